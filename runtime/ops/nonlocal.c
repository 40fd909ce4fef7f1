/* nonlocal.c — the non-local block (Wang et al., "Non-local Neural Networks", CVPR 2018) as one
 * op, with the launchers of cl/nonlocal.cl.
 *
 * On x [B, H, W, C] (NHWC) with inner width Ci:
 *   P = [θ | φ | g](x)          one fused 1x1 convolution, [B, H, W, 3·Ci]
 *   P' = maxpool2x2(P)          when subsampling (φ and g are read from P'; θ from P)
 *   embedded Gaussian           y = attention(q = θ, k = φ, v = g, scale 1): the fused kernel,
 *                               no N x N' matrix in memory
 *   Gaussian                    y = attention(q = x, k = x (pooled), v = g); g is padded to C
 *                               columns because the attention kernel takes one head width
 *   dot product                 y = θ·(φᵀ·g) / N': two GEMMs, O(N·Ci²), no N x N' matrix
 *   concatenation               y_i = Σ_j ReLU(a_i + b_j)·g_j / N' with a = θ·w_θ, b = φ·w_φ:
 *                               one streaming kernel over j, no N x N' matrix
 *   z = BN(W·y) + x             a 1x1 convolution with BN folded, x fused in as the residual.
 * The unfused algorithm of the softmax forms (S = q·kᵀ in memory, softmax, S·v) is kept as the
 * baseline the fused kernel is benchmarked against. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct pgd_nonlocal {
    pgd_nonlocal_desc d;
    pgd_conv2d *proj; /* [θ | φ | g], or g (padded to C) for the Gaussian form */
    pgd_conv2d_desc proj_d;
    pgd_conv2d *wz; /* W with BN folded; dy -> C */
    pgd_conv2d_desc wz_d;
    int64_t pc;                  /* columns of proj's output */
    int64_t dy;                  /* columns of y */
    pgd_tensor *w_theta, *w_phi; /* concatenation: the halves of concat.weight */
    float *concat;               /* concatenation: the same 2·Ci floats on the host (affinity) */
};

static const char *const mode_names[] = {"embedded_gaussian", "gaussian", "dot_product",
                                         "concatenation"};

const char *pgd_nonlocal_mode_name(pgd_nonlocal_mode mode)
{
    return (unsigned)mode < 4 ? mode_names[mode] : "?";
}

static int softmax_form(pgd_nonlocal_mode m)
{
    return m == PGD_NONLOCAL_EMBEDDED_GAUSSIAN || m == PGD_NONLOCAL_GAUSSIAN;
}

int64_t pgd_nonlocal_key_grid(const pgd_nonlocal_desc *desc, int64_t h, int64_t w, int64_t *gh,
                              int64_t *gw)
{
    int64_t a = h < 0 ? 0 : h, b = w < 0 ? 0 : w;
    if (desc && desc->subsample)
        a /= 2, b /= 2; /* 2x2 max pool, stride 2, floor rule */
    if (gh)
        *gh = a;
    if (gw)
        *gw = b;
    return a * b;
}

/* ---- creation ------------------------------------------------------------------------------ */

static int conv1x1(pgd_ctx *ctx, pgd_conv2d_desc *d, int64_t cin, int64_t cout, const float *w,
                   const float *bias, const pgd_batchnorm *bn, pgd_conv2d **out, pgd_error **err)
{
    memset(d, 0, sizeof *d);
    d->cin = cin;
    d->cout = cout;
    d->kh = d->kw = 1;
    d->stride_h = d->stride_w = 1;
    d->dil_h = d->dil_w = 1;
    d->groups = 1;
    return pgd_conv2d_create(ctx, d, w, bias, bn, out, err);
}

