/* conv.c — convolution and pooling over NHWC activations: launchers for cl/conv.cl and for the
 * implicit-GEMM kernel of cl/gemm.cl.
 *
 * Weights are prepared once, at create: batch norm folded in (in double), reordered from
 * PyTorch's [cout, cin/g, kh, kw] to [cout, kh, kw, cin/g] so that a GEMM's K runs over
 * (ky, kx, ci) with ci contiguous in the NHWC input, and on CPU devices also packed into the
 * GEMM's column panels, one set per group.
 *
 * Algorithms (pgd_conv2d_forward picks one per shape and device; $PAGODA_CONV forces one where
 * it applies):
 *   gemm      1x1, stride 1, no padding, one group: the input is the GEMM's A [N·H·W, cin].
 *   implicit  CPU devices: gemm_cpu's register tile with A addressed as im2col would lay it
 *             out, without the matrix (conv_implicit_cpu), any groups; taps in the padding
 *             read a small buffer of zeros.
 *   im2col    an explicit im2col matrix, in chunks of output rows of at most 64 MiB, then the
 *             shared GEMM; any device, any groups (one GEMM per group).
 *   direct    one work-item per output element; any device, any shape (depthwise).
 *   depthwise groups = channels (one input and one output channel a group): a few output
 *             pixels of a row a work-item, channels fastest, the weights tap-major [kh, kw, C]
 *             so that neighbouring work-items read neighbouring addresses; any device.
 *   winograd  CPU devices, 3x3, stride 1, no dilation, one group: F(2x2, 3x3) (cl/winograd.cl),
 *             the input transformed into 16 [tiles, cin] matrices, 16 GEMMs against the
 *             weights transformed at create, the output transformed back with the epilogue;
 *             16 multiply-adds per 2x2 outputs and channel pair instead of 36.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tune.h"

enum { ALG_GEMM, ALG_IMPLICIT, ALG_IM2COL, ALG_DIRECT, ALG_WINOGRAD, ALG_DEPTHWISE, ALG_COUNT };
static const char *const alg_names[ALG_COUNT] = {"gemm",   "implicit", "im2col",
                                                 "direct", "winograd", "depthwise"};

/* The im2col matrix is built in chunks of output rows of at most this many bytes. */
#define IM2COL_CHUNK_BYTES ((uint64_t)64 << 20)

struct pgd_conv2d {
    pgd_ctx *ctx;
    pgd_conv2d_desc d;   /* normalised: strides, dilations and groups at least 1 */
    int64_t cing, coutg; /* channels per group */
    int64_t kg;          /* GEMM depth per group: kh·kw·cing */
    pgd_tensor *w;       /* [cout, kh, kw, cing], batch norm folded in */
    pgd_tensor *packed;  /* CPU devices: each group's panels, packed_stride apart; else NULL */
    int64_t packed_stride;
    pgd_tensor *bias;    /* [cout] or NULL */
    pgd_tensor *zeros;   /* CPU devices, padding: cing zeros (the implicit GEMM's taps
                            outside the input read them) */
    pgd_conv2d *wino;    /* CPU devices, 3x3 stride 1 where winograd may run: the 16 GEMMs as
                            a 1x1 convolution of 16 groups, cin·16 -> cout·16, its weights the
                            matrices G g Gᵀ [cout, cin]; else NULL */
    pgd__gemm_params gp; /* the GEMM parameters of the context when it was created */
    pgd_tensor *dw;      /* depthwise layers: the weights tap-major [kh, kw, C]; else NULL */
};

static int enqueue_flat(pgd_ctx *ctx, cl_kernel k, const char *name, int64_t total, uint64_t flops,
                        pgd_error **err)
{
    return pgd__enqueue_flat_cap(ctx, k, name, total, flops, 256, err);
}

static int same_shape4(const pgd_tensor *t, int64_t a, int64_t b, int64_t c, int64_t d)
{
    return t->ndim == 4 && t->shape[0] == a && t->shape[1] == b && t->shape[2] == c &&
           t->shape[3] == d;
}

/* ---- layout ---- */

pgd_status pgd_nchw_to_nhwc(pgd_ctx *ctx, const pgd_tensor *x, pgd_tensor *y, pgd_error **err)
{
    const char *op = "nchw_to_nhwc";
    if (!ctx || !x || !y)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "%s: ctx, x and y are required", op);
    if (x->ndim != 4)
        return pgd__shape_error(err, op, "x must be 4-D [N, C, H, W]", x, y);
    int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3];
    if (!same_shape4(y, N, H, W, C))
        return pgd__shape_error(err, op, "y must be [N, H, W, C] for x [N, C, H, W]", x, y);
    if (x->buf == y->buf)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "%s: y must not alias x", op);
    int64_t total = pgd_tensor_get_numel(x);
    if (total > INT32_MAX)
        return pgd__error_set(err, PGD_ERR_TOO_LARGE, "%s: more than 2^31 elements", op);
    if (total == 0)
        return PGD_OK;
    cl_kernel k;
    pgd__args args;
    int rc = pgd__args_kernel(&args, ctx, "conv", NULL, "nchw_to_nhwc", &k, err);
    if (rc)
        return rc;
    /* One work-item a run of 16 pixels of one image (nchw_to_nhwc in cl/conv.cl). */
    int64_t runs = N * ((H * W + 15) / 16);
    cl_int a[4] = {(cl_int)runs, (cl_int)C, (cl_int)H, (cl_int)W};
    pgd__arg_mem(&args, x->buf);
    pgd__arg_mem(&args, y->buf);
    for (cl_uint i = 0; i < 4; i++)
        pgd__arg_int(&args, a[i]);
    if ((rc = pgd__args_end(&args, err)))
        return rc;
    return enqueue_flat(ctx, k, "nchw_to_nhwc", runs, 0, err);
}

