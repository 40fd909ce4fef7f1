/* test_conv_pads.c — pgd_conv2d_forward_pads (pads per side) and pgd_conv2d_same_pads (ONNX's
 * auto_pad) against the double reference of reference.c on x padded by hand, on every device:
 * 110 random layers per device (groups, depthwise, strides, dilations, a forced algorithm now
 * and then), SAME_UPPER and SAME_LOWER output sizes, and the errors. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "reference.h"

#define TRIALS 110

/* x NHWC [n, h, w, c] with zeros around it: pads [top, left, bottom, right]. */
static float *pad_by_hand(const float *x, int64_t n, int64_t h, int64_t w, int64_t c, const int *p)
{
    int64_t ph = h + p[0] + p[2], pw = w + p[1] + p[3];
    float *y = calloc((size_t)(n * ph * pw * c), sizeof *y);
    for (int64_t b = 0; b < n; b++)
        for (int64_t i = 0; i < h; i++)
            for (int64_t j = 0; j < w; j++)
                memcpy(y + ((b * ph + i + p[0]) * pw + j + p[1]) * c, x + ((b * h + i) * w + j) * c,
                       (size_t)c * sizeof *y);
    return y;
}

static void pads_case(pgd_ctx *ctx, pgd_rng *r, int trial, const char *dev)
{
    int groups = trial % 5 == 0 ? 2 : 1;
    pgd_conv2d_desc d;
    memset(&d, 0, sizeof d);
    d.cin = groups * pgd_rng_int(r, 1, 4), d.cout = groups * pgd_rng_int(r, 1, 4);
    d.kh = (int)pgd_rng_int(r, 1, 4), d.kw = (int)pgd_rng_int(r, 1, 4);
    d.stride_h = (int)pgd_rng_int(r, 1, 2), d.stride_w = (int)pgd_rng_int(r, 1, 3);
    d.dil_h = trial % 4 == 1 ? 2 : 1, d.dil_w = 1, d.groups = groups;
    int64_t n = pgd_rng_int(r, 1, 2), h = pgd_rng_int(r, 5, 11), w = pgd_rng_int(r, 5, 11);
    int pads[4];
    if (trial % 3 == 2) /* auto_pad */
        pgd_conv2d_same_pads(&d, h, w, trial % 2, pads);
    else
        for (int i = 0; i < 4; i++)
            pads[i] = (int)pgd_rng_int(r, 0, 3);
    int64_t ph = h + pads[0] + pads[2], pw = w + pads[1] + pads[3], oh, ow;
    pgd_conv2d_out_size(&d, ph, pw, &oh, &ow);
    if (trial % 3 == 2) {
        ck_assert_int_eq(oh, (h + d.stride_h - 1) / d.stride_h);
        ck_assert_int_eq(ow, (w + d.stride_w - 1) / d.stride_w);
        ck_assert_msg(abs((pads[0] - pads[2])) <= 1 &&
                          (trial % 2 ? pads[0] >= pads[2] : pads[0] <= pads[2]),
                      "SAME_%s pads %d, %d", trial % 2 ? "LOWER" : "UPPER", pads[0], pads[2]);
    }
    int64_t cig = d.cin / groups, nw = d.cout * cig * d.kh * d.kw;
    float *hx = malloc((size_t)(n * h * w * d.cin) * sizeof *hx);
    float *hw = malloc((size_t)nw * sizeof *hw), *hb = malloc((size_t)d.cout * sizeof *hb);
    for (int64_t i = 0; i < n * h * w * d.cin; i++)
        hx[i] = pgd_rng_float(r);
    for (int64_t i = 0; i < nw; i++)
        hw[i] = pgd_rng_float(r);
    for (int64_t i = 0; i < d.cout; i++)
        hb[i] = pgd_rng_float(r);
    float *hp = pad_by_hand(hx, n, h, w, d.cin, pads);
    pgd_ref_conv rc = {(size_t)n,
                       (size_t)ph,
                       (size_t)pw,
                       (size_t)d.cin,
                       (size_t)d.cout,
                       (size_t)d.kh,
                       (size_t)d.kw,
                       (size_t)d.stride_h,
                       (size_t)d.stride_w,
                       0,
                       0,
                       (size_t)d.dil_h,
                       (size_t)d.dil_w,
                       (size_t)groups};
    int64_t ny = n * oh * ow * d.cout;
    double *want = malloc((size_t)ny * sizeof *want);
    pgd_ref_conv2d(&rc, hp, hw, hb, NULL, 0.0, NULL, 1, want, NULL);
    pgd_conv2d *conv = NULL;
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_conv2d_create(ctx, &d, hw, hb, NULL, &conv, &err), &err);
    int64_t sx[4] = {n, h, w, d.cin}, sy[4] = {n, oh, ow, d.cout};
    pgd_tensor *x = pgd_test_upload(ctx, 4, sx, hx), *y;
    PGD_CHECK_OK(pgd_tensor_create(ctx, 4, sy, &y, &err), &err);
    PGD_CHECK_OK(pgd_conv2d_forward_pads(ctx, conv, x, pads, PGD_ACT_RELU, NULL, y, &err), &err);
    float *got = malloc((size_t)ny * sizeof *got);
    PGD_CHECK_OK(pgd_tensor_download(y, got, &err), &err);
    char what[200];
    snprintf(what, sizeof what, "conv on %s, case %d: %lldx%lld k %dx%d s %dx%d pads %d,%d,%d,%d",
             dev, trial, (long long)h, (long long)w, d.kh, d.kw, d.stride_h, d.stride_w, pads[0],
             pads[1], pads[2], pads[3]);
    ck_assert_msg(pgd_test_allclose(got, want, (size_t)ny, 1e-4, 1e-5, what), "%s", what);
    pgd_conv2d_destroy(conv);
    pgd_tensor_destroy(x), pgd_tensor_destroy(y);
    free(hx), free(hw), free(hb), free(hp), free(want), free(got);
}

