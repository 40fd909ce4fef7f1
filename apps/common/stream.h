/* stream.h — the streaming side of the classify path: images from files, directories, glob
 * patterns or a list, decoded and preprocessed on host worker threads into a bounded set of
 * batch buffers, run in batches on one device or several (one context, queue and host thread
 * each, batches handed out dynamically), and written in input order, one line per image, as the
 * batches finish (JSON lines or CSV), with --resume, SIGINT handling and a progress line. With
 * the MPI build (-Dmpi=enabled) and a launch under mpirun, ranks share the batches and rank 0
 * writes the file. */
#ifndef PAGODA_STREAM_H
#define PAGODA_STREAM_H

#include "classify.h"
#include "family.h"

/* What the stream runs: a model family (family.h) with its configuration and weights, loaded
 * on each device's context through the family's entry, with the hard attention to set on it
 * (families with set_attention); and what the results file records of it (results.h): the
 * weights file (NULL: seeded random weights, `random` their spec) and the model with every
 * option that changes its results, e.g. "ViT (timm), 12 heads, attention soft". */
typedef struct stream_model {
    const model_family *family;
    const void *cfg;
    const model_source *src;
    classify_attention attention;
    const char *weights, *random;
    char label[128];
} stream_model;

/* 1 when the options or operands ask for the streaming path (--output, --list, --batch,
 * --jobs, --resume, --recursive, --strict, several devices, a directory or a glob pattern among
 * the images), 0 for the one-batch path. */
int classify_streaming(const classify_opts *o);
/* The options that only the one-batch path has (--input, --save-input, --save-logits,
 * --profile, a command's maps named by `map_flag` when set) refused with a usage error; EXIT_OK
 * when none is given. */
int classify_stream_check(const classify_opts *o, const char *map_flag);
/* Runs the stream: every image preprocessed with `preset`, `classes` logits each. Returns the
 * exit status: 0 (also when some images were unreadable, each reported on its line), 1 on a
 * runtime failure (or an unreadable image with --strict), 2 on a usage error, 130 after SIGINT
 * (the batches finished so far are written). */
int classify_stream(const classify_opts *o, pgd_preprocess preset, int classes,
                    const stream_model *model);

/* What a stream measured, for `pagoda bench` (throughput items). */
typedef struct classify_stream_stats {
    long images;    /* images streamed */
    double seconds; /* from the first decode to the last batch written (model loads excluded) */
    double busy_s;  /* the devices' time in forward passes, summed */
} classify_stream_stats;
/* classify_stream with no output at all (the lines are made and dropped), and its timing in
 * *st: `pagoda bench` measures images/s over a stream of real decodes with it. */
int classify_stream_timed(const classify_opts *o, pgd_preprocess preset, int classes,
                          const stream_model *model, classify_stream_stats *st);

/* pagoda eval: the next classify_stream takes each operand as an ImageFolder root (a class per
 * sub-directory, numbered in sorted order or by `labels_map`: NAME INDEX lines, may be NULL)
 * and --list lines as 'PATH LABEL', counts top-1/top-5 against those classes and reports the
 * accuracy (per class too) and the most frequent confusions. */
void classify_stream_eval(const char *labels_map);

#endif
