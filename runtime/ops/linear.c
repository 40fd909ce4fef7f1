/* linear.c — linear layers y = x·Wᵀ + b: weights packed once for Pagoda's CPU kernel, and the
 * GEMM back end of the layer's shape class chosen when the layer is created (measured then when
 * options.gemm_tuning allows, see gemm_tune.c), never in its forward pass. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tune.h"

struct pgd_linear {
    pgd_ctx *ctx;
    int64_t n, k;
    pgd_tensor *w;    /* packed panels on CPU devices; the [N, K] weights elsewhere */
    pgd_tensor *bias; /* [N] or NULL */
    int packed;
    int half;            /* w holds halves (options.weights_f16, or precision f16) */
    int precision;       /* PGD__PREC_* of the context when the layer was made */
    pgd__linear_q8 q8;   /* precision int8: the quantised weights (linear_int8.c) */
    pgd__gemm_params gp; /* the GEMM parameters the weights were packed for */
    int backend;         /* PGD__GEMM_CLBLAST when CLBlast measured faster for this layer's class */
};

static int check_linear_args(const pgd_tensor *w, const pgd_tensor *bias, pgd_error **err)
{
    char sw[96], sb[96];
    if (w->ndim != 2)
        return pgd__error_set(err, PGD_ERR_SHAPE, "linear: weights %s must be 2-D [out, in]",
                              pgd_tensor_shape_str(w, sw, sizeof sw));
    if (bias && (bias->ndim != 1 || bias->shape[0] != w->shape[0]))
        return pgd__error_set(
            err, PGD_ERR_SHAPE, "linear: bias %s must be 1-D [out] for weights %s",
            pgd_tensor_shape_str(bias, sb, sizeof sb), pgd_tensor_shape_str(w, sw, sizeof sw));
    return PGD_OK;
}

/* The weights packed into panels for Pagoda's CPU kernel. *panels is set as soon as it exists,
 * also when packing fails: the caller destroys it. */
static int pack_weights(pgd_ctx *ctx, const pgd__gemm_params *p, const pgd_tensor *w, int half,
                        pgd_tensor **panels, pgd_error **err)
{
    int64_t n = w->shape[0], k = w->shape[1];
    int64_t shape[1] = {pgd__weights_floats(pgd__gemm_packed_size(p, n, k), half)};
    int rc = pgd_tensor_create(ctx, 1, shape, panels, err);
    if (!rc) {
        pgd__mat src = {w->buf, 0, (int)k, 0};
        rc = pgd__gemm_pack(ctx, p, 1, n, k, 1, &src, (*panels)->buf, 0, half, err);
    }
    return rc;
}

/* The GEMM back end for this layer's shape class: forced by the options, else measured now when
 * options.gemm_tuning says so, else the stored choice (Pagoda when none). Never fails: without
 * memory for the probe's input it keeps the stored choice. */
static int choose_backend(pgd_ctx *ctx, const pgd__gemm_params *p, const pgd_tensor *w,
                          const pgd_tensor *panels)
{
    if (pgd__gemm_forced(ctx) >= 0)
        return pgd__gemm_forced(ctx);
    int64_t n = w->shape[0], k = w->shape[1];
    /* The class of a linear layer ignores M: it is measured with 256 rows. */
    pgd__gemm_call probe;
    memset(&probe, 0, sizeof probe);
    probe.params = p;
    probe.trans_b = 1;
    probe.M = 256;
    probe.N = n;
    probe.K = k;
    probe.batch = 1;
    probe.alpha = 1.0f;
    pgd_tensor *x = NULL;
    int64_t xs[1] = {256 * k};
    int backend = pgd__gemm_backend(ctx, &probe, 1); /* stored, else Pagoda */
    if (ctx->opt.gemm_tuning == PGD_GEMM_TUNE_AT_CREATE &&
        pgd_tensor_create(ctx, 1, xs, &x, NULL) == PGD_OK) {
        probe.a = (pgd__mat){x->buf, 0, (int)k, 0};
        probe.b = (pgd__mat){w->buf, 0, (int)k, 0};
        backend = pgd__gemm_tune_call(ctx, &probe, 1, panels ? panels->buf : NULL);
        pgd_tensor_destroy(x);
    }
    return backend;
}

/* *dst = a new tensor of `shape` holding a device-side copy of as many floats of src. *dst is
 * set as soon as it exists, also when the copy fails: the caller destroys it. `what` names the
 * copy in the error. */
static int copy_new(pgd_ctx *ctx, cl_mem src, int ndim, const int64_t *shape, pgd_tensor **dst,
                    const char *what, pgd_error **err)
{
    int rc = pgd_tensor_create(ctx, ndim, shape, dst, err);
    if (rc)
        return rc;
    cl_int cl =
        clEnqueueCopyBuffer(ctx->queue, src, (*dst)->buf, 0, 0,
                            (size_t)pgd_tensor_get_numel(*dst) * sizeof(float), 0, NULL, NULL);
    if (cl != CL_SUCCESS)
        return pgd__cl_fail(err, cl, "clEnqueueCopyBuffer", "copying %s", what);
    return PGD_OK;
}

/* l's weights for the float and half kernels (packed panels, halves or a copy of w) and its
 * GEMM back end. */
