/* model.h — what every model in apps/models shares: where weights come from (a safetensors
 * file or seeded random values, behind one interface), exact tensor checks, fitting a batch on
 * the device, and a clock for the stage times. Written against pagoda.h only. */
#ifndef PAGODA_MODEL_H
#define PAGODA_MODEL_H

#include <stdint.h>

#include "pagoda.h"

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
} model_source;

/* Shared by the models (weights.c): requires tensor `name` with `want_ndim` dims of `want`
 * (compared by element count, so [1, 1, D] matches [D]); the error names the tensor, its shape
 * and the expected one. */
int model_need(const model_source *src, const char *name, int want_ndim, const int64_t *want,
               pgd_error **err);
/* Writes "[a, b, c]". */
void model_shape_str(int ndim, const int64_t *s, char *buf, size_t size);

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
    int h, w, maps;     /* the input (size, probability maps) `bytes` was measured for */
    uint64_t bytes;     /* device bytes one image took in the last pass there */
    int last_split;     /* images per pass in the last forward */
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

/* Monotonic wall-clock time in milliseconds (stage times). */
double model_now_ms(void);

/* The one generator of seeded weights and inputs (xorshift64* from `state`, which must not
 * be 0): n values uniform in [-amp, amp], the same on every machine. */
void model_fill_seeded(float *dst, int64_t n, uint64_t state, float amp);

#endif