static int check_desc(const pgd_nonlocal_desc *d, pgd_error **err)
{
    const char *op = "pgd_nonlocal_create";
    if ((unsigned)d->mode > PGD_NONLOCAL_CONCATENATION)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "%s: unknown mode %d (embedded Gaussian 0, Gaussian 1, dot product "
                              "2, concatenation 3)",
                              op, (int)d->mode);
    /* 3·Ci and C are leading dimensions of int-indexed kernels. */
    if (d->channels < 2 || d->channels > (1 << 24))
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "%s: channels must be 2..%d, got %lld",
                              op, 1 << 24, (long long)d->channels);
    if (d->inner < 1 || d->inner > (1 << 24))
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "%s: inner width must be 1..%d, got %lld", op, 1 << 24,
                              (long long)d->inner);
    /* The fused attention takes one head width for q, k and v: g travels in C columns. */
    if (d->mode == PGD_NONLOCAL_GAUSSIAN && d->inner > d->channels)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "%s: the gaussian form needs inner <= channels (g is carried in the "
                              "C columns of x), got inner %lld, channels %lld",
                              op, (long long)d->inner, (long long)d->channels);
    if (d->subsample != 0 && d->subsample != 1)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "%s: subsample must be 0 or 1, got %d",
                              op, d->subsample);
    if (d->unfused != 0 && d->unfused != 1)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "%s: unfused must be 0 or 1, got %d",
                              op, d->unfused);
    return PGD_OK;
}

static int check_params(const pgd_nonlocal_desc *d, const pgd_nonlocal_params *p, pgd_error **err)
{
    const char *need = NULL;
    int gauss = d->mode == PGD_NONLOCAL_GAUSSIAN;
    if (!p->g_weight)
        need = "g_weight";
    else if (!p->w_weight)
        need = "w_weight";
    else if (!gauss && !p->theta_weight)
        need = "theta_weight";
    else if (!gauss && !p->phi_weight)
        need = "phi_weight";
    else if (d->mode == PGD_NONLOCAL_CONCATENATION && !p->concat_weight)
        need = "concat_weight";
    else if (p->bn && (!p->bn->weight || !p->bn->bias || !p->bn->mean || !p->bn->var))
        need = "all four arrays of bn";
    if (need)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "pgd_nonlocal_create: the %s form needs %s", mode_names[d->mode],
                              need);
    return PGD_OK;
}

int pgd_nonlocal_create(pgd_ctx *ctx, const pgd_nonlocal_desc *desc,
                        const pgd_nonlocal_params *params, pgd_nonlocal **out, pgd_error **err)
{
    if (out)
        *out = NULL;
    if (!ctx || !desc || !params || !out)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "pgd_nonlocal_create: ctx, desc, params and out are required");
    int rc = check_desc(desc, err);
    if (!rc)
        rc = check_params(desc, params, err);
    if (rc)
        return rc;
    pgd_nonlocal *nl = calloc(1, sizeof *nl);
    if (!nl)
        return pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "non-local block");
    nl->d = *desc;
    int64_t C = desc->channels, Ci = desc->inner;
    int gauss = desc->mode == PGD_NONLOCAL_GAUSSIAN;
    nl->pc = gauss ? C : 3 * Ci;
    nl->dy = gauss ? C : Ci;
    float *pw = calloc((size_t)(nl->pc * C), sizeof *pw);
    float *pb = calloc((size_t)nl->pc, sizeof *pb);
    float *ww = calloc((size_t)(C * nl->dy), sizeof *ww);
    if (!pw || !pb || !ww) {
        rc = pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "non-local block (C %lld, Ci %lld)",
                            (long long)C, (long long)Ci);
        goto done;
    }
    /* Missing biases stay zero. */
    if (gauss) {
        /* g in the first Ci output columns, zeros after: v must be as wide as q and k. */
        memcpy(pw, params->g_weight, (size_t)(Ci * C) * sizeof *pw);
        if (params->g_bias)
            memcpy(pb, params->g_bias, (size_t)Ci * sizeof *pb);
        for (int64_t o = 0; o < C; o++)
            memcpy(ww + o * C, params->w_weight + o * Ci, (size_t)Ci * sizeof *ww);
    } else {
        memcpy(pw, params->theta_weight, (size_t)(Ci * C) * sizeof *pw);
        memcpy(pw + Ci * C, params->phi_weight, (size_t)(Ci * C) * sizeof *pw);
        memcpy(pw + 2 * Ci * C, params->g_weight, (size_t)(Ci * C) * sizeof *pw);
        if (params->theta_bias)
            memcpy(pb, params->theta_bias, (size_t)Ci * sizeof *pb);
        if (params->phi_bias)
            memcpy(pb + Ci, params->phi_bias, (size_t)Ci * sizeof *pb);
        if (params->g_bias)
            memcpy(pb + 2 * Ci, params->g_bias, (size_t)Ci * sizeof *pb);
        memcpy(ww, params->w_weight, (size_t)(C * Ci) * sizeof *ww);
    }
    rc = conv1x1(ctx, &nl->proj_d, C, nl->pc, pw, pb, NULL, &nl->proj, err);
    if (!rc)
        rc = conv1x1(ctx, &nl->wz_d, nl->dy, C, ww, params->w_bias, params->bn, &nl->wz, err);
    if (!rc && desc->mode == PGD_NONLOCAL_CONCATENATION) {
        nl->concat = malloc((size_t)(2 * Ci) * sizeof *nl->concat);
        if (!nl->concat)
            rc = pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "non-local block");
        else
            memcpy(nl->concat, params->concat_weight, (size_t)(2 * Ci) * sizeof *nl->concat);
        if (!rc)
            rc = pgd_tensor_create_from(ctx, 1, &Ci, params->concat_weight, &nl->w_theta, err);
        if (!rc)
            rc = pgd_tensor_create_from(ctx, 1, &Ci, params->concat_weight + Ci, &nl->w_phi, err);
    }
