/* app.h — shared by the pagoda subcommands. */
#ifndef PAGODA_APP_H
#define PAGODA_APP_H

#include <jansson.h>

#include "pagoda.h"

enum { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2 };

/* Prints "pagoda: error: <message>" to stderr (with the build log when the error has one) and
 * frees err. Returns EXIT_RUNTIME. */
int app_fail(pgd_error *err);
/* Prints "pagoda: error: <formatted>" and a hint to use --help; returns EXIT_USAGE. */
int app_usage_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Opens the context of a command: the options of the environment (pgd_ctx_options_from_env),
 * `device` (--device; NULL: $PAGODA_DEVICE or the default) replacing the selector. A bad
 * PAGODA_* value is reported naming the variable and gives EXIT_USAGE, like a bad option; a
 * device that cannot be opened gives EXIT_RUNTIME. Prints the error; EXIT_OK on success. */
int app_ctx_open(const char *device, pgd_ctx **ctx);
/* The device's capabilities as a JSON object (new reference). */
json_t *app_device_json(const pgd_device_info *d);
/* Writes a JSON value to a file via temp file + rename, or to stdout for "-" or NULL.
 * Returns 0 or prints an error and returns EXIT_RUNTIME. */
int app_write_json(json_t *value, const char *path);

/* Class names read from a file, one per line. */
typedef struct app_labels {
    char **names;
    unsigned char *text;
    int count;
} app_labels;
/* Reads `path`; prints an error and returns EXIT_RUNTIME on failure. */
int app_labels_load(const char *path, app_labels *out);
void app_labels_free(app_labels *l);

/* The weights file `file` in the default location ($PAGODA_WEIGHTS_DIR, else
 * $XDG_DATA_HOME/pagoda/weights, else ~/.local/share/pagoda/weights), written to buf; 1 if it
 * exists. */
int app_default_weights(const char *file, char *buf, size_t size);

/* Prints (or, with json, returns as a JSON array) the top-k classes with softmax probabilities
 * of each of B logit rows. sources[b] names row b (NULL: fallback_source for all). Labels: the
 * file's, else ImageNet-1k's for 1000 classes, else "class N". */
json_t *app_report_topk(const float *logits, int B, int classes, int topk,
                        const app_labels *labels, char **sources, const char *fallback_source,
                        int json);

/* Loads and preprocesses n image files into *x [n, 3, 224, 224] (shape receives it), one image
 * at a time, and keeps a thumbnail of each (longer side at most 1024 pixels; it knows its
 * source's size and view, pgd_image_thumbnail) in *loaded for drawing maps. On error nothing is
 * left allocated. */
int app_load_batch(char **paths, int n, pgd_preprocess preset, float **x, pgd_image ***loaded,
                   int64_t shape[4], pgd_error **err);

/* OUT.png → OUT<tag>.png, or OUT<tag>-<index+1>.png when count > 1 (malloc'd). */
char *app_numbered_path(const char *path, const char *tag, int index, int count);

/* The demo's sample image (Chelsea the cat, CC0): $PAGODA_SAMPLE_IMAGE, else the installed
 * copy, else the source tree's apps/data. 1 if readable. */
int app_sample_image(char *buf, size_t size);

/* 1 when a batch cap was set ($PAGODA_MAX_BATCH), for the note on split batches. */
int app_max_batch(const pgd_ctx *ctx);

int cmd_devices(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_vit(int argc, char **argv);
int cmd_nonlocal(int argc, char **argv);

#endif
