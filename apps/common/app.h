/* app.h — shared by the pagoda subcommands. */
#ifndef PAGODA_APP_H
#define PAGODA_APP_H

#include <jansson.h>

#include "pagoda.h"
#include "pagoda_util.h"

enum { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2 };

/* Text from outside (argv, files, drivers) that is shown, decided once: on the terminal, every
 * byte of an invalid UTF-8 sequence and of a control character (C0, DEL, C1) is written as
 * \xNN, so a path prints as what it is and cannot move the cursor; in JSON, each byte that is
 * not part of valid UTF-8 becomes U+FFFD (the document stays valid; the bytes are not
 * recoverable from it, the terminal form shows them). */
/* s escaped for the terminal into buf (cut at a whole character or escape); returns buf. */
const char *app_term_text(const char *s, char *buf, size_t size);
/* s as a JSON string, invalid UTF-8 bytes replaced by U+FFFD; NULL only out of memory (which
 * makes a json_pack "o" fail, and the document with it, rather than drop one entry). */
json_t *app_json_text(const char *s);

/* Prints "pagoda: error: <message>" to stderr (escaped as app_term_text, newlines kept; with
 * the build log when the error has one) and frees err. Returns EXIT_RUNTIME. */
int app_fail(pgd_error *err);
/* The same as "pagoda: error: <what>: <message>" (what escaped too). */
int app_fail_in(const char *what, pgd_error *err);
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
/* --weights-dtype f32|f16: how the contexts app_ctx_open makes afterwards store linear-layer
 * weights (pgd_ctx_options.weights_f16; overrides $PAGODA_WEIGHTS_DTYPE). A bad value prints
 * a usage error for `cmd` and returns EXIT_USAGE. */
int app_set_weights_dtype(const char *cmd, const char *arg);
/* 1 when contexts app_ctx_open makes store weights as f16 (--weights-dtype, else
 * $PAGODA_WEIGHTS_DTYPE), else 0: results files record it (results.h). */
int app_weights_f16(void);
/* --precision f32|f16|int8: the arithmetic of the contexts app_ctx_open makes afterwards (knob
 * precision; overrides $PAGODA_PRECISION). A device without the capability refuses it at
 * app_ctx_open, naming the device and the extension. A bad value: usage error, EXIT_USAGE. */
int app_set_precision(const char *cmd, const char *arg);
/* The precision ctx runs in ("f32", "f16", "int8"); ctx NULL: the one asked for. */
const char *app_precision(const pgd_ctx *ctx);
#define APP_PRECISION_HELP                                                                         \
    "  --precision f32|f16|int8  arithmetic of the linear layers: fp32 (default), fp16 (needs\n"   \
    "                      cl_khr_fp16) or int8 dot products (cl_khr_integer_dot_product);\n"      \
    "                      refused on a device without it (docs/precision.md: accuracy)\n"
#define APP_WEIGHTS_DTYPE_HELP                                                                     \
    "  --weights-dtype f32|f16  store the linear layers' weights as fp32 (default) or as\n"        \
    "                      fp16 (half the memory; each weight rounded to the nearest half,\n"      \
    "                      arithmetic still fp32; see README for the accuracy measured)\n"
/* The device's capabilities as a JSON object (new reference). */
/* PGD_DOT_* bits as space-separated words ("none" for 0) into buf. */
void app_dot_accel_text(unsigned bits, char *buf, size_t size);
json_t *app_device_json(const pgd_device_info *d);
/* Writes a JSON value to a file through a pgd_outfile (a regular file only, complete or not at
 * all), or to stdout for "-" or NULL. Returns 0 or prints an error and returns EXIT_RUNTIME. */
int app_write_json(json_t *value, const char *path);
/* app_write_json(doc, NULL), then releases doc (NULL accepted: an error, nothing printed). */
int app_print_json(json_t *doc);
/* Writes a JSON value into f (opened earlier, e.g. to check the target before a long run) and
 * commits it; aborts f on failure. f is consumed either way. */
int app_write_json_to(json_t *value, pgd_outfile *f);

/* Class names read from a file, one per line. */
typedef struct app_labels {
    char **names;
    unsigned char *text;
    int count;
} app_labels;
/* Reads `path`; prints an error and returns EXIT_RUNTIME on failure, also for a line with a NUL
 * byte, invalid UTF-8 or a control character other than a tab (the error names the line). */
int app_labels_load(const char *path, app_labels *out);
/* The parsing half of app_labels_load: splits `text` (size bytes then one NUL byte, as
 * pgd_file_read leaves them; malloc'd, ownership is taken, also on failure) into lines, `path`
 * naming it in messages. No file or device is touched. */
int app_labels_parse(void *text, size_t size, const char *path, app_labels *out);
void app_labels_free(app_labels *l);

/* When *weights is NULL: the weights file `file` in the default location ($PAGODA_WEIGHTS_DIR,
 * else $XDG_DATA_HOME/pagoda/weights, else ~/.local/share/pagoda/weights) is written to buf and,
 * when it exists, *weights points to buf. EXIT_OK, or EXIT_USAGE (with an error printed) when
 * $PAGODA_WEIGHTS_DIR is set but is not a directory: a mistyped variable is not quietly
 * replaced by random weights. */