done:
    free(pw);
    free(pb);
    free(ww);
    if (rc) {
        pgd_nonlocal_destroy(nl);
        return rc;
    }
    *out = nl;
    return PGD_OK;
}

void pgd_nonlocal_destroy(pgd_nonlocal *nl)
{
    if (!nl)
        return;
    pgd_conv2d_destroy(nl->proj);
    pgd_conv2d_destroy(nl->wz);
    pgd_tensor_destroy(nl->w_theta);
    pgd_tensor_destroy(nl->w_phi);
    free(nl->concat);
    free(nl);
}

const pgd_nonlocal_desc *pgd_nonlocal_get_desc(const pgd_nonlocal *nl)
{
    return nl ? &nl->d : NULL;
}

/* ---- the concatenation form's kernels ------------------------------------------------------ */

/* The longest key range one nl_concat launch sums over: Mesa's llvmpipe ends a work-item's
 * loops after ~65,535 iterations (see gemm.c), so ranges are cut at 8192; the context's
 * nl_key_chunk option sets another length (tests). */
static cl_int key_chunk(const pgd_ctx *ctx)
{
    int64_t n = ctx->knobs.nl_key_chunk;
    return n > 0 && n <= INT32_MAX ? (cl_int)n : 8192;
}

/* out[r] = Σ_c X[off + r·ld + c]·w[c] for r < rows. */
static int rowdot(pgd_ctx *ctx, const pgd_tensor *X, int64_t off, int64_t ld, int64_t cols,
                  const pgd_tensor *w, pgd_tensor *out, int64_t rows, pgd_error **err)
{
    cl_kernel k;
    pgd__args args;
    int rc = pgd__args_kernel(&args, ctx, "nonlocal", NULL, "nl_rowdot", &k, err);
    if (rc)
        return rc;
    pgd__arg_mem(&args, X->buf);
    pgd__arg_long(&args, off);
    pgd__arg_int(&args, (cl_int)ld);
    pgd__arg_int(&args, (cl_int)cols);
    pgd__arg_mem(&args, w->buf);
    pgd__arg_mem(&args, out->buf);
    pgd__arg_int(&args, (cl_int)rows);
    if ((rc = pgd__args_end(&args, err)))
        return rc;
    size_t wg = pgd__flat_wg(ctx, k);
    size_t global[1] = {pgd__round_up((size_t)rows, wg)}, local[1] = {wg};
    return pgd__enqueue(ctx, k, "nl_rowdot", 1, global, local, err);
}

