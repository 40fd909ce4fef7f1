/* test_lowp.c — linear layers in precision f16 and int8 against a double-precision reference,
 * on every device that has the capability (Intel's CPU runtime here; PoCL and rusticl refuse
 * the precision, which test_device checks): 100 random shapes each, with awkward sizes (K not
 * a multiple of 4, of the half block, of the panel), bias, ReLU/GELU and residual epilogues.
 *
 * Bounds (docs/precision.md), per output with S = Σ_k |x_k·w_k| (the reference's magnitude):
 *   f16:  |y - ref| <= 1.2e-2·S + 1e-5·(|ref| + 1): inputs rounded to half (2^-11 each), HK = 16
 *         products summed in half (at most 18 roundings of 2^-11 of the block's magnitude),
 *         blocks summed in float; and the RMS error below 2e-3 of the RMS output.
 *   int8: |y - ref| <= 1.02·K·ax·aw·(2/254 + 1/254²) + 1e-5·(|ref| + 1) with ax the row's and
 *         aw the channel's largest magnitude (each value off by at most half a step, max/127);
 *         and the RMS error below 4e-2 of the RMS output (uniform data: about 1 %; shapes of
 *         64 outputs or more).
 * A wrong packing or scale passes the first bound often but never the second. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static const int64_t awkward[] = {1, 2, 3, 5, 7, 13, 15, 16, 17, 31, 33, 63, 65, 97, 131, 197};

static int64_t pick(pgd_rng *r, int64_t hi)
{
    if (pgd_rng_int(r, 0, 1))
        return awkward[pgd_rng_int(r, 0, 15)];
    return pgd_rng_int(r, 1, hi);
}

static float *uniform(pgd_rng *r, size_t n, float lo, float hi)
{
    float *p = malloc((n ? n : 1) * sizeof *p);
    ck_assert_ptr_nonnull(p);
    for (size_t i = 0; i < n; i++)
        p[i] = lo + (hi - lo) * (0.5f * pgd_rng_float(r) + 0.5f);
    return p;
}

/* ref = act(x·Wᵀ + b) + res; mag = Σ|x·w|; ax, aw: the largest |x| of each row, |w| of each
 * channel. */
static void reference(int64_t M, int64_t N, int64_t K, const float *x, const float *w,
                      const float *b, pgd_act act, const float *res, double *ref, double *mag,
                      double *ax, double *aw)
{
    for (int64_t m = 0; m < M; m++) {
        ax[m] = 0;
        for (int64_t k = 0; k < K; k++)
            ax[m] = fmax(ax[m], fabs(x[m * K + k]));
    }
    for (int64_t n = 0; n < N; n++) {
        aw[n] = 0;
        for (int64_t k = 0; k < K; k++)
            aw[n] = fmax(aw[n], fabs(w[n * K + k]));
    }
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double s = 0, a = 0;
            for (int64_t k = 0; k < K; k++) {
                double p = (double)x[m * K + k] * w[n * K + k];
                s += p;
                a += fabs(p);
            }
            s += b ? b[n] : 0;
            if (act == PGD_ACT_RELU)
                s = s > 0 ? s : 0;
            else if (act == PGD_ACT_GELU)
                s = 0.5 * s * (1.0 + erf(s / sqrt(2.0)));
            if (res)
                s += res[m * N + n];
            ref[m * N + n] = s;
            mag[m * N + n] = a;
        }
}

/* One random linear layer in the context's precision; fails the test past the bounds. Returns
 * the RMS error relative to the RMS output. */
