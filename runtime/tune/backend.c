/* backend.c — GEMM back-end tuning, apart from running: measuring Pagoda's kernels against
 * CLBlast per device and shape class, kept with the device's parameters ("choices" in the one
 * store, <cache dir>/tuning.json: see params.c).
 *
 * options.gemm_backend forces a back end. Otherwise, where CLBlast is built in, a shape class is
 * measured only when a layer is created (pgd_linear_create, when options.gemm_tuning allows)
 * or on request (pgd_gemm_tune): both back ends are timed on scratch buffers (CLBlast's first
 * call compiles its kernels, which is excluded) and the faster is kept; the choice is stored
 * under the device's identity, so later runs do not measure. A forward pass only looks up:
 * the stored choice, else Pagoda's kernels, and writes no file.
 * The class is (op(A), op(B), batched?, and each of M, N, K rounded to a power of two); linear
 * layers are classed without M, measured with 256 rows. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "pgd_config.h"
#include "tune.h"

int pgd__gemm_forced(const pgd_ctx *ctx)
{
    if (ctx->opt.gemm_backend == PGD_GEMM_BACKEND_CLBLAST)
        return PGD__GEMM_CLBLAST;
    if (ctx->opt.gemm_backend == PGD_GEMM_BACKEND_PAGODA || !PGD_HAVE_CLBLAST)
        return PGD__GEMM_PAGODA;
    return -1;
}

static int64_t pow2_class(int64_t v)
{
    int64_t p = 1;
    while (p < v && p < ((int64_t)1 << 40))
        p <<= 1;
    return p;
}

static void class_key(const pgd__gemm_call *g, int linear, char *buf, size_t size)
{
    if (linear)
        snprintf(buf, size, "linear:%lld,%lld", (long long)pow2_class(g->N),
                 (long long)pow2_class(g->K));
    else
        snprintf(buf, size, "gemm:%d%d:%s:%lld,%lld,%lld", g->trans_a, g->trans_b,
                 g->batch > 1 ? "b" : "1", (long long)pow2_class(g->M), (long long)pow2_class(g->N),
                 (long long)pow2_class(g->K));
}

/* Stores the choices with the device's entry of the one store (tune/params.c). */
static void save_choices(pgd_ctx *ctx)
{
    (void)pgd__params_save(ctx, NULL);
}

/* Median of 3 timed runs after one untimed run; a negative result means the run failed. */
static double time_backend(pgd_ctx *ctx, const pgd__gemm_call *g, int backend)
{
    double t[3];
    for (int i = -1; i < 3; i++) {
        double t0 = pgd__now_ms();
        int rc = backend == PGD__GEMM_CLBLAST ? pgd__gemm_clblast(ctx, g, NULL)
                                              : pgd__gemm_run_own(ctx, g, NULL);
        if (rc || clFinish(ctx->queue) != CL_SUCCESS)
            return -1;
        if (i >= 0)
            t[i] = pgd__now_ms() - t0;
    }
    double lo = t[0] < t[1] ? t[0] : t[1], hi = t[0] < t[1] ? t[1] : t[0];
    return t[2] < lo ? lo : t[2] > hi ? hi : t[2];
}

/* Measures both back ends on `g` with a scratch output; for a linear layer `packed` holds the
 * panel form of the same weights for Pagoda's kernel. */
static int measure(pgd_ctx *ctx, const pgd__gemm_call *g, cl_mem packed)
{
    pgd_tensor *scratch = NULL;
    int64_t shape[1] = {g->batch * g->M * g->N};
    if (pgd_tensor_create(ctx, 1, shape, &scratch, NULL))
        return PGD__GEMM_PAGODA;
    pgd__gemm_call t = *g;
    t.beta = 0.0f;
    t.residual = NULL;
    t.bias = NULL;
    t.act = PGD_ACT_NONE;
    t.c = (pgd__mat){scratch->buf, 0, (int)g->N, (long)(g->M * g->N)};
    pgd__gemm_call own = t;
    if (packed) {
        own.b = (pgd__mat){packed, 0, 0, 0};
        own.b_packed = 1;
    }
    double a = time_backend(ctx, &own, PGD__GEMM_PAGODA);
    double b = time_backend(ctx, &t, PGD__GEMM_CLBLAST);
    pgd_tensor_destroy(scratch);
    pgd__params_of(ctx)->gemm_measurements++;
    return b > 0 && (a < 0 || b < a) ? PGD__GEMM_CLBLAST : PGD__GEMM_PAGODA;
}

