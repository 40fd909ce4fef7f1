/* model.h — what every model in apps/models shares: where weights come from (a safetensors
 * file or seeded random values, behind one interface), exact tensor checks, fitting a batch on
 * the device, and a clock for the stage times. Written against pagoda.h only. */
#ifndef PAGODA_MODEL_H
#define PAGODA_MODEL_H

#include <stdint.h>

#include "pagoda.h"
#include "pagoda_util.h"

typedef struct model_used model_used; /* the names a load consumed (weights.c) */

/* Where weights come from: a safetensors file, or seeded random values for the demo. */
typedef struct model_source {
    void *u;
    const char *label; /* for messages: the file name, or "random weights" */
    /* 0 with the shape when the tensor exists, -1 when it does not. */
    int (*shape)(void *u, const char *name, int *ndim, int64_t shape[8]);
    /* Reads the tensor as float32 into dst (numel floats). */
    int (*read)(void *u, const char *name, float *dst, pgd_error **err);
    /* A __metadata__ value, or NULL. */
    const char *(*meta)(void *u, const char *key);
    /* The i-th tensor name, or NULL past the end (may itself be NULL: no listing). */
    const char *(*name_at)(void *u, size_t i);
    /* Set by model_track_begin for the length of one load: what model_need, model_read and
     * model_mark record. NULL (a source made by hand, or detection): nothing is recorded. */
    model_used *used;
    /* Frees u when the source owns it (seeded random sources), else NULL: model_source_free. */
    void (*release)(void *u);
} model_source;

/* ---- exact tensors (weights.c) ----
 * A load is strict: every tensor has exactly the shape the model expects (no two layouts with
 * the same element count are confused: [64, 32] is not [32, 64]), every value is finite, and
 * every tensor of the file is consumed. A model loads through a copy of its source:
 *
 *     model_source s = *src;
 *     rc = model_track_begin(&s, err);
 *     ... model_need / model_read / model_mark over &s ...
 *     if (!rc) rc = model_check_consumed(&s, ignore, n_ignore, err);
 *     model_track_end(&s);
 */

/* One accepted layout of a tensor. */
typedef struct model_shape {
    int ndim;
    int64_t d[8];
} model_shape;

/* Requires tensor `name` with exactly `want_ndim` dims equal to `want`; records it as consumed.
 * PGD_ERR_NOT_FOUND or PGD_ERR_SHAPE naming the tensor, the expected and the found shape. */
int model_need(const model_source *src, const char *name, int want_ndim, const int64_t *want,
               pgd_error **err);
/* As model_need, with several accepted exact layouts (a naming's documented alternatives, e.g.
 * a class token stored as [1, 1, D] or [D]); the error lists them all. */
int model_need_shapes(const model_source *src, const char *name, const model_shape *ok, int nok,
                      pgd_error **err);
/* Reads tensor `name` as float32 into dst (n floats: a tensor of another size is PGD_ERR_SHAPE
 * and nothing is written), records it as consumed, and refuses a NaN or infinite value
 * (PGD_ERR_FORMAT naming the tensor, the value and the index of the first bad element). */
int model_read(const model_source *src, const char *name, float *dst, int64_t n, pgd_error **err);
/* Records `name` as consumed without reading it (a tensor the model deliberately leaves out
 * because the user asked for it, e.g. θ and φ under a forced Gaussian non-local mode). */
void model_mark(const model_source *src, const char *name);

/* Starts recording consumed names on src (the caller's copy of the model's source). On error
 * (out of memory) nothing is allocated. */
int model_track_begin(model_source *src, pgd_error **err);
/* Releases what model_track_begin made; src->used is NULL after. Safe on a source never
 * tracked. */
void model_track_end(model_source *src);

/* A name a naming writes that no model consumes: the tensor named `suffix` (a whole last
 * component, e.g. "num_batches_tracked"), ignored only when its sibling `companion` (same
 * prefix, e.g. "running_var") was consumed, so that a stray buffer of a block the model does
 * not have is still reported. companion NULL: ignored wherever it appears. */
typedef struct model_ignore {
    const char *suffix, *companion;
} model_ignore;
/* After a load: every name the source lists that was not consumed and is not on the ignore
 * list is an error (PGD_ERR_FORMAT naming the first such tensor and how many others there are).
 * A source that lists no names (random weights) passes. */
int model_check_consumed(const model_source *src, const model_ignore *ignore, size_t n_ignore,
                         pgd_error **err);

/* The whole strict load above in one call: load(model, tracked, err) reads every tensor through
 * `tracked` (a copy of src with consumption recorded), then model_check_consumed with the ignore
 * list. The first error is returned; the caller frees its half-built model. */
