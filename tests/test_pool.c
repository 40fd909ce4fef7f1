/* test_pool.c — pgd_pool2d (max with indices, average with and without the padding counted)
 * and pgd_global_maxpool against the double reference of reference.c on every device: 110
 * random configurations per device of rectangular windows, strides, dilations, per-side pads,
 * ceil mode, NaN inputs; the output sizes against PyTorch's formula written out; errors. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "reference.h"

#define TRIALS 110

/* PyTorch's pooling_output_shape, written out for symmetric pads (its formula). */
static int64_t torch_out(int64_t in, int k, int pad, int stride, int dil, int ceil_mode)
{
    int64_t num = in + 2 * pad - (int64_t)dil * (k - 1) - 1 + (ceil_mode ? stride - 1 : 0);
    int64_t out = num / stride + 1;
    if (ceil_mode && (out - 1) * stride >= in + pad)
        out--;
    return out;
}

/* One random configuration; 0 when its window does not fit (nothing run). */
static int pool_case(pgd_ctx *ctx, pgd_rng *r, int trial, const char *dev)
{
    pgd_pool_desc d;
    memset(&d, 0, sizeof d);
    d.mode = trial % 2 ? PGD_POOL_AVG : PGD_POOL_MAX;
    d.kh = (int)pgd_rng_int(r, 1, 5), d.kw = (int)pgd_rng_int(r, 1, 5);
    d.sh = (int)pgd_rng_int(r, 1, 3), d.sw = (int)pgd_rng_int(r, 1, 3);
    d.dh = trial % 3 == 0 ? (int)pgd_rng_int(r, 1, 3) : 0, d.dw = trial % 3 == 0 ? 2 : 1;
    int sym = trial % 4 == 0;
    d.pad_top = (int)pgd_rng_int(r, 0, d.kh / 2 + 1);
    d.pad_left = (int)pgd_rng_int(r, 0, d.kw / 2 + 1);
    d.pad_bottom = sym ? d.pad_top : (int)pgd_rng_int(r, 0, 2);
    d.pad_right = sym ? d.pad_left : (int)pgd_rng_int(r, 0, 2);
    d.ceil_mode = (int)pgd_rng_int(r, 0, 1);
    d.count_include_pad = (int)pgd_rng_int(r, 0, 1);
    int64_t n = pgd_rng_int(r, 1, 2), h = pgd_rng_int(r, 4, 17), w = pgd_rng_int(r, 4, 13);
    int64_t c = pgd_rng_int(r, 1, 9), oh, ow;
    pgd_error *err = NULL;
    if (pgd_pool2d_output_size(&d, h, w, &oh, &ow, &err) != PGD_OK) {
        pgd_error_destroy(err); /* a window wider than the padded input: checked in errors */
        return 0;
    }
    if (sym && d.pad_top <= d.kh / 2 && d.pad_left <= d.kw / 2) {
        int dil_h = d.dh ? d.dh : 1;
        ck_assert_int_eq(oh, torch_out(h, d.kh, d.pad_top, d.sh, dil_h, d.ceil_mode));
        ck_assert_int_eq(ow, torch_out(w, d.kw, d.pad_left, d.sw, d.dw, d.ceil_mode));
    }
    int64_t sx[4] = {n, h, w, c}, sy[4] = {n, oh, ow, c}, nx = n * h * w * c, ny = n * oh * ow * c;
    float *hx = malloc((size_t)nx * sizeof *hx);
    for (int64_t i = 0; i < nx; i++)
        hx[i] = trial % 10 == 4 && i % 17 == 3 ? NAN : pgd_rng_float(r);
    double *want = malloc((size_t)ny * sizeof *want), *wi = malloc((size_t)ny * sizeof *wi);
    pgd_ref_pool2d(hx, n, h, w, c, &d, oh, ow, want, wi);
    pgd_tensor *x = pgd_test_upload(ctx, 4, sx, hx), *y, *idx = NULL;
    PGD_CHECK_OK(pgd_tensor_create(ctx, 4, sy, &y, &err), &err);
    if (d.mode == PGD_POOL_MAX)
        PGD_CHECK_OK(pgd_tensor_create(ctx, 4, sy, &idx, &err), &err);
    PGD_CHECK_OK(pgd_pool2d(ctx, x, &d, y, idx, &err), &err);
    float *got = malloc((size_t)ny * sizeof *got);
    PGD_CHECK_OK(pgd_tensor_download(y, got, &err), &err);
    char what[200];
    snprintf(what, sizeof what,
             "%s on %s, case %d: %dx%d /%dx%d dil %dx%d pads %d,%d,%d,%d ceil %d incl %d",
             d.mode ? "avgpool" : "maxpool", dev, trial, d.kh, d.kw, d.sh, d.sw, d.dh, d.dw,
             d.pad_top, d.pad_left, d.pad_bottom, d.pad_right, d.ceil_mode, d.count_include_pad);
    for (int64_t i = 0; i < ny; i++) {
        int ok = isnan(want[i])      ? isnan(got[i])
                 : got[i] == want[i] ? 1
                                     : fabs(got[i] - want[i]) <= 1e-6 + 1e-5 * fabs(want[i]);
        ck_assert_msg(ok, "%s: element %lld is %g, want %g", what, (long long)i, got[i], want[i]);
    }
    if (idx) {
        PGD_CHECK_OK(pgd_tensor_download(idx, got, &err), &err);
        for (int64_t i = 0; i < ny; i++)
            ck_assert_msg(got[i] == wi[i], "%s: index %lld is %g, want %g", what, (long long)i,
                          got[i], wi[i]);
    }
    pgd_tensor_destroy(x), pgd_tensor_destroy(y), pgd_tensor_destroy(idx);
    free(hx), free(want), free(wi), free(got);
    return 1;
}

