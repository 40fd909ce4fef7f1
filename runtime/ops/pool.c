/* pool.c — pooling launchers: pgd_pool2d for cl/pool.cl (max and average pooling with
 * rectangular windows, strides, dilation, per-side padding, ceil mode, count_include_pad and
 * max-pool indices) and pgd_global_maxpool, the general forms; and the square, symmetric pools
 * the models use (pgd_maxpool2d, pgd_avgpool2d, pgd_global_avgpool) over conv.cl's vectorised
 * kernels. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

pgd_status pgd_pool2d_output_size(const pgd_pool_desc *d, int64_t h, int64_t w, int64_t *oh,
                                  int64_t *ow, pgd_error **err)
{
    const char *op = d && d->mode == PGD_POOL_AVG ? "avgpool" : "maxpool";
    if (!d)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "pool2d: no descriptor");
    if ((int)d->mode < 0 || (int)d->mode > PGD_POOL_AVG)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "pool2d: mode %d is not a pgd_pool_mode (0 max, 1 average)",
                              (int)d->mode);
    int dh = d->dh ? d->dh : 1, dw = d->dw ? d->dw : 1;
    if (d->kh < 1 || d->kw < 1 || d->sh < 1 || d->sw < 1 || dh < 1 || dw < 1 || d->pad_top < 0 ||
        d->pad_left < 0 || d->pad_bottom < 0 || d->pad_right < 0 || d->kh > 4096 || d->kw > 4096 ||
        dh > 4096 || dw > 4096 || d->pad_top > 4096 || d->pad_left > 4096 || d->pad_bottom > 4096 ||
        d->pad_right > 4096)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "%s: window %dx%d, stride %dx%d, dilation %dx%d, pads %d/%d/%d/%d "
                              "(top/left/bottom/right): windows, strides and dilations must be "
                              "1 to 4096, pads 0 to 4096",
                              op, d->kh, d->kw, d->sh, d->sw, dh, dw, d->pad_top, d->pad_left,
                              d->pad_bottom, d->pad_right);
    int64_t span[2] = {(int64_t)dh * (d->kh - 1) + 1, (int64_t)dw * (d->kw - 1) + 1};
    int64_t room[2] = {h + d->pad_top + d->pad_bottom, w + d->pad_left + d->pad_right};
    int64_t stride[2] = {d->sh, d->sw}, pad0[2] = {d->pad_top, d->pad_left}, in[2] = {h, w};
    int64_t out[2];
    for (int k = 0; k < 2; k++) {
        if (span[k] > room[k])
            return pgd__error_set(err, PGD_ERR_SHAPE,
                                  "%s: the window spans %lld %s but x padded has %lld", op,
                                  (long long)span[k], k ? "columns" : "rows", (long long)room[k]);
        int64_t q = room[k] - span[k];
        out[k] = (d->ceil_mode ? (q + stride[k] - 1) / stride[k] : q / stride[k]) + 1;
        /* PyTorch's rule: the last window starts inside x or its leading padding. */
        if (d->ceil_mode && (out[k] - 1) * stride[k] >= in[k] + pad0[k])
            out[k]--;
    }
    *oh = out[0];
    *ow = out[1];
    return PGD_OK;
}

pgd_status pgd_pool2d(pgd_ctx *ctx, const pgd_tensor *x, const pgd_pool_desc *d, pgd_tensor *y,
                      pgd_tensor *indices, pgd_error **err)
{
    if (!ctx || !x || !y)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "pool2d: ctx, x and y are required");
    int64_t oh = 0, ow = 0;
    if (x->ndim != 4)
        return pgd__shape_error(err, "pool2d", "x must be 4-D [N, H, W, C] (NHWC)", x, y);
    int rc = pgd_pool2d_output_size(d, x->shape[1], x->shape[2], &oh, &ow, err);
    if (rc)
        return rc;
    const char *op = d->mode == PGD_POOL_AVG ? "avgpool" : "maxpool";
    int64_t n = x->shape[0], c = x->shape[3];
    if (y->ndim != 4 || y->shape[0] != n || y->shape[1] != oh || y->shape[2] != ow ||
        y->shape[3] != c) {
        char what[96];
        snprintf(what, sizeof what, "y must be [N, %lld, %lld, C]", (long long)oh, (long long)ow);
        return pgd__shape_error(err, op, what, x, y);
    }
    if (indices && (d->mode != PGD_POOL_MAX || !pgd__shape_equal(indices, y)))
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "%s: indices are a max pool's, shaped like y", op);
    if (x->buf == y->buf || (indices && (indices->buf == x->buf || indices->buf == y->buf)))
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "%s: y and indices must not alias x "
                              "or each other",
                              op);
    if (pgd_tensor_get_numel(x) > INT32_MAX || pgd_tensor_get_numel(y) > INT32_MAX)
        return pgd__error_set(err, PGD_ERR_TOO_LARGE, "%s: more than 2^31 elements", op);
    if (indices && x->shape[1] * x->shape[2] > (1 << 24))
        return pgd__error_set(err, PGD_ERR_TOO_LARGE,
                              "%s: indices are floats, exact to 2^24 pixels a plane", op);
    cl_int total = (cl_int)pgd_tensor_get_numel(y);
    if (total == 0)
        return PGD_OK;
    const char *kernel = d->mode == PGD_POOL_AVG ? "pool2d_avg" : "pool2d_max";
    cl_kernel k;
    pgd__args args;
    if ((rc = pgd__args_kernel(&args, ctx, "pool", NULL, kernel, &k, err)))
        return rc;
    cl_int8 g = {{d->kh, d->kw, d->sh, d->sw, d->dh ? d->dh : 1, d->dw ? d->dw : 1, d->pad_top,
                  d->pad_left}};
    cl_int4 e = {{d->pad_bottom, d->pad_right, (cl_int)x->shape[1], (cl_int)x->shape[2]}};
    pgd__arg_mem(&args, x->buf);
    pgd__arg_mem(&args, y->buf);
    if (d->mode == PGD_POOL_MAX)
        pgd__arg_mem(&args, indices ? indices->buf : y->buf); /* not written without */
    pgd__arg(&args, sizeof g, &g);
    pgd__arg(&args, sizeof e, &e);
    pgd__arg_int(&args, (cl_int)c);
    pgd__arg_int(&args, (cl_int)oh);
    pgd__arg_int(&args, (cl_int)ow);
    pgd__arg_int(&args, total);
    pgd__arg_int(&args, d->mode == PGD_POOL_MAX ? indices != NULL : d->count_include_pad != 0);
    if ((rc = pgd__args_end(&args, err)))
        return rc;
    size_t wg = pgd__flat_wg(ctx, k), global = pgd__round_up((size_t)total, wg);
    return pgd__enqueue(ctx, k, kernel, 1, &global, &wg, err);
}