typedef int (*model_load_fn)(void *model, const model_source *tracked, pgd_error **err);
int model_load_strict(const model_source *src, model_load_fn load, void *model,
                      const model_ignore *ignore, size_t n_ignore, pgd_error **err);

/* A block index as a naming writes it: "0" or a decimal without a sign or leading zeros, below
 * 1000000. Returns how many characters it took (*out set), or 0 when s does not start with one
 * (so "+2", "01" and "-1" are refused rather than read as 2, 1 and -1). */
int model_parse_index(const char *s, int *out);
/* One more than the largest index N of the names the source lists that begin with
 * `prefix`N`follow` (N as model_parse_index reads it): how many blocks a file's names say it
 * has, including any the file holds only partly. 0 when none; -1 when the source lists no
 * names. */
int model_count_indexed(const model_source *src, const char *prefix, const char *follow);
/* Writes "[a, b, c]". */
void model_shape_str(int ndim, const int64_t *s, char *buf, size_t size);

/* ---- sizes read from a checkpoint (weights.c) ----
 * A shape in a file may hold any 64-bit values, and a zero dimension lets a tensor of no bytes
 * claim any other size ([16, 3, 0, 0], [2^62, 0]). So every size a loader takes from a shape (a
 * width, a patch, a class count, a window) goes through model_size before any arithmetic on it,
 * and sizes combine only through model_mul: a hostile shape is an error naming the tensor, never
 * a division by zero, a wrapped product or an allocation sized by a wrapped product. */
enum { MODEL_SIZE_MAX = 1 << 24 }; /* a width, class count or vocabulary: 16M */
/* `v`, dimension `what` ("classes", "patch size") of tensor `tensor`, into *out when it is
 * 1 .. max; else PGD_ERR_SHAPE naming the tensor, the dimension and the rule ("has a zero
 * dimension" for 0). */
int model_size(const model_source *src, const char *tensor, const char *what, int64_t v,
               int64_t max, int *out, pgd_error **err);
/* a * b for sizes a, b >= 0 when the product is at most INT64_MAX / 16 (room left to turn it
 * into bytes and add a few such); -1 when it is larger or either operand is negative, so that a
 * chain of model_mul stays -1 once it overflowed. */
int64_t model_mul(int64_t a, int64_t b);
/* Refuses, before it is made, a buffer of `bytes` (-1: an overflowed size) that cannot be made:
 * larger than the host's physical memory (host != 0: a host buffer) or, with ctx, than one
 * device buffer may be (CL_DEVICE_MAX_MEM_ALLOC_SIZE). PGD_ERR_TOO_LARGE naming `what` and both
 * sizes. */
int model_check_alloc(pgd_ctx *ctx, int host, int64_t bytes, const char *what, pgd_error **err);

/* Fitting on the device (weights.c). The weights as float32: the sum over the source's
 * tensors (0 when it lists none, as random sources do). */
uint64_t model_weight_bytes(const model_source *src);
/* Refuses, before anything is allocated, weights larger than the device's global memory
 * (PGD_ERR_TOO_LARGE with both sizes and the file). */
int model_check_fits(pgd_ctx *ctx, const model_source *src, const char *what, pgd_error **err);
/* A forward over a batch that may not fit the device at once. Passes of as many images as fit,
 * at per_image bytes each (the measured peak of the last pass at the same input, when larger),
 * in seven eighths of the global memory less what live tensors hold (the model), with the
 * largest single per-image buffer (`largest` bytes) under CL_DEVICE_MAX_MEM_ALLOC_SIZE and at
 * most $PAGODA_MAX_BATCH images; a pass of several images that runs out of device memory is
 * retried at half the size. pass(u, first, n, times, err) runs images [first, first + n) and
 * fills times[0..ntimes) (ntimes <= 8), summed over the passes. PGD_ERR_TOO_LARGE, naming the
 * sizes, when one image does not fit. */
typedef int (*model_pass_fn)(void *u, int first, int n, double *times, pgd_error **err);
typedef struct model_batching {
    int h, w, maps; /* the input (size, probability maps) `bytes` was measured for */
    uint64_t bytes; /* device bytes one image took in the last pass there */
    int last_split; /* images per pass in the last forward */
} model_batching;
int model_forward_batched(pgd_ctx *ctx, model_batching *mb, int H, int W, int maps, int B,
                          uint64_t per_image, uint64_t largest, const char *what, int ntimes,
                          model_pass_fn pass, void *u, double *times, pgd_error **err);

/* A source over an open safetensors file; `label` (the path) names it in messages. */
void model_weights_source(model_source *src, pgd_weights *w, const char *label);