/* y[b, i, c] = inv·Σ_j ReLU(a[b, i] + bv[b, j])·G[goff + (b·Np + j)·ld + c]. */
static int concat_sum(pgd_ctx *ctx, const pgd_tensor *a, const pgd_tensor *bv, const pgd_tensor *G,
                      int64_t goff, int64_t ld, int64_t Ci, int64_t Bn, int64_t N, int64_t Np,
                      pgd_tensor *y, pgd_error **err)
{
    cl_kernel k;
    pgd__args args;
    int rc = pgd__args_kernel(&args, ctx, "nonlocal", NULL, "nl_concat", &k, err);
    if (rc)
        return rc;
    cl_int np = (cl_int)Np;
    pgd__arg_mem(&args, a->buf);
    pgd__arg_mem(&args, bv->buf);
    pgd__arg_mem(&args, G->buf);
    pgd__arg_long(&args, goff);
    pgd__arg_int(&args, (cl_int)ld);
    pgd__arg_int(&args, (cl_int)Ci);
    pgd__arg_int(&args, (cl_int)N);
    pgd__arg_int(&args, np);
    pgd__arg_float(&args, 1.0f / (float)Np);
    pgd__arg_mem(&args, y->buf);
    if ((rc = pgd__args_end(&args, err)))
        return rc;
    size_t wg = pgd__flat_wg(ctx, k);
    size_t l0 = wg < (size_t)Ci ? wg : pgd__pow2_floor((size_t)Ci);
    if (l0 < 1)
        l0 = 1;
    size_t global[3] = {pgd__round_up((size_t)Ci, l0), (size_t)N, (size_t)Bn};
    size_t local[3] = {l0, 1, 1};
    cl_int chunk = key_chunk(ctx);
    for (cl_int j0 = 0; j0 < np && !rc; j0 += chunk) {
        cl_int j1 = np - j0 > chunk ? j0 + chunk : np, acc = j0 > 0;
        /* Only the key range changes between chunks: arguments 10 to 12. */
        pgd__args_begin(&args, ctx, k, "nl_concat");
        pgd__args_seek(&args, 10);
        pgd__arg_int(&args, j0);
        pgd__arg_int(&args, j1);
        pgd__arg_int(&args, acc);
        if ((rc = pgd__args_end(&args, err)))
            return rc;
        rc = pgd__enqueue(ctx, k, "nl_concat", 3, global, local, err);
    }
    return rc;
}

/* ---- forward ------------------------------------------------------------------------------- */

static int new4(pgd_ctx *ctx, int64_t a, int64_t b, int64_t c, int64_t d, pgd_tensor **out,
                pgd_error **err)
{
    int64_t s[4] = {a, b, c, d};
    return pgd_tensor_create(ctx, 4, s, out, err);
}

/* x must be [B, H, W, C] with C the block's channels and, when subsampling, H, W >= 2. */
static int check_x(const pgd_nonlocal *nl, const pgd_tensor *x, const char *op, pgd_error **err)
{
    char got[128];
    if (!x || x->ndim != 4 || x->shape[3] != nl->d.channels || x->shape[0] < 1 || x->shape[1] < 1 ||
        x->shape[2] < 1)
        return pgd__error_set(err, x ? PGD_ERR_SHAPE : PGD_ERR_INVALID_ARGUMENT,
                              "%s: x is %s, expected [B, H, W, %lld] (NHWC, %lld channels)", op,
                              x ? pgd_tensor_shape_str(x, got, sizeof got) : "NULL",
                              (long long)nl->d.channels, (long long)nl->d.channels);
    if (x->shape[0] * x->shape[1] * x->shape[2] > INT32_MAX)
        return pgd__error_set(err, PGD_ERR_TOO_LARGE, "%s: x %s has more than 2^31 positions", op,
                              pgd_tensor_shape_str(x, got, sizeof got));
    if (nl->d.subsample && (x->shape[1] < 2 || x->shape[2] < 2))
        return pgd__error_set(err, PGD_ERR_SHAPE,
                              "%s: x is %s: a %lldx%lld input has nothing left after 2x2 "
                              "subsampling (H and W must be at least 2)",
                              op, pgd_tensor_shape_str(x, got, sizeof got), (long long)x->shape[1],
                              (long long)x->shape[2]);
    return PGD_OK;
}

