/* test_normalize.c — normalisation over any axis: pgd_softmax_axis (softmax and log_softmax),
 * pgd_layernorm_axis (with its mean and rstd), pgd_rmsnorm, pgd_batch_norm and pgd_group_norm
 * against the double references of reference.c, on every device: 110 random cases per op of
 * rank 1 to 6 with 1s and primes, every axis (negative ones too), inputs with a common offset,
 * outputs in place, NaN rows, and the exact errors. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "reference.h"

#define TRIALS 110
#define MAX_ELEMS 6000

static const int64_t sizes[] = {1, 2, 3, 5, 7, 1, 4, 13, 17, 31, 64, 65};

static int random_shape(pgd_rng *r, int lo, int hi, int64_t *shape)
{
    int nd = (int)pgd_rng_int(r, lo, hi);
    int64_t n = 1;
    for (int d = 0; d < nd; d++) {
        int64_t s = sizes[pgd_rng_int(r, 0, 11)];
        if (n * s > MAX_ELEMS)
            s = 1;
        shape[d] = s;
        n *= s;
    }
    return nd;
}

static int64_t prod(const int64_t *s, int from, int to)
{
    int64_t n = 1;
    for (int d = from; d < to; d++)
        n *= s[d];
    return n;
}

/* n values around `offset`, spread `spread`. */
static float *values(pgd_rng *r, int64_t n, float offset, float spread)
{
    float *h = malloc((size_t)(n ? n : 1) * sizeof *h);
    for (int64_t i = 0; i < n; i++)
        h[i] = offset + spread * pgd_rng_float(r);
    return h;
}

static pgd_tensor *dev_tensor(pgd_ctx *ctx, int nd, const int64_t *shape, const float *h)
{
    return pgd_test_upload(ctx, nd, shape, h);
}

static void expect_near(const pgd_tensor *t, const double *want, double rtol, double atol,
                        const char *what, const char *dev, int trial)
{
    int64_t n = pgd_tensor_get_numel(t);
    float *got = malloc((size_t)(n ? n : 1) * sizeof *got);
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_tensor_download(t, got, &err), &err);
    char label[256];
    snprintf(label, sizeof label, "%s on %s, case %d", what, dev, trial);
    ck_assert_msg(pgd_test_allclose(got, want, (size_t)n, rtol, atol, label), "%s", label);
    free(got);
}

static void softmax_case(pgd_ctx *ctx, pgd_rng *r, int trial, const char *dev)
{
    int64_t s[PGD_MAX_DIMS];
    int nd = random_shape(r, 1, 6, s), a = (int)pgd_rng_int(r, 0, nd - 1), log_form = trial % 2;
    int64_t n = prod(s, 0, nd);
    float scale = 0.5f + 2.5f * (pgd_rng_float(r) + 1.0f) / 2.0f;
    float *h = values(r, n, 0.0f, 4.0f); /* sharp rows: probabilities far from uniform */
    double *want = malloc((size_t)n * sizeof *want);
    pgd_ref_softmax_axis(h, prod(s, 0, a), s[a], prod(s, a + 1, nd), scale, log_form, want);
    pgd_tensor *x = dev_tensor(ctx, nd, s, h), *y = x;
    int in_place = trial % 3 == 0;
    pgd_error *err = NULL;
    if (!in_place)
        PGD_CHECK_OK(pgd_tensor_create(ctx, nd, s, &y, &err), &err);
    PGD_CHECK_OK(pgd_softmax_axis(ctx, x, trial % 4 < 2 ? a : a - nd, scale, log_form, y, &err),
                 &err);
    expect_near(y, want, 2e-5, log_form ? 2e-5 : 1e-7, log_form ? "log_softmax" : "softmax", dev,
                trial);
    if (!in_place)
        pgd_tensor_destroy(y);
    pgd_tensor_destroy(x);
    free(h);
    free(want);
}

START_TEST(softmax_any_axis)
{
    PGD_TEST_EACH_DEVICE(71, for (int i = 0; i < TRIALS; i++) softmax_case(ctx, &r, i, dev));
}
END_TEST