START_TEST(pool_random)
{
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    for (size_t di = 0; di < n; di++) {
        pgd_ctx *ctx = pgd_test_ctx(&d[di]);
        pgd_rng r;
        pgd_rng_seed(&r, 131 + di);
        int ran = 0;
        for (int i = 0; ran < TRIALS && i < 4 * TRIALS; i++)
            ran += pool_case(ctx, &r, i, d[di].name);
        ck_assert_msg(ran == TRIALS, "%s: only %d configurations fit", d[di].name, ran);
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

START_TEST(global_max)
{
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    for (size_t di = 0; di < n; di++) {
        pgd_ctx *ctx = pgd_test_ctx(&d[di]);
        int64_t sx[4] = {2, 5, 3, 4}, sy[2] = {2, 4};
        float hx[120], got[8];
        for (int i = 0; i < 120; i++)
            hx[i] = (float)((i * 37) % 101) - 50.0f;
        hx[4 * 7 + 2] = NAN; /* image 0, channel 2 */
        pgd_tensor *x = pgd_test_upload(ctx, 4, sx, hx), *y;
        pgd_error *err = NULL;
        PGD_CHECK_OK(pgd_tensor_create(ctx, 2, sy, &y, &err), &err);
        PGD_CHECK_OK(pgd_global_maxpool(ctx, x, y, &err), &err);
        PGD_CHECK_OK(pgd_tensor_download(y, got, &err), &err);
        for (int b = 0; b < 2; b++)
            for (int ch = 0; ch < 4; ch++) {
                float m = -INFINITY;
                for (int p = 0; p < 15; p++) {
                    float v = hx[(b * 15 + p) * 4 + ch];
                    m = v > m || isnan(v) ? v : m;
                }
                ck_assert_msg(isnan(m) ? isnan(got[b * 4 + ch]) : got[b * 4 + ch] == m,
                              "%s: [%d, %d] is %g, want %g", d[di].name, b, ch, got[b * 4 + ch], m);
            }
        pgd_tensor_destroy(x), pgd_tensor_destroy(y);
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

START_TEST(errors)
{
    if (!pgd_test_primary())
        return;
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    pgd_ctx *ctx = pgd_test_ctx(&d[0]);
    int64_t sx[4] = {1, 4, 4, 2}, sy[4] = {1, 2, 2, 2}, s3[3] = {4, 4, 2};
    pgd_tensor *x, *y, *x3;
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_tensor_create(ctx, 4, sx, &x, &err), &err);
    PGD_CHECK_OK(pgd_tensor_create(ctx, 4, sy, &y, &err), &err);
    PGD_CHECK_OK(pgd_tensor_create(ctx, 3, s3, &x3, &err), &err);
    pgd_pool_desc p = {PGD_POOL_MAX, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0, 0, 0};
    p.kh = 6;
    int rc = pgd_pool2d(ctx, x, &p, y, NULL, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_SHAPE,
                          "maxpool: the window spans 6 rows but x padded has 4");
    err = NULL;
    p.kh = 2, p.sw = 0;
    rc = pgd_pool2d(ctx, x, &p, y, NULL, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_INVALID_ARGUMENT, "stride 2x0");
    err = NULL;
    p.sw = 1;
    rc = pgd_pool2d(ctx, x, &p, y, NULL, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_SHAPE, "y must be [N, 2, 3, C]");
    err = NULL;
    p.sw = 2, p.mode = PGD_POOL_AVG;
    rc = pgd_pool2d(ctx, x, &p, y, x, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_INVALID_ARGUMENT, "indices are a max pool's");
    err = NULL;
    rc = pgd_pool2d(ctx, x3, &p, y, NULL, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_SHAPE, "x must be 4-D [N, H, W, C]");
    err = NULL;
    p.mode = (pgd_pool_mode)5;
    rc = pgd_pool2d(ctx, x, &p, y, NULL, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_INVALID_ARGUMENT, "mode 5 is not a pgd_pool_mode");
    pgd_tensor_destroy(x), pgd_tensor_destroy(y), pgd_tensor_destroy(x3);
    pgd_ctx_destroy(ctx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pool");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, pool_random);
    tcase_add_test(tc, global_max);
    tcase_add_test(tc, errors);
    suite_add_tcase(s, tc);
    return pgd_test_run(s);
}