/* The projections every path needs: P = proj(x) [B, H, W, pc], its pooled copy Pp when
 * subsampling, and for the Gaussian form the pooled x (Kx). */
typedef struct proj_set {
    pgd_tensor *P, *Pp, *Kx;
    const pgd_tensor *Pk, *Xk; /* what keys and values are read from */
} proj_set;

static void proj_free(proj_set *s)
{
    pgd_tensor_destroy(s->P);
    pgd_tensor_destroy(s->Pp);
    pgd_tensor_destroy(s->Kx);
    memset(s, 0, sizeof *s);
}

static int project(pgd_ctx *ctx, const pgd_nonlocal *nl, const pgd_tensor *x, proj_set *s,
                   pgd_error **err)
{
    memset(s, 0, sizeof *s);
    int64_t Bn = x->shape[0], H = x->shape[1], W = x->shape[2], C = x->shape[3];
    int64_t H2 = H / 2, W2 = W / 2, pc = nl->pc;
    int rc = new4(ctx, Bn, H, W, pc, &s->P, err);
    if (!rc)
        rc = pgd_conv2d_forward(ctx, nl->proj, x, PGD_ACT_NONE, NULL, s->P, err);
    if (!rc && nl->d.subsample) {
        rc = new4(ctx, Bn, H2, W2, pc, &s->Pp, err);
        if (!rc)
            rc = pgd_maxpool2d(ctx, s->P, 2, 2, 0, s->Pp, err);
        if (!rc && nl->d.mode == PGD_NONLOCAL_GAUSSIAN) {
            rc = new4(ctx, Bn, H2, W2, C, &s->Kx, err);
            if (!rc)
                rc = pgd_maxpool2d(ctx, x, 2, 2, 0, s->Kx, err);
        }
    }
    if (rc) {
        proj_free(s);
        return rc;
    }
    s->Pk = nl->d.subsample ? s->Pp : s->P;
    s->Xk = s->Kx ? s->Kx : x;
    return PGD_OK;
}

/* The fused attention call of a softmax-form block: q = θ (Gaussian: x), k = φ (x, pooled when
 * subsampling), v = g, scale 1, one head; o = y [B, N, dy]. */
static void attention_args(const pgd_nonlocal *nl, const pgd_tensor *x, const proj_set *s,
                           int64_t Bn, int64_t N, int64_t Np, const pgd_tensor *y,
                           pgd_attention_args *a)
{
    int64_t C = nl->d.channels, Ci = nl->d.inner, pc = nl->pc;
    memset(a, 0, sizeof *a);
    a->batch = Bn, a->heads = 1, a->nq = N, a->nk = Np, a->scale = 1.0f;
    if (nl->d.mode == PGD_NONLOCAL_GAUSSIAN) {
        a->head_dim = C;
        a->q = (pgd_view){x, 0, N * C, 0, C};
        a->k = (pgd_view){s->Xk, 0, Np * C, 0, C};
        a->v = (pgd_view){s->Pk, 0, Np * pc, 0, pc};
    } else {
        a->head_dim = Ci;
        a->q = (pgd_view){s->P, 0, N * pc, 0, pc};
        a->k = (pgd_view){s->Pk, Ci, Np * pc, 0, pc};
        a->v = (pgd_view){s->Pk, 2 * Ci, Np * pc, 0, pc};
    }
    a->o = (pgd_view){y, 0, N * nl->dy, 0, nl->dy};
}

/* The softmax forms the textbook way: S = q·kᵀ [B, N, N'] in memory, softmax over rows,
 * y = S·v. Only for comparison with the fused path (pagoda bench nonlocal-unfused). */