static double one_shape(pgd_ctx *ctx, pgd_rng *r, int int8, int i, const char *dev)
{
    int64_t M = pick(r, 70), N = pick(r, 90), K = pick(r, 300);
    pgd_act act = (pgd_act)pgd_rng_int(r, 0, 2);
    int has_bias = pgd_rng_int(r, 0, 1), has_res = pgd_rng_int(r, 0, 2) == 0;
    float *x = uniform(r, (size_t)(M * K), -2.0f, 2.0f), *w = uniform(r, (size_t)(N * K), -1, 1);
    float *b = has_bias ? uniform(r, (size_t)N, -1, 1) : NULL;
    float *res = has_res ? uniform(r, (size_t)(M * N), -1, 1) : NULL;
    size_t mn = (size_t)(M * N);
    double *ref = malloc(mn * sizeof *ref), *mag = malloc(mn * sizeof *mag);
    double *ax = malloc((size_t)M * sizeof *ax), *aw = malloc((size_t)N * sizeof *aw);
    float *y = malloc(mn * sizeof *y);
    ck_assert(ref && mag && ax && aw && y);
    reference(M, N, K, x, w, b, act, res, ref, mag, ax, aw);
    int64_t xs[2] = {M, K}, ws[2] = {N, K}, bs[1] = {N}, ys[2] = {M, N};
    pgd_tensor *tx = pgd_test_upload(ctx, 2, xs, x), *tw = pgd_test_upload(ctx, 2, ws, w);
    pgd_tensor *tb = b ? pgd_test_upload(ctx, 1, bs, b) : NULL;
    pgd_tensor *tr = res ? pgd_test_upload(ctx, 2, ys, res) : NULL, *ty = NULL;
    pgd_linear *l = NULL;
    pgd_error *err = NULL;
    int rc = pgd_tensor_create(ctx, 2, ys, &ty, &err);
    if (!rc)
        rc = pgd_linear_create(ctx, tw, tb, &l, &err);
    if (!rc)
        rc = pgd_linear_forward(ctx, l, tx, act, tr, ty, &err);
    if (!rc)
        rc = pgd_tensor_download(ty, y, &err);
    ck_assert_msg(rc == PGD_OK, "%s shape %d (%lld,%lld,%lld): %s", dev, i, (long long)M,
                  (long long)N, (long long)K, pgd_error_get_message(err));
    double se = 0, sr = 0;
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            size_t j = (size_t)(m * N + n);
            double e = fabs((double)y[j] - ref[j]), slack = 1e-5 * (fabs(ref[j]) + 1);
            double bound = int8 ? 1.02 * (double)K * ax[m] * aw[n] * (2.0 / 254 + 1.0 / 64516)
                                : 1.2e-2 * mag[j];
            ck_assert_msg(isfinite(y[j]) && e <= bound + slack,
                          "%s %s shape %d (M %lld, N %lld, K %lld, act %d): y[%lld,%lld] = %.7g, "
                          "reference %.7g, error %.3g above the bound %.3g",
                          dev, int8 ? "int8" : "f16", i, (long long)M, (long long)N, (long long)K,
                          (int)act, (long long)m, (long long)n, y[j], ref[j], e, bound + slack);
            se += e * e;
            sr += ref[j] * ref[j];
        }
    double rel = sqrt(se / (double)mn) / (sqrt(sr / (double)mn) + 1e-12);
    /* A statistic: over fewer than 64 outputs one near-cancelling sum dominates it (f16, 3x3
     * outputs of K 210: 2.2e-3); those shapes have the per-output bound alone. */
    ck_assert_msg(mn < 64 || rel <= (int8 ? 4e-2 : 2e-3),
                  "%s %s shape %d (M %lld, N %lld, K %lld): RMS "
                  "error %.3g of the RMS output",
                  dev, int8 ? "int8" : "f16", i, (long long)M, (long long)N, (long long)K, rel);
    pgd_linear_destroy(l);
    pgd_tensor_destroy(tx);
    pgd_tensor_destroy(tw);
    pgd_tensor_destroy(tb);
    pgd_tensor_destroy(tr);
    pgd_tensor_destroy(ty);
    free(x), free(w), free(b), free(res), free(ref), free(mag), free(ax), free(aw), free(y);
    return rel;
}

/* 100 shapes on each device that has the capability of `precision`; 0 when none has it. */
static int run_precision(const char *precision, int int8)
{
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    int ran = 0;
    for (size_t i = 0; i < n; i++) {
        pgd_device_lowp lp;
        memset(&lp, 0, sizeof lp);
        lp.size = sizeof lp;
        ck_assert_int_eq(pgd_device_get_lowp(&d[i], &lp, NULL), PGD_OK);
        if (int8 ? !(lp.int_dot && (lp.int_dot_caps & 1)) : !lp.fp16)
            continue;
        static const char *const vars[] = {"PAGODA_GEMM=pagoda", NULL};
        pgd_ctx_options o;
        pgd_test_options(&d[i], vars, &o);
        ck_assert_int_eq(pgd_ctx_options_set_knob(&o, "precision", precision, NULL), PGD_OK);
        pgd_ctx *ctx = pgd_test_ctx_opts(&o);
        pgd_rng r;
        pgd_rng_seed(&r, 4200 + i + (size_t)int8);
        double worst = 0;
        for (int s = 0; s < 100; s++)
            worst = fmax(worst, one_shape(ctx, &r, int8, s, d[i].name));
        /* The precision really ran: float32 arithmetic would stay near 1e-7 on every shape. */
        ck_assert_msg(worst > (int8 ? 1e-3 : 3e-5),
                      "%s %s: the largest RMS error %.3g is float32's: the precision did not run",
                      d[i].name, precision, worst);
        pgd_ctx_destroy(ctx);
        ran++;
    }
    return ran;
}

START_TEST(linear_f16)
{
    if (!run_precision("f16", 0))
        fprintf(stderr, "test_lowp: no device has cl_khr_fp16: f16 shapes not run\n");
}
END_TEST

START_TEST(linear_int8)
{
    if (!run_precision("int8", 1))
        fprintf(stderr, "test_lowp: no device has cl_khr_integer_dot_product: int8 not run\n");
}
END_TEST

/* Whether any device of this run ($PAGODA_TEST_DEVICE's key, else all) can run f16 or int8:
 * without one the suite is a skip (77), not a pass; the refusals there are test_device's.
 * Outside a test case, so no ck_assert (pgd_test_devices) here. */
static int any_capable(void)
{
    pgd_device_info *d = NULL;
    size_t n = 0;
    if (pgd_devices_list(&d, &n, NULL))
        return 0;
    const char *want = getenv("PAGODA_TEST_DEVICE");
    int found = 0;
    for (size_t i = 0; i < n && !found; i++) {
        pgd_device_lowp lp;
        memset(&lp, 0, sizeof lp);
        lp.size = sizeof lp;
        found =
            (!want || !*want || !strcmp(want, pgd_test_device_key(&d[i])) || strchr(want, ':')) &&
            pgd_device_get_lowp(&d[i], &lp, NULL) == PGD_OK &&
            (lp.fp16 || (lp.int_dot && (lp.int_dot_caps & 1)));
    }
    pgd_free(d);
    return found;
}

int main(void)
{
    if (!any_capable()) {
        printf("SKIP: no device here has cl_khr_fp16 or cl_khr_integer_dot_product\n");
        return 77;
    }
    Suite *s = suite_create("lowp");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 0);
    tcase_add_test(tc, linear_f16);
    tcase_add_test(tc, linear_int8);
    suite_add_tcase(s, tc);
    return pgd_test_run(s);
}
