/* test_gemm.c — GEMM and linear layers against a double-precision reference, on every device:
 * random and awkward shapes, every transpose, epilogues, batches, canaries, poisoned outputs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "internal.h" /* white-box: reaches library internals */
#include "pgd_config.h"
#include "reference.h"
#include "tune.h" /* white-box: the context's parameters */

/* The double-precision reference: C = alpha·op(A)·op(B) + beta·C0, + bias, act, + R. */
static void ref_gemm(int ta, int tb, int64_t M, int64_t N, int64_t K, int64_t batch, int b_shared,
                     double alpha, const float *A, const float *B, double beta, const float *C0,
                     const float *bias, pgd_act act, const float *R, double *out)
{
    for (int64_t bt = 0; bt < batch; bt++) {
        const float *a = A + bt * M * K, *b = B + (b_shared ? 0 : bt * K * N);
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                double s = 0;
                for (int64_t k = 0; k < K; k++) {
                    double av = ta ? a[k * M + m] : a[m * K + k];
                    double bv = tb ? b[n * K + k] : b[k * N + n];
                    s += av * bv;
                }
                int64_t i = bt * M * N + m * N + n;
                double x = alpha * s + (beta != 0 ? beta * C0[i] : 0.0);
                if (bias)
                    x += bias[n];
                if (act == PGD_ACT_RELU)
                    x = x > 0 ? x : 0;
                else if (act == PGD_ACT_GELU)
                    x = 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
                if (R)
                    x += R[i];
                out[i] = x;
            }
    }
}

/* The settings of the tests that check Pagoda's own kernels (cl/gemm.cl), not a tuned choice. */
static const char *const pagoda_gemm[] = {"PAGODA_GEMM=pagoda", NULL};

static const int64_t awkward[] = {1, 2, 3, 7, 13, 31, 63, 64, 65, 127, 197, 257};

static int64_t pick_dim(pgd_rng *r, int small)
{
    if (pgd_rng_int(r, 0, 1))
        return awkward[pgd_rng_int(r, 0, small ? 6 : 11)];
    return pgd_rng_int(r, 1, small ? 40 : 300);
}

static float *filled(size_t n, pgd_rng *r, int integers)
{
    float *p = malloc((n ? n : 1) * sizeof *p);
    ck_assert_ptr_nonnull(p);
    for (size_t i = 0; i < n; i++)
        p[i] = integers ? (float)pgd_rng_int(r, -3, 3) : pgd_rng_float(r);
    return p;
}

/* One random case; returns 1 if it passed. long_k: K in 700..3000 with small M and N (past
 * llvmpipe's loop limit, so K is chunked there); 2: and the residual is C itself. */