static int unfused(pgd_ctx *ctx, const pgd_nonlocal *nl, const pgd_tensor *x, const proj_set *s,
                   int64_t N, int64_t Np, pgd_tensor *y, pgd_error **err)
{
    int64_t Bn = x->shape[0], C = x->shape[3], Ci = nl->d.inner, pc = nl->pc;
    int gauss = nl->d.mode == PGD_NONLOCAL_GAUSSIAN;
    int64_t d = gauss ? C : Ci, ss[2] = {Bn * N, Np};
    pgd_tensor *S = NULL;
    int rc = pgd_tensor_create(ctx, 2, ss, &S, err);
    if (!rc) {
        pgd__gemm_call g;
        memset(&g, 0, sizeof g);
        g.trans_b = 1;
        g.M = N, g.N = Np, g.K = d, g.batch = Bn, g.alpha = 1.0f;
        g.a = gauss ? (pgd__mat){x->buf, 0, (int)C, (long)(N * C)}
                    : (pgd__mat){s->P->buf, 0, (int)pc, (long)(N * pc)};
        g.b = gauss ? (pgd__mat){s->Xk->buf, 0, (int)C, (long)(Np * C)}
                    : (pgd__mat){s->Pk->buf, (size_t)Ci, (int)pc, (long)(Np * pc)};
        g.c = (pgd__mat){S->buf, 0, (int)Np, (long)(N * Np)};
        rc = pgd__gemm(ctx, &g, err);
    }
    if (!rc)
        rc = pgd_softmax(ctx, S, 1.0f, S, err);
    if (!rc) {
        pgd__gemm_call g;
        memset(&g, 0, sizeof g);
        g.M = N, g.N = nl->dy, g.K = Np, g.batch = Bn, g.alpha = 1.0f;
        g.a = (pgd__mat){S->buf, 0, (int)Np, (long)(N * Np)};
        g.b = (pgd__mat){s->Pk->buf, gauss ? 0 : (size_t)(2 * Ci), (int)pc, (long)(Np * pc)};
        g.c = (pgd__mat){y->buf, 0, (int)nl->dy, (long)(N * nl->dy)};
        rc = pgd__gemm(ctx, &g, err);
    }
    pgd_tensor_destroy(S);
    return rc;
}

/* y = θ·(φᵀ·g) / N' per batch item. */
static int dot_product(pgd_ctx *ctx, const pgd_nonlocal *nl, const proj_set *s, int64_t Bn,
                       int64_t N, int64_t Np, pgd_tensor *y, pgd_error **err)
{
    int64_t Ci = nl->d.inner, pc = nl->pc, ms[3] = {Bn, Ci, Ci};
    pgd_tensor *M = NULL;
    int rc = pgd_tensor_create(ctx, 3, ms, &M, err);
    if (!rc) { /* M = φᵀ·g per batch item: [Ci, Np]·[Np, Ci] */
        pgd__gemm_call g;
        memset(&g, 0, sizeof g);
        g.trans_a = 1;
        g.M = Ci, g.N = Ci, g.K = Np, g.batch = Bn, g.alpha = 1.0f;
        g.a = (pgd__mat){s->Pk->buf, (size_t)Ci, (int)pc, (long)(Np * pc)};
        g.b = (pgd__mat){s->Pk->buf, (size_t)(2 * Ci), (int)pc, (long)(Np * pc)};
        g.c = (pgd__mat){M->buf, 0, (int)Ci, (long)(Ci * Ci)};
        rc = pgd__gemm(ctx, &g, err);
    }
    if (!rc) { /* y = θ·M / Np */
        pgd__gemm_call g;
        memset(&g, 0, sizeof g);
        g.M = N, g.N = Ci, g.K = Ci, g.batch = Bn, g.alpha = 1.0f / (float)Np;
        g.a = (pgd__mat){s->P->buf, 0, (int)pc, (long)(N * pc)};
        g.b = (pgd__mat){M->buf, 0, (int)Ci, (long)(Ci * Ci)};
        g.c = (pgd__mat){y->buf, 0, (int)Ci, (long)(N * Ci)};
        rc = pgd__gemm(ctx, &g, err);
    }
    pgd_tensor_destroy(M);
    return rc;
}

