/* results.h — the results file of a stream (--output F.jsonl or F.csv), written in place as
 * the batches finish so that a crash or SIGINT leaves every finished line for --resume:
 *
 *   - it is opened and locked (flock, non-blocking) before any model loads: a second run
 *     writing the same file stops at once with an error naming it, instead of both appending;
 *   - nothing in it changes until the run has its first lines to write (or succeeds with none):
 *     a run that fails earlier — at model load, say — leaves an existing file as it was, and
 *     removes the empty file it created;
 *   - its first line records the model that wrote it (weights file name, size and SHA-256, or
 *     the random spec; the model and its options; the weights' dtype; preprocessing with the
 *     decoding options; top-k; classes; the labels file's name and SHA-256): JSON
 *     lines {"pagoda_results": {...}}, CSV a comment line "# pagoda_results {...}" before the
 *     column names. --resume refuses a file recorded for another model, or none, naming both;
 *   - CSV is RFC 4180 both ways (csv.h). */
#ifndef PAGODA_RESULTS_H
#define PAGODA_RESULTS_H

#include <sys/types.h>

#include "stream.h"

typedef struct results_file {
    const char *path;
    int fd; /* open and locked; -1 when there is no file */
    int csv;
    int created; /* made and locked by this run: removed if the run writes nothing */
    int started; /* cut to `keep` and given its head: the file is this run's now */
    off_t keep;  /* --resume: the bytes of the complete lines kept (0: written anew) */
    char *head;  /* the identity line (and the CSV column names) for a file written anew */
} results_file;

/* The identity of the model a stream runs, for the first line (a new reference; NULL after
 * printing the error). Hashes the weights file. */
json_t *results_identity(const classify_opts *o, const stream_model *m, pgd_preprocess preset,
                         int classes);

/* Opens and locks `path` (csv: .csv) and, with `resume`, reads it: its model record must equal
 * `identity`, every complete line must be a result of paths[0..n) (marked in done[], counted in
 * *ndone), an unfinished last line is cut. Prints the error and returns the exit status on
 * failure (rf is then closed). */
int results_open(results_file *rf, const char *path, int csv, int resume, const json_t *identity,
                 int columns, char **paths, int n, unsigned char *done, int *ndone);
/* Appends n bytes of finished lines (the first call makes the file this run's: cut to the
 * resumed lines, or emptied and given its head). Prints the error on failure. */
int results_write(results_file *rf, const char *text, size_t n);
/* Closes the file. `success`: a run that wrote nothing still makes the file its own (head
 * only); otherwise a file it never wrote is left as it was (removed if this run created it).
 * Returns `rc`, or EXIT_RUNTIME when closing failed. */
int results_close(results_file *rf, int success, int rc);

#endif