static int float_weights(pgd_ctx *ctx, pgd_linear *l, const pgd_tensor *w, pgd_error **err)
{
    int64_t n = l->n, k = l->k;
    pgd_tensor *panels = NULL;
    int rc = 0;
    if (l->gp.cpu)
        rc = pack_weights(ctx, &l->gp, w, l->half, &panels, err);
    /* Half weights run Pagoda's kernels only (CLBlast takes fp32 operands). */
    int backend = rc || l->half ? PGD__GEMM_PAGODA : choose_backend(ctx, &l->gp, w, panels);
    if (rc) {
        /* reported */
    } else if (backend == PGD__GEMM_PAGODA && panels) {
        l->w = panels;
        panels = NULL;
        l->packed = 1;
    } else if (l->half) {
        rc = pgd__to_half(ctx, w->buf, n * k, &l->w, err);
    } else {
        l->backend = backend;
        char sw[96], what[128];
        snprintf(what, sizeof what, "linear weights %s", pgd_tensor_shape_str(w, sw, sizeof sw));
        int64_t shape[2] = {n, k};
        rc = copy_new(ctx, w->buf, 2, shape, &l->w, what, err);
    }
    pgd_tensor_destroy(panels);
    return rc;
}

pgd_status pgd_linear_create(pgd_ctx *ctx, const pgd_tensor *w, const pgd_tensor *bias,
                             pgd_linear **out, pgd_error **err)
{
    *out = NULL;
    int rc = check_linear_args(w, bias, err);
    if (rc)
        return rc;
    int64_t n = w->shape[0], k = w->shape[1];
    pgd_linear *l = calloc(1, sizeof *l);
    if (!l)
        return pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "linear layer");
    l->ctx = ctx;
    l->n = n;
    l->k = k;
    l->gp = pgd__params_of(ctx)->gemm;
    l->precision = ctx->precision;
    /* Precision f16 keeps the weights as halves, as weights_f16 does, and runs gemm_cpu's half
     * arithmetic on them; the device kernel (gemm_gpu) has no half variant yet. */
    l->half = ctx->opt.weights_f16 != 0 || l->precision == PGD__PREC_F16;
    if (l->precision == PGD__PREC_F16 && !l->gp.cpu)
        rc = pgd__error_set(err, PGD_ERR_UNSUPPORTED,
                            "linear %lldx%lld: precision f16 runs on the CPU GEMM kernel only; "
                            "device '%s' uses the device kernel (use precision f32 there)",
                            (long long)n, (long long)k, ctx->dev.name);
    else if (l->precision == PGD__PREC_INT8)
        rc = pgd__linear_q8_create(ctx, w, &l->q8, err);
    else
        rc = float_weights(ctx, l, w, err);
    if (!rc && bias) {
        int64_t shape[1] = {n};
        rc = copy_new(ctx, bias->buf, 1, shape, &l->bias, "a linear bias", err);
    }
    if (rc) {
        pgd_linear_destroy(l);
        return rc;
    }
    *out = l;
    return PGD_OK;
}

void pgd_linear_destroy(pgd_linear *l)
{
    if (!l)
        return;
    pgd_tensor_destroy(l->w);
    pgd_tensor_destroy(l->bias);
    pgd__linear_q8_destroy(&l->q8);
    free(l);
}

pgd_status pgd_linear_forward(pgd_ctx *ctx, const pgd_linear *l, const pgd_tensor *x, pgd_act act,
                              const pgd_tensor *residual, pgd_tensor *y, pgd_error **err)
{
    char sx[96], sy[96];
    pgd_tensor_shape_str(x, sx, sizeof sx);
    pgd_tensor_shape_str(y, sy, sizeof sy);
    int lead_equal = x->ndim == y->ndim;
    for (int i = 0; lead_equal && i + 1 < x->ndim; i++)
        lead_equal = x->shape[i] == y->shape[i];
    if (x->ndim < 1 || !lead_equal || x->shape[x->ndim - 1] != l->k ||
        y->shape[y->ndim - 1] != l->n)
        return pgd__error_set(err, PGD_ERR_SHAPE,
                              "linear %lld->%lld: input %s must end in %lld and output %s in "
                              "%lld, with equal leading sizes",
                              (long long)l->k, (long long)l->n, sx, (long long)l->k, sy,
                              (long long)l->n);
    if (residual && !pgd__shape_equal(residual, y)) {
        char sr[96];
        return pgd__error_set(err, PGD_ERR_SHAPE,
                              "linear: residual %s must be shaped like the "
                              "output %s",
                              pgd_tensor_shape_str(residual, sr, sizeof sr), sy);
    }
    if (l->precision == PGD__PREC_INT8)
        return pgd__linear_q8_forward(ctx, &l->q8, x, l->bias, act, residual, y, err);
    pgd__gemm_call g;
    memset(&g, 0, sizeof g);
    g.params = &l->gp;
    g.trans_b = 1;
    g.M = l->k ? pgd_tensor_get_numel(x) / l->k : 0;
    g.N = l->n;
    g.K = l->k;
    g.batch = 1;
    g.alpha = 1.0f;
    g.act = act;
    g.a = (pgd__mat){x->buf, 0, (int)l->k, 0};
    g.b = (pgd__mat){l->w->buf, 0, (int)l->k, 0};
    g.b_packed = l->packed;
    g.b_half = l->half;
    g.half_arith = l->precision == PGD__PREC_F16;
    g.b_own = 1; /* the back end was chosen when the layer was created */
    g.c = (pgd__mat){y->buf, 0, (int)l->n, 0};
    pgd__mat bias, res;
    if (l->bias) {
        bias = (pgd__mat){l->bias->buf, 0, 0, 0};
        g.bias = &bias;
    }
    if (residual) {
        res = (pgd__mat){residual->buf, 0, (int)l->n, 0};
        g.residual = &res;
    }
    if (l->backend == PGD__GEMM_CLBLAST) {
        int rc = pgd__gemm_clblast(ctx, &g, err);
        if (rc != PGD_ERR_UNSUPPORTED)
            return rc;
    }
    return pgd__gemm(ctx, &g, err);
}