/* ---- convolution: preparation ---- */

static pgd_conv2d_desc normalise(const pgd_conv2d_desc *in)
{
    pgd_conv2d_desc d = *in;
    if (d.stride_h == 0)
        d.stride_h = 1;
    if (d.stride_w == 0)
        d.stride_w = 1;
    if (d.dil_h == 0)
        d.dil_h = 1;
    if (d.dil_w == 0)
        d.dil_w = 1;
    if (d.groups == 0)
        d.groups = 1;
    return d;
}

static int check_desc(const pgd_conv2d_desc *d, pgd_error **err)
{
    const char *op = "conv2d";
    if (d->cin < 1 || d->cout < 1 || d->kh < 1 || d->kw < 1)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "%s: need at least one channel in and out and a kernel of at least "
                              "1 x 1, got cin %lld, cout %lld, kernel %d x %d",
                              op, (long long)d->cin, (long long)d->cout, d->kh, d->kw);
    if (d->stride_h < 1 || d->stride_w < 1 || d->dil_h < 1 || d->dil_w < 1 || d->pad_h < 0 ||
        d->pad_w < 0 || d->groups < 1)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "%s: stride %d x %d, dilation %d x %d, groups %d must be positive "
                              "(0 means 1) and padding %d x %d not negative",
                              op, d->stride_h, d->stride_w, d->dil_h, d->dil_w, d->groups, d->pad_h,
                              d->pad_w);
    if (d->cin % d->groups || d->cout % d->groups)
        return pgd__error_set(err, PGD_ERR_SHAPE,
                              "%s: cin %lld and cout %lld must both be multiples of groups %d", op,
                              (long long)d->cin, (long long)d->cout, d->groups);
    int64_t kg = (int64_t)d->kh * d->kw * (d->cin / d->groups);
    if (d->cout > INT32_MAX || d->cin > INT32_MAX || kg > INT32_MAX || d->cout * kg > INT32_MAX ||
        d->kh > 65535 || d->kw > 65535)
        return pgd__error_set(err, PGD_ERR_TOO_LARGE,
                              "%s: %lld x %lld weights of a %d x %d kernel exceed the 32-bit "
                              "indices of the kernels",
                              op, (long long)d->cout, (long long)d->cin, d->kh, d->kw);
    return PGD_OK;
}

const pgd_conv2d_desc *pgd__conv2d_desc(const pgd_conv2d *conv)
{
    return &conv->d;
}

void pgd_conv2d_out_size(const pgd_conv2d_desc *desc, int64_t h, int64_t w, int64_t *oh,
                         int64_t *ow)
{
    pgd_conv2d_desc d = normalise(desc);
    int64_t eh = h + 2 * (int64_t)d.pad_h - (int64_t)d.dil_h * (d.kh - 1) - 1;
    int64_t ew = w + 2 * (int64_t)d.pad_w - (int64_t)d.dil_w * (d.kw - 1) - 1;
    if (oh)
        *oh = h > 0 && eh >= 0 && d.stride_h > 0 ? eh / d.stride_h + 1 : 0;
    if (ow)
        *ow = w > 0 && ew >= 0 && d.stride_w > 0 ? ew / d.stride_w + 1 : 0;
}

static int upload_new(pgd_ctx *ctx, int64_t n, const float *host, pgd_tensor **out,
                      const char *what, pgd_error **err)
{
    int rc = pgd__check_alloc(ctx, (uint64_t)n * sizeof(float), what, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 1, &n, out, err);
    if (!rc)
        rc = pgd_tensor_upload(*out, host, err);
    return rc;
}

/* F(2x2, 3x3) fits: 3x3, stride 1, no dilation, one group (any padding). */
static int wino_shape(const pgd_conv2d_desc *d)
{
    return d->kh == 3 && d->kw == 3 && d->stride_h == 1 && d->stride_w == 1 && d->dil_h == 1 &&
           d->dil_w == 1 && d->groups == 1;
}

/* Whether a layer keeps Winograd weights: on CPU devices where the shape fits and either
 * winograd is forced or both widths are at least WINO_MIN_CHANNELS (choose's rule; narrower
 * layers are memory-bound, and their transforms cost more than the products saved). */
#define WINO_MIN_CHANNELS 64
static int wino_wanted(const pgd_ctx *ctx, const pgd_conv2d_desc *d, int cpu)
{
    if (!cpu || !wino_shape(d))
        return 0;
    if (ctx->opt.conv_algo == PGD_CONV_ALGO_WINOGRAD)
        return 1;
    return ctx->opt.conv_algo == PGD_CONV_ALGO_AUTO && d->cin >= WINO_MIN_CHANNELS &&
           d->cout >= WINO_MIN_CHANNELS;
}

/* c->wino: U_ξ = G g Gᵀ of every (cout, cin) pair, batch norm scale folded in, in double, rounded
 * once, as the weights [16·cout, cin, 1, 1] of a 1x1 convolution of 16 groups (group ξ: U_ξ),
 * which packs them into the GEMM's panels (wino_products runs them).
 *   G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1] */
