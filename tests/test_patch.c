/* test_patch.c — patch embedding and the bicubic position-embedding resize against the double
 * references of reference.c, on every device, over at least 100 seeded shapes each, with
 * NaN-poisoned outputs and a NaN canary after every output. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "reference.h"

static const int64_t awkward[] = {1, 2, 3, 7, 13, 31, 63, 64, 65, 127, 197, 257};
#define N_AWKWARD (sizeof awkward / sizeof awkward[0])
#define TRIALS 110
#define CANARY 23

/* A device tensor of n floats holding `data` (or the canary NaN where data is NULL). */
static pgd_tensor *upload(pgd_ctx *ctx, const float *data, int64_t n, pgd_error **err)
{
    pgd_tensor *t = NULL;
    int64_t shape[1] = {n};
    PGD_CHECK_OK(pgd_tensor_create(ctx, 1, shape, &t, err), err);
    float *h = malloc((size_t)n * sizeof(float));
    ck_assert_ptr_nonnull(h);
    for (int64_t i = 0; i < n; i++)
        h[i] = data ? data[i] : pgd_test_canary();
    PGD_CHECK_OK(pgd_tensor_upload(t, h, err), err);
    free(h);
    return t;
}

static float *random_floats(pgd_rng *r, int64_t n, float amp)
{
    float *h = malloc((size_t)(n ? n : 1) * sizeof(float));
    ck_assert_ptr_nonnull(h);
    for (int64_t i = 0; i < n; i++)
        h[i] = amp * pgd_rng_float(r);
    return h;
}

/* Downloads out (prefix n of a buffer of n + CANARY), compares and checks the canary. */
static void check_output(pgd_tensor *buf, int64_t n, const double *want, double rtol, double atol,
                         const char *what)
{
    pgd_error *err = NULL;
    float *got = malloc((size_t)(n + CANARY) * sizeof(float));
    ck_assert_ptr_nonnull(got);
    PGD_CHECK_OK(pgd_tensor_download(buf, got, &err), &err);
    ck_assert_msg(pgd_test_allclose(got, want, (size_t)n, rtol, atol, what), "%s", what);
    for (int64_t i = n; i < n + CANARY; i++)
        ck_assert_msg(pgd_test_is_canary(got[i]), "%s: canary %lld overwritten", what,
                      (long long)(i - n));
    free(got);
}