/* The stored choice of g's class, or -1. */
static int stored(pgd_ctx *ctx, const pgd__gemm_call *g, int linear)
{
    char key[96];
    class_key(g, linear, key, sizeof key);
    const char *known = json_string_value(json_object_get(pgd__params_of(ctx)->choices, key));
    if (!known)
        return -1;
    return !strcmp(known, "clblast") ? PGD__GEMM_CLBLAST : PGD__GEMM_PAGODA;
}

int pgd__gemm_backend(pgd_ctx *ctx, const pgd__gemm_call *g, int linear)
{
    int b = pgd__gemm_forced(ctx);
    if (b < 0)
        b = stored(ctx, g, linear);
    return b < 0 ? PGD__GEMM_PAGODA : b;
}

int pgd__gemm_tune_call(pgd_ctx *ctx, const pgd__gemm_call *g, int linear, cl_mem packed)
{
    int b = pgd__gemm_forced(ctx);
    if (b < 0)
        b = stored(ctx, g, linear);
    if (b >= 0)
        return b;
    b = measure(ctx, g, packed);
    char key[96];
    class_key(g, linear, key, sizeof key);
    json_object_set_new(pgd__params_of(ctx)->choices, key,
                        json_string(b == PGD__GEMM_CLBLAST ? "clblast" : "pagoda"));
    save_choices(ctx);
    return b;
}

pgd_status pgd_gemm_tune(pgd_ctx *ctx, int trans_a, int trans_b, int64_t M, int64_t N, int64_t K,
                         int64_t batch, pgd_gemm_backend *chosen, pgd_error **err)
{
    if (chosen)
        *chosen = PGD_GEMM_BACKEND_PAGODA;
    if (M < 1 || N < 1 || K < 1 || batch < 1 || M > INT32_MAX || N > INT32_MAX || K > INT32_MAX ||
        batch > INT32_MAX || M * K > INT64_MAX / batch || K * N > INT64_MAX / batch ||
        M * N > INT64_MAX / batch)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "gemm tune: sizes must be positive and below 2^31, each matrix of "
                              "the batch below 2^63 elements (M=%lld N=%lld K=%lld batch=%lld)",
                              (long long)M, (long long)N, (long long)K, (long long)batch);
    int b = pgd__gemm_forced(ctx);
    pgd__gemm_call g;
    memset(&g, 0, sizeof g);
    g.trans_a = trans_a != 0;
    g.trans_b = trans_b != 0;
    g.M = M;
    g.N = N;
    g.K = K;
    g.batch = batch;
    g.alpha = 1.0f;
    if (b < 0)
        b = stored(ctx, &g, 0);
    if (b < 0) {
        /* Zeros, not whatever a pooled buffer held: denormals or NaNs would skew the timing. */
        pgd_tensor *a = NULL, *bt = NULL;
        int64_t sa[1] = {batch * M * K}, sb[1] = {batch * K * N};
        int rc = pgd_tensor_create(ctx, 1, sa, &a, err);
        if (!rc)
            rc = pgd_tensor_create(ctx, 1, sb, &bt, err);
        float zero = 0.0f;
        cl_int cl = CL_SUCCESS;
        if (!rc)
            cl = clEnqueueFillBuffer(ctx->queue, a->buf, &zero, sizeof zero, 0,
                                     (size_t)sa[0] * sizeof zero, 0, NULL, NULL);
        if (!rc && cl == CL_SUCCESS)
            cl = clEnqueueFillBuffer(ctx->queue, bt->buf, &zero, sizeof zero, 0,
                                     (size_t)sb[0] * sizeof zero, 0, NULL, NULL);
        if (!rc && cl != CL_SUCCESS)
            rc = pgd__cl_fail(err, cl, "clEnqueueFillBuffer", "gemm tune scratch operands");
        if (!rc) {
            g.a = (pgd__mat){a->buf, 0, (int)(trans_a ? M : K), (long)(M * K)};
            g.b = (pgd__mat){bt->buf, 0, (int)(trans_b ? K : N), (long)(K * N)};
            b = pgd__gemm_tune_call(ctx, &g, 0, NULL);
        }
        pgd_tensor_destroy(a);
        pgd_tensor_destroy(bt);
        if (rc)
            return rc;
    }
    if (chosen)
        *chosen = b == PGD__GEMM_CLBLAST ? PGD_GEMM_BACKEND_CLBLAST : PGD_GEMM_BACKEND_PAGODA;
    return PGD_OK;
}
