/* test_window.c — Swin's window partition (padding, cyclic shift), its inverse added into y,
 * and the 2 x 2 patch merge, on every device against plain-C references written from
 * torchvision's definitions (F.pad, torch.roll, view/permute): 120 random shapes each,
 * exact equality; a partition merged back into zeros gives x again; bad arguments refused. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static const int64_t sizes[] = {1, 2, 3, 4, 5, 7, 8, 13, 14, 28};

static float *random_floats(pgd_rng *r, int64_t n)
{
    float *f = malloc((size_t)(n ? n : 1) * sizeof *f);
    for (int64_t i = 0; i < n; i++)
        f[i] = pgd_rng_float(r);
    return f;
}

/* torchvision: pad (bottom, right), roll by (-sh, -sw), view/permute into windows; timm
 * (unpadded): roll, then pad. */
static void ref_partition(const float *x, int64_t B, int64_t H, int64_t W, int64_t C, int64_t w,
                          int64_t sh, int64_t sw, int unpadded, float *out)
{
    int64_t Hp = (H + w - 1) / w * w, Wp = (W + w - 1) / w * w, nWh = Hp / w, nWw = Wp / w;
    int64_t Rh = unpadded ? H : Hp, Rw = unpadded ? W : Wp;
    for (int64_t b = 0; b < B; b++)
        for (int64_t wh = 0; wh < nWh; wh++)
            for (int64_t ww = 0; ww < nWw; ww++)
                for (int64_t r = 0; r < w; r++)
                    for (int64_t c = 0; c < w; c++) {
                        int64_t p = wh * w + r, q = ww * w + c;
                        int64_t i = p < Rh ? (p + sh) % Rh : H, j = q < Rw ? (q + sw) % Rw : W;
                        float *o = out + (((b * nWh + wh) * nWw + ww) * w * w + r * w + c) * C;
                        for (int64_t ch = 0; ch < C; ch++)
                            o[ch] = i < H && j < W ? x[((b * H + i) * W + j) * C + ch] : 0.0f;
                    }
}

static void ref_patch_merge(const float *x, int64_t B, int64_t H, int64_t W, int64_t C, float *out)
{
    int64_t Ho = (H + 1) / 2, Wo = (W + 1) / 2;
    static const int di[4] = {0, 1, 0, 1}, dj[4] = {0, 0, 1, 1};
    for (int64_t b = 0; b < B; b++)
        for (int64_t io = 0; io < Ho; io++)
            for (int64_t jo = 0; jo < Wo; jo++)
                for (int k = 0; k < 4; k++)
                    for (int64_t ch = 0; ch < C; ch++) {
                        int64_t i = 2 * io + di[k], j = 2 * jo + dj[k];
                        out[(((b * Ho + io) * Wo + jo) * 4 + k) * C + ch] =
                            i < H && j < W ? x[((b * H + i) * W + j) * C + ch] : 0.0f;
                    }
}

static int exact(const float *got, const float *want, int64_t n, const char *what)
{
    for (int64_t i = 0; i < n; i++)
        if (memcmp(&got[i], &want[i], sizeof got[i])) {
            fprintf(stderr, "%s: element %lld is %g, want %g\n", what, (long long)i, got[i],
                    want[i]);
            return 0;
        }
    return 1;
}

