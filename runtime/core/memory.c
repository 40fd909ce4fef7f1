/* memory.c — device memory accounting and tensor-to-tensor copies: what models need to move
 * data around on the device without seeing OpenCL. */
#include <string.h>

#include "internal.h"

void pgd_ctx_get_memory_stats(const pgd_ctx *ctx, pgd_memory_stats *out)
{
    memset(out, 0, sizeof *out);
    out->live_bytes = ctx->live_bytes;
    out->peak_bytes = ctx->live_peak;
    out->idle_bytes = ctx->pool_idle_bytes;
    out->idle_buffers = ctx->pool_len;
    out->reused = ctx->pool_reused;
}

void pgd_ctx_memory_reset_peak(pgd_ctx *ctx)
{
    pgd__live_peak_reset(ctx);
}

/* 0 when [off, off + n) lies inside t, else the error naming `what`. */
static int check_range(const pgd_tensor *t, int64_t off, int64_t n, const char *what,
                       pgd_error **err)
{
    int64_t numel = pgd_tensor_get_numel(t);
    if (off >= 0 && n >= 0 && off <= numel && n <= numel - off)
        return PGD_OK;
    char s[96];
    return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                          "tensor copy: %s range [%lld, %lld + %lld) is outside the tensor %s "
                          "(%lld elements)",
                          what, (long long)off, (long long)off, (long long)n,
                          pgd_tensor_shape_str(t, s, sizeof s), (long long)numel);
}

pgd_status pgd_tensor_copy(const pgd_tensor *src, int64_t src_offset, pgd_tensor *dst,
                           int64_t dst_offset, int64_t count, pgd_error **err)
{
    if (src->ctx != dst->ctx)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "tensor copy: source and destination belong to different contexts");
    int rc = check_range(src, src_offset, count, "source", err);
    if (!rc)
        rc = check_range(dst, dst_offset, count, "destination", err);
    if (rc || count == 0)
        return rc;
    if (src == dst && src_offset < dst_offset + count && dst_offset < src_offset + count)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "tensor copy: ranges [%lld, +%lld) and [%lld, +%lld) of one tensor "
                              "overlap",
                              (long long)src_offset, (long long)count, (long long)dst_offset,
                              (long long)count);
    pgd_ctx *ctx = src->ctx;
    cl_int cl = clEnqueueCopyBuffer(
        ctx->queue, src->buf, dst->buf, (size_t)src_offset * sizeof(float),
        (size_t)dst_offset * sizeof(float), (size_t)count * sizeof(float), 0, NULL, NULL);
    if (cl != CL_SUCCESS)
        return pgd__cl_fail(err, cl, "clEnqueueCopyBuffer", "copying %lld elements on '%s'",
                            (long long)count, ctx->dev.name);
    return PGD_OK;
}

pgd_status pgd_tensor_slice(const pgd_tensor *src, int dim, int64_t start, int64_t length,
                            pgd_tensor *dst, pgd_error **err)
{
    char ss[96], sd[96];
    pgd_tensor_shape_str(src, ss, sizeof ss);
    pgd_tensor_shape_str(dst, sd, sizeof sd);
    if (src == dst || src->ctx != dst->ctx)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "tensor slice: the destination must be another tensor of the same "
                              "context");
    if (dim < 0 || dim >= src->ndim)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "tensor slice: dimension %d does not exist in %s", dim, ss);
    int64_t extent = src->shape[dim];
    if (start < 0 || length < 0 || start > extent || length > extent - start)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "tensor slice: [%lld, %lld + %lld) is outside dimension %d (size "
                              "%lld) of %s",
                              (long long)start, (long long)start, (long long)length, dim,
                              (long long)extent, ss);
    int same = dst->ndim == src->ndim;
    for (int i = 0; same && i < src->ndim; i++)
        same = dst->shape[i] == (i == dim ? length : src->shape[i]);
    if (!same)
        return pgd__error_set(err, PGD_ERR_SHAPE,
                              "tensor slice: %s narrowed along dimension %d to %lld must go into "
                              "a tensor of that shape, not %s",
                              ss, dim, (long long)length, sd);
    size_t outer = 1, inner = 1;
    for (int i = 0; i < dim; i++)
        outer *= (size_t)src->shape[i];
    for (int i = dim + 1; i < src->ndim; i++)
        inner *= (size_t)src->shape[i];
    if (outer == 0 || inner == 0 || length == 0)
        return PGD_OK;
    /* One rectangular copy: each of the `outer` rows holds the length x inner block. */
    size_t row = (size_t)length * inner * sizeof(float);
    size_t src_origin[3] = {(size_t)start * inner * sizeof(float), 0, 0};
    size_t dst_origin[3] = {0, 0, 0};
    size_t region[3] = {row, outer, 1};
    pgd_ctx *ctx = src->ctx;
    cl_int cl =
        clEnqueueCopyBufferRect(ctx->queue, src->buf, dst->buf, src_origin, dst_origin, region,
                                (size_t)extent * inner * sizeof(float), 0, row, 0, 0, NULL, NULL);
    if (cl != CL_SUCCESS)
        return pgd__cl_fail(err, cl, "clEnqueueCopyBufferRect",
                            "slicing %s along dimension %d on "
                            "'%s'",
                            ss, dim, ctx->dev.name);
    return PGD_OK;
}

pgd_status pgd_tensor_fill(pgd_tensor *t, float value, pgd_error **err)
{
    int64_t n = pgd_tensor_get_numel(t);
    if (n == 0)
        return PGD_OK;
    cl_int cl = clEnqueueFillBuffer(t->ctx->queue, t->buf, &value, sizeof value, 0,
                                    (size_t)n * sizeof(float), 0, NULL, NULL);
    if (cl != CL_SUCCESS)
        return pgd__cl_fail(err, cl, "clEnqueueFillBuffer", "filling %lld elements on '%s'",
                            (long long)n, t->ctx->dev.name);
    return PGD_OK;
}