int app_weights_or_default(const char **weights, const char *file, char *buf, size_t size);

/* After a seeded-random-weights note: the one command that runs `cmd` with real weights,
 * "--weights hf:REPO" (pulled into the hub cache on first use), on stderr. */
void app_note_real_weights(const char *cmd, const char *repo);

/* Values a load assumed rather than read (model.h's model_assumptions): one stderr line each,
 * "pagoda: note: LABEL: KEY not given: assumed VALUE (HOW)", and as a JSON object
 * {"KEY": VALUE, ...} (NULL only out of memory). */
struct model_assumptions;
void app_note_assumed(const char *label, const struct model_assumptions *as);

/* The preprocessing presets by their option names: "torchvision", "timm", "hf" (-1 for any
 * other), and back. */
int app_preset_parse(const char *name);
const char *app_preset_name(pgd_preprocess p);

/* Refuses the first NaN or infinity of an input batch x [B, 3, H, W]: PGD_ERR_INVALID_ARGUMENT
 * "SOURCE: the input holds a non-finite value (V) at [b, c, y, x]NOTE (--allow-nonfinite runs it
 * anyway)", SOURCE being names[b] (names NULL: name for every image). PGD_OK when all are
 * finite. The one check of classify's and detect's inputs. */
int app_check_finite_batch(const float *x, int B, int H, int W, const char *const *names,
                           const char *name, const char *note, pgd_error **err);
json_t *app_assumed_json(const struct model_assumptions *as);

/* A JSON side file `name` (a Hugging Face config.json) in the directory of `weights`: its path
 * to path[size]; *out NULL when there is none. One that is there goes through pgd_file_read
 * (a FIFO or a device is refused, at most 1 MiB) and must be a JSON object, else the error
 * names the file. EXIT_OK, or EXIT_RUNTIME with the error printed (EXIT_USAGE for a path
 * too long). */
int app_side_json(const char *weights, const char *name, char *path, size_t size, json_t **out);
/* Hugging Face's config.json beside `weights` (a ViT's, a Swin's): num_attention_heads into
 * *heads unless *heads is already set (--heads goes over it; heads NULL: not read),
 * layer_norm_eps into *eps (left as is when absent); path[size] gets its path. A key of the
 * wrong type or range is an error naming the file and the key (EXIT_RUNTIME, printed); no file
 * is EXIT_OK with nothing set. */
int app_hf_side_config(const char *weights, int *heads, float *eps, char *path, size_t size);
/* vit_detect over src (the file `weights`) with its config.json (app_hf_side_config; `heads`
 * > 0: --heads), then each value assumed said on stderr (app_note_assumed): the heads of the
 * standard table, and Hugging Face's layer_norm_eps when config.json does not give it. Prints
 * any error; EXIT_OK or the exit status. */
struct vit_config;
struct model_source;
int app_vit_detect(struct model_source *src, const char *weights, int heads,
                   struct vit_config *cfg);

/* Prints (or, with json, returns as a JSON array) the top-k classes with softmax probabilities
 * of each of B logit rows. sources[b] names row b (NULL: fallback_source for all). Labels: the
 * file's, else ImageNet-1k's for 1000 classes, else "class N". */
json_t *app_report_topk(const float *logits, int B, int classes, int topk, const app_labels *labels,
                        char **sources, const char *fallback_source, int json);

/* Loads and preprocesses n image files into *x [n, 3, 224, 224] (shape receives it), one image
 * at a time (min_side > 0: pgd_image_load_scaled, --fast-decode; 0: exact; exif_rotate: turned
 * upright by the EXIF orientation, --exif-rotate), and keeps a thumbnail of each (longer side at
 * most 1024 pixels; it knows its source's size and view, pgd_image_thumbnail) in *loaded for
 * drawing maps. On error nothing is left allocated. */
int app_load_batch(char **paths, int n, pgd_preprocess preset, int min_side, int exif_rotate,
                   float **x, pgd_image ***loaded, int64_t shape[4], pgd_error **err);

/* One image as app_load_batch loads it, at full size: min_side > 0 decodes scaled
 * (pgd_image_load_scaled), exif_rotate turns it upright. Safe to call from several threads. */
int app_load_image(const char *path, int min_side, int exif_rotate, pgd_image **out,
                   pgd_error **err);

/* OUT.png → OUT<tag>.png, or OUT<tag>-<index+1>.png when count > 1 (malloc'd). */
char *app_numbered_path(const char *path, const char *tag, int index, int count);

/* The demo's sample image (Chelsea the cat, CC0): $PAGODA_SAMPLE_IMAGE, else the installed
 * copy, else the source tree's apps/data. 1 if readable, 0 if no copy is found; -1 (with an
 * error printed) when $PAGODA_SAMPLE_IMAGE names a file that cannot be read. */
int app_sample_image(char *buf, size_t size);

/* 1 when a batch cap was set ($PAGODA_MAX_BATCH), for the note on split batches. */
int app_max_batch(const pgd_ctx *ctx);

#endif