static int wino_weights(pgd_ctx *ctx, pgd_conv2d *c, const float *weight, const pgd_batchnorm *bn,
                        pgd_error **err)
{
    const int64_t cout = c->d.cout, cin = c->d.cin, n = 16 * cout * cin;
    int rc = pgd__check_alloc(ctx, (uint64_t)n * sizeof(float), "conv2d Winograd weights", err);
    if (rc)
        return rc;
    float *hu = malloc((size_t)n * sizeof(float));
    if (!hu)
        return pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY,
                              "conv2d: host staging of %lld Winograd weights", (long long)n);
    static const double G[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
    for (int64_t co = 0; co < cout; co++) {
        double s = 1.0;
        if (bn)
            s = (double)bn->weight[co] / sqrt((double)bn->var[co] + (double)bn->eps);
        for (int64_t ci = 0; ci < cin; ci++) {
            const float *g = weight + (co * cin + ci) * 9;
            double gt[4][3]; /* G g */
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 3; j++)
                    gt[i][j] = (G[i][0] * g[j] + G[i][1] * g[3 + j] + G[i][2] * g[6 + j]) * s;
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 4; j++)
                    hu[((int64_t)(4 * i + j) * cout + co) * cin + ci] =
                        (float)(gt[i][0] * G[j][0] + gt[i][1] * G[j][1] + gt[i][2] * G[j][2]);
        }
    }
    pgd_conv2d_desc g16 = {16 * cin, 16 * cout, 1, 1, 1, 1, 0, 0, 1, 1, 16};
    rc = pgd_conv2d_create(ctx, &g16, hu, NULL, NULL, &c->wino, err);
    free(hu);
    /* Only the direct kernel reads the unpacked copy, and the 16-group form takes it only below
     * 8 channels a group: keep the panels alone (ResNet-50: 58 MB less on the device). */
    if (!rc && c->wino->packed && c->wino->coutg >= 8) {
        pgd_tensor_destroy(c->wino->w);
        c->wino->w = NULL;
    }
    return rc;
}

/* The weights [cout, cin/groups, kh, kw] as the kernels read them, [cout, kh·kw, cin/groups],
 * into hw, and the bias into hb, with the batch norm folded in, in double: w' = w·s,
 * b' = (b − mean)·s + β with s = γ/√(var + eps). */
static void fold_weights(const pgd_conv2d_desc *d, const float *weight, const float *bias,
                         const pgd_batchnorm *bn, float *hw, float *hb)
{
    int64_t cing = d->cin / d->groups, taps = (int64_t)d->kh * d->kw, kg = taps * cing;
    for (int64_t co = 0; co < d->cout; co++) {
        double s = 1.0, b = bias ? bias[co] : 0.0;
        if (bn) {
            s = (double)bn->weight[co] / sqrt((double)bn->var[co] + (double)bn->eps);
            b = (b - (double)bn->mean[co]) * s + (double)bn->bias[co];
        }
        hb[co] = (float)b;
        for (int64_t ci = 0; ci < cing; ci++)
            for (int64_t t = 0; t < taps; t++)
                hw[co * kg + t * cing + ci] =
                    (float)((double)weight[(co * cing + ci) * taps + t] * s);
    }
}

/* c->dw: the folded weights hw [C, taps] of a depthwise layer transposed to [taps, C]. */
static int depthwise_weights(pgd_ctx *ctx, pgd_conv2d *c, const float *hw, pgd_error **err)
{
    const int64_t ch = c->d.cout, taps = (int64_t)c->d.kh * c->d.kw, n = ch * taps;
    float *t = malloc((size_t)n * sizeof *t);
    if (!t)
        return pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY,
                              "conv2d: host staging of %lld depthwise weights", (long long)n);
    for (int64_t co = 0; co < ch; co++)
        for (int64_t k = 0; k < taps; k++)
            t[k * ch + co] = hw[co * taps + k];
    int rc = upload_new(ctx, n, t, &c->dw, "conv2d depthwise weights", err);
    free(t);
    return rc;
}

pgd_status pgd_conv2d_create(pgd_ctx *ctx, const pgd_conv2d_desc *desc, const float *weight,
                             const float *bias, const pgd_batchnorm *bn, pgd_conv2d **out,
                             pgd_error **err)
{
    if (out)
        *out = NULL;
    if (!ctx || !desc || !weight || !out)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "conv2d: ctx, desc, weight and out are required");
    if (bn && (!bn->weight || !bn->bias || !bn->mean || !bn->var))
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "conv2d: batch norm needs weight, bias, mean and var");
    pgd_conv2d_desc d = normalise(desc);
    int rc = check_desc(&d, err);
    if (rc)
        return rc;
    int64_t cing = d.cin / d.groups, coutg = d.cout / d.groups, taps = (int64_t)d.kh * d.kw;
    int64_t kg = taps * cing, nw = d.cout * kg;
    const pgd__gemm_params gp = pgd__params_of(ctx)->gemm; /* kept by the layer: its packing */
    int cpu = gp.cpu;
    int64_t per = cpu ? pgd__gemm_packed_size(&gp, coutg, kg) : 0;
    if ((rc = pgd__check_alloc(ctx, (uint64_t)nw * sizeof(float), "conv2d weights", err)) ||
        (cpu && (rc = pgd__check_alloc(ctx, (uint64_t)(per * d.groups) * sizeof(float),
                                       "conv2d packed weights", err))))
        return rc;

    pgd_conv2d *c = calloc(1, sizeof *c);
    float *hw = malloc((size_t)nw * sizeof(float));
    float *hb = malloc((size_t)d.cout * sizeof(float));
    if (!c || !hw || !hb) {
        free(c);
        free(hw);
        free(hb);
        return pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY,
                              "conv2d: host staging of %lld "
                              "weights",
                              (long long)nw);
    }
    c->ctx = ctx;
    c->gp = gp;
    c->d = d;
    c->cing = cing;
    c->coutg = coutg;
    c->kg = kg;
    c->packed_stride = per;
    fold_weights(&d, weight, bias, bn, hw, hb);
    rc = upload_new(ctx, nw, hw, &c->w, "conv2d weights", err);
    if (!rc && (bias || bn))
        rc = upload_new(ctx, d.cout, hb, &c->bias, "conv2d bias", err);
    if (!rc && cpu && (d.pad_h || d.pad_w)) {
        float *z = calloc((size_t)cing, sizeof *z);
        rc = z ? upload_new(ctx, cing, z, &c->zeros, "conv2d padding zeros", err)
               : pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "conv2d: padding zeros");
        free(z);
    }
    if (!rc && cpu) {
        int64_t shape[1] = {per * d.groups};
        rc = pgd_tensor_create(ctx, 1, shape, &c->packed, err);
        if (!rc) {
            /* Group g's B^T is rows [g·coutg, (g+1)·coutg) of w: [coutg, kg]. */
            pgd__mat src = {c->w->buf, 0, (int)kg, (long)(coutg * kg)};
            rc = pgd__gemm_pack(ctx, &c->gp, 1, coutg, kg, d.groups, &src, c->packed->buf, per, 0,
                                err);
        }
    }
    if (!rc && wino_wanted(ctx, &d, cpu))
        rc = wino_weights(ctx, c, weight, bn, err);
    if (!rc && d.groups == d.cin && d.cin == d.cout)
        rc = depthwise_weights(ctx, c, hw, err);
    free(hw);
    free(hb);
    if (rc) {
        pgd_conv2d_destroy(c);
        return rc;
    }
    *out = c;
    return PGD_OK;
}

