/* outset.h — the output set of a run: every file a command writes (saved tensors, pictures,
 * heat maps, JSON) goes through one, so that
 *
 *   - each output is checked before the command's work starts (outset_claim): absent or a
 *     regular file (pgd_outfile_check: a directory, a FIFO, a device such as /dev/null, a
 *     symbolic link is refused), in a directory that exists; an option's value that a command
 *     derives file names from (--draw OUT -> OUT.png, OUT-2.png) must not itself be a directory
 *     or a special file;
 *   - no two outputs of a run resolve to one file (the same directory, by realpath, and name;
 *     or the same existing file, by device and inode): one would silently replace the other;
 *   - each is staged as a temporary file beside its target (pgd_outfile) and renamed into place
 *     by outset_commit once the whole run has succeeded: a failed run leaves none (outset_free).
 * Errors are printed ("pagoda: error: ..." naming the option and the file) and give
 * EXIT_RUNTIME. */
#ifndef PAGODA_OUTSET_H
#define PAGODA_OUTSET_H

#include <sys/types.h>

#include "app.h"

typedef struct outset_item {
    char *path, *option; /* the target, and the option that named it ("--save-logits") */
    char *key;           /* realpath of its directory + "/" + its name */
    dev_t dev;           /* of the existing file (exists) */
    ino_t ino;
    int exists;
    pgd_outfile *file; /* staged (opened) or NULL */
    char *note;        /* "attention rollout of a.jpg": "<note> written to <path>" */
} outset_item;

typedef struct outset {
    outset_item *items;
    int n, cap;
} outset;

/* Checks `given`, an option's value that file names are derived from (NULL: none): when it
 * exists it must be a regular file. */
int outset_check_given(const char *option, const char *given);
/* Checks `path` as an output of `option` and claims it (see above): EXIT_OK, EXIT_USAGE when
 * another output of the run is the same file, else EXIT_RUNTIME. */
int outset_claim(outset *s, const char *option, const char *path);
/* Stages `path` (claimed before by `option`, else claimed now): *f is its temporary file,
 * owned by the set (write into it, never commit or abort it). `note` may be NULL (copied). */
int outset_open(outset *s, const char *option, const char *path, const char *note, pgd_outfile **f);
/* outset_open without printing: a PGD_ERR_* code, the error in *err. */
int outset_stage(outset *s, const char *option, const char *path, const char *note, pgd_outfile **f,
                 pgd_error **err);
/* After writing the file outset_open gave (write_rc, err: the writer's result): finishes it
 * (flushed, synced, its descriptor released) or prints err. */
int outset_staged(outset *s, pgd_outfile *f, int write_rc, pgd_error *err);
/* Renames every staged output into place, all finished first so that a late write error
 * leaves none; prints "<note> written to <path>" unless quiet. Empties the set. */
int outset_commit(outset *s, int quiet);
/* Removes every staged output and frees the set (a run that did not commit leaves none). */
void outset_free(outset *s);

#endif