static int one_case_k(pgd_ctx *ctx, pgd_rng *r, int trial, int small, int long_k)
{
    int ta = trial & 1, tb = (trial >> 1) & 1;
    int64_t M = pick_dim(r, small), N = pick_dim(r, small), K = pick_dim(r, small);
    if (long_k) {
        M = pgd_rng_int(r, 1, 24);
        N = pgd_rng_int(r, 1, 24);
        K = pgd_rng_int(r, 700, 3000);
    }
    int64_t batch = pgd_rng_int(r, 0, 3) == 0 ? pgd_rng_int(r, 2, 3) : 1;
    int b_shared = batch > 1 && pgd_rng_int(r, 0, 1);
    /* Epilogues are exercised mostly with B transposed, the linear-layer case. */
    int epi = tb ? (int)pgd_rng_int(r, 0, 5) : (int)pgd_rng_int(r, 0, 1);
    int has_bias = epi >= 1, has_res = epi >= 3 || long_k == 2;
    int alias = long_k == 2;
    pgd_act act = epi == 2 || epi == 4 ? PGD_ACT_GELU : epi == 5 ? PGD_ACT_RELU : PGD_ACT_NONE;
    int integers = act != PGD_ACT_GELU && pgd_rng_int(r, 0, 1);
    float alpha = integers ? 1.0f : 0.5f + pgd_rng_float(r);
    float beta = pgd_rng_int(r, 0, 3) == 0 ? (integers ? 2.0f : pgd_rng_float(r)) : 0.0f;

    size_t na = (size_t)(batch * M * K), nb = (size_t)((b_shared ? 1 : batch) * K * N),
           nc = (size_t)(batch * M * N);
    const size_t canary = 33;
    float *A = filled(na, r, integers), *B = filled(nb, r, integers), *C0 = filled(nc, r, integers);
    float *bias = has_bias ? filled((size_t)N, r, integers) : NULL;
    float *R = has_res ? filled(nc, r, integers) : NULL;
    if (alias)
        memcpy(R, C0, nc * sizeof *R); /* the residual is C's old content */
    double *want = malloc(nc * sizeof *want);
    float *got = malloc((nc + canary) * sizeof *got);
    ref_gemm(ta, tb, M, N, K, batch, b_shared, alpha, A, B, beta, C0, bias, act, R, want);

    int64_t sa[3] = {batch, ta ? K : M, ta ? M : K};
    int64_t sb[3] = {b_shared ? 1 : batch, tb ? N : K, tb ? K : N};
    int64_t sc[3] = {batch, M, N};
    pgd_tensor *ta_ = pgd_test_upload(ctx, 3, sa, A);
    pgd_tensor *tb_ =
        b_shared ? pgd_test_upload(ctx, 2, sb + 1, B) : pgd_test_upload(ctx, 3, sb, B);
    /* C lives at the start of a larger buffer: the tail is a NaN canary; with beta = 0 the
     * output is poisoned with NaN too, so an unwritten element fails. */
    float *cinit = malloc((nc + canary) * sizeof *cinit);
    for (size_t i = 0; i < nc + canary; i++)
        cinit[i] = i < nc && (beta != 0.0f || alias) ? C0[i] : NAN;
    int64_t big[1] = {(int64_t)(nc + canary)};
    pgd_tensor *cbuf = pgd_test_upload(ctx, 1, big, cinit);
    pgd_tensor *cv = pgd_test_prefix(cbuf, 3, sc);
    pgd_tensor *tbias = has_bias ? pgd_test_upload(ctx, 1, &N, bias) : NULL;
    pgd_tensor *tres = has_res && !alias ? pgd_test_upload(ctx, 3, sc, R) : NULL;

    pgd_gemm_args args = {ta, tb, alpha, beta, tbias, act, alias ? cv : tres};
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_gemm(ctx, &args, ta_, tb_, cv, &err), &err);
    PGD_CHECK_OK(pgd_tensor_download(cbuf, got, &err), &err);
    char what[160];
    snprintf(what, sizeof what, "gemm ta=%d tb=%d M=%lld N=%lld K=%lld batch=%lld%s epi=%d %s%s",
             ta, tb, (long long)M, (long long)N, (long long)K, (long long)batch,
             b_shared ? " shared-B" : "", epi, integers ? "integers" : "floats",
             alias ? " residual=C" : "");
    /* Integer inputs give exact sums in float (|sum| < 2^24): demand equality. Otherwise the
     * error of a length-K float dot product: K·eps relative to the magnitudes involved. */
    double tol = integers ? 0.0 : 2e-6 * (double)K + 1e-5;
    int ok = pgd_test_allclose(got, want, nc, tol, tol, what);
    for (size_t i = nc; i < nc + canary; i++)
        if (!isnan(got[i])) {
            fprintf(stderr, "%s: canary %zu overwritten\n", what, i - nc);
            ok = 0;
            break;
        }
    free(cv);
    pgd_tensor_destroy(ta_);
    pgd_tensor_destroy(tb_);
    pgd_tensor_destroy(cbuf);
    pgd_tensor_destroy(tbias);
    pgd_tensor_destroy(tres);
    free(A);
    free(B);
    free(C0);
    free(bias);
    free(R);
    free(want);
    free(got);
    free(cinit);
    return ok;
}

static int one_case(pgd_ctx *ctx, pgd_rng *r, int trial, int small)
{
    return one_case_k(ctx, r, trial, small, 0);
}

/* Long K on every device, both back ends, with K chunked (forced small on half the cases, as
 * llvmpipe needs it; see k_chunk in gemm.c), the residual sometimes C itself. */