pgd_status pgd_global_maxpool(pgd_ctx *ctx, const pgd_tensor *x, pgd_tensor *y, pgd_error **err)
{
    if (!ctx || !x || !y)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "global_maxpool: ctx, x and y are required");
    if (x->ndim != 4)
        return pgd__shape_error(err, "global_maxpool", "x must be 4-D [N, H, W, C] (NHWC)", x, y);
    if (y->ndim != 2 || y->shape[0] != x->shape[0] || y->shape[1] != x->shape[3])
        return pgd__shape_error(err, "global_maxpool", "y must be [N, C] for x [N, H, W, C]", x, y);
    if (x->shape[1] * x->shape[2] == 0 && pgd_tensor_get_numel(y) > 0)
        return pgd__shape_error(err, "global_maxpool", "x has no pixels to take the max of", x, y);
    static const int axes[2] = {1, 2};
    return pgd_reduce(ctx, PGD_REDUCE_MAX, x, axes, 2, 0, y, err);
}

/* ---- pooling ---- */

/* Starts the arguments of pooling kernel `kernel` over C channels: where C % 4 == 0 (every
 * ResNet pool) its _vec form, a work-item taking *pvw = 16, 8 or 4 contiguous channels, else the
 * scalar one (*pvw = 1). The kernel's name goes to name (for the launch). */
static int pool_kernel(pgd_ctx *ctx, const char *kernel, int64_t C, pgd__args *args, cl_kernel *k,
                       int *pvw, char *name, size_t size, pgd_error **err)
{
    *pvw = C % 16 == 0 ? 16 : C % 8 == 0 ? 8 : C % 4 == 0 ? 4 : 1;
    char opts[32];
    snprintf(name, size, "%s%s", kernel, *pvw > 1 ? "_vec" : "");
    snprintf(opts, sizeof opts, "-DPVW=%d", *pvw);
    return pgd__args_kernel(args, ctx, "conv", *pvw > 1 ? opts : NULL, name, k, err);
}