void pgd_conv2d_destroy(pgd_conv2d *c)
{
    if (!c)
        return;
    pgd_tensor_destroy(c->w);
    pgd_tensor_destroy(c->packed);
    pgd_tensor_destroy(c->bias);
    pgd_tensor_destroy(c->zeros);
    pgd_conv2d_destroy(c->wino);
    pgd_tensor_destroy(c->dw);
    free(c);
}

/* ---- algorithm choice ---- */

static int applies(const pgd_conv2d *c, int alg)
{
    const pgd_conv2d_desc *d = &c->d;
    switch (alg) {
    case ALG_GEMM:
        return d->kh == 1 && d->kw == 1 && d->stride_h == 1 && d->stride_w == 1 && d->pad_h == 0 &&
               d->pad_w == 0 && d->groups == 1;
    case ALG_IMPLICIT: return c->gp.cpu;
    case ALG_WINOGRAD: return c->wino != NULL;
    case ALG_DEPTHWISE: return c->dw != NULL;
    default: return 1;
    }
}

/* The automatic choice of winograd for a layer that holds its weights (wino_wanted): at least
 * WINO_MIN_TILES 2x2 output tiles in the batch. Fewer tiles leave GEMMs of a few rows against 16
 * weight matrices, 1.8 times the 3x3 weights to read (PoCL 3.1, Xeon, 7x7x512 at batch 1:
 * 0.61-0.66 ms against 0.60-0.65 implicit; at 14x14x256 0.46-0.57 against 0.55-0.68; at
 * 28x28x128 0.41-0.59 against 0.55-1.1; batch 8 at 14x14x256 2.5-3.3 against 4.3). */
#define WINO_MIN_TILES 32
static int wino_auto(const pgd_conv2d *c, int64_t n, int64_t h, int64_t w)
{
    int64_t oh = h + 2 * c->d.pad_h - 2, ow = w + 2 * c->d.pad_w - 2;
    return n * ((oh + 1) / 2) * ((ow + 1) / 2) >= WINO_MIN_TILES;
}

static int choose(const pgd_ctx *ctx, const pgd_conv2d *c, int64_t n, int64_t h, int64_t w)
{
    /* PGD_CONV_ALGO_<X> is ALG_<X> + 1 */
    int forced = (int)ctx->opt.conv_algo - 1;
    if (forced >= 0 && forced < ALG_COUNT && applies(c, forced))
        return forced;
    if (applies(c, ALG_GEMM))
        return ALG_GEMM;
    if (forced < 0 && applies(c, ALG_WINOGRAD) && wino_auto(c, n, h, w))
        return ALG_WINOGRAD;
    /* A depthwise layer's own kernel: channels fastest, each weight read once for a few
     * outputs (PoCL 3.1, Xeon: ConvNeXt-T's 7x7 layers 1.1 ms a layer against 16 direct). */
    if (forced < 0 && applies(c, ALG_DEPTHWISE))
        return ALG_DEPTHWISE;
    /* A GEMM tile is NB output channels wide: groups of a few channels would waste most of
     * it, and the direct kernel reads each weight once per output anyway. */
    if (c->coutg < 8)
        return ALG_DIRECT;
    return c->gp.cpu ? ALG_IMPLICIT : ALG_IM2COL;
}

const char *pgd_conv2d_algorithm(pgd_ctx *ctx, const pgd_conv2d *conv, int64_t h, int64_t w)
{
    if (!ctx || !conv)
        return NULL;
    return alg_names[choose(ctx, conv, 1, h, w)];
}

const char *pgd_conv2d_algorithm_batch(pgd_ctx *ctx, const pgd_conv2d *conv, int64_t n, int64_t h,
                                       int64_t w)
{
    if (!ctx || !conv || n < 1)
        return NULL;
    return alg_names[choose(ctx, conv, n, h, w)];
}

/* ---- convolution: forward ---- */

typedef struct fwd {
    pgd_ctx *ctx;
    const pgd_conv2d *c;
    const pgd_tensor *x, *res;
    pgd_tensor *y;
    int64_t n, h, w, oh, ow, m; /* m: output pixels n·oh·ow */
    pgd_act act;
} fwd;

static cl_int16 geometry(const fwd *f)
{
    const pgd_conv2d_desc *d = &f->c->d;
    cl_int16 g;
    cl_int v[16] = {
        (cl_int)f->h,       (cl_int)f->w, (cl_int)d->cin, (cl_int)f->oh, (cl_int)f->ow,
        (cl_int)d->cout,    d->kh,        d->kw,          d->stride_h,   d->stride_w,
        d->pad_h,           d->pad_w,     d->dil_h,       d->dil_w,      (cl_int)f->c->cing,
        (cl_int)f->c->coutg};
    memcpy(g.s, v, sizeof v);
    return g;
}

