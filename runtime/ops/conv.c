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
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

enum { ALG_GEMM, ALG_IMPLICIT, ALG_IM2COL, ALG_DIRECT, ALG_COUNT };
static const char *const alg_names[ALG_COUNT] = {"gemm", "implicit", "im2col", "direct"};

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
    pgd__gemm_params gp; /* the GEMM parameters of the context when it was created */
};

/* Enqueues a flat kernel (one work-item per element) over `total` items, each of about
 * `flops` FLOPs: long launches go in chunks of whole work-groups at their global offset (the
 * kernels index by the global id and test it against the total). */
static int enqueue_flat_cap(pgd_ctx *ctx, cl_kernel k, const char *name, int64_t total,
                            uint64_t flops, size_t cpu_wg, pgd_error **err)
{
    size_t wg = pgd__flat_wg(ctx, k);
    /* On a CPU device a work-group is a call into the kernel's loop over its items: a few
     * hundred items make that call's cost small (PoCL 3.1: the stem's im2col took 31 ms in
     * groups of 32); cpu_wg items where each item is bigger. */
    if (pgd__gemm_uses_cpu_kernel(ctx)) {
        size_t limit = pgd__kernel_wg(ctx, k);
        wg = limit < cpu_wg ? limit : cpu_wg;
    }
    size_t global = pgd__round_up((size_t)total, wg);
    size_t chunk = flops ? (size_t)pgd__launch_rows(ctx, (int64_t)global, flops,
                                                    PGD_LAUNCH_GEMM_FLOPS, (int64_t)wg)
                         : global;
    int rc = PGD_OK;
    for (size_t x0 = 0; x0 < global && !rc; x0 += chunk) {
        size_t n = global - x0 < chunk ? global - x0 : chunk;
        rc = pgd__enqueue_at(ctx, k, name, 1, x0 ? &x0 : NULL, &n, &wg, err);
    }
    return rc;
}

static int enqueue_flat(pgd_ctx *ctx, cl_kernel k, const char *name, int64_t total, uint64_t flops,
                        pgd_error **err)
{
    return enqueue_flat_cap(ctx, k, name, total, flops, 256, err);
}

static int same_shape4(const pgd_tensor *t, int64_t a, int64_t b, int64_t c, int64_t d)
{
    return t->ndim == 4 && t->shape[0] == a && t->shape[1] == b && t->shape[2] == c &&
           t->shape[3] == d;
}

/* ---- layout ---- */

int pgd_nchw_to_nhwc(pgd_ctx *ctx, const pgd_tensor *x, pgd_tensor *y, pgd_error **err)
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
    int64_t total = pgd_tensor_numel(x);
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

int pgd_conv2d_create(pgd_ctx *ctx, const pgd_conv2d_desc *desc, const float *weight,
                      const float *bias, const pgd_batchnorm *bn, pgd_conv2d **out, pgd_error **err)
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
    const pgd__gemm_params gp = ctx->gemm; /* kept by the layer: its packing */
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
    /* Fold in double: w' = w·s, b' = (b − mean)·s + β with s = γ/√(var + eps). */
    for (int64_t co = 0; co < d.cout; co++) {
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
    case ALG_IMPLICIT:
        return c->gp.cpu;
    default:
        return 1;
    }
}

static int choose(const pgd_ctx *ctx, const pgd_conv2d *c, int64_t h, int64_t w)
{
    (void)h;
    (void)w;
    /* PGD_CONV_ALGO_<X> is ALG_<X> + 1 */
    int forced = (int)ctx->opt.conv_algo - 1;
    if (forced >= 0 && forced < ALG_COUNT && applies(c, forced))
        return forced;
    if (applies(c, ALG_GEMM))
        return ALG_GEMM;
    /* A GEMM tile is NB output channels wide: groups of a few channels (depthwise) would
     * waste most of it, and the direct kernel reads each weight once per output anyway. */
    if (c->coutg < 8)
        return ALG_DIRECT;
    return c->gp.cpu ? ALG_IMPLICIT : ALG_IM2COL;
}

