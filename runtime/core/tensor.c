/* tensor.c — device buffers with shape and strides, upload/download, and the buffer pool.
 *
 * The pool keeps released buffers and hands one back to a request of a size class it fits:
 * requests are rounded up to a size class (1/8 steps between powers of two, so at most 12.5 %
 * is wasted), which lets a model's repeating layers reuse each other's buffers. Idle bytes are
 * capped; past the cap the oldest idle buffers are released. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static size_t size_class(size_t bytes)
{
    if (bytes <= 256)
        return 256;
    size_t p = 1;
    while (p < bytes / 8)
        p <<= 1;
    /* p = largest power of two ≤ bytes/8 (at least 1): round up to a multiple of it. */
    return (bytes + p - 1) / p * p;
}

static uint64_t pool_cap_bytes(const pgd_ctx *ctx)
{
    /* Keep at most a quarter of device memory idle, and never more than 2 GiB. */
    uint64_t cap = ctx->dev.global_mem / 4;
    return cap > ((uint64_t)2 << 30) ? ((uint64_t)2 << 30) : cap;
}

int pgd__check_alloc(pgd_ctx *ctx, uint64_t bytes, const char *what, pgd_error **err)
{
    if (bytes > ctx->dev.max_alloc)
        return pgd__error_set(err, PGD_ERR_TOO_LARGE,
                              "%s needs %" PRIu64 " bytes in one buffer, more than the %" PRIu64
                              " bytes '%s' allows (CL_DEVICE_MAX_MEM_ALLOC_SIZE)",
                              what, bytes, ctx->dev.max_alloc, ctx->dev.name);
    if (bytes > ctx->dev.global_mem)
        return pgd__error_set(err, PGD_ERR_TOO_LARGE,
                              "%s needs %" PRIu64 " bytes, more than the %" PRIu64
                              " bytes of global memory of '%s'",
                              what, bytes, ctx->dev.global_mem, ctx->dev.name);
    return PGD_OK;
}

static void count_live(pgd_ctx *ctx, uint64_t bytes)
{
    ctx->live_bytes += bytes;
    if (ctx->live_bytes > ctx->live_peak)
        ctx->live_peak = ctx->live_bytes;
}

static void set_contiguous(pgd_tensor *t, int ndim, const int64_t *shape)
{
    t->ndim = ndim;
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        t->shape[i] = shape[i];
        t->stride[i] = s;
        s *= shape[i];
    }
}

static int checked_numel(int ndim, const int64_t *shape, uint64_t *numel, char *desc, size_t dsize,
                         pgd_error **err)
{
    uint64_t n = 1;
    size_t used = 0;
    desc[0] = 0;
    int bad = ndim < 0 || ndim > PGD_MAX_DIMS || (ndim > 0 && !shape);
    for (int i = 0; !bad && i < ndim; i++) {
        int w = snprintf(desc + used, dsize - used, "%s%" PRId64, i ? ", " : "", shape[i]);
        if (w > 0 && (size_t)w < dsize - used)
            used += (size_t)w;
        if (shape[i] < 0 || (shape[i] > 0 && n > UINT64_MAX / 4 / (uint64_t)shape[i])) {
            bad = 1;
            break;
        }
        n *= (uint64_t)shape[i];
    }
    if (bad)
        return pgd__error_set(err, PGD_ERR_SHAPE,
                              "invalid tensor shape [%s] (ndim %d, at most %d dims, sizes >= 0, "
                              "at most 2^62 bytes)",
                              desc, ndim, PGD_MAX_DIMS);
    *numel = n;
    return PGD_OK;
}