static void layernorm_case(pgd_ctx *ctx, pgd_rng *r, int trial, const char *dev)
{
    int64_t s[PGD_MAX_DIMS], ss[PGD_MAX_DIMS];
    int nd = random_shape(r, 1, 6, s), a = (int)pgd_rng_int(r, 0, nd - 1);
    int64_t rows = prod(s, 0, a), cols = prod(s, a, nd), n = rows * cols;
    int affine = trial % 3 != 0, stats = trial % 2, rms = trial % 5 == 4;
    float *h = values(r, n, trial % 4 == 0 ? 300.0f : 0.0f, 2.0f); /* a common offset too */
    float *w = values(r, cols, 1.0f, 0.5f), *b = values(r, cols, 0.0f, 0.5f);
    double *want = malloc((size_t)n * sizeof *want), *wm = malloc((size_t)(rows + 1) * 8),
           *wr = malloc((size_t)(rows + 1) * 8);
    float eps = 1e-5f;
    pgd_tensor *x = dev_tensor(ctx, nd, s, h), *y = x, *tw = NULL, *tb = NULL, *tm = NULL,
               *ts = NULL;
    pgd_error *err = NULL;
    if (trial % 4 != 1)
        PGD_CHECK_OK(pgd_tensor_create(ctx, nd, s, &y, &err), &err);
    if (affine) { /* w as x's trailing dims, or flat */
        int flat = trial % 7 == 0;
        tw = flat ? dev_tensor(ctx, 1, &cols, w) : dev_tensor(ctx, nd - a, s + a, w);
        tb = flat ? dev_tensor(ctx, 1, &cols, b) : dev_tensor(ctx, nd - a, s + a, b);
    }
    if (rms) {
        pgd_ref_rmsnorm(h, rows, cols, affine ? w : NULL, eps, want);
        PGD_CHECK_OK(pgd_rmsnorm(ctx, x, a - nd * (trial % 2), tw, eps, y, &err), &err);
        expect_near(y, want, 1e-4, 1e-5, "rmsnorm", dev, trial);
    } else {
        pgd_ref_layernorm_groups(h, rows, cols, affine ? w : NULL, affine ? b : NULL, eps, want, wm,
                                 wr);
        if (stats) { /* ONNX's [.., 1, 1] or x's leading dims alone */
            int keep = trial % 4 == 3 ? a : nd;
            for (int d = 0; d < keep; d++)
                ss[d] = d < a ? s[d] : 1;
            tm = dev_tensor(ctx, keep, ss, h);
            ts = dev_tensor(ctx, keep, ss, h);
        }
        PGD_CHECK_OK(pgd_layernorm_axis(ctx, x, a - nd * (trial % 2), tw, tb, eps, y, tm, ts, &err),
                     &err);
        /* offset inputs: float's rounding of x itself (300 + noise) bounds what is exact */
        expect_near(y, want, 1e-4, trial % 4 == 0 ? 3e-3 : 2e-5, "layernorm", dev, trial);
        if (stats) {
            expect_near(tm, wm, 1e-5, 1e-5, "layernorm mean", dev, trial);
            expect_near(ts, wr, trial % 4 == 0 ? 3e-3 : 1e-4, 1e-5, "layernorm rstd", dev, trial);
        }
    }
    pgd_tensor *all[] = {tw, tb, tm, ts};
    for (size_t i = 0; i < 4; i++)
        pgd_tensor_destroy(all[i]);
    if (y != x)
        pgd_tensor_destroy(y);
    pgd_tensor_destroy(x);
    free(h), free(w), free(b), free(want), free(wm), free(wr);
}

START_TEST(layernorm_and_rmsnorm_any_axis)
{
    PGD_TEST_EACH_DEVICE(81, for (int i = 0; i < TRIALS; i++) layernorm_case(ctx, &r, i, dev));
}
END_TEST

