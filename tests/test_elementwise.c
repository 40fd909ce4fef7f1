/* test_elementwise.c — scale and add against a double reference, on every device, over
 * random sizes with a canary after the output and a poisoned output. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static const int64_t awkward[] = {1, 2, 3, 7, 13, 31, 63, 64, 65, 127, 197, 257, 1000003};

START_TEST(scale_and_add_random_sizes)
{
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    for (size_t di = 0; di < n; di++) {
        pgd_ctx *ctx = pgd_test_ctx(&d[di]);
        pgd_error *err = NULL;
        pgd_rng r;
        pgd_rng_seed(&r, 1234);
        for (int trial = 0; trial < 110; trial++) {
            int64_t len = trial < 13 ? awkward[trial] : pgd_rng_int(&r, 1, 5000);
            const int64_t canary = 16;
            int64_t full[1] = {len + canary};
            pgd_tensor *a = NULL, *b = NULL, *y = NULL;
            PGD_CHECK_OK(pgd_tensor_create(ctx, 1, full, &a, &err), &err);
            PGD_CHECK_OK(pgd_tensor_create(ctx, 1, full, &b, &err), &err);
            PGD_CHECK_OK(pgd_tensor_create(ctx, 1, full, &y, &err), &err);
            float *ha = malloc((size_t)(len + canary) * sizeof(float));
            float *hb = malloc((size_t)(len + canary) * sizeof(float));
            float *hy = malloc((size_t)(len + canary) * sizeof(float));
            double *want = malloc((size_t)len * sizeof(double));
            for (int64_t i = 0; i < len + canary; i++) {
                ha[i] = pgd_rng_float(&r) * 100.0f;
                hb[i] = pgd_rng_float(&r);
                hy[i] = NAN; /* poison: an unwritten element fails */
            }
            PGD_CHECK_OK(pgd_tensor_upload(a, ha, &err), &err);
            PGD_CHECK_OK(pgd_tensor_upload(b, hb, &err), &err);
            PGD_CHECK_OK(pgd_tensor_upload(y, hy, &err), &err);
            /* The ops see tensors of `len` elements; the canary lies beyond them. */
            int64_t shape[1] = {len};
            pgd_tensor *va = pgd_test_prefix(a, 1, shape), *vb = pgd_test_prefix(b, 1, shape),
                       *vy = pgd_test_prefix(y, 1, shape);
            float alpha = pgd_rng_float(&r) * 3.0f;
            PGD_CHECK_OK(pgd_scale(ctx, va, alpha, vy, &err), &err);
            PGD_CHECK_OK(pgd_add(ctx, vy, vb, vy, &err), &err);
            free(va);
            free(vb);
            free(vy);
            PGD_CHECK_OK(pgd_tensor_download(y, hy, &err), &err);
            for (int64_t i = 0; i < len; i++)
                want[i] = (double)alpha * ha[i] + hb[i];
            ck_assert_msg(pgd_test_allclose(hy, want, (size_t)len, 1e-6, 1e-6, "scale+add"),
                          "%s: len %lld", d[di].name, (long long)len);
            for (int64_t i = len; i < len + canary; i++)
                ck_assert_msg(isnan(hy[i]), "%s: canary %lld overwritten (len %lld)", d[di].name,
                              (long long)(i - len), (long long)len);
            pgd_tensor_destroy(a);
            pgd_tensor_destroy(b);
            pgd_tensor_destroy(y);
            free(ha);
            free(hb);
            free(hy);
            free(want);
        }
        /* Mismatched shapes are refused with both shapes named. */
        int64_t s1[1] = {3}, s2[1] = {4};
        pgd_tensor *a = NULL, *b = NULL;
        PGD_CHECK_OK(pgd_tensor_create(ctx, 1, s1, &a, &err), &err);
        PGD_CHECK_OK(pgd_tensor_create(ctx, 1, s2, &b, &err), &err);
        ck_assert_int_eq(pgd_add(ctx, a, b, b, &err), PGD_ERR_SHAPE);
        ck_assert(strstr(pgd_error_get_message(err), "[3]") &&
                  strstr(pgd_error_get_message(err), "[4]"));
        pgd_error_destroy(err);
        pgd_tensor_destroy(a);
        pgd_tensor_destroy(b);
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

START_TEST(profile_counts_launches)
{
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    for (size_t di = 0; di < n; di++) {
        pgd_ctx *ctx = pgd_test_ctx(&d[di]);
        pgd_ctx_set_profiling(ctx, 1);
        pgd_error *err = NULL;
        int64_t shape[1] = {4096};
        pgd_tensor *t = NULL;
        PGD_CHECK_OK(pgd_tensor_create(ctx, 1, shape, &t, &err), &err);
        for (int i = 0; i < 7; i++)
            PGD_CHECK_OK(pgd_scale(ctx, t, 1.0f, t, &err), &err);
        PGD_CHECK_OK(pgd_add(ctx, t, t, t, &err), &err);
        FILE *f = tmpfile();
        ck_assert_ptr_nonnull(f);
        PGD_CHECK_OK(pgd_profile_print(ctx, f, &err), &err);
        rewind(f);
        char line[512];
        int saw_scale = 0, saw_add = 0;
        while (fgets(line, sizeof line, f)) {
            unsigned long launches = 0;
            if (sscanf(line, "elementwise_scale %lu", &launches) == 1)
                saw_scale = launches == 7;
            if (sscanf(line, "elementwise_add %lu", &launches) == 1)
                saw_add = launches == 1;
        }
        fclose(f);
        ck_assert_msg(saw_scale && saw_add, "%s: profile table lacks the launch counts",
                      d[di].name);
        pgd_profile_reset(ctx);
        pgd_tensor_destroy(t);
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("elementwise");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, scale_and_add_random_sizes);
    tcase_add_test(tc, profile_counts_launches);
    suite_add_tcase(s, tc);
    return pgd_test_run(s);
}