pgd_status pgd_tensor_create(pgd_ctx *ctx, int ndim, const int64_t *shape, pgd_tensor **out,
                             pgd_error **err)
{
    *out = NULL;
    uint64_t numel = 0;
    char desc[256];
    int rc = checked_numel(ndim, shape, &numel, desc, sizeof desc, err);
    if (rc)
        return rc;
    uint64_t bytes = numel * sizeof(float);
    char what[300];
    snprintf(what, sizeof what, "a float32 tensor [%s]", desc);
    rc = pgd__check_alloc(ctx, bytes, what, err);
    if (rc)
        return rc;
    pgd_tensor *t = calloc(1, sizeof *t);
    if (!t)
        return pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "tensor handle");
    t->ctx = ctx;
    set_contiguous(t, ndim, shape);
    size_t want = size_class(bytes ? (size_t)bytes : 4);
    if (want > ctx->dev.max_alloc)
        want = (size_t)(bytes ? bytes : 4);
    /* Reuse the smallest idle buffer of the same class. */
    for (size_t i = 0; i < ctx->pool_len; i++) {
        if (ctx->pool[i].bytes == want) {
            t->buf = ctx->pool[i].buf;
            t->bytes = want;
            ctx->pool_idle_bytes -= want;
            ctx->pool[i] = ctx->pool[--ctx->pool_len];
            ctx->pool_reused++;
            count_live(ctx, want);
            *out = t;
            return PGD_OK;
        }
    }
    cl_int cl = CL_SUCCESS;
    t->buf = clCreateBuffer(ctx->context, CL_MEM_READ_WRITE, want, NULL, &cl);
    if (!t->buf && ctx->pool_len) {
        /* Out of memory with idle buffers held: give them back and try once more. */
        pgd__pool_destroy(ctx);
        t->buf = clCreateBuffer(ctx->context, CL_MEM_READ_WRITE, want, NULL, &cl);
    }
    if (!t->buf) {
        free(t);
        return pgd__cl_fail(err, cl, "clCreateBuffer", "%zu bytes for %s on '%s'", want, what,
                            ctx->dev.name);
    }
    t->bytes = want;
    count_live(ctx, want);
    *out = t;
    return PGD_OK;
}

void pgd__live_peak_reset(pgd_ctx *ctx)
{
    ctx->live_peak = ctx->live_bytes;
}

int pgd__tensor_numel(int ndim, const int64_t *shape, uint64_t *numel, pgd_error **err)
{
    char desc[256];
    return checked_numel(ndim, shape, numel, desc, sizeof desc, err);
}

pgd_tensor *pgd__tensor_handle(pgd_ctx *ctx, int ndim, const int64_t *shape)
{
    pgd_tensor *t = calloc(1, sizeof *t);
    if (t) {
        t->ctx = ctx;
        set_contiguous(t, ndim, shape);
    }
    return t;
}

/* A tensor over memory the pool does not own (interop.c): its references go back, nothing is
 * pooled or uncounted. */
static void destroy_foreign(pgd_tensor *t)
{
    if (t->buf)
        clReleaseMemObject(t->buf);
    if (t->parent)
        clReleaseMemObject(t->parent);
    free(t);
}

void pgd_tensor_destroy(pgd_tensor *t)
{
    if (!t)
        return;
    if (t->foreign) {
        destroy_foreign(t);
        return;
    }
    pgd_ctx *ctx = t->ctx;
    ctx->live_bytes -= t->bytes < ctx->live_bytes ? t->bytes : ctx->live_bytes;
    uint64_t cap = pool_cap_bytes(ctx);
    if (t->bytes <= cap) {
        while (ctx->pool_len && ctx->pool_idle_bytes + t->bytes > cap) {
            clReleaseMemObject(ctx->pool[0].buf);
            ctx->pool_idle_bytes -= ctx->pool[0].bytes;
            memmove(ctx->pool, ctx->pool + 1, (ctx->pool_len - 1) * sizeof *ctx->pool);
            ctx->pool_len--;
        }
        if (ctx->pool_len == ctx->pool_cap) {
            size_t ncap = ctx->pool_cap ? ctx->pool_cap * 2 : 32;
            pgd__pool_entry *p = realloc(ctx->pool, ncap * sizeof *p);
            if (p) {
                ctx->pool = p;
                ctx->pool_cap = ncap;
            }
        }
        if (ctx->pool_len < ctx->pool_cap) {
            ctx->pool[ctx->pool_len].buf = t->buf;
            ctx->pool[ctx->pool_len].bytes = t->bytes;
            ctx->pool_len++;
            ctx->pool_idle_bytes += t->bytes;
            free(t);
            return;
        }
    }
    clReleaseMemObject(t->buf);
    free(t);
}

void pgd__pool_destroy(pgd_ctx *ctx)
{
    for (size_t i = 0; i < ctx->pool_len; i++)
        clReleaseMemObject(ctx->pool[i].buf);
    free(ctx->pool);
    ctx->pool = NULL;
    ctx->pool_len = ctx->pool_cap = 0;
    ctx->pool_idle_bytes = 0;
}