const char *pgd_conv2d_algorithm(pgd_ctx *ctx, const pgd_conv2d *conv, int64_t h, int64_t w)
{
    if (!ctx || !conv)
        return NULL;
    return alg_names[choose(ctx, conv, h, w)];
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
    int rc = pgd__kernel_get(ctx, "gemm", opts, "conv_implicit_cpu", &k, err);
    if (rc)
        return rc;
    pgd__args args;
    pgd__args_begin(&args, ctx, k, "conv_implicit_cpu");
    pgd__conv_cpu_set_args(&args, &ca);
    /* Row tiles per work-item. One measured best on PoCL 3.1 (2 cores): more gave no gain on
     * big layers and unequal work-items on small ones (7x7 3x3 512: 3.1 ms with 1, 4.0 with
     * 8). PAGODA_CONV_MB is a tuning knob. */
    int64_t tiles = (f->m + rm - 1) / rm;
    cl_int mb = ctx->opt.conv_mb > 0 ? ctx->opt.conv_mb : 1;
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
    if (ctx->opt.conv_chunk_bytes > 0 && ctx->opt.conv_chunk_bytes < cap)
        cap = ctx->opt.conv_chunk_bytes;
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

static int run_direct(const fwd *f, pgd_error **err)
{
    pgd_ctx *ctx = f->ctx;
    const pgd_conv2d *c = f->c;
    cl_kernel k;
    pgd__args args;
    int rc = pgd__args_kernel(&args, ctx, "conv", NULL, "conv_direct", &k, err);
    if (rc)
        return rc;
    cl_int16 geo = geometry(f);
    int64_t total = pgd_tensor_numel(f->y);
    cl_int t = (cl_int)total, flags = epi_code(f);
    cl_mem bias = c->bias ? c->bias->buf : f->y->buf, res = f->res ? f->res->buf : f->y->buf;
    pgd__arg_mem(&args, f->x->buf);
    pgd__arg_mem(&args, c->w->buf);
    pgd__arg_mem(&args, bias);
    pgd__arg_mem(&args, res);
    pgd__arg_mem(&args, f->y->buf);
    pgd__arg(&args, sizeof geo, &geo);
    pgd__arg(&args, sizeof t, &t);
    pgd__arg(&args, sizeof flags, &flags);
    if ((rc = pgd__args_end(&args, err)))
        return rc;
    return enqueue_flat(ctx, k, "conv_direct", total,
                        2u * (uint64_t)c->d.kh * (uint64_t)c->d.kw * (uint64_t)c->cing, err);
}

int pgd_conv2d_forward(pgd_ctx *ctx, const pgd_conv2d *conv, const pgd_tensor *x, pgd_act act,
                       const pgd_tensor *residual, pgd_tensor *y, pgd_error **err)
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
    if (pgd_tensor_numel(x) > INT32_MAX || pgd_tensor_numel(y) > INT32_MAX)
        return pgd__error_set(err, PGD_ERR_TOO_LARGE, "%s: a tensor has more than 2^31 elements",
                              op);
    f.m = f.n * f.oh * f.ow;
    if (f.m == 0)
        return PGD_OK;
    switch (choose(ctx, conv, f.h, f.w)) {
    case ALG_GEMM:
        return run_gemm(&f, err);
    case ALG_IMPLICIT:
        return run_implicit(&f, err);
    case ALG_IM2COL:
        return run_im2col(&f, err);
    default:
        return run_direct(&f, err);
    }
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
    if (!same_shape4(y, N, OH, OW, C)) {
        char what[128];
        snprintf(what, sizeof what, "y must be [%lld, %lld, %lld, %lld] for this input",
                 (long long)N, (long long)OH, (long long)OW, (long long)C);
        return pgd__shape_error(err, op, what, x, y);
    }
    if (x->buf == y->buf)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "%s: y must not alias x", op);
    if (pgd_tensor_numel(x) > INT32_MAX)
        return pgd__error_set(err, PGD_ERR_TOO_LARGE, "%s: more than 2^31 elements", op);
    int64_t total = pgd_tensor_numel(y);
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
    return enqueue_flat_cap(ctx, kk, name, items, (uint64_t)k * (uint64_t)k * (uint64_t)per_item,
                            (size_t)(wg > 16 ? wg : 16), err);
}

int pgd_maxpool2d(pgd_ctx *ctx, const pgd_tensor *x, int k, int stride, int pad, pgd_tensor *y,
                  pgd_error **err)
{
    return pool(ctx, "maxpool2d", "maxpool2d", x, k, stride, pad, y, err);
}

int pgd_avgpool2d(pgd_ctx *ctx, const pgd_tensor *x, int k, int stride, int pad, pgd_tensor *y,
                  pgd_error **err)
{
    return pool(ctx, "avgpool2d", "avgpool2d", x, k, stride, pad, y, err);
}

int pgd_global_avgpool(pgd_ctx *ctx, const pgd_tensor *x, pgd_tensor *y, pgd_error **err)
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
    if (pgd_tensor_numel(x) > INT32_MAX)
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
    return enqueue_flat(ctx, k, name, total / pvw, (uint64_t)(H * W) * (uint64_t)pvw, err);
}