/* A new device tensor of `shape` holding the host floats `data` (the caller keeps data); on
 * error *out is NULL (weights.c). */
int model_upload(pgd_ctx *ctx, const float *data, int ndim, const int64_t *shape, pgd_tensor **out,
                 pgd_error **err);

/* ---- non-finite values in a forward pass ----
 * A model's forward pass normally checks nothing. When its logits hold a NaN or an infinity,
 * the caller re-runs the pass with a probe: after each stage the model hands the stage's output
 * to model_probe_tensor, and the first stage whose output is not finite is kept. */
typedef struct model_probe {
    char stage[160]; /* the first stage with a non-finite output; "" while there is none */
    int64_t index;   /* the flat index of its first bad element */
    float value;
} model_probe;
/* Downloads t and records `stage` (formatted like printf) in p when p has no stage yet and t
 * holds a non-finite value. A no-op (PGD_OK) once a stage is recorded. */
int model_probe_tensor(model_probe *p, const pgd_tensor *t, pgd_error **err, const char *stage, ...)
    PGD_PRINTF_LIKE(4, 5);
/* The flat index of the first non-finite value of x[0..n), or -1. */
int64_t model_first_nonfinite(const float *x, int64_t n);

/* ---- values a load assumes rather than reads ----
 * What a file's names, shapes and metadata cannot say (a DETR's attention heads, whether its
 * backbone is dilated, ...) takes a default. Every default a load takes is recorded here, so
 * that the caller says so (one stderr line each, and "assumed" in JSON) instead of running a
 * possibly different model without a word. */
#define MODEL_MAX_ASSUMED 8
typedef struct model_assumed {
    char key[32];   /* the value's name in JSON: "encoder_heads", "dilation", ... */
    char value[32]; /* the default taken, as JSON text: "8", "false", "1e-05", "\"coco\"" */
    char how[160];  /* how to give it instead: "--heads N, or ... in config.json" */
} model_assumed;
typedef struct model_assumptions {
    int n;
    model_assumed a[MODEL_MAX_ASSUMED];
} model_assumptions;
/* Records one assumption (a key already recorded is replaced; past MODEL_MAX_ASSUMED the rest
 * are dropped: no model takes that many). */
void model_assume(model_assumptions *as, const char *key, const char *value, const char *how);

/* Opens the safetensors file at `path` as a source that owns it (model_source_free closes it);
 * `path` names it in messages and must outlive the source. On error *src is zeroed. */
int model_source_open(model_source *src, const char *path, pgd_error **err);
/* Releases what the source owns (nothing for a file source: close the file yourself) and
 * clears it. A zeroed source is accepted. */
void model_source_free(model_source *src);

/* Monotonic wall-clock time in milliseconds (stage times). */
double model_now_ms(void);
/* The clock (model_now_ms) at the end of a forward's stage. With `timed` the queue is drained
 * first, so that the stage's kernels fall before it; untimed, nothing waits (a drain costs the
 * launches queued behind it). The drain's status goes to *rc, which must be PGD_OK to drain. */
double model_stage_end(pgd_ctx *ctx, int timed, int *rc, pgd_error **err);

/* The one generator of seeded weights and inputs (xorshift64* from `state`, which must not
 * be 0): n values uniform in [-amp, amp], the same on every machine. */
void model_fill_seeded(float *dst, int64_t n, uint64_t state, float amp);

/* Requires tensor `name` of exactly `shape` (model_need) and reads it into a new host array
 * *host (malloc'd, numel floats; the caller frees it), refusing non-finite values
 * (model_read). On error *host is NULL. */
int model_read_host(const model_source *src, const char *name, int ndim, const int64_t *shape,
                    float **host, pgd_error **err);
/* As model_read_host, then uploaded as a device tensor of that shape (*out; NULL on error). */
int model_load_tensor(pgd_ctx *ctx, const model_source *src, const char *name, int ndim,
                      const int64_t *shape, pgd_tensor **out, pgd_error **err);

/* A row [1, n] of 1/n in *row, the left operand that averages n rows with one GEMM (mean
 * pooling). Kept between calls: an existing *row of n elements is reused, another is replaced. */
int model_mean_row(pgd_ctx *ctx, int64_t n, pgd_tensor **row, pgd_error **err);

/* Seeded random weights for a model's configuration, for the demo, the bench and tests: a
 * source whose tensors are the names `shape` knows (shape(cfg, name, ...) returns 0 and the
 * shape, -1 for a name the model does not have), filled by one rule: LayerNorm scales (a 1-D
 * ".weight" whose name contains "norm", or is `unit`) 1 ± 0.1, biases ±0.01, everything else
 * ±0.035 (the size of a trained ViT's init), each tensor from its own stream of `seed` and its
 * name. The source keeps a copy of the cfg_size bytes at cfg; model_source_free frees it. */