static int epi_code(const fwd *f)
{
    return (f->c->bias ? 1 : 0) | (f->res ? 2 | 16 : 0) | ((int)f->act << 2);
}

/* A GEMM call for group g over output rows [m0, m0 + rows) with A given. */
static pgd__gemm_call group_call(const fwd *f, int g, int64_t m0, int64_t rows, pgd__mat a,
                                 pgd__mat *bias, pgd__mat *res)
{
    const pgd_conv2d *c = f->c;
    int cout = (int)c->d.cout;
    pgd__gemm_call gc;
    memset(&gc, 0, sizeof gc);
    gc.params = &c->gp;
    gc.trans_b = 1;
    gc.M = rows;
    gc.N = c->coutg;
    gc.K = c->kg;
    gc.batch = 1;
    gc.alpha = 1.0f;
    gc.act = f->act;
    gc.res_before_act = 1;
    gc.a = a;
    if (c->packed) {
        gc.b = (pgd__mat){c->packed->buf, (size_t)(g * c->packed_stride), 0, 0};
        gc.b_packed = 1;
    } else {
        gc.b = (pgd__mat){c->w->buf, (size_t)(g * c->coutg * c->kg), (int)c->kg, 0};
    }
    size_t off = (size_t)(m0 * cout + g * c->coutg);
    gc.c = (pgd__mat){f->y->buf, off, cout, 0};
    if (c->bias) {
        *bias = (pgd__mat){c->bias->buf, (size_t)(g * c->coutg), 0, 0};
        gc.bias = bias;
    }
    if (f->res) {
        *res = (pgd__mat){f->res->buf, off, cout, 0};
        gc.residual = res;
    }
    return gc;
}

static int run_implicit(const fwd *f, pgd_error **err);
static int few_rows(const fwd *f, int rm);

static int run_gemm(const fwd *f, pgd_error **err)
{
    /* few output rows: the implicit kernel's few-rows form, unless gemm was asked for */
    if (f->c->gp.cpu && f->ctx->opt.conv_algo != PGD_CONV_ALGO_GEMM) {
        char o[256];
        int rm, nb, pf;
        pgd__gemm_cpu_tile(f->ctx, &f->c->gp, f->m, f->c->kg, o, sizeof o, &rm, &nb, &pf);
        if (few_rows(f, rm))
            return run_implicit(f, err);
    }
    pgd__mat bias, res;
    pgd__gemm_call gc =
        group_call(f, 0, 0, f->m, (pgd__mat){f->x->buf, 0, (int)f->c->d.cin, 0}, &bias, &res);
    return pgd__gemm(f->ctx, &gc, err);
}

/* Whether the few-rows form (conv_few_rows_cpu) runs this convolution: pgd__gemm_few_rows's rule
 * (gemm.c), one work-item a weight panel of a group. */
static int few_rows(const fwd *f, int rm)
{
    const pgd_conv2d *c = f->c;
    int64_t nb = c->gp.vw * c->gp.nv;
    return c->gp.cpu &&
           pgd__gemm_few_rows(f->ctx, f->m, rm, c->kg, (c->coutg + nb - 1) / nb * c->d.groups);
}

static int run_implicit(const fwd *f, pgd_error **err)
{
    pgd_ctx *ctx = f->ctx;
    const pgd_conv2d *c = f->c;
    const pgd_conv2d_desc *d = &c->d;
    char opts[256];
    int rm, nb, panels_first;
    pgd__gemm_cpu_tile(ctx, &c->gp, f->m, c->kg, opts, sizeof opts, &rm, &nb, &panels_first);
    /* Padding: the kernel reads c->zeros for taps outside the input (no bordered copy: PoCL
     * 3.1, Xeon, the 7x7 stem with its 3 channels 0.81 -> 0.68 ms at batch 1 against copying
     * the input into a zero border first, since kernel rows inside the input still run whole).
     * Absent bias and residual are never read; their arguments still need a valid buffer. */
    pgd__conv_cpu_args ca = {{(cl_int)f->m, (cl_int)c->coutg, (cl_int)c->cing, (cl_int)d->cin,
                              (cl_int)f->h, (cl_int)f->w, (cl_int)f->oh, (cl_int)f->ow, d->kh,
                              d->kw, d->stride_h, d->stride_w, d->dil_h, d->dil_w, d->pad_h,
                              d->pad_w},
                             f->x->buf,
                             c->zeros ? c->zeros->buf : f->x->buf, /* no zeros: never read */
                             c->packed->buf,
                             c->packed_stride,
                             f->y->buf,
                             (cl_int)d->cout,
                             c->bias ? c->bias->buf : f->y->buf,
                             f->res ? f->res->buf : f->y->buf,
                             epi_code(f)};
    size_t panels = (size_t)((c->coutg + nb - 1) / nb);
    if (few_rows(f, rm))
        return pgd__few_rows_run(ctx, opts, &ca, panels, (size_t)d->groups, err);
    cl_kernel k;
    pgd__args args;
    int rc = pgd__args_kernel(&args, ctx, "gemm", opts, "conv_implicit_cpu", &k, err);
    if (rc)
        return rc;
    pgd__conv_cpu_set_args(&args, &ca);
    /* Row tiles per work-item. One measured best on PoCL 3.1 (2 cores): more gave no gain on
     * big layers and unequal work-items on small ones (7x7 3x3 512: 3.1 ms with 1, 4.0 with
     * 8). PAGODA_CONV_MB is a tuning knob. */
    int64_t tiles = (f->m + rm - 1) / rm;
    cl_int mb = ctx->knobs.conv_mb > 0 ? (cl_int)ctx->knobs.conv_mb : 1;
    pgd__arg(&args, sizeof mb, &mb);
    rc = pgd__args_end(&args, err);
    /* Long launches go in chunks of work-items (MB row tiles each) at their global offset. */
    size_t items = (size_t)((tiles + mb - 1) / mb);
    uint64_t per_row = 2u * (uint64_t)d->cout * (uint64_t)c->kg;
    /* pgd__launch_rows gives a multiple of the unit or every row: rounded up, "every row" is
     * one launch (rounded down it left the last row tile to a launch of its own, which ran on
     * one core: ResNet-50's 7x7 layers spent 0.3 ms each in it). */
    int64_t unit = (int64_t)rm * mb;
    size_t chunk =
        (size_t)((pgd__launch_rows(ctx, f->m, per_row, PGD_LAUNCH_GEMM_FLOPS, unit) + unit - 1) /
                 unit); /* ≥ 1 */
    for (size_t x0 = 0; x0 < items && !rc; x0 += chunk) {
        size_t offset[3], global[3], local[3] = {1, 1, 1};
        pgd__gemm_cpu_grid(panels_first, x0, items - x0 < chunk ? items - x0 : chunk, panels,
                           (size_t)d->groups, offset, global);
        rc =
            pgd__enqueue_at(ctx, k, "conv_implicit_cpu", 3, x0 ? offset : NULL, global, local, err);
    }
    return rc;
}