static void channel_case(pgd_ctx *ctx, pgd_rng *r, int trial, const char *dev)
{
    int64_t s[PGD_MAX_DIMS];
    int nd = random_shape(r, 2, 5, s), groups = 1;
    if (trial % 2) { /* group norm: C a multiple of the groups */
        groups = (int)pgd_rng_int(r, 1, 4);
        s[1] = groups * pgd_rng_int(r, 1, 4);
        for (int d = nd - 1; d >= 2 && prod(s, 0, nd) > MAX_ELEMS; d--)
            s[d] = 1;
    }
    int64_t c = s[1], inner = prod(s, 2, nd), n = prod(s, 0, nd);
    float *h = values(r, n, 1.0f, 3.0f), *mean = values(r, c, 0.5f, 1.0f);
    float *var = values(r, c, 1.5f, 1.0f), *w = values(r, c, 1.0f, 0.5f);
    float *b = values(r, c, 0.0f, 0.5f);
    double *want = malloc((size_t)n * sizeof *want);
    pgd_tensor *x = dev_tensor(ctx, nd, s, h), *tm = dev_tensor(ctx, 1, &c, mean);
    pgd_tensor *tv = dev_tensor(ctx, 1, &c, var), *tw = dev_tensor(ctx, 1, &c, w);
    pgd_tensor *tb = dev_tensor(ctx, 1, &c, b), *y = NULL;
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_tensor_create(ctx, nd, s, &y, &err), &err);
    if (trial % 2) {
        int affine = trial % 4 == 1;
        pgd_ref_group_norm(h, s[0], c, inner, groups, affine ? w : NULL, b, 1e-5, want);
        PGD_CHECK_OK(
            pgd_group_norm(ctx, x, groups, affine ? tw : NULL, affine ? tb : NULL, 1e-5f, y, &err),
            &err);
        expect_near(y, want, 1e-4, 2e-5, "group_norm", dev, trial);
    } else {
        pgd_ref_batch_norm(h, s[0], c, inner, mean, var, w, b, 1e-5, want);
        PGD_CHECK_OK(pgd_batch_norm(ctx, x, tm, tv, tw, tb, 1e-5f, y, &err), &err);
        expect_near(y, want, 1e-5, 1e-6, "batch_norm", dev, trial);
    }
    pgd_tensor *all[] = {x, tm, tv, tw, tb, y};
    for (size_t i = 0; i < 6; i++)
        pgd_tensor_destroy(all[i]);
    free(h), free(mean), free(var), free(w), free(b), free(want);
}

START_TEST(batch_and_group_norm)
{
    PGD_TEST_EACH_DEVICE(91, for (int i = 0; i < TRIALS; i++) channel_case(ctx, &r, i, dev));
}
END_TEST

/* A NaN in a softmax row makes that row NaN and no other; log_softmax keeps a tiny
 * probability's digits where softmax's log would be -inf. */
START_TEST(nan_rows_and_tiny_probabilities)
{
    PGD_TEST_EACH_DEVICE(5, {
        (void)r;
        int64_t s[2] = {3, 4};
        float h[12] = {0, 1, 2, 3, NAN, 1, 2, 3, 0, 1, 2, 3};
        pgd_tensor *x = dev_tensor(ctx, 2, s, h), *y = NULL;
        pgd_error *err = NULL;
        PGD_CHECK_OK(pgd_tensor_create(ctx, 2, s, &y, &err), &err);
        PGD_CHECK_OK(pgd_softmax_axis(ctx, x, 0, 1.0f, 0, y, &err), &err);
        float got[12];
        PGD_CHECK_OK(pgd_tensor_download(y, got, &err), &err);
        ck_assert_msg(isnan(got[0]) && isnan(got[4]) && isnan(got[8]), "%s: column 0 %g %g %g", dev,
                      got[0], got[4], got[8]);
        for (int i = 1; i < 4; i++)
            ck_assert_msg(fabsf(got[i] + got[4 + i] + got[8 + i] - 1.0f) < 1e-6f,
                          "%s: column %d sums to %g", dev, i, got[i] + got[4 + i] + got[8 + i]);
        float t[2] = {0.0f, 200.0f};
        int64_t s2[1] = {2};
        pgd_tensor *u = dev_tensor(ctx, 1, s2, t), *v = NULL;
        PGD_CHECK_OK(pgd_tensor_create(ctx, 1, s2, &v, &err), &err);
        PGD_CHECK_OK(pgd_softmax_axis(ctx, u, -1, 1.0f, 1, v, &err), &err);
        PGD_CHECK_OK(pgd_tensor_download(v, t, &err), &err);
        ck_assert_msg(fabsf(t[0] + 200.0f) < 1e-3f && t[1] == 0.0f, "%s: log_softmax %g %g", dev,
                      t[0], t[1]);
        pgd_tensor *all[] = {x, y, u, v};
        for (size_t i = 0; i < 4; i++)
            pgd_tensor_destroy(all[i]);
    });
}
END_TEST