typedef int (*model_shape_fn)(const void *cfg, const char *name, int *ndim, int64_t shape[8]);
int model_random_source(model_source *src, const void *cfg, size_t cfg_size, model_shape_fn shape,
                        const char *unit, uint64_t seed, pgd_error **err);

/* ---- shared helpers (model.c) ---- */

/* Whether the source holds tensor `name` (any shape). */
int model_has(const model_source *src, const char *name);
/* A linear layer from weight `wn` [out, in] and bias `bn` [out] (model_load_tensor). The bias
 * may be absent (a model built without one) unless `need_bias`. */
int model_load_linear(pgd_ctx *ctx, const model_source *src, const char *wn, const char *bn,
                      int need_bias, int64_t out_dim, int64_t in_dim, pgd_linear **out,
                      pgd_error **err);
/* As model_load_linear for a layer followed by LayerScale (y = gamma * (xW^T + b), gamma
 * `gn` [out]; DINOv2's ls1/ls2): gamma is folded into W's rows and b on the host. */
int model_load_linear_scaled(pgd_ctx *ctx, const model_source *src, const char *wn, const char *bn,
                             const char *gn, int64_t out_dim, int64_t in_dim, pgd_linear **out,
                             pgd_error **err);

/* The strict load (model_load_strict) of a model built as an outer part and `depth` blocks (ViT,
 * MLP-Mixer), once the caller has allocated it: outer(model, tracked, err) reads what is not a
 * block (stem, tokens, final norm, head), then block(model, tracked, i, err) each block in order.
 * The first error is returned; the caller frees its half-built model. */
typedef int (*model_block_fn)(void *model, const model_source *tracked, int i, pgd_error **err);
int model_load_blocks(const model_source *src, void *model, int depth, model_load_fn outer,
                      model_block_fn block, pgd_error **err);

/* The pre-norm MLP with its residual that the token models share (ViT's and Swin's MLP, the
 * Mixer's channel mixing), in place: x += fc2(GELU(fc1(LayerNorm(x)))), with h (x's shape) and
 * mlp ([rows, hidden]) the caller's scratch. */
int model_mlp_residual(pgd_ctx *ctx, pgd_tensor *x, const pgd_tensor *ln_w, const pgd_tensor *ln_b,
                       float eps, const pgd_linear *fc1, const pgd_linear *fc2, pgd_tensor *h,
                       pgd_tensor *mlp, pgd_error **err);

/* The classifier head the token models share (MLP-Mixer, Swin): the final LayerNorm of x into
 * h, the mean over the tokens (one GEMM with mean_row, a row [1, tokens] of 1/tokens) into
 * pooled [batch, dim], the head linear into out [batch, classes], logits downloaded; h and out
 * probed as "norm (final norm)" and "head". */
typedef struct model_head {
    const pgd_tensor *x, *norm_w, *norm_b, *mean_row;
    float eps;
    pgd_tensor *h, *pooled, *out;
    const pgd_linear *head;
    int64_t batch, tokens, dim;
    model_probe *probe; /* NULL: nothing checked */
} model_head;
int model_mean_head(pgd_ctx *ctx, const model_head *a, float *logits, pgd_error **err);

/* The body of a model's find_nonfinite: clears *p, points the model's probe (*slot) at it for
 * one pass(model, image, H, W, logits) of a single image into scratch logits of `classes`
 * floats, and clears *slot again. */
typedef int (*model_probe_pass)(void *model, const float *image, int H, int W, float *logits,
                                pgd_error **err);
int model_probe_run(model_probe *p, model_probe **slot, int64_t classes, model_probe_pass pass,
                    void *model, const float *image, int H, int W, pgd_error **err);

/* A linear layer from host weights w [out, in] and bias b [out] (NULL: none), uploaded; the
 * caller keeps w and b. */
int model_linear_from_host(pgd_ctx *ctx, const float *w, const float *b, int64_t out, int64_t in,
                           pgd_linear **l, pgd_error **err);
/* A forward's stage times from its clock readings (model_stage_end) at the start (t0), after
 * the stem (t1), after the blocks (t2) and at the end (t3): times[0..3] = stem, blocks, head,
 * whole pass. Nothing when times is NULL. */
void model_stage_times(double *times, double t0, double t1, double t2, double t3);
/* Destroys n tensors (NULL entries are accepted). */
void model_destroy_tensors(pgd_tensor *const *ts, size_t n);

#endif