START_TEST(long_k)
{
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    for (size_t i = 0; i < n; i++) {
        pgd_ctx *ctx = pgd_test_ctx(&d[i]);
        pgd_rng r;
        pgd_rng_seed(&r, 4242);
        int failed = 0;
        for (int trial = 0; trial < 24; trial++) {
            ctx->opt.gemm_backend =
                trial % 3 == 2 ? PGD_GEMM_BACKEND_CLBLAST : PGD_GEMM_BACKEND_PAGODA;
            ctx->knobs.gemm_k_chunk = trial % 2 ? 97 : 0;
            failed += !one_case_k(ctx, &r, trial, 1, trial % 4 == 3 ? 2 : 1);
        }
        ctx->opt.gemm_backend = PGD_GEMM_BACKEND_AUTO;
        ctx->knobs.gemm_k_chunk = 0;
        ck_assert_msg(failed == 0, "%s: %d of 24 long-K GEMM cases failed", d[i].name, failed);
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

START_TEST(random_shapes)
{
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    for (size_t i = 0; i < n; i++) {
        pgd_ctx *ctx = pgd_test_ctx_with(&d[i], pagoda_gemm);
        pgd_rng r;
        pgd_rng_seed(&r, 42);
        int failed = 0;
        int small = d[i].software_rasteriser;
        for (int trial = 0; trial < 120; trial++)
            failed += !one_case(ctx, &r, trial, small);
        ck_assert_msg(failed == 0, "%s: %d of 120 GEMM cases failed", d[i].name, failed);
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

START_TEST(linear_layers)
{
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    for (size_t di = 0; di < n; di++) {
        pgd_ctx *ctx = pgd_test_ctx_with(&d[di], pagoda_gemm);
        pgd_rng r;
        pgd_rng_seed(&r, 99);
        int small = d[di].software_rasteriser;
        pgd_ctx_set_profiling(ctx, 1);
        /* 100 layers with fp32 weights, then 100 with weights stored as halves (the reference
         * takes the same weights rounded to half: only the storage may differ); every other
         * layer on the few-rows kernel wherever it fits (at most 40 row tiles), the others
         * never on it */
        for (int trial = 0; trial < 200; trial++) {
            int half = trial >= 100;
            ctx->opt.weights_f16 = half;
            pgd__params_of(ctx)->conv_few_rows = trial % 2 ? 1 : -1;
            int64_t rows = pick_dim(&r, small), in = pick_dim(&r, small), out = pick_dim(&r, small);
            int use_bias = trial % 3 != 0, use_res = trial % 4 == 1;
            pgd_act act = (pgd_act)(trial % 3);
            float *X = filled((size_t)(rows * in), &r, 0), *W = filled((size_t)(out * in), &r, 0);
            float *bias = filled((size_t)out, &r, 0), *R = filled((size_t)(rows * out), &r, 0);
            double *want = malloc((size_t)(rows * out) * sizeof *want);
            float *got = malloc((size_t)(rows * out) * sizeof *got);
            float *Wr = malloc((size_t)(out * in) * sizeof *Wr);
            for (int64_t e = 0; e < out * in; e++)
                Wr[e] = half ? pgd_ref_round_half(W[e]) : W[e];
            ref_gemm(0, 1, rows, out, in, 1, 1, 1.0, X, Wr, 0.0, NULL, use_bias ? bias : NULL, act,
                     use_res ? R : NULL, want);
            int64_t sx[2] = {rows, in}, sw[2] = {out, in}, sy[2] = {rows, out};
            pgd_tensor *tx = pgd_test_upload(ctx, 2, sx, X), *tw = pgd_test_upload(ctx, 2, sw, W);
            pgd_tensor *tbias = pgd_test_upload(ctx, 1, &out, bias),
                       *tr = pgd_test_upload(ctx, 2, sy, R);
            pgd_tensor *ty = NULL;
            pgd_linear *lin = NULL;
            pgd_error *err = NULL;
            PGD_CHECK_OK(pgd_tensor_create(ctx, 2, sy, &ty, &err), &err);
            PGD_CHECK_OK(pgd_linear_create(ctx, tw, use_bias ? tbias : NULL, &lin, &err), &err);
            /* The layer keeps its own copy: changing the caller's weights must not matter. */
            pgd_tensor_destroy(tw);
            PGD_CHECK_OK(pgd_linear_forward(ctx, lin, tx, act, use_res ? tr : NULL, ty, &err),
                         &err);
            PGD_CHECK_OK(pgd_tensor_download(ty, got, &err), &err);
            char what[128];
            snprintf(what, sizeof what, "%s linear %lld x %lld -> %lld act %d%s", d[di].name,
                     (long long)rows, (long long)in, (long long)out, (int)act,
                     half ? " (f16 weights)" : "");
            double tol = 2e-6 * (double)in + 1e-5;
            ck_assert_msg(pgd_test_allclose(got, want, (size_t)(rows * out), tol, tol, what), "%s",
                          what);
            pgd_linear_destroy(lin);
            pgd_tensor_destroy(tx);
            pgd_tensor_destroy(tbias);
            pgd_tensor_destroy(tr);
            pgd_tensor_destroy(ty);
            free(X);
            free(W);
            free(Wr);
            free(bias);
            free(R);
            free(want);
            free(got);
        }
        if (pgd__gemm_uses_cpu_kernel(ctx)) {
            long few = pgd_test_launches(ctx, "conv_few_rows_cpu");
            ck_assert_msg(few >= 25, "%s: the few-rows kernel ran %ld times in 100 layers",
                          d[di].name, few);
        }
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

START_TEST(shape_errors)
{
    if (!pgd_test_primary())
        return;
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    pgd_ctx *ctx = pgd_test_ctx(&d[0]);
    pgd_error *err = NULL;
    int64_t s1[2] = {4, 5}, s2[2] = {6, 7}, s3[2] = {4, 7};
    pgd_tensor *a = NULL, *b = NULL, *c = NULL;
    PGD_CHECK_OK(pgd_tensor_create(ctx, 2, s1, &a, &err), &err);
    PGD_CHECK_OK(pgd_tensor_create(ctx, 2, s2, &b, &err), &err);
    PGD_CHECK_OK(pgd_tensor_create(ctx, 2, s3, &c, &err), &err);
    ck_assert_int_eq(pgd_gemm(ctx, NULL, a, b, c, &err), PGD_ERR_SHAPE);
    ck_assert_msg(strstr(pgd_error_get_message(err), "[4, 5]") &&
                      strstr(pgd_error_get_message(err), "[6, 7]"),
                  "%s", pgd_error_get_message(err));
    pgd_error_destroy(err);
    err = NULL;
    pgd_linear *lin = NULL;
    PGD_CHECK_OK(pgd_linear_create(ctx, b, NULL, &lin, &err), &err); /* 7 -> 6 */
    ck_assert_int_eq(pgd_linear_forward(ctx, lin, a, PGD_ACT_NONE, NULL, c, &err), PGD_ERR_SHAPE);
    ck_assert(strstr(pgd_error_get_message(err), "[4, 5]") != NULL);
    pgd_error_destroy(err);
    pgd_linear_destroy(lin);
    pgd_tensor_destroy(a);
    pgd_tensor_destroy(b);
    pgd_tensor_destroy(c);
    pgd_ctx_destroy(ctx);
}
END_TEST

/* Bias and residual are checked by shape, not by element count: a [1, N] bias, a transposed
 * residual or an output whose leading sizes only multiply to the right count are refused, and the
 * message names the shape found. */
static void expect_shape_error(int rc, pgd_error **err, const char *shape)
{
    ck_assert_int_eq(rc, PGD_ERR_SHAPE);
    ck_assert_msg(strstr(pgd_error_get_message(*err), shape), "'%s' does not name %s",
                  pgd_error_get_message(*err), shape);
    pgd_error_destroy(*err);
    *err = NULL;
}

START_TEST(operand_shapes_exact)
{
    if (!pgd_test_primary())
        return;
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    pgd_ctx *ctx = pgd_test_ctx(&d[0]);
    pgd_error *err = NULL;
    int64_t sa[2] = {4, 5}, sb[2] = {5, 6}, sc[2] = {4, 6}, sbias[1] = {6}, sbias2[2] = {1, 6};
    int64_t sct[2] = {6, 4}, sc3[3] = {1, 4, 6}, sw[2] = {6, 5}, swb[2] = {6, 1},
            sy3[3] = {2, 2, 6};
    int64_t sflat[1] = {24};
    pgd_tensor *a, *b, *c, *bias, *bias2, *ct, *c3, *w, *wb, *y3, *flat;
    PGD_CHECK_OK(pgd_tensor_create(ctx, 2, sa, &a, &err), &err);
    PGD_CHECK_OK(pgd_tensor_create(ctx, 2, sb, &b, &err), &err);
    PGD_CHECK_OK(pgd_tensor_create(ctx, 2, sc, &c, &err), &err);
    PGD_CHECK_OK(pgd_tensor_create(ctx, 1, sbias, &bias, &err), &err);
    PGD_CHECK_OK(pgd_tensor_create(ctx, 2, sbias2, &bias2, &err), &err);
    PGD_CHECK_OK(pgd_tensor_create(ctx, 2, sct, &ct, &err), &err);
    PGD_CHECK_OK(pgd_tensor_create(ctx, 3, sc3, &c3, &err), &err);
    PGD_CHECK_OK(pgd_tensor_create(ctx, 2, sw, &w, &err), &err);
    PGD_CHECK_OK(pgd_tensor_create(ctx, 2, swb, &wb, &err), &err);
    PGD_CHECK_OK(pgd_tensor_create(ctx, 3, sy3, &y3, &err), &err);
    PGD_CHECK_OK(pgd_tensor_create(ctx, 1, sflat, &flat, &err), &err);
    PGD_CHECK_OK(pgd_tensor_fill(a, 0.0f, &err), &err);
    PGD_CHECK_OK(pgd_tensor_fill(b, 0.0f, &err), &err);
    PGD_CHECK_OK(pgd_tensor_fill(c, 0.0f, &err), &err);
    PGD_CHECK_OK(pgd_tensor_fill(bias, 0.0f, &err), &err);
    PGD_CHECK_OK(pgd_tensor_fill(w, 0.0f, &err), &err);

    pgd_gemm_args args = {0, 0, 1.0f, 0.0f, bias, PGD_ACT_NONE, NULL};
    PGD_CHECK_OK(pgd_gemm(ctx, &args, a, b, c, &err), &err);
    args.bias = bias2;
    expect_shape_error(pgd_gemm(ctx, &args, a, b, c, &err), &err, "[1, 6]");
    args.bias = NULL;
    args.residual = ct;
    expect_shape_error(pgd_gemm(ctx, &args, a, b, c, &err), &err, "[6, 4]");
    args.residual = c3;
    expect_shape_error(pgd_gemm(ctx, &args, a, b, c, &err), &err, "[1, 4, 6]");

    pgd_linear *lin = NULL;
    expect_shape_error(pgd_linear_create(ctx, w, wb, &lin, &err), &err, "[6, 1]");
    ck_assert_ptr_null(lin);
    PGD_CHECK_OK(pgd_linear_create(ctx, w, bias, &lin, &err), &err);
    PGD_CHECK_OK(pgd_linear_forward(ctx, lin, a, PGD_ACT_NONE, NULL, c, &err), &err);
    expect_shape_error(pgd_linear_forward(ctx, lin, a, PGD_ACT_NONE, NULL, y3, &err), &err,
                       "[2, 2, 6]");
    expect_shape_error(pgd_linear_forward(ctx, lin, a, PGD_ACT_NONE, flat, c, &err), &err, "[24]");
    expect_shape_error(pgd_linear_forward(ctx, lin, a, PGD_ACT_NONE, ct, c, &err), &err, "[6, 4]");
    pgd_linear_destroy(lin);
    pgd_tensor *all[] = {a, b, c, bias, bias2, ct, c3, w, wb, y3, flat};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        pgd_tensor_destroy(all[i]);
    pgd_ctx_destroy(ctx);
}
END_TEST

/* CLBlast forced: the same reference checks on fewer, smaller cases (CLBlast compiles for
 * seconds at its first call in each process). */
/* The GELU epilogue's erf (cl/gemm.cl: polynomials, not the built-in) against double erf:
 * inputs spread over [-12, 12] with the region edges (|x|/sqrt(2) at 1, 2.5, 4) and special
 * values, through a K = 1 linear layer with weight 1 (so the GEMM part is exact), 48 columns so
 * that both the vector and the scalar tail epilogue run (on every gemm_cpu tile of 32 or 16
 * columns). Each output must be within 4 ulp of the double result, plus 2^-23 |x| where
 * 1 + erf cancels (x < 0, as in any float GELU). NaN stays NaN, +inf gives +inf, -inf 0. */
START_TEST(gelu_epilogue_accuracy)
{
    enum { COLS = 48 };
    size_t nd;
    const pgd_device_info *d = pgd_test_devices(&nd);
    int64_t rows = 0;
    float *x = malloc(24100 * sizeof *x);
    ck_assert_ptr_nonnull(x);
    for (int i = 0; i <= 24000; i++)
        x[rows++] = -12.0f + 24.0f * (float)i / 24000.0f;
    const float edges[] = {1.0f, 2.5f, 4.0f};
    for (int e = 0; e < 3; e++)
        for (int sgn = -1; sgn <= 1; sgn += 2) {
            float v = (float)sgn * edges[e] * 1.41421356f;
            x[rows++] = nextafterf(v, 0.0f);
            x[rows++] = v;
            x[rows++] = nextafterf(v, (float)sgn * INFINITY);
        }
    const float special[] = {0.0f,  -0.0f,  1e-30f, -1e-30f, 1e-10f, -1e-10f,  1e-3f,
                             30.0f, -30.0f, 1e30f,  -1e30f,  NAN,    INFINITY, -INFINITY};
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++)
        x[rows++] = special[i];
    float w[COLS];
    for (int c = 0; c < COLS; c++)
        w[c] = 1.0f;
    float *got = malloc((size_t)(rows * COLS) * sizeof *got);
    ck_assert_ptr_nonnull(got);
    for (size_t i = 0; i < nd; i++) {
        /* Pagoda's kernels: a tuned choice of CLBlast would not run the epilogue under test */
        pgd_ctx *ctx = pgd_test_ctx_with(&d[i], pagoda_gemm);
        int64_t sx[2] = {rows, 1}, sw[2] = {COLS, 1}, sy[2] = {rows, COLS};
        pgd_tensor *tx = pgd_test_upload(ctx, 2, sx, x), *tw = pgd_test_upload(ctx, 2, sw, w);
        pgd_tensor *ty = NULL;
        pgd_linear *lin = NULL;
        pgd_error *err = NULL;
        PGD_CHECK_OK(pgd_tensor_create(ctx, 2, sy, &ty, &err), &err);
        PGD_CHECK_OK(pgd_linear_create(ctx, tw, NULL, &lin, &err), &err);
        PGD_CHECK_OK(pgd_linear_forward(ctx, lin, tx, PGD_ACT_GELU, NULL, ty, &err), &err);
        PGD_CHECK_OK(pgd_tensor_download(ty, got, &err), &err);
        double worst = 0;
        for (int64_t m = 0; m < rows; m++) {
            double v = x[m];
            double want = isinf(v) ? (v > 0 ? v : 0.0) : 0.5 * v * (1.0 + erf(v / sqrt(2.0)));
            for (int c = 0; c < COLS; c++) {
                float g = got[m * COLS + c];
                if (isnan(v)) {
                    ck_assert_msg(isnan(g), "%s: GELU(NaN) = %g, column %d", d[i].name, g, c);
                    continue;
                }
                if (isinf(want) || want == 0.0) {
                    ck_assert_msg((double)g == want, "%s: GELU(%g) = %g, want %g (column %d)",
                                  d[i].name, v, g, want, c);
                    continue;
                }
                double ulp = ldexp(1.0, ilogb(want) - 23);
                double err_ulp = fabs((double)g - want) / ulp;
                double allowed = 4.0 + (v < 0 ? ldexp(fabs(v), -23) / ulp : 0.0);
                ck_assert_msg(err_ulp <= allowed,
                              "%s: GELU(%.9g) = %.9g, want %.9g: %.1f ulp (allowed %.1f), "
                              "column %d",
                              d[i].name, v, g, want, err_ulp, allowed, c);
                if (v >= 0 && err_ulp > worst)
                    worst = err_ulp;
            }
        }
        printf("%s: GELU epilogue, worst %.2f ulp for x >= 0 over %lld inputs\n", d[i].name, worst,
               (long long)rows);
        pgd_linear_destroy(lin);
        pgd_tensor_destroy(tx);
        pgd_tensor_destroy(tw);
        pgd_tensor_destroy(ty);
        pgd_ctx_destroy(ctx);
    }
    free(x);
    free(got);
}
END_TEST

#if PGD_HAVE_CLBLAST
START_TEST(clblast_backend)
{
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    for (size_t i = 0; i < n; i++) {
        pgd_ctx *ctx = pgd_test_ctx_with(&d[i], (const char *const[]){"PAGODA_GEMM=clblast", NULL});
        pgd_rng r;
        pgd_rng_seed(&r, 7);
        int failed = 0;
        for (int trial = 0; trial < 24; trial++)
            failed += !one_case(ctx, &r, trial, 1);
        ck_assert_msg(failed == 0, "%s: %d of 24 CLBlast GEMM cases failed", d[i].name, failed);
        /* y = y + x·Wᵀ + b with the residual in the output itself (a transformer block's
         * x = x + proj(a)): CLBlast overwrites C, so the residual must be saved first. */
        int64_t rows = 13, in = 20, out = 9;
        float *X = filled((size_t)(rows * in), &r, 0), *W = filled((size_t)(out * in), &r, 0);
        float *bias = filled((size_t)out, &r, 0), *Y0 = filled((size_t)(rows * out), &r, 0);
        double *want = malloc((size_t)(rows * out) * sizeof *want);
        float *got = malloc((size_t)(rows * out) * sizeof *got);
        ref_gemm(0, 1, rows, out, in, 1, 1, 1.0, X, W, 0.0, NULL, bias, PGD_ACT_GELU, Y0, want);
        int64_t sx[2] = {rows, in}, sw[2] = {out, in}, sy[2] = {rows, out};
        pgd_tensor *tx = pgd_test_upload(ctx, 2, sx, X), *tw = pgd_test_upload(ctx, 2, sw, W);
        pgd_tensor *tb = pgd_test_upload(ctx, 1, &out, bias), *ty = pgd_test_upload(ctx, 2, sy, Y0);
        pgd_linear *lin = NULL;
        pgd_error *err = NULL;
        PGD_CHECK_OK(pgd_linear_create(ctx, tw, tb, &lin, &err), &err);
        PGD_CHECK_OK(pgd_linear_forward(ctx, lin, tx, PGD_ACT_GELU, ty, ty, &err), &err);
        PGD_CHECK_OK(pgd_tensor_download(ty, got, &err), &err);
        ck_assert_msg(pgd_test_allclose(got, want, (size_t)(rows * out), 1e-4, 1e-5,
                                        "CLBlast linear, residual in the output"),
                      "%s", d[i].name);
        pgd_linear_destroy(lin);
        pgd_tensor_destroy(tx);
        pgd_tensor_destroy(tw);
        pgd_tensor_destroy(tb);
        pgd_tensor_destroy(ty);
        free(X);
        free(W);
        free(bias);
        free(Y0);
        free(want);
        free(got);
        pgd_ctx_destroy(ctx);
    }
}
END_TEST
#endif

/* Without a forced back end a shape class is measured once, when asked for (pgd_gemm_tune; a
 * layer's creation likewise), and the choice is remembered in the cache directory: a new
 * context does not measure again, and the GEMMs that follow never measure. */
#if PGD_HAVE_CLBLAST
START_TEST(choice_is_measured_once)
{
    if (!pgd_test_primary())
        return;
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    char *dir = pgd_test_tempdir("choice");
    /* the automatic back end (whatever the environment forces), choices kept in a fresh dir */
    pgd_ctx_options o;
    pgd_test_options(&d[0], NULL, &o);
    o.gemm_backend = PGD_GEMM_BACKEND_AUTO;
    o.cache_dir = dir;
    /* A symbolic link planted at the store's old temporary name (tuning.json.tmp.<pid>)
     * must not be followed: the file it points to keeps its contents. */
    char victim[4200], planted[4300];
    snprintf(victim, sizeof victim, "%s/victim", dir);
    snprintf(planted, sizeof planted, "%s/tuning.json.tmp.%ld", dir, (long)getpid());
    FILE *vf = fopen(victim, "wb");
    ck_assert_ptr_nonnull(vf);
    fputs("victim", vf);
    ck_assert_int_eq(fclose(vf), 0);
    ck_assert_int_eq(symlink(victim, planted), 0);
    for (int round = 0; round < 2; round++) {
        pgd_ctx *ctx = pgd_test_ctx_opts(&o);
        pgd_error *err = NULL;
        pgd_gemm_backend chosen = PGD_GEMM_BACKEND_AUTO;
        PGD_CHECK_OK(pgd_gemm_tune(ctx, 0, 0, 40, 24, 33, 1, &chosen, &err), &err);
        ck_assert(chosen == PGD_GEMM_BACKEND_PAGODA || chosen == PGD_GEMM_BACKEND_CLBLAST);
        ck_assert_uint_eq(pgd__params_of(ctx)->gemm_measurements, round == 0 ? 1 : 0);
        pgd_rng r;
        pgd_rng_seed(&r, 5);
        ck_assert(one_case(ctx, &r, 0, 1));
        ck_assert_uint_eq(pgd__params_of(ctx)->gemm_measurements, round == 0 ? 1 : 0);
        pgd_ctx_destroy(ctx);
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/tuning.json", dir);
    unsigned char *text = NULL;
    size_t size = 0;
    ck_assert_int_eq(pgd_test_read_file(path, &text, &size), 0);
    ck_assert_msg(strstr((char *)text, "gemm:00:") != NULL, "no class recorded: %s", text);
    free(text);
    ck_assert_int_eq(pgd_test_read_file(victim, &text, &size), 0);
    ck_assert_msg(size == 6 && !memcmp(text, "victim", 6), "the planted link was followed: %.40s",
                  text);
    free(text);
    pgd_test_rmtree(dir);
    free(dir);
}
END_TEST
#endif

/* Tuning apart from running: with tuning at creation on, GEMMs of new shape classes (a forward
 * pass) measure nothing and write no file; a layer's creation and pgd_gemm_tune measure and
 * save; with tuning on request, a layer's creation does not measure. */
#if PGD_HAVE_CLBLAST
static int file_exists(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f)
        fclose(f);
    return f != NULL;
}

START_TEST(forward_pass_does_not_tune)
{
    if (!pgd_test_primary())
        return;
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    char *dir = pgd_test_tempdir("notune");
    /* the defaults (automatic back end, tuning at creation), whatever the environment forces */
    pgd_ctx_options o;
    pgd_test_options(&d[0], NULL, &o);
    o.gemm_backend = PGD_GEMM_BACKEND_AUTO;
    o.gemm_tuning = PGD_GEMM_TUNE_AT_CREATE;
    o.cache_dir = dir;
    char path[4200];
    snprintf(path, sizeof path, "%s/tuning.json", dir);
    pgd_ctx *ctx = pgd_test_ctx_opts(&o);
    ck_assert_int_eq(pgd_ctx_get_options(ctx)->gemm_tuning, PGD_GEMM_TUNE_AT_CREATE);
    ck_assert_int_eq(pgd_ctx_get_options(ctx)->gemm_backend, PGD_GEMM_BACKEND_AUTO);
    pgd_rng r;
    pgd_rng_seed(&r, 77);
    for (int trial = 0; trial < 6; trial++)
        ck_assert(one_case(ctx, &r, trial, 1));
    ck_assert_uint_eq(pgd__params_of(ctx)->gemm_measurements, 0);
    ck_assert_msg(!file_exists(path), "a forward pass wrote %s", path);

    /* a linear layer's creation measures its class once; its forward pass does not */
    pgd_error *err = NULL;
    int64_t rows = 7, in = 33, out = 24;
    float *X = filled((size_t)(rows * in), &r, 0), *W = filled((size_t)(out * in), &r, 0);
    int64_t sx[2] = {rows, in}, sw[2] = {out, in}, sy[2] = {rows, out};
    pgd_tensor *tx = pgd_test_upload(ctx, 2, sx, X), *tw = pgd_test_upload(ctx, 2, sw, W), *ty;
    PGD_CHECK_OK(pgd_tensor_create(ctx, 2, sy, &ty, &err), &err);
    pgd_linear *lin = NULL;
    PGD_CHECK_OK(pgd_linear_create(ctx, tw, NULL, &lin, &err), &err);
    ck_assert_uint_eq(pgd__params_of(ctx)->gemm_measurements, 1);
    ck_assert_msg(file_exists(path), "layer creation did not save the choice");
    PGD_CHECK_OK(pgd_linear_forward(ctx, lin, tx, PGD_ACT_NONE, NULL, ty, &err), &err);
    PGD_CHECK_OK(pgd_ctx_finish(ctx, &err), &err);
    ck_assert_uint_eq(pgd__params_of(ctx)->gemm_measurements, 1);
    pgd_linear_destroy(lin);

    /* an explicit request measures a new class, and only once */
    PGD_CHECK_OK(pgd_gemm_tune(ctx, 1, 0, 64, 48, 40, 2, NULL, &err), &err);
    ck_assert_uint_eq(pgd__params_of(ctx)->gemm_measurements, 2);
    PGD_CHECK_OK(pgd_gemm_tune(ctx, 1, 0, 64, 48, 40, 2, NULL, &err), &err);
    ck_assert_uint_eq(pgd__params_of(ctx)->gemm_measurements, 2);
    unsigned char *text = NULL;
    size_t size = 0;
    ck_assert_int_eq(pgd_test_read_file(path, &text, &size), 0);
    ck_assert_msg(strstr((char *)text, "gemm:10:b:") && strstr((char *)text, "linear:"),
                  "classes not recorded: %s", text);
    free(text);
    ck_assert_int_eq(pgd_gemm_tune(ctx, 0, 0, 0, 4, 4, 1, NULL, &err), PGD_ERR_INVALID_ARGUMENT);
    pgd_error_destroy(err);
    err = NULL;

    /* tuning on request: creating a layer of a new class measures nothing */
    ctx->opt.gemm_tuning = PGD_GEMM_TUNE_ON_REQUEST;
    int64_t sw2[2] = {100, in};
    float *W2 = filled((size_t)(100 * in), &r, 0);
    pgd_tensor *tw2 = pgd_test_upload(ctx, 2, sw2, W2);
    PGD_CHECK_OK(pgd_linear_create(ctx, tw2, NULL, &lin, &err), &err);
    ck_assert_uint_eq(pgd__params_of(ctx)->gemm_measurements, 2);
    pgd_linear_destroy(lin);
    pgd_tensor_destroy(tw2);
    pgd_tensor_destroy(tx);
    pgd_tensor_destroy(tw);
    pgd_tensor_destroy(ty);
    free(X);
    free(W);
    free(W2);
    pgd_ctx_destroy(ctx);
    pgd_test_rmtree(dir);
    free(dir);
}
END_TEST
#endif

int main(void)
{
    Suite *s = suite_create("gemm");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 1200);
    tcase_add_test(tc, shape_errors);
    tcase_add_test(tc, operand_shapes_exact);
    tcase_add_test(tc, random_shapes);
    tcase_add_test(tc, long_k);
    tcase_add_test(tc, linear_layers);
    tcase_add_test(tc, gelu_epilogue_accuracy);
    suite_add_tcase(s, tc);
    /* The CLBlast back end and the automatic choice between it and Pagoda's kernels: a case of
     * its own (meson runs it as gemm_clblast@DEVICE), skipped in a build without CLBlast. */
#if PGD_HAVE_CLBLAST
    TCase *cb = tcase_create("clblast");
    tcase_set_tags(cb, "clblast");
    tcase_set_timeout(cb, 1200);
    tcase_add_test(cb, clblast_backend);
    tcase_add_test(cb, choice_is_measured_once);
    tcase_add_test(cb, forward_pass_does_not_tune);
    suite_add_tcase(s, cb);
#else
    pgd_test_case_unavailable("clblast", "built without CLBlast (meson option clblast)");
#endif
    return pgd_test_run(s);
}