static int one_case(pgd_ctx *ctx, pgd_rng *r, int trial)
{
    int64_t B = pgd_rng_int(r, 1, 3), H = sizes[pgd_rng_int(r, 0, 9)];
    int64_t W = sizes[pgd_rng_int(r, 0, 9)], C = pgd_rng_int(r, 1, 17), w = pgd_rng_int(r, 1, 8);
    int64_t Hp = (H + w - 1) / w * w, Wp = (W + w - 1) / w * w, nW = (Hp / w) * (Wp / w);
    int unpadded = trial % 2, flags = unpadded ? PGD_WINDOW_ROLL_UNPADDED : 0;
    int64_t sh = trial % 3 == 0 ? 0 : pgd_rng_int(r, 0, (unpadded ? H : Hp) - 1);
    int64_t sw = trial % 3 == 0 ? 0 : pgd_rng_int(r, 0, (unpadded ? W : Wp) - 1);
    int64_t nx = B * H * W * C, nwin = B * nW * w * w * C;
    float *x = random_floats(r, nx), *win = random_floats(r, nwin), *y0 = random_floats(r, nx);
    float *want = malloc((size_t)nwin * sizeof *want), *got = malloc((size_t)nwin * sizeof *got);
    float *ywant = malloc((size_t)nx * sizeof *ywant), *ygot = malloc((size_t)nx * sizeof *ygot);
    char what[160];
    snprintf(what, sizeof what,
             "case %d: B %lld H %lld W %lld C %lld window %lld shift %lld,%lld%s", trial,
             (long long)B, (long long)H, (long long)W, (long long)C, (long long)w, (long long)sh,
             (long long)sw, unpadded ? " unpadded" : "");
    int64_t sx[4] = {B, H, W, C}, swn[3] = {B * nW, w * w, C};
    pgd_tensor *tx = pgd_test_upload(ctx, 4, sx, x), *tw = pgd_test_upload(ctx, 3, swn, win);
    pgd_tensor *ty = pgd_test_upload(ctx, 4, sx, y0), *tout = pgd_test_upload(ctx, 3, swn, win);
    pgd_error *err = NULL;
    /* Partition. */
    ref_partition(x, B, H, W, C, w, sh, sw, unpadded, want);
    PGD_CHECK_OK(pgd_window_partition(ctx, tx, w, sh, sw, flags, tout, &err), &err);
    PGD_CHECK_OK(pgd_tensor_download(tout, got, &err), &err);
    int ok = exact(got, want, nwin, what);
    /* Merge-add of random windows into random y: each y element gets the token that holds it.
     * The reference finds that token by partitioning the element indices themselves. */
    float *idx = calloc((size_t)nx, sizeof *idx), *pidx = calloc((size_t)nwin, sizeof *pidx);
    for (int64_t i = 0; i < nx; i++)
        idx[i] = (float)(i + 1); /* exact in float: nx < 2^24 */
    ref_partition(idx, B, H, W, C, w, sh, sw, unpadded, pidx);
    memcpy(ywant, y0, (size_t)nx * sizeof *ywant);
    for (int64_t t = 0; t < nwin; t++)
        if (pidx[t] > 0)
            ywant[(int64_t)pidx[t] - 1] += win[t];
    PGD_CHECK_OK(pgd_window_merge_add(ctx, tw, w, sh, sw, flags, ty, &err), &err);
    PGD_CHECK_OK(pgd_tensor_download(ty, ygot, &err), &err);
    ok = ok && exact(ygot, ywant, nx, what);
    /* Partition then merge into zeros: x again. */
    PGD_CHECK_OK(pgd_tensor_fill(ty, 0.0f, &err), &err);
    PGD_CHECK_OK(pgd_window_merge_add(ctx, tout, w, sh, sw, flags, ty, &err), &err);
    PGD_CHECK_OK(pgd_tensor_download(ty, ygot, &err), &err);
    ok = ok && exact(ygot, x, nx, what);
    /* Patch merge. */
    int64_t Ho = (H + 1) / 2, Wo = (W + 1) / 2, npm = B * Ho * Wo * 4 * C;
    int64_t spm[4] = {B, Ho, Wo, 4 * C};
    float *pw = malloc((size_t)npm * sizeof *pw), *pg = malloc((size_t)npm * sizeof *pg);
    pgd_tensor *tpm = NULL;
    PGD_CHECK_OK(pgd_tensor_create(ctx, 4, spm, &tpm, &err), &err);
    ref_patch_merge(x, B, H, W, C, pw);
    PGD_CHECK_OK(pgd_patch_merge(ctx, tx, tpm, &err), &err);
    PGD_CHECK_OK(pgd_tensor_download(tpm, pg, &err), &err);
    ok = ok && exact(pg, pw, npm, what);
    pgd_tensor *all[] = {tx, tw, ty, tout, tpm};
    for (int i = 0; i < 5; i++)
        pgd_tensor_destroy(all[i]);
    free(x), free(win), free(y0), free(want), free(got), free(ywant), free(ygot), free(idx);
    free(pidx), free(pw), free(pg);
    return ok;
}

