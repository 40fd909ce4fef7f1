/* conv_pads.c — convolution with pads per side (ONNX's pads and auto_pad): the input padded
 * with zeros by pgd_pad into a temporary, then the layer's own unpadded forward, so every
 * algorithm the dispatcher picks applies unchanged. The price is one copy of the padded input. */
#include <string.h>

#include "internal.h"

void pgd_conv2d_same_pads(const pgd_conv2d_desc *desc, int64_t h, int64_t w, int lower, int pads[4])
{
    int64_t in[2] = {h, w};
    int k[2] = {desc->kh, desc->kw};
    int s[2] = {desc->stride_h ? desc->stride_h : 1, desc->stride_w ? desc->stride_w : 1};
    int d[2] = {desc->dil_h ? desc->dil_h : 1, desc->dil_w ? desc->dil_w : 1};
    for (int i = 0; i < 2; i++) {
        int64_t out = (in[i] + s[i] - 1) / s[i];
        int64_t total = (out - 1) * s[i] + (int64_t)(k[i] - 1) * d[i] + 1 - in[i];
        total = total > 0 ? total : 0;
        int64_t small = total / 2, big = total - small;
        pads[i] = (int)(lower ? big : small);
        pads[i + 2] = (int)(lower ? small : big);
    }
}

pgd_status pgd_conv2d_forward_pads(pgd_ctx *ctx, const pgd_conv2d *conv, const pgd_tensor *x,
                                   const int pads[4], pgd_act act, const pgd_tensor *residual,
                                   pgd_tensor *y, pgd_error **err)
{
    if (!ctx || !conv || !x || !y || !pads)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "conv2d: ctx, conv, x, pads and y are required");
    const pgd_conv2d_desc *d = pgd__conv2d_desc(conv);
    if (d->pad_h || d->pad_w)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "conv2d: the layer pads by itself (pad_h %d, pad_w %d): create it "
                              "with 0 pads to give pads per side",
                              d->pad_h, d->pad_w);
    for (int i = 0; i < 4; i++)
        if (pads[i] < 0 || pads[i] > 4096)
            return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                                  "conv2d: pads %d, %d, %d, %d (top, left, bottom, right) must be "
                                  "0 to 4096",
                                  pads[0], pads[1], pads[2], pads[3]);
    if (x->ndim != 4)
        return pgd__shape_error(err, "conv2d", "x must be 4-D [N, H, W, C] (NHWC)", x, y);
    if (!pads[0] && !pads[1] && !pads[2] && !pads[3])
        return pgd_conv2d_forward(ctx, conv, x, act, residual, y, err);
    int64_t padded[4] = {x->shape[0], x->shape[1] + pads[0] + pads[2],
                         x->shape[2] + pads[1] + pads[3], x->shape[3]};
    int64_t widths[8] = {0, pads[0], pads[1], 0, 0, pads[2], pads[3], 0};
    pgd_tensor *t = NULL;
    int rc = pgd_tensor_create(ctx, 4, padded, &t, err);
    if (!rc)
        rc = pgd_pad(ctx, x, widths, PGD_PAD_CONSTANT, 0.0f, t, err);
    if (!rc)
        rc = pgd_conv2d_forward(ctx, conv, t, act, residual, y, err);
    pgd_tensor_destroy(t);
    return rc;
}