/* y_i = Σ_j ReLU(a_i + b_j)·g_j / N'. */
static int concatenation(pgd_ctx *ctx, const pgd_nonlocal *nl, const proj_set *s, int64_t Bn,
                         int64_t N, int64_t Np, pgd_tensor *y, pgd_error **err)
{
    int64_t Ci = nl->d.inner, pc = nl->pc, an = Bn * N, bn = Bn * Np;
    pgd_tensor *av = NULL, *bv = NULL;
    int rc = pgd_tensor_create(ctx, 1, &an, &av, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 1, &bn, &bv, err);
    if (!rc)
        rc = rowdot(ctx, s->P, 0, pc, Ci, nl->w_theta, av, an, err);
    if (!rc)
        rc = rowdot(ctx, s->Pk, Ci, pc, Ci, nl->w_phi, bv, bn, err);
    if (!rc)
        rc = concat_sum(ctx, av, bv, s->Pk, 2 * Ci, pc, Ci, Bn, N, Np, y, err);
    pgd_tensor_destroy(av);
    pgd_tensor_destroy(bv);
    return rc;
}

int pgd_nonlocal_forward(pgd_ctx *ctx, const pgd_nonlocal *nl, const pgd_tensor *x, pgd_tensor *z,
                         pgd_error **err)
{
    const char *op = "pgd_nonlocal_forward";
    if (!ctx || !nl || !z)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "%s: ctx, nl and z are required", op);
    int rc = check_x(nl, x, op, err);
    if (rc)
        return rc;
    if (z->ndim != 4 || memcmp(z->shape, x->shape, 4 * sizeof *x->shape) != 0) {
        char sz[128], sx[128];
        return pgd__error_set(err, PGD_ERR_SHAPE, "%s: z is %s, expected %s (x's shape)", op,
                              pgd_tensor_shape_str(z, sz, sizeof sz),
                              pgd_tensor_shape_str(x, sx, sizeof sx));
    }
    int64_t Bn = x->shape[0], H = x->shape[1], W = x->shape[2];
    int64_t N = H * W, Np = pgd_nonlocal_key_grid(&nl->d, H, W, NULL, NULL);
    pgd_nonlocal_mode mode = nl->d.mode;
    proj_set s;
    pgd_tensor *y = NULL;
    rc = project(ctx, nl, x, &s, err);
    if (rc)
        return rc;
    rc = new4(ctx, Bn, H, W, nl->dy, &y, err);
    if (!rc && softmax_form(mode) && nl->d.unfused) {
        rc = unfused(ctx, nl, x, &s, N, Np, y, err);
    } else if (!rc && softmax_form(mode)) {
        pgd_attention_args a;
        attention_args(nl, x, &s, Bn, N, Np, y, &a);
        rc = pgd_attention(ctx, &a, err);
    } else if (!rc && mode == PGD_NONLOCAL_DOT_PRODUCT) {
        rc = dot_product(ctx, nl, &s, Bn, N, Np, y, err);
    } else if (!rc) {
        rc = concatenation(ctx, nl, &s, Bn, N, Np, y, err);
    }
    /* z may be x itself: x is only read as the residual, element by element. */
    if (!rc)
        rc = pgd_conv2d_forward(ctx, nl->wz, y, PGD_ACT_NONE, x, z, err);
    proj_free(&s);
    pgd_tensor_destroy(y);
    return rc;
}

/* ---- affinity ------------------------------------------------------------------------------ */

/* The softmax forms' affinity row: the attention kernel's probability pass for query row q,
 * nothing else stored (the attention output goes to a scratch tensor). */