void pgd_ctx_get_pool_stats(const pgd_ctx *ctx, uint64_t *idle_bytes, size_t *idle_buffers,
                            uint64_t *reused)
{
    if (idle_bytes)
        *idle_bytes = ctx->pool_idle_bytes;
    if (idle_buffers)
        *idle_buffers = ctx->pool_len;
    if (reused)
        *reused = ctx->pool_reused;
}

int pgd_tensor_get_ndim(const pgd_tensor *t)
{
    return t->ndim;
}
int64_t pgd_tensor_get_dim(const pgd_tensor *t, int i)
{
    return i >= 0 && i < t->ndim ? t->shape[i] : 1;
}
int64_t pgd_tensor_get_stride(const pgd_tensor *t, int i)
{
    return i >= 0 && i < t->ndim ? t->stride[i] : 1;
}
int64_t pgd_tensor_get_numel(const pgd_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= t->shape[i];
    return n;
}

int pgd__shape_equal(const pgd_tensor *a, const pgd_tensor *b)
{
    if (a->ndim != b->ndim)
        return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i])
            return 0;
    return 1;
}

pgd_status pgd_tensor_reshape(pgd_tensor *t, int ndim, const int64_t *shape, pgd_error **err)
{
    uint64_t numel = 0;
    char desc[256], old[256];
    int rc = checked_numel(ndim, shape, &numel, desc, sizeof desc, err);
    if (rc)
        return rc;
    if ((int64_t)numel != pgd_tensor_get_numel(t))
        return pgd__error_set(err, PGD_ERR_SHAPE,
                              "cannot reshape %s to [%s]: element counts differ",
                              pgd_tensor_shape_str(t, old, sizeof old), desc);
    set_contiguous(t, ndim, shape);
    return PGD_OK;
}

/* One blocking copy of the whole tensor: from host memory `src` when `upload`, else to host
 * memory `dst` (the pointer not used is NULL). */
static int transfer(const pgd_tensor *t, int upload, const float *src, float *dst, pgd_error **err)
{
    size_t bytes = (size_t)pgd_tensor_get_numel(t) * sizeof(float);
    if (!bytes)
        return PGD_OK;
    cl_int cl =
        upload ? clEnqueueWriteBuffer(t->ctx->queue, t->buf, CL_TRUE, 0, bytes, src, 0, NULL, NULL)
               : clEnqueueReadBuffer(t->ctx->queue, t->buf, CL_TRUE, 0, bytes, dst, 0, NULL, NULL);
    if (cl != CL_SUCCESS) {
        char s[256];
        return pgd__cl_fail(err, cl, upload ? "clEnqueueWriteBuffer" : "clEnqueueReadBuffer",
                            "%s tensor %s (%zu bytes)", upload ? "uploading" : "downloading",
                            pgd_tensor_shape_str(t, s, sizeof s), bytes);
    }
    return PGD_OK;
}

pgd_status pgd_tensor_create_from(pgd_ctx *ctx, int ndim, const int64_t *shape, const float *data,
                                  pgd_tensor **out, pgd_error **err)
{
    int rc = pgd_tensor_create(ctx, ndim, shape, out, err);
    if (!rc)
        rc = pgd_tensor_upload(*out, data, err);
    if (rc) {
        pgd_tensor_destroy(*out);
        *out = NULL;
    }
    return rc;
}

pgd_status pgd_tensor_upload(pgd_tensor *t, const float *src, pgd_error **err)
{
    return transfer(t, 1, src, NULL, err);
}

pgd_status pgd_tensor_download(const pgd_tensor *t, float *dst, pgd_error **err)
{
    return transfer(t, 0, NULL, dst, err);
}

char *pgd_tensor_shape_str(const pgd_tensor *t, char *buf, size_t size)
{
    size_t used = 0;
    if (size == 0)
        return buf;
    buf[0] = 0;
    int w = snprintf(buf, size, "[");
    used = w > 0 ? (size_t)w : 0;
    for (int i = 0; i < t->ndim && used < size; i++) {
        w = snprintf(buf + used, size - used, "%s%" PRId64, i ? ", " : "", t->shape[i]);
        if (w < 0)
            break;
        used += (size_t)w;
    }
    if (used < size)
        snprintf(buf + used, size - used, "]");
    return buf;
}