static int pool(pgd_ctx *ctx, const char *op, const char *kernel, const pgd_tensor *x, int k,
                int stride, int pad, pgd_tensor *y, pgd_error **err)
{
    if (!ctx || !x || !y)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "%s: ctx, x and y are required", op);
    if (k < 1 || stride < 1 || pad < 0 || pad > k / 2)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "%s: need k >= 1, stride >= 1 and 0 <= pad <= k/2, got k %d, stride "
                              "%d, pad %d",
                              op, k, stride, pad);
    if (x->ndim != 4)
        return pgd__shape_error(err, op, "x must be 4-D [N, H, W, C] (NHWC)", x, y);
    int64_t N = x->shape[0], H = x->shape[1], W = x->shape[2], C = x->shape[3];
    int64_t eh = H + 2 * (int64_t)pad - k, ew = W + 2 * (int64_t)pad - k;
    if (H < 1 || W < 1 || eh < 0 || ew < 0) {
        char what[96];
        snprintf(what, sizeof what, "a %d x %d window (padding %d) does not fit the input", k, k,
                 pad);
        return pgd__shape_error(err, op, what, x, y);
    }
    int64_t OH = eh / stride + 1, OW = ew / stride + 1;
    if (y->ndim != 4 || y->shape[0] != N || y->shape[1] != OH || y->shape[2] != OW ||
        y->shape[3] != C) {
        char what[128];
        snprintf(what, sizeof what, "y must be [%lld, %lld, %lld, %lld] for this input",
                 (long long)N, (long long)OH, (long long)OW, (long long)C);
        return pgd__shape_error(err, op, what, x, y);
    }
    if (x->buf == y->buf)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "%s: y must not alias x", op);
    if (pgd_tensor_get_numel(x) > INT32_MAX)
        return pgd__error_set(err, PGD_ERR_TOO_LARGE, "%s: more than 2^31 elements", op);
    int64_t total = pgd_tensor_get_numel(y);
    if (total == 0)
        return PGD_OK;
    int pvw;
    char name[32];
    cl_kernel kk;
    pgd__args args;
    int rc = pool_kernel(ctx, kernel, C, &args, &kk, &pvw, name, sizeof name, err);
    if (rc)
        return rc;
    /* The _vec kernels take an output pixel a work-item (all its C channels, PVW at a time), the
     * scalar ones an output element. */
    int64_t per_item = pvw > 1 ? C : 1;
    int64_t items = total / per_item;
    cl_int a[9] = {(cl_int)items, (cl_int)C, (cl_int)H, (cl_int)W, (cl_int)OH,
                   (cl_int)OW,    k,         stride,    pad};
    pgd__arg_mem(&args, x->buf);
    pgd__arg_mem(&args, y->buf);
    for (cl_uint i = 0; i < 9; i++)
        pgd__arg_int(&args, a[i]);
    if ((rc = pgd__args_end(&args, err)))
        return rc;
    /* On a CPU, work-groups of about 256 vectors (at least 16 work-items), as the other flat
     * kernels' 256 items: 64 pixels of ResNet's 64 channels. */
    int64_t vectors = per_item / pvw, wg = 256 / vectors;
    return pgd__enqueue_flat_cap(ctx, kk, name, items,
                                 (uint64_t)k * (uint64_t)k * (uint64_t)per_item,
                                 (size_t)(wg > 16 ? wg : 16), err);
}

pgd_status pgd_maxpool2d(pgd_ctx *ctx, const pgd_tensor *x, int k, int stride, int pad,
                         pgd_tensor *y, pgd_error **err)
{
    return pool(ctx, "maxpool2d", "maxpool2d", x, k, stride, pad, y, err);
}

pgd_status pgd_avgpool2d(pgd_ctx *ctx, const pgd_tensor *x, int k, int stride, int pad,
                         pgd_tensor *y, pgd_error **err)
{
    return pool(ctx, "avgpool2d", "avgpool2d", x, k, stride, pad, y, err);
}

pgd_status pgd_global_avgpool(pgd_ctx *ctx, const pgd_tensor *x, pgd_tensor *y, pgd_error **err)
{
    const char *op = "global_avgpool";
    if (!ctx || !x || !y)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "%s: ctx, x and y are required", op);
    if (x->ndim != 4)
        return pgd__shape_error(err, op, "x must be 4-D [N, H, W, C] (NHWC)", x, y);
    int64_t N = x->shape[0], H = x->shape[1], W = x->shape[2], C = x->shape[3];
    if (y->ndim != 2 || y->shape[0] != N || y->shape[1] != C)
        return pgd__shape_error(err, op, "y must be [N, C] for x [N, H, W, C]", x, y);
    if (H < 1 || W < 1)
        return pgd__shape_error(err, op, "x has no pixels to average", x, y);
    if (x->buf == y->buf)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "%s: y must not alias x", op);
    if (pgd_tensor_get_numel(x) > INT32_MAX)
        return pgd__error_set(err, PGD_ERR_TOO_LARGE, "%s: more than 2^31 elements", op);
    int64_t total = N * C;
    if (total == 0)
        return PGD_OK;
    /* As the pools: PVW contiguous channels a work-item where C allows. PoCL 3.1, AMD EPYC,
     * inside ResNet-50 (7x7x2048): batch 8 1.07 -> 0.12-0.30 ms, batch 1 0.16 -> 0.011-0.02 ms
     * (one channel a work-item, its 49 loads 8 KB apart, did not vectorise across items). */
    int pvw;
    char name[32];
    cl_kernel k;
    pgd__args args;
    int rc = pool_kernel(ctx, "global_avgpool", C, &args, &k, &pvw, name, sizeof name, err);
    if (rc)
        return rc;
    cl_int a[3] = {(cl_int)total, (cl_int)C, (cl_int)(H * W)};
    pgd__arg_mem(&args, x->buf);
    pgd__arg_mem(&args, y->buf);
    for (cl_uint i = 0; i < 3; i++)
        pgd__arg_int(&args, a[i]);
    if ((rc = pgd__args_end(&args, err)))
        return rc;
    return pgd__enqueue_flat_cap(ctx, k, name, total / pvw, (uint64_t)(H * W) * (uint64_t)pvw, 256,
                                 err);
}