static int affinity_softmax(pgd_ctx *ctx, const pgd_nonlocal *nl, const pgd_tensor *x,
                            const proj_set *s, int64_t N, int64_t Np, int64_t q, float *row,
                            pgd_error **err)
{
    int64_t Bn = x->shape[0], H = x->shape[1], W = x->shape[2];
    int64_t ps[4] = {Bn, 1, 1, Np};
    pgd_tensor *probs = NULL, *scratch = NULL;
    int rc = pgd_tensor_create(ctx, 4, ps, &probs, err);
    if (!rc)
        rc = new4(ctx, Bn, H, W, nl->dy, &scratch, err);
    if (!rc) {
        pgd_attention_args a;
        attention_args(nl, x, s, Bn, N, Np, scratch, &a);
        a.probs = probs;
        a.probs_head = 0;
        a.probs_q0 = q;
        a.probs_q1 = q + 1;
        rc = pgd_attention(ctx, &a, err);
    }
    if (!rc)
        rc = pgd_tensor_download(probs, row, err);
    pgd_tensor_destroy(probs);
    pgd_tensor_destroy(scratch);
    return rc;
}

/* The dot-product and concatenation forms' affinity row: from θ's row q and φ, in double on the
 * host. */
static int affinity_host(const pgd_nonlocal *nl, const proj_set *s, int64_t Bn, int64_t N,
                         int64_t Np, int64_t q, float *row, const char *op, pgd_error **err)
{
    int64_t Ci = nl->d.inner, pc = nl->pc;
    const float *wc = nl->d.mode == PGD_NONLOCAL_CONCATENATION ? nl->concat : NULL;
    int rc = PGD_OK;
    float *hp = malloc((size_t)pgd_tensor_get_numel(s->P) * sizeof *hp);
    float *hpp = malloc((size_t)pgd_tensor_get_numel(s->Pk) * sizeof *hpp);
    if (!hp || !hpp)
        rc = pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "%s: host copies of θ and φ", op);
    if (!rc)
        rc = pgd_tensor_download(s->P, hp, err);
    if (!rc)
        rc = pgd_tensor_download(s->Pk, hpp, err);
    for (int64_t b = 0; b < Bn && !rc; b++) {
        const float *th = hp + (b * N + q) * pc;
        double at = 0;
        if (wc)
            for (int64_t c = 0; c < Ci; c++)
                at += (double)th[c] * wc[c];
        for (int64_t j = 0; j < Np; j++) {
            const float *ph = hpp + (b * Np + j) * pc + Ci;
            double v = 0;
            if (wc) {
                for (int64_t c = 0; c < Ci; c++)
                    v += (double)ph[c] * wc[Ci + c];
                v = at + v > 0 ? at + v : 0;
            } else {
                for (int64_t c = 0; c < Ci; c++)
                    v += (double)th[c] * ph[c];
            }
            row[b * Np + j] = (float)(v / (double)Np);
        }
    }
    free(hp);
    free(hpp);
    return rc;
}

int pgd_nonlocal_affinity(pgd_ctx *ctx, const pgd_nonlocal *nl, const pgd_tensor *x, int64_t qi,
                          int64_t qj, float *row, int64_t *gh, int64_t *gw, pgd_error **err)
{
    const char *op = "pgd_nonlocal_affinity";
    if (!ctx || !nl || !row)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "%s: ctx, nl and row are required",
                              op);
    int rc = check_x(nl, x, op, err);
    if (rc)
        return rc;
    int64_t Bn = x->shape[0], H = x->shape[1], W = x->shape[2], N = H * W;
    if (qi < 0 || qi >= H || qj < 0 || qj >= W)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "%s: query (%lld, %lld) is outside the %lldx%lld grid of x", op,
                              (long long)qi, (long long)qj, (long long)H, (long long)W);
    int64_t kh = 0, kw = 0, Np = pgd_nonlocal_key_grid(&nl->d, H, W, &kh, &kw);
    if (gh)
        *gh = kh;
    if (gw)
        *gw = kw;
    int64_t q = qi * W + qj;
    proj_set s;
    rc = project(ctx, nl, x, &s, err);
    if (rc)
        return rc;
    if (softmax_form(nl->d.mode))
        rc = affinity_softmax(ctx, nl, x, &s, N, Np, q, row, err);
    else
        rc = affinity_host(nl, &s, Bn, N, Np, q, row, op, err);
    proj_free(&s);
    return rc;
}
