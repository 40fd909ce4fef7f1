/* pool.c — launchers for cl/pool.cl: pgd_pool2d (max and average pooling with rectangular
 * windows, strides, dilation, per-side padding, ceil mode, count_include_pad and max-pool
 * indices) and pgd_global_maxpool. The square, symmetric pools of conv.c (pgd_maxpool2d,
 * pgd_avgpool2d) keep their vectorised kernels for the models; this is the general form. */
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