static int run_im2col(const fwd *f, pgd_error **err)
{
    pgd_ctx *ctx = f->ctx;
    const pgd_conv2d *c = f->c;
    uint64_t row_bytes = (uint64_t)c->kg * sizeof(float);
    uint64_t cap =
        IM2COL_CHUNK_BYTES < ctx->dev.max_alloc ? IM2COL_CHUNK_BYTES : ctx->dev.max_alloc;
    /* A test knob: a smaller chunk (bytes) so small shapes run the chunk loop. */
    if (ctx->knobs.conv_chunk_bytes > 0 && (uint64_t)ctx->knobs.conv_chunk_bytes < cap)
        cap = (uint64_t)ctx->knobs.conv_chunk_bytes;
    int64_t chunk = (int64_t)(cap / row_bytes);
    if (chunk < 1)
        chunk = 1;
    if (chunk > f->m)
        chunk = f->m;
    /* Whole register tiles per chunk keep the GEMM's edge handling out of the middle rows. */
    if (chunk > 64 && chunk < f->m)
        chunk -= chunk % 64;
    int rc = pgd__check_alloc(ctx, (uint64_t)chunk * row_bytes, "conv2d im2col matrix", err);
    if (rc)
        return rc;
    cl_kernel k;
    if ((rc = pgd__kernel_get(ctx, "conv", NULL, "conv_im2col", &k, err)))
        return rc;
    pgd_tensor *a = NULL;
    int64_t shape[1] = {chunk * c->kg};
    if ((rc = pgd_tensor_create(ctx, 1, shape, &a, err)))
        return rc;
    cl_int16 geo = geometry(f);
    for (int g = 0; g < c->d.groups && !rc; g++) {
        for (int64_t m0 = 0; m0 < f->m && !rc; m0 += chunk) {
            int64_t rows = f->m - m0 < chunk ? f->m - m0 : chunk;
            cl_int im0 = (cl_int)m0, total = (cl_int)(rows * c->d.kh * c->d.kw), gi = g;
            pgd__args args;
            pgd__args_begin(&args, ctx, k, "conv_im2col");
            pgd__arg_mem(&args, f->x->buf);
            pgd__arg_mem(&args, a->buf);
            pgd__arg(&args, sizeof geo, &geo);
            pgd__arg(&args, sizeof im0, &im0);
            pgd__arg(&args, sizeof total, &total);
            pgd__arg(&args, sizeof gi, &gi);
            if ((rc = pgd__args_end(&args, err)))
                break;
            rc = enqueue_flat(ctx, k, "conv_im2col", total, 0, err);
            pgd__mat bias, res;
            pgd__gemm_call gc =
                group_call(f, g, m0, rows, (pgd__mat){a->buf, 0, (int)c->kg, 0}, &bias, &res);
            if (!rc)
                rc = pgd__gemm(ctx, &gc, err);
        }
    }
    pgd_tensor_destroy(a); /* the pool reuses it only after the queued work (in order) */
    return rc;
}

/* conv_direct or conv_depthwise (their arguments are the same): `total` work-items of `flops`
 * FLOPs each, over the weights w. */
static int run_flat_conv(const fwd *f, const char *name, const char *opts, const pgd_tensor *w,
                         int64_t total, uint64_t flops, pgd_error **err)
{
    pgd_ctx *ctx = f->ctx;
    const pgd_conv2d *c = f->c;
    cl_kernel k;
    pgd__args args;
    int rc = pgd__args_kernel(&args, ctx, "conv", opts, name, &k, err);
    if (rc)
        return rc;
    cl_int16 geo = geometry(f);
    cl_int t = (cl_int)total, flags = epi_code(f);
    cl_mem bias = c->bias ? c->bias->buf : f->y->buf, res = f->res ? f->res->buf : f->y->buf;
    pgd__arg_mem(&args, f->x->buf);
    pgd__arg_mem(&args, w->buf);
    pgd__arg_mem(&args, bias);
    pgd__arg_mem(&args, res);
    pgd__arg_mem(&args, f->y->buf);
    pgd__arg(&args, sizeof geo, &geo);
    pgd__arg(&args, sizeof t, &t);
    pgd__arg(&args, sizeof flags, &flags);
    if ((rc = pgd__args_end(&args, err)))
        return rc;
    return enqueue_flat(ctx, k, name, total, flops, err);
}

static int run_direct(const fwd *f, pgd_error **err)
{
    const pgd_conv2d_desc *d = &f->c->d;
    return run_flat_conv(f, "conv_direct", NULL, f->c->w, pgd_tensor_get_numel(f->y),
                         2u * (uint64_t)d->kh * (uint64_t)d->kw * (uint64_t)f->c->cing, err);
}