START_TEST(pads_random)
{
    PGD_TEST_EACH_DEVICE(151, for (int i = 0; i < TRIALS; i++) pads_case(ctx, &r, i, dev));
}
END_TEST

START_TEST(errors)
{
    if (!pgd_test_primary())
        return;
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    pgd_ctx *ctx = pgd_test_ctx(&d[0]);
    pgd_conv2d_desc desc = {2, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1};
    float w[36] = {0}, bias[2] = {0};
    pgd_conv2d *conv = NULL;
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_conv2d_create(ctx, &desc, w, bias, NULL, &conv, &err), &err);
    int64_t sx[4] = {1, 4, 4, 2};
    pgd_tensor *x, *y;
    PGD_CHECK_OK(pgd_tensor_create(ctx, 4, sx, &x, &err), &err);
    PGD_CHECK_OK(pgd_tensor_create(ctx, 4, sx, &y, &err), &err);
    int pads[4] = {1, 0, 1, 0};
    int rc = pgd_conv2d_forward_pads(ctx, conv, x, pads, PGD_ACT_NONE, NULL, y, &err);
    ck_assert_int_eq(rc, PGD_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(pgd_error_get_message(err), "the layer pads by itself (pad_h 1, pad_w 1)"),
                  "%s", pgd_error_get_message(err));
    pgd_error_destroy(err);
    err = NULL;
    pgd_conv2d_destroy(conv);
    desc.pad_h = desc.pad_w = 0;
    PGD_CHECK_OK(pgd_conv2d_create(ctx, &desc, w, bias, NULL, &conv, &err), &err);
    pads[3] = -1;
    rc = pgd_conv2d_forward_pads(ctx, conv, x, pads, PGD_ACT_NONE, NULL, y, &err);
    ck_assert_int_eq(rc, PGD_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(pgd_error_get_message(err), "pads 1, 0, 1, -1 (top, left, bottom, right)"),
                  "%s", pgd_error_get_message(err));
    pgd_error_destroy(err);
    err = NULL;
    pads[3] = 0; /* [1, 6, 4, 2] padded: 3x3 gives [1, 4, 2, 2], not y [1, 4, 4, 2] */
    rc = pgd_conv2d_forward_pads(ctx, conv, x, pads, PGD_ACT_NONE, NULL, y, &err);
    ck_assert_int_eq(rc, PGD_ERR_SHAPE);
    pgd_error_destroy(err);
    pgd_conv2d_destroy(conv);
    pgd_tensor_destroy(x), pgd_tensor_destroy(y);
    pgd_ctx_destroy(ctx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("conv_pads");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, pads_random);
    tcase_add_test(tc, errors);
    suite_add_tcase(s, tc);
    return pgd_test_run(s);
}