START_TEST(patch_embed_shapes)
{
    static const int64_t patches[] = {1, 2, 3, 4, 5, 7, 8, 14, 16};
    size_t ndev;
    const pgd_device_info *devs = pgd_test_devices(&ndev);
    for (size_t di = 0; di < ndev; di++) {
        const pgd_device_info *dev = &devs[di];
        pgd_ctx *ctx = pgd_test_ctx(dev);
        pgd_error *err = NULL;
        pgd_rng r;
        pgd_rng_seed(&r, 4242);
        /* Multiply-adds per shape: the reference is plain C, llvmpipe is slow. */
        int64_t cap = dev->software_rasteriser ? 150000 : 2000000;
        for (int trial = 0; trial < TRIALS; trial++) {
            int64_t B = pgd_rng_int(&r, 1, 3), C = trial % 10 == 9 ? pgd_rng_int(&r, 1, 4) : 3;
            int64_t P = patches[pgd_rng_int(&r, 0, 8)];
            int64_t gh = pgd_rng_int(&r, 1, 9), gw = pgd_rng_int(&r, 1, 9);
            int64_t D = trial < (int)N_AWKWARD  ? awkward[trial]
                        : pgd_rng_int(&r, 0, 1) ? awkward[pgd_rng_int(&r, 0, N_AWKWARD - 1)]
                                                : pgd_rng_int(&r, 1, 300);
            if (trial == 0 && !dev->software_rasteriser) /* a ViT-Tiny sized image */
                B = 1, C = 3, P = 16, gh = gw = 14, D = 192;
            else
                while (B * gh * gw * D * C * P * P > cap) {
                    /* The awkward widths stay; the image shrinks first. */
                    if (trial < (int)N_AWKWARD && (B > 1 || P > 1 || gh > 1 || gw > 1)) {
                        if (B > 1)
                            B--;
                        else if (P > 1)
                            P = P / 2;
                        else if (gh > 1)
                            gh--;
                        else
                            gw--;
                    } else if (D > 8)
                        D = (D + 1) / 2;
                    else if (P > 1)
                        P = P / 2;
                    else if (gh > 1)
                        gh--;
                    else
                        break;
                }
            int64_t H = gh * P, W = gw * P, K = C * P * P;
            int extra = trial % 3, has_pos = trial % 4 != 1, has_bias = trial % 7 != 5;
            int64_t T = extra + gh * gw, nout = B * T * D;

            float *himg = random_floats(&r, B * C * H * W, 1.0f);
            float *hw = random_floats(&r, D * K, 1.0f), *hb = random_floats(&r, D, 1.0f);
            float *hcls = random_floats(&r, D, 1.0f), *hdist = random_floats(&r, D, 1.0f);
            float *hpos = random_floats(&r, T * D, 1.0f);
            double *want = malloc((size_t)nout * sizeof(double));
            ck_assert_ptr_nonnull(want);

            pgd_tensor *img = upload(ctx, himg, B * C * H * W, &err);
            pgd_tensor *wt = upload(ctx, hw, D * K, &err), *bias = upload(ctx, hb, D, &err);
            pgd_tensor *cls = upload(ctx, hcls, D, &err), *dist = upload(ctx, hdist, D, &err);
            pgd_tensor *pos = upload(ctx, hpos, T * D, &err);
            pgd_tensor *out = upload(ctx, NULL, nout + CANARY, &err); /* poisoned */
            int64_t si[4] = {B, C, H, W}, sw[4] = {D, C, P, P}, so[3] = {B, T, D}, sp[2] = {T, D};
            pgd_tensor *vimg = pgd_test_prefix(img, 4, si), *vw = pgd_test_prefix(wt, 4, sw);
            pgd_tensor *vout = pgd_test_prefix(out, 3, so), *vpos = pgd_test_prefix(pos, 2, sp);
            PGD_CHECK_OK(pgd_patch_embed(ctx, vimg, vw, has_bias ? bias : NULL,
                                         extra >= 1 ? cls : NULL, extra >= 2 ? dist : NULL,
                                         has_pos ? vpos : NULL, vout, &err),
                         &err);
            pgd_ref_patch_embed(himg, (size_t)B, (size_t)C, (size_t)H, (size_t)W, hw, (size_t)D,
                                (size_t)P, has_bias ? hb : NULL, extra >= 1 ? hcls : NULL,
                                extra >= 2 ? hdist : NULL, has_pos ? hpos : NULL, want);
            char what[200];
            snprintf(what, sizeof what,
                     "patch_embed on %s: image [%lld, %lld, %lld, %lld], P %lld, D %lld, extra %d, "
                     "pos %d, bias %d (trial %d)",
                     dev->name, (long long)B, (long long)C, (long long)H, (long long)W,
                     (long long)P, (long long)D, extra, has_pos, has_bias, trial);
            /* K-term float sums: the absolute slack grows with K. */
            check_output(out, nout, want, 1e-4, 1e-5 + 2e-6 * (double)K, what);
            /* The prepared projection: the same result bit for bit, and on CPU devices its
             * weights are not packed again in the call. */
            {
                float *first = malloc((size_t)nout * sizeof(float));
                float *again = malloc((size_t)nout * sizeof(float));
                ck_assert_ptr_nonnull(first);
                ck_assert_ptr_nonnull(again);
                PGD_CHECK_OK(pgd_tensor_download(vout, first, &err), &err);
                pgd_patch_proj *proj = NULL;
                PGD_CHECK_OK(pgd_patch_proj_create(ctx, vw, &proj, &err), &err);
                pgd_ctx_set_profiling(ctx, 1);
                long packs = pgd_test_launches(ctx, "gemm_pack_b");
                PGD_CHECK_OK(pgd_patch_embed_proj(ctx, vimg, proj, has_bias ? bias : NULL,
                                                  extra >= 1 ? cls : NULL, extra >= 2 ? dist : NULL,
                                                  has_pos ? vpos : NULL, vout, &err),
                             &err);
                long packed_now = pgd_test_launches(ctx, "gemm_pack_b") - packs;
                pgd_ctx_set_profiling(ctx, 0);
                PGD_CHECK_OK(pgd_tensor_download(vout, again, &err), &err);
                ck_assert_msg(!memcmp(first, again, (size_t)nout * sizeof(float)),
                              "%s: the prepared projection gave another result", what);
                ck_assert_msg(packed_now == 0, "%s: the prepared projection packed %ld times", what,
                              packed_now);
                pgd_patch_proj_destroy(proj);
                free(first);
                free(again);
            }
            free(vimg);
            free(vw);
            free(vout);
            free(vpos);
            pgd_tensor *all[] = {img, wt, bias, cls, dist, pos, out};
            for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
                pgd_tensor_destroy(all[i]);
            float *hall[] = {himg, hw, hb, hcls, hdist, hpos};
            for (size_t i = 0; i < sizeof hall / sizeof hall[0]; i++)
                free(hall[i]);
            free(want);
        }
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

static const char *const mode_names[] = {"bicubic", "bicubic-align-corners", "bicubic-antialias",
                                         "bicubic-hf"};
#define N_MODES 4

/* Every resize mode over TRIALS seeded shapes each: up- and down-sampling, 1 x N and N x 1
 * grids on either side, the identity size, 0, 1 or 2 extra rows and the awkward widths. */
START_TEST(pos_resize_shapes)
{
    size_t ndev;
    const pgd_device_info *devs = pgd_test_devices(&ndev);
    for (size_t di = 0; di < ndev; di++) {
        const pgd_device_info *dev = &devs[di];
        pgd_ctx *ctx = pgd_test_ctx(dev);
        pgd_error *err = NULL;
        int64_t cap = dev->software_rasteriser ? 20000 : 400000; /* output elements */
        for (int mode = 0; mode < N_MODES; mode++) {
            pgd_rng r;
            pgd_rng_seed(&r, 777 + (uint64_t)mode);
            for (int trial = 0; trial < TRIALS; trial++) {
                int extra = trial % 3;
                /* Small grids while D runs through the awkward widths, so the cap keeps them. */
                int g1 = trial < (int)N_AWKWARD ? 8 : 16, g2 = trial < (int)N_AWKWARD ? 8 : 24;
                int gh = (int)pgd_rng_int(&r, 1, g1), gw = (int)pgd_rng_int(&r, 1, g1);
                int gh2 = (int)pgd_rng_int(&r, 1, g2), gw2 = (int)pgd_rng_int(&r, 1, g2);
                switch (trial % 10) {
                case 0: /* same size: the identity (not for Hugging Face's +0.1) */
                    gh2 = gh, gw2 = gw;
                    break;
                case 3: /* 1 x N in */ gh = 1; break;
                case 4: /* N x 1 out */ gw2 = 1; break;
                case 6: /* downsampling by a large factor: the antialiased support widens */
                    gh = 16, gw = (int)pgd_rng_int(&r, 9, 16);
                    gh2 = (int)pgd_rng_int(&r, 1, 3), gw2 = (int)pgd_rng_int(&r, 1, 5);
                    break;
                case 7: /* 1 x 1 out or in */
                    if (trial % 20 == 7)
                        gh2 = gw2 = 1;
                    else
                        gh = gw = 1;
                    break;
                default: break;
                }
                int64_t D = trial < (int)N_AWKWARD  ? awkward[trial]
                            : pgd_rng_int(&r, 0, 1) ? awkward[pgd_rng_int(&r, 0, N_AWKWARD - 1)]
                                                    : pgd_rng_int(&r, 1, 400);
                int64_t rows = extra + (int64_t)gh * gw, rows2 = extra + (int64_t)gh2 * gw2;
                while (D > 1 && rows2 * D > cap)
                    D = (D + 1) / 2;
                float *hpos = random_floats(&r, rows * D, 1.0f);
                double *want = malloc((size_t)(rows2 * D) * sizeof(double));
                ck_assert_ptr_nonnull(want);
                pgd_tensor *pos = upload(ctx, hpos, rows * D, &err);
                pgd_tensor *out = upload(ctx, NULL, rows2 * D + CANARY, &err);
                int64_t sp[2] = {rows, D}, so[2] = {rows2, D};
                pgd_tensor *vpos = pgd_test_prefix(pos, 2, sp), *vout = pgd_test_prefix(out, 2, so);
                PGD_CHECK_OK(pgd_pos_embed_resize(ctx, vpos, extra, gh, gw, gh2, gw2,
                                                  (pgd_resize_mode)mode, vout, &err),
                             &err);
                pgd_ref_pos_resize(hpos, (size_t)extra, (size_t)gh, (size_t)gw, (size_t)gh2,
                                   (size_t)gw2, (size_t)D, mode, want);
                char what[200];
                snprintf(what, sizeof what,
                         "pos_resize %s on %s: extra %d, %dx%d -> %dx%d, D %lld (trial %d)",
                         mode_names[mode], dev->name, extra, gh, gw, gh2, gw2, (long long)D, trial);
                check_output(out, rows2 * D, want, 1e-4, 1e-5, what);
                if (trial % 10 == 0 && mode != PGD_RESIZE_BICUBIC_HF)
                    for (int64_t k = 0; k < rows2 * D; k++) /* the reference is the identity */
                        ck_assert_msg(fabs(want[k] - hpos[k]) < 1e-12, "%s: not the identity",
                                      what);
                free(vpos);
                free(vout);
                pgd_tensor_destroy(pos);
                pgd_tensor_destroy(out);
                free(hpos);
                free(want);
            }
        }
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

/* The bicubic reference against hand-worked values: [0, 1] to 4 samples (scale 1/2) gives
 * taps at -0.25, 0.25, 0.75, 1.25 with Keys' A = -0.75 weights and clamped borders. The device
 * must agree too. */
START_TEST(pos_resize_known_values)
{
    const float pos[3] = {9.0f, 0.0f, 1.0f}; /* one class row, a 1 x 2 grid, D = 1 */
    double want[5] = {9.0, -0.10546875, 0.2265625, 0.7734375, 1.10546875}, got[5];
    pgd_ref_pos_resize(pos, 1, 1, 2, 1, 4, 1, PGD_RESIZE_BICUBIC, got);
    for (int i = 0; i < 5; i++)
        ck_assert_msg(fabs(got[i] - want[i]) < 1e-12, "reference %d: %.17g vs %.17g", i, got[i],
                      want[i]);
    size_t ndev;
    const pgd_device_info *devs = pgd_test_devices(&ndev);
    for (size_t di = 0; di < ndev; di++) {
        pgd_ctx *ctx = pgd_test_ctx(&devs[di]);
        pgd_error *err = NULL;
        pgd_tensor *p = upload(ctx, pos, 3, &err), *o = upload(ctx, NULL, 5 + CANARY, &err);
        int64_t so[2] = {5, 1}, sp[2] = {3, 1};
        pgd_tensor *vo = pgd_test_prefix(o, 2, so), *vp = pgd_test_prefix(p, 2, sp);
        PGD_CHECK_OK(pgd_pos_embed_resize(ctx, vp, 1, 1, 2, 1, 4, PGD_RESIZE_BICUBIC, vo, &err),
                     &err);
        free(vp);
        check_output(o, 5, want, 1e-6, 1e-6, devs[di].name);
        free(vo);
        pgd_tensor_destroy(p);
        pgd_tensor_destroy(o);
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

/* Antialiased (A = -0.5, in-bounds taps normalised): [0, 1] to 4 samples puts the centres at
 * 0.25, 0.75, 1.25, 1.75, distances x + 1/2 - c; e.g. the first is -0.0703125 / 0.796875. */
START_TEST(pos_resize_antialias_known_values)
{
    const float pos[3] = {9.0f, 0.0f, 1.0f};
    double want[5] = {9.0, -3.0 / 34.0, 29.0 / 140.0, 111.0 / 140.0, 37.0 / 34.0}, got[5];
    pgd_ref_pos_resize(pos, 1, 1, 2, 1, 4, 1, PGD_RESIZE_BICUBIC_ANTIALIAS, got);
    for (int i = 0; i < 5; i++)
        ck_assert_msg(fabs(got[i] - want[i]) < 1e-12, "reference %d: %.17g vs %.17g", i, got[i],
                      want[i]);
    /* align_corners: [0, 1] to 3 samples is 0, 1/2, 1 exactly. */
    double want_ac[4] = {9.0, 0.0, 0.5, 1.0};
    pgd_ref_pos_resize(pos, 1, 1, 2, 1, 3, 1, PGD_RESIZE_BICUBIC_ALIGN_CORNERS, got);
    for (int i = 0; i < 4; i++)
        ck_assert_msg(fabs(got[i] - want_ac[i]) < 1e-12, "align_corners %d: %.17g", i, got[i]);
    size_t ndev;
    const pgd_device_info *devs = pgd_test_devices(&ndev);
    for (size_t di = 0; di < ndev; di++) {
        pgd_ctx *ctx = pgd_test_ctx(&devs[di]);
        pgd_error *err = NULL;
        pgd_tensor *p = upload(ctx, pos, 3, &err), *o = upload(ctx, NULL, 5 + CANARY, &err);
        int64_t so[2] = {5, 1}, sp[2] = {3, 1};
        pgd_tensor *vo = pgd_test_prefix(o, 2, so), *vp = pgd_test_prefix(p, 2, sp);
        PGD_CHECK_OK(
            pgd_pos_embed_resize(ctx, vp, 1, 1, 2, 1, 4, PGD_RESIZE_BICUBIC_ANTIALIAS, vo, &err),
            &err);
        free(vp);
        check_output(o, 5, want, 1e-6, 1e-6, devs[di].name);
        free(vo);
        /* An unknown mode is refused. */
        ck_assert_int_eq(pgd_pos_embed_resize(ctx, p, 1, 1, 2, 1, 2, (pgd_resize_mode)9, p, &err),
                         PGD_ERR_INVALID_ARGUMENT);
        pgd_error_destroy(err);
        pgd_tensor_destroy(p);
        pgd_tensor_destroy(o);
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

/* One patch, one channel, known weights: the reference sums what it should. */
START_TEST(patch_embed_reference_known_values)
{
    const float img[8] = {1, 2, 3, 4, 5, 6, 7, 8}; /* [1, 1, 2, 4], P = 2: two patches */
    const float w[4] = {1, 10, 100, 1000};         /* [1, 1, 2, 2] */
    const float bias[1] = {0.5f}, cls[1] = {-1.0f}, pos[3] = {0.25f, 0.0f, 2.0f};
    double out[3];
    pgd_ref_patch_embed(img, 1, 1, 2, 4, w, 1, 2, bias, cls, NULL, pos, out);
    ck_assert(out[0] == -0.75);
    ck_assert(out[1] == 1 + 20 + 500 + 6000 + 0.5);
    ck_assert(out[2] == 3 + 40 + 700 + 8000 + 0.5 + 2.0);
}
END_TEST

static void expect_shape_error(int rc, pgd_error **err, const char *a, const char *b)
{
    ck_assert_msg(rc == PGD_ERR_SHAPE, "want PGD_ERR_SHAPE, got %s", pgd_status_name(rc));
    ck_assert_ptr_nonnull(*err);
    const char *m = pgd_error_get_message(*err);
    ck_assert_msg(strstr(m, a) && strstr(m, b), "message lacks %s and %s: %s", a, b, m);
    pgd_error_destroy(*err);
    *err = NULL;
}

static pgd_tensor *shaped(pgd_ctx *ctx, int ndim, const int64_t *shape)
{
    pgd_tensor *t = NULL;
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_tensor_create(ctx, ndim, shape, &t, &err), &err);
    return t;
}

START_TEST(patch_shape_errors)
{
    if (!pgd_test_primary())
        return;
    size_t ndev;
    const pgd_device_info *devs = pgd_test_devices(&ndev);
    pgd_ctx *ctx = pgd_test_ctx(&devs[0]);
    pgd_error *err = NULL;
    int64_t si[4] = {1, 3, 30, 32}, sw[4] = {8, 3, 4, 4}, sw2[4] = {8, 2, 4, 4};
    int64_t si_ok[4] = {1, 3, 32, 32}, so[3] = {1, 65, 8}, so_bad[3] = {1, 64, 8};
    int64_t sp_bad[2] = {64, 8}, sv[1] = {8};
    pgd_tensor *img = shaped(ctx, 4, si), *w = shaped(ctx, 4, sw), *w2 = shaped(ctx, 4, sw2);
    pgd_tensor *img_ok = shaped(ctx, 4, si_ok), *out = shaped(ctx, 3, so);
    pgd_tensor *out_bad = shaped(ctx, 3, so_bad), *pos_bad = shaped(ctx, 2, sp_bad);
    pgd_tensor *cls = shaped(ctx, 1, sv);
    /* 30 is not a multiple of 4. */
    expect_shape_error(pgd_patch_embed(ctx, img, w, NULL, cls, NULL, NULL, out, &err), &err,
                       "[1, 3, 30, 32]", "[8, 3, 4, 4]");
    /* Channel counts differ. */
    expect_shape_error(pgd_patch_embed(ctx, img_ok, w2, NULL, cls, NULL, NULL, out, &err), &err,
                       "[1, 3, 32, 32]", "[8, 2, 4, 4]");
    /* 1 + 64 tokens, not 64. */
    expect_shape_error(pgd_patch_embed(ctx, img_ok, w, NULL, cls, NULL, NULL, out_bad, &err), &err,
                       "[1, 3, 32, 32]", "[1, 64, 8]");
    expect_shape_error(pgd_patch_embed(ctx, img_ok, w, NULL, cls, NULL, pos_bad, out, &err), &err,
                       "[1, 65, 8]", "[64, 8]");
    ck_assert_int_eq(pgd_patch_embed(ctx, img_ok, w, NULL, NULL, cls, NULL, out, &err),
                     PGD_ERR_INVALID_ARGUMENT);
    pgd_error_destroy(err);
    err = NULL;
    /* Position tables: 65 rows are 1 + 8 x 8, not 1 + 7 x 7; output must have 1 + 4 x 4. */
    int64_t sp[2] = {65, 8}, sp2[2] = {17, 8};
    pgd_tensor *pos = shaped(ctx, 2, sp), *pos2 = shaped(ctx, 2, sp2);
    expect_shape_error(
        pgd_pos_embed_resize(ctx, pos, 1, 7, 7, 4, 4, PGD_RESIZE_BICUBIC, pos2, &err), &err,
        "[65, 8]", "[17, 8]");
    expect_shape_error(
        pgd_pos_embed_resize(ctx, pos, 1, 8, 8, 4, 5, PGD_RESIZE_BICUBIC, pos2, &err), &err,
        "[65, 8]", "[17, 8]");
    PGD_CHECK_OK(pgd_pos_embed_resize(ctx, pos, 1, 8, 8, 4, 4, PGD_RESIZE_BICUBIC, pos2, &err),
                 &err);
    pgd_tensor *all[] = {img, w, w2, img_ok, out, out_bad, pos_bad, cls, pos, pos2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        pgd_tensor_destroy(all[i]);
    pgd_ctx_destroy(ctx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("patch");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, patch_embed_reference_known_values);
    tcase_add_test(tc, pos_resize_known_values);
    tcase_add_test(tc, pos_resize_antialias_known_values);
    tcase_add_test(tc, patch_embed_shapes);
    tcase_add_test(tc, pos_resize_shapes);
    tcase_add_test(tc, patch_shape_errors);
    suite_add_tcase(s, tc);
    return pgd_test_run(s);
}