/* conv_depthwise's outputs a work-item (DW_XB in cl/conv.cl). */
#define DW_XB 4

static int run_depthwise(const fwd *f, pgd_error **err)
{
    const pgd_conv2d_desc *d = &f->c->d;
    /* channels a work-item: the widest vector dividing C */
    int cv = d->cout % 16 == 0 ? 16 : d->cout % 8 == 0 ? 8 : d->cout % 4 == 0 ? 4 : 1;
    char opts[32];
    snprintf(opts, sizeof opts, "-DDW_CV=%d", cv);
    int64_t total = f->n * f->oh * ((f->ow + DW_XB - 1) / DW_XB) * (d->cout / cv);
    return run_flat_conv(f, "conv_depthwise", opts, f->c->dw, total,
                         2u * DW_XB * (uint64_t)cv * (uint64_t)d->kh * (uint64_t)d->kw, err);
}

/* The two Winograd temporaries ([tiles, 16·cin] and [tiles, 16·cout]) of a launch take at most
 * this many bytes together: longer inputs run in chunks of tiles. */
#define WINO_CHUNK_BYTES ((uint64_t)32 << 20)

/* A Winograd work-item's channels: the widest of 16, 8, 4 floats that divides n, else 1 (on
 * Intel's CPU runtime too, which vectorises scalar work-items itself: one channel a work-item
 * ran its transforms 3x slower there). */
static int wino_cv(int64_t n)
{
    return n % 16 == 0 ? 16 : n % 8 == 0 ? 8 : n % 4 == 0 ? 4 : 1;
}

/* A 4-D tensor [1, 1, rows, cols] for a Winograd temporary. */
static int wino_temp(pgd_ctx *ctx, int64_t rows, int64_t cols, const char *what, pgd_tensor **t,
                     pgd_error **err)
{
    int64_t shape[4] = {1, 1, rows, cols};
    int rc = pgd__check_alloc(ctx, (uint64_t)(rows * cols) * sizeof(float), what, err);
    return rc ? rc : pgd_tensor_create(ctx, 4, shape, t, err);
}

/* Whether the 16 products of nt tiles run as the 1x1 convolution of 16 groups w, in its
 * few-rows form, which streams the 16 weight matrices once (its temporaries [nt, 16·c]); else
 * as one batch of 16 GEMMs of gemm_cpu on w's panels (temporaries [16, nt, c]: rows 16·c apart
 * put gemm_cpu's tile rows 4 KiB apart at 64 channels, into the same cache sets). PoCL 3.1,
 * Xeon: the implicit kernel ran the grouped form at 56x56x64 0.46-0.49 ms against 0.35 for the
 * batch, the few-rows form at 14x14x256 0.39 against 0.47-0.50. */
static int wino_grouped(pgd_ctx *ctx, const pgd_conv2d *w, int64_t nt)
{
    char o[256];
    int rm, nb, pf;
    pgd__gemm_cpu_tile(ctx, &w->gp, nt, w->cing, o, sizeof o, &rm, &nb, &pf);
    return pgd__gemm_few_rows(ctx, nt, rm, w->cing, (w->coutg + nb - 1) / nb * 16);
}

/* M_ξ = V_ξ · U_ξᵀ for the 16 positions ξ of nt tiles (wino_grouped's choice of form). */
static int wino_products(pgd_ctx *ctx, const pgd_conv2d *w, int64_t nt, int grouped,
                         const pgd_tensor *v, pgd_tensor *m, pgd_error **err)
{
    if (grouped)
        return pgd_conv2d_forward(ctx, w, v, PGD_ACT_NONE, NULL, m, err);
    const int64_t cin = w->cing, cout = w->coutg;
    const pgd__gemm_call gc = {.params = &w->gp,
                               .trans_b = 1,
                               .M = nt,
                               .N = cout,
                               .K = cin,
                               .batch = 16,
                               .alpha = 1.0f,
                               .a = {v->buf, 0, (int)cin, (long)(nt * cin)},
                               .b = {w->packed->buf, 0, 0, (long)w->packed_stride},
                               .b_packed = 1,
                               .c = {m->buf, 0, (int)cout, (long)(nt * cout)}};
    return pgd__gemm(ctx, &gc, err);
}

