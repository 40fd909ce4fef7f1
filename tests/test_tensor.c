/* test_tensor.c — tensors: shapes, upload/download, limits, the buffer pool. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "internal.h" /* white-box: reaches library internals */

START_TEST(roundtrip_and_shape)
{
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    for (size_t i = 0; i < n; i++) {
        pgd_ctx *ctx = pgd_test_ctx(&d[i]);
        pgd_error *err = NULL;
        int64_t shape[3] = {2, 197, 13};
        pgd_tensor *t = NULL;
        PGD_CHECK_OK(pgd_tensor_create(ctx, 3, shape, &t, &err), &err);
        ck_assert_int_eq(pgd_tensor_get_ndim(t), 3);
        ck_assert_int_eq(pgd_tensor_get_numel(t), 2 * 197 * 13);
        ck_assert_int_eq(pgd_tensor_get_stride(t, 0), 197 * 13);
        ck_assert_int_eq(pgd_tensor_get_stride(t, 1), 13);
        ck_assert_int_eq(pgd_tensor_get_stride(t, 2), 1);
        char s[64];
        ck_assert_str_eq(pgd_tensor_shape_str(t, s, sizeof s), "[2, 197, 13]");
        size_t count = (size_t)pgd_tensor_get_numel(t);
        float *in = malloc(count * sizeof *in), *out = malloc(count * sizeof *out);
        pgd_rng r;
        pgd_rng_seed(&r, 11);
        for (size_t j = 0; j < count; j++) {
            in[j] = pgd_rng_float(&r);
            out[j] = -12345.0f;
        }
        PGD_CHECK_OK(pgd_tensor_upload(t, in, &err), &err);
        PGD_CHECK_OK(pgd_tensor_download(t, out, &err), &err);
        ck_assert_int_eq(memcmp(in, out, count * sizeof *in), 0);

        int64_t flat[2] = {394, 13};
        PGD_CHECK_OK(pgd_tensor_reshape(t, 2, flat, &err), &err);
        ck_assert_int_eq(pgd_tensor_get_dim(t, 0), 394);
        int64_t wrong[1] = {7};
        ck_assert_int_eq(pgd_tensor_reshape(t, 1, wrong, &err), PGD_ERR_SHAPE);
        ck_assert(strstr(pgd_error_get_message(err), "[394, 13]") &&
                  strstr(pgd_error_get_message(err), "[7]"));
        pgd_error_destroy(err);
        err = NULL;
        pgd_tensor_destroy(t);
        free(in);
        free(out);
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

START_TEST(bad_shapes_and_limits)
{
    if (!pgd_test_primary())
        return;
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    pgd_ctx *ctx = pgd_test_ctx(&d[0]);
    pgd_error *err = NULL;
    pgd_tensor *t = NULL;
    int64_t neg[2] = {3, -1};
    ck_assert_int_eq(pgd_tensor_create(ctx, 2, neg, &t, &err), PGD_ERR_SHAPE);
    ck_assert_ptr_null(t);
    ck_assert(strstr(pgd_error_get_message(err), "-1") != NULL);
    pgd_error_destroy(err);
    err = NULL;
    int64_t many[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    ck_assert_int_eq(pgd_tensor_create(ctx, 9, many, &t, &err), PGD_ERR_SHAPE);
    pgd_error_destroy(err);
    err = NULL;
    int64_t overflow[3] = {INT64_C(1) << 40, INT64_C(1) << 40, 16};
    ck_assert_int_eq(pgd_tensor_create(ctx, 3, overflow, &t, &err), PGD_ERR_SHAPE);
    pgd_error_destroy(err);
    err = NULL;
    /* Just above the max allocation: refused before any allocation, both sizes named. */
    uint64_t too_many = ctx->dev.max_alloc / 4 + 1;
    int64_t big[1] = {(int64_t)too_many};
    ck_assert_int_eq(pgd_tensor_create(ctx, 1, big, &t, &err), PGD_ERR_TOO_LARGE);
    char want[64];
    snprintf(want, sizeof want, "%llu", (unsigned long long)ctx->dev.max_alloc);
    ck_assert_msg(strstr(pgd_error_get_message(err), want) != NULL, "%s",
                  pgd_error_get_message(err));
    snprintf(want, sizeof want, "%llu", (unsigned long long)(too_many * 4));
    ck_assert_msg(strstr(pgd_error_get_message(err), want) != NULL, "%s",
                  pgd_error_get_message(err));
    pgd_error_destroy(err);
    err = NULL;
    /* Zero-sized tensors are legal and cost nothing to move. */
    int64_t empty[2] = {0, 5};
    PGD_CHECK_OK(pgd_tensor_create(ctx, 2, empty, &t, &err), &err);
    PGD_CHECK_OK(pgd_tensor_upload(t, NULL, &err), &err);
    pgd_tensor_destroy(t);
    pgd_ctx_destroy(ctx);
}
END_TEST

/* pgd_tensor_create_from: the data arrives exactly, shapes are checked as by create, and a
 * refused request leaves *out NULL. */
START_TEST(create_from_host)
{
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    for (size_t i = 0; i < n; i++) {
        pgd_ctx *ctx = pgd_test_ctx(&d[i]);
        pgd_error *err = NULL;
        pgd_rng r;
        pgd_rng_seed(&r, 5 + i);
        int64_t shape[3] = {3, 17, 5};
        float in[3 * 17 * 5], out[3 * 17 * 5];
        for (size_t j = 0; j < sizeof in / sizeof in[0]; j++)
            in[j] = pgd_rng_float(&r);
        pgd_tensor *t = NULL;
        PGD_CHECK_OK(pgd_tensor_create_from(ctx, 3, shape, in, &t, &err), &err);
        ck_assert_int_eq(pgd_tensor_get_ndim(t), 3);
        ck_assert_int_eq(pgd_tensor_get_dim(t, 0), 3);
        ck_assert_int_eq(pgd_tensor_get_dim(t, 1), 17);
        ck_assert_int_eq(pgd_tensor_get_dim(t, 2), 5);
        PGD_CHECK_OK(pgd_tensor_download(t, out, &err), &err);
        ck_assert_int_eq(memcmp(in, out, sizeof in), 0);
        pgd_tensor_destroy(t);
        int64_t bad[2] = {4, -2};
        t = (pgd_tensor *)&err; /* must be reset to NULL on failure */
        ck_assert_int_eq(pgd_tensor_create_from(ctx, 2, bad, in, &t, &err), PGD_ERR_SHAPE);
        ck_assert_ptr_null(t);
        ck_assert(strstr(pgd_error_get_message(err), "-2") != NULL);
        pgd_error_destroy(err);
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

START_TEST(pool_reuses_buffers)
{
    if (!pgd_test_primary())
        return;
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    pgd_ctx *ctx = pgd_test_ctx(&d[0]);
    pgd_error *err = NULL;
    int64_t shape[1] = {1000};
    pgd_tensor *a = NULL, *b = NULL;
    PGD_CHECK_OK(pgd_tensor_create(ctx, 1, shape, &a, &err), &err);
    pgd_tensor_destroy(a);
    uint64_t idle, reused;
    size_t bufs;
    pgd_ctx_get_pool_stats(ctx, &idle, &bufs, &reused);
    ck_assert_uint_eq(bufs, 1);
    ck_assert_uint_ge(idle, 4000);
    ck_assert_uint_eq(reused, 0);
    /* A slightly different size of the same class reuses the buffer. */
    shape[0] = 990;
    PGD_CHECK_OK(pgd_tensor_create(ctx, 1, shape, &b, &err), &err);
    pgd_ctx_get_pool_stats(ctx, &idle, &bufs, &reused);
    ck_assert_uint_eq(bufs, 0);
    ck_assert_uint_eq(reused, 1);
    /* and works as a tensor of its own shape */
    float in[990], out[990];
    for (int i = 0; i < 990; i++)
        in[i] = (float)i;
    PGD_CHECK_OK(pgd_tensor_upload(b, in, &err), &err);
    PGD_CHECK_OK(pgd_tensor_download(b, out, &err), &err);
    ck_assert_int_eq(memcmp(in, out, sizeof in), 0);
    pgd_tensor_destroy(b);
    pgd_ctx_destroy(ctx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tensor");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, roundtrip_and_shape);
    tcase_add_test(tc, bad_shapes_and_limits);
    tcase_add_test(tc, pool_reuses_buffers);
    tcase_add_test(tc, create_from_host);
    suite_add_tcase(s, tc);
    return pgd_test_run(s);
}