START_TEST(random_shapes)
{
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    for (size_t i = 0; i < n; i++) {
        pgd_ctx *ctx = pgd_test_ctx(&d[i]);
        pgd_rng r;
        pgd_rng_seed(&r, 3);
        int failed = 0;
        for (int trial = 0; trial < 120; trial++)
            failed += !one_case(ctx, &r, trial);
        ck_assert_msg(failed == 0, "%s: %d of 120 window cases failed", d[i].name, failed);
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

static void expect(int rc, int want, pgd_error **err, const char *text)
{
    ck_assert_int_eq(rc, want);
    ck_assert_msg(strstr(pgd_error_get_message(*err), text), "'%s' not in: %s", text,
                  pgd_error_get_message(*err));
    pgd_error_destroy(*err);
    *err = NULL;
}

START_TEST(bad_arguments)
{
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    pgd_ctx *ctx = pgd_test_ctx(&d[0]);
    pgd_error *err = NULL;
    int64_t sx[4] = {1, 5, 6, 3}, s3[3] = {1, 5, 6}, sw[3] = {4, 9, 3}, sbad[3] = {4, 9, 4};
    int64_t spm[4] = {1, 3, 3, 12}, spm_bad[4] = {1, 2, 3, 12};
    pgd_tensor *x, *x3, *w, *wbad, *pm, *pmbad;
    PGD_CHECK_OK(pgd_tensor_create(ctx, 4, sx, &x, &err), &err);
    PGD_CHECK_OK(pgd_tensor_create(ctx, 3, s3, &x3, &err), &err);
    PGD_CHECK_OK(pgd_tensor_create(ctx, 3, sw, &w, &err), &err);
    PGD_CHECK_OK(pgd_tensor_create(ctx, 3, sbad, &wbad, &err), &err);
    PGD_CHECK_OK(pgd_tensor_create(ctx, 4, spm, &pm, &err), &err);
    PGD_CHECK_OK(pgd_tensor_create(ctx, 4, spm_bad, &pmbad, &err), &err);
    PGD_CHECK_OK(pgd_tensor_fill(x, 1.0f, &err), &err);
    PGD_CHECK_OK(pgd_window_partition(ctx, x, 3, 1, 2, 0, w, &err), &err); /* 5x6 -> 6x6, 4 wins */
    expect(pgd_window_partition(ctx, x, 3, 1, 2, 0, wbad, &err), PGD_ERR_SHAPE, &err, "[4, 9, 3]");
    expect(pgd_window_partition(ctx, x3, 3, 0, 0, 0, w, &err), PGD_ERR_SHAPE, &err, "[B, H, W, C]");
    expect(pgd_window_partition(ctx, x, 0, 0, 0, 0, w, &err), PGD_ERR_INVALID_ARGUMENT, &err,
           "window 0");
    expect(pgd_window_partition(ctx, x, 3, 6, 0, 0, w, &err), PGD_ERR_INVALID_ARGUMENT, &err,
           "shift (6, 0)");
    expect(pgd_window_partition(ctx, x, 3, -1, 0, 0, w, &err), PGD_ERR_INVALID_ARGUMENT, &err,
           "shift (-1, 0)");
    /* Unpadded: the shift must lie within the map itself (5 x 6), and flags are checked. */
    expect(pgd_window_partition(ctx, x, 3, 5, 0, PGD_WINDOW_ROLL_UNPADDED, w, &err),
           PGD_ERR_INVALID_ARGUMENT, &err, "unpadded");
    expect(pgd_window_partition(ctx, x, 3, 0, 0, 4, w, &err), PGD_ERR_INVALID_ARGUMENT, &err,
           "flags");
    expect(pgd_window_merge_add(ctx, wbad, 3, 0, 0, 0, x, &err), PGD_ERR_SHAPE, &err, "[4, 9, 3]");
    PGD_CHECK_OK(pgd_patch_merge(ctx, x, pm, &err), &err);
    expect(pgd_patch_merge(ctx, x, pmbad, &err), PGD_ERR_SHAPE, &err, "[1, 3, 3, 12]");
    pgd_tensor *all[] = {x, x3, w, wbad, pm, pmbad};
    for (int i = 0; i < 6; i++)
        pgd_tensor_destroy(all[i]);
    pgd_ctx_destroy(ctx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("window");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, bad_arguments);
    tcase_add_test(tc, random_shapes);
    suite_add_tcase(s, tc);
    return pgd_test_run(s);
}