static int run_winograd(const fwd *f, pgd_error **err)
{
    pgd_ctx *ctx = f->ctx;
    const pgd_conv2d *c = f->c;
    const pgd_conv2d_desc *d = &c->d;
    const int64_t cin = d->cin, cout = d->cout;
    const int64_t th = (f->oh + 1) / 2, tw = (f->ow + 1) / 2, tiles = f->n * th * tw;
    uint64_t cap = WINO_CHUNK_BYTES < ctx->dev.max_alloc ? WINO_CHUNK_BYTES : ctx->dev.max_alloc;
    int64_t tc = (int64_t)(cap / (16u * sizeof(float) * (uint64_t)(cin + cout)));
    tc = tc < 1 ? 1 : tc > tiles ? tiles : tc;
    const int cvi = wino_cv(cin), cvo = wino_cv(cout);
    char oi[32], oo[32];
    snprintf(oi, sizeof oi, "-DCV=%d", cvi);
    snprintf(oo, sizeof oo, "-DCV=%d", cvo);
    cl_kernel kin, kout;
    int rc = pgd__kernel_get(ctx, "winograd", oi, "wino_input", &kin, err);
    if (!rc)
        rc = pgd__kernel_get(ctx, "winograd", oo, "wino_output", &kout, err);
    for (int64_t t0 = 0; t0 < tiles && !rc; t0 += tc) {
        const int64_t nt = tiles - t0 < tc ? tiles - t0 : tc;
        pgd_tensor *v = NULL, *m = NULL;
        const int grouped = wino_grouped(ctx, c->wino, nt);
        rc = wino_temp(ctx, nt, 16 * cin, "conv2d Winograd input transform", &v, err);
        if (!rc)
            rc = wino_temp(ctx, nt, 16 * cout, "conv2d Winograd products", &m, err);
        /* element strides of a tile and of a position in the temporaries */
        const cl_int sti = (cl_int)(grouped ? 16 * cin : cin),
                     sxi = (cl_int)(grouped ? cin : nt * cin);
        const cl_int sto = (cl_int)(grouped ? 16 * cout : cout),
                     sxo = (cl_int)(grouped ? cout : nt * cout);
        pgd__args args;
        cl_int total = (cl_int)(nt * (cin / cvi));
        if (!rc) {
            cl_int gi[9] = {total,    (cl_int)cin, (cl_int)f->h, (cl_int)f->w, d->pad_h,
                            d->pad_w, (cl_int)th,  (cl_int)tw,   (cl_int)t0};
            pgd__args_begin(&args, ctx, kin, "wino_input");
            for (int i = 0; i < 9; i++)
                pgd__arg_int(&args, gi[i]);
            pgd__arg_int(&args, sti);
            pgd__arg_int(&args, sxi);
            pgd__arg_mem(&args, f->x->buf);
            pgd__arg_mem(&args, v->buf);
            if (!(rc = pgd__args_end(&args, err)))
                rc = pgd__enqueue_flat_cap(ctx, kin, "wino_input", total, 0, 64, err);
        }
        if (!rc)
            rc = wino_products(ctx, c->wino, nt, grouped, v, m, err);
        if (!rc) {
            total = (cl_int)(nt * (cout / cvo));
            cl_int go[7] = {total,      (cl_int)cout, (cl_int)f->oh, (cl_int)f->ow,
                            (cl_int)th, (cl_int)tw,   (cl_int)t0};
            pgd__args_begin(&args, ctx, kout, "wino_output");
            for (int i = 0; i < 7; i++)
                pgd__arg_int(&args, go[i]);
            pgd__arg_int(&args, sto);
            pgd__arg_int(&args, sxo);
            pgd__arg_mem(&args, m->buf);
            pgd__arg_mem(&args, f->y->buf);
            pgd__arg_mem(&args, c->bias ? c->bias->buf : f->y->buf); /* absent: never read */
            pgd__arg_mem(&args, f->res ? f->res->buf : f->y->buf);
            pgd__arg_int(&args, epi_code(f));
            if (!(rc = pgd__args_end(&args, err)))
                rc = pgd__enqueue_flat_cap(ctx, kout, "wino_output", total, 0, 64, err);
        }
        pgd_tensor_destroy(v); /* the pool keeps the buffers; the in-order queue orders reuse */
        pgd_tensor_destroy(m);
    }
    return rc;
}

pgd_status pgd_conv2d_forward(pgd_ctx *ctx, const pgd_conv2d *conv, const pgd_tensor *x,
                              pgd_act act, const pgd_tensor *residual, pgd_tensor *y,
                              pgd_error **err)
{
    const char *op = "conv2d";
    if (!ctx || !conv || !x || !y)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "%s: ctx, conv, x and y are required",
                              op);
    if ((int)act < PGD_ACT_NONE || (int)act > PGD_ACT_GELU)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "%s: unknown activation %d", op,
                              (int)act);
    const pgd_conv2d_desc *d = &conv->d;
    if (x->ndim != 4 || x->shape[3] != d->cin) {
        char what[96];
        snprintf(what, sizeof what, "x must be [N, H, W, %lld] (NHWC)", (long long)d->cin);
        return pgd__shape_error(err, op, what, x, y);
    }
    fwd f = {ctx, conv, x, residual, y, x->shape[0], x->shape[1], x->shape[2], 0, 0, 0, act};
    pgd_conv2d_out_size(d, f.h, f.w, &f.oh, &f.ow);
    if (f.oh < 1 || f.ow < 1) {
        char what[160];
        snprintf(what, sizeof what,
                 "a %d x %d kernel (dilation %d x %d, padding %d x %d) does not fit the input",
                 d->kh, d->kw, d->dil_h, d->dil_w, d->pad_h, d->pad_w);
        return pgd__shape_error(err, op, what, x, y);
    }
    if (!same_shape4(y, f.n, f.oh, f.ow, d->cout)) {
        char what[128];
        snprintf(what, sizeof what, "y must be [%lld, %lld, %lld, %lld] for this input",
                 (long long)f.n, (long long)f.oh, (long long)f.ow, (long long)d->cout);
        return pgd__shape_error(err, op, what, x, y);
    }
    if (residual && !same_shape4(residual, f.n, f.oh, f.ow, d->cout))
        return pgd__shape_error(err, op, "the residual must be shaped like y", residual, y);
    if (y->buf == x->buf || (residual && residual->buf == x->buf))
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "%s: y and the residual must not alias x", op);
    if (pgd_tensor_get_numel(x) > INT32_MAX || pgd_tensor_get_numel(y) > INT32_MAX)
        return pgd__error_set(err, PGD_ERR_TOO_LARGE, "%s: a tensor has more than 2^31 elements",
                              op);
    f.m = f.n * f.oh * f.ow;
    if (f.m == 0)
        return PGD_OK;
    switch (choose(ctx, conv, f.n, f.h, f.w)) {
    case ALG_GEMM: return run_gemm(&f, err);
    case ALG_IMPLICIT: return run_implicit(&f, err);
    case ALG_IM2COL: return run_im2col(&f, err);
    case ALG_WINOGRAD: return run_winograd(&f, err);
    case ALG_DEPTHWISE: return run_depthwise(&f, err);
    default: return run_direct(&f, err);
    }
}