static pgd_tensor *blank(pgd_ctx *ctx, int nd, const int64_t *shape)
{
    pgd_tensor *t = NULL;
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_tensor_create(ctx, nd, shape, &t, &err), &err);
    return t;
}

START_TEST(errors)
{
    if (!pgd_test_primary())
        return;
    size_t nd;
    const pgd_device_info *d = pgd_test_devices(&nd);
    pgd_ctx *ctx = pgd_test_ctx(&d[0]);
    int64_t s234[3] = {2, 3, 4}, s34[2] = {3, 4}, s12[1] = {12}, s5[1] = {5}, s3[1] = {3};
    int64_t s21[2] = {2, 1}, s31[2] = {3, 1}, s6[1] = {6};
    pgd_tensor *x = blank(ctx, 3, s234), *y = blank(ctx, 3, s234), *w = blank(ctx, 2, s34);
    pgd_tensor *wf = blank(ctx, 1, s12), *w5 = blank(ctx, 1, s5), *c3 = blank(ctx, 1, s3);
    pgd_tensor *m21 = blank(ctx, 2, s21), *m31 = blank(ctx, 2, s31), *v6 = blank(ctx, 1, s6);
    pgd_error *err = NULL;
    int rc = pgd_softmax_axis(ctx, x, 3, 1.0f, 0, y, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_INVALID_ARGUMENT, "softmax: axis 3 is outside [-3, 3)");
    err = NULL;
    rc = pgd_softmax_axis(ctx, x, 0, 1.0f, 1, w, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_SHAPE, "log_softmax: output shape differs");
    err = NULL;
    rc = pgd_layernorm_axis(ctx, x, 1, w5, w5, 1e-5f, y, NULL, NULL, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_SHAPE, "weight must have x's dims from axis 1 on");
    err = NULL;
    rc = pgd_layernorm_axis(ctx, x, -2, wf, NULL, 1e-5f, y, NULL, NULL, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_INVALID_ARGUMENT, "give both weight and bias");
    err = NULL;
    rc = pgd_layernorm_axis(ctx, x, 1, w, wf, 1e-5f, y, m31, m31, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_SHAPE, "mean must have x's dims before axis 1");
    err = NULL;
    rc = pgd_layernorm_axis(ctx, x, 1, NULL, NULL, 1e-5f, y, m21, NULL, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_INVALID_ARGUMENT, "give both mean and rstd");
    err = NULL;
    rc = pgd_layernorm_axis(ctx, x, 1, NULL, NULL, -1.0f, y, NULL, NULL, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_INVALID_ARGUMENT, "eps must be non-negative");
    err = NULL;
    rc = pgd_rmsnorm(ctx, x, 2, w, 1e-5f, y, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_SHAPE,
                          "rmsnorm: weight must have x's dims from axis 2 on");
    err = NULL;
    rc = pgd_batch_norm(ctx, x, c3, c3, c3, NULL, 1e-5f, y, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_INVALID_ARGUMENT, "batch_norm: bias is required");
    err = NULL;
    rc = pgd_batch_norm(ctx, x, c3, v6, c3, c3, 1e-5f, y, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_SHAPE, "var must be 1-D [C], one per channel");
    err = NULL;
    rc = pgd_batch_norm(ctx, c3, c3, c3, c3, c3, 1e-5f, c3, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_SHAPE, "want [N, C, ...]");
    err = NULL;
    rc = pgd_group_norm(ctx, x, 2, c3, c3, 1e-5f, y, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_INVALID_ARGUMENT,
                          "2 groups do not divide the 3 channels");
    pgd_tensor *all[] = {x, y, w, wf, w5, c3, m21, m31, v6};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        pgd_tensor_destroy(all[i]);
    pgd_ctx_destroy(ctx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("normalize");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, softmax_any_axis);
    tcase_add_test(tc, layernorm_and_rmsnorm_any_axis);
    tcase_add_test(tc, batch_and_group_norm);
    tcase_add_test(tc, nan_rows_and_tiny_probabilities);
    tcase_add_test(tc, errors);
    suite_add_tcase(s, tc);
    return pgd_test_run(s);
}
