/* test_kernel.c — custom kernels (pgd_kernel_*) on every device: a saxpy with a local-memory
 * reduction checked against the host, build and argument errors, launch checks, separate
 * arguments per handle, the program table's cache. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* y = a·x + y over n elements; partial[g] = the sum of work-group g's new y (a tree in local
 * memory, so the work-group size must be a power of two). */
static const char *saxpy_src =
    "__kernel void saxpy_sum(__global const float *x, __global float *y, float a, int n,\n"
    "                        __local float *scratch, __global float *partial)\n"
    "{\n"
    "    int g = (int)get_global_id(0), l = (int)get_local_id(0), L = (int)get_local_size(0);\n"
    "    float v = 0.0f;\n"
    "    if (g < n) {\n"
    "        v = a * x[g] + y[g];\n"
    "        y[g] = v;\n"
    "    }\n"
    "    scratch[l] = v;\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    for (int s = L / 2; s > 0; s >>= 1) {\n"
    "        if (l < s)\n"
    "            scratch[l] += scratch[l + s];\n"
    "        barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    }\n"
    "    if (l == 0)\n"
    "        partial[get_group_id(0)] = scratch[0];\n"
    "}\n"
    "__kernel void scale(__global const float *x, __global float *y, float a)\n"
    "{\n"
    "    size_t i = get_global_id(0);\n"
    "    y[i] = a * x[i];\n"
    "}\n";

static pgd_kernel *create(pgd_ctx *ctx, const char *function)
{
    pgd_kernel *k = NULL;
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_kernel_create(ctx, "test_saxpy", saxpy_src, NULL, function, &k, &err), &err);
    ck_assert_ptr_nonnull(k);
    return k;
}

static size_t pow2_floor(size_t v)
{
    size_t p = 1;
    while (p * 2 <= v)
        p *= 2;
    return p;
}

START_TEST(saxpy_reduction)
{
    size_t nd;
    const pgd_device_info *d = pgd_test_devices(&nd);
    for (size_t di = 0; di < nd; di++) {
        pgd_ctx *ctx = pgd_test_ctx(&d[di]);
        pgd_kernel *k = create(ctx, "saxpy_sum");
        size_t maxwg = pgd_kernel_get_max_work_group(k),
               pref = pgd_kernel_get_preferred_work_group(k);
        ck_assert_uint_ge(maxwg, 1);
        ck_assert_uint_ge(pref, 1);
        ck_assert_uint_le(pref, maxwg);
        pgd_rng r;
        pgd_rng_seed(&r, 17);
        /* The preferred size, the largest, and 1 (a group of one item). */
        size_t sizes[3] = {pow2_floor(pref), pow2_floor(maxwg > 256 ? 256 : maxwg), 1};
        for (int si = 0; si < 3; si++) {
            size_t local = sizes[si];
            int n = (int)pgd_rng_int(&r, 1, 5000);
            size_t global = (size_t)(n + (int)local - 1) / local * local, groups = global / local;
            int64_t len = n, glen = (int64_t)groups;
            float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
            float *gy = malloc((size_t)n * sizeof *gy), *gp = malloc(groups * sizeof *gp);
            for (int i = 0; i < n; i++) {
                x[i] = pgd_rng_float(&r);
                y[i] = pgd_rng_float(&r);
            }
            float a = 1.5f + pgd_rng_float(&r);
            pgd_tensor *tx = pgd_test_upload(ctx, 1, &len, x),
                       *ty = pgd_test_upload(ctx, 1, &len, y);
            pgd_tensor *tp = NULL;
            pgd_error *err = NULL;
            PGD_CHECK_OK(pgd_tensor_create(ctx, 1, &glen, &tp, &err), &err);
            PGD_CHECK_OK(pgd_kernel_set_tensor(k, 0, tx, &err), &err);
            PGD_CHECK_OK(pgd_kernel_set_tensor(k, 1, ty, &err), &err);
            PGD_CHECK_OK(pgd_kernel_set_value(k, 2, sizeof a, &a, &err), &err);
            PGD_CHECK_OK(pgd_kernel_set_value(k, 3, sizeof n, &n, &err), &err);
            PGD_CHECK_OK(pgd_kernel_set_local(k, 4, local * sizeof(float), &err), &err);
            PGD_CHECK_OK(pgd_kernel_set_tensor(k, 5, tp, &err), &err);
            PGD_CHECK_OK(pgd_kernel_launch(k, 1, &global, &local, &err), &err);
            PGD_CHECK_OK(pgd_tensor_download(ty, gy, &err), &err);
            PGD_CHECK_OK(pgd_tensor_download(tp, gp, &err), &err);
            double *want = malloc((size_t)n * sizeof *want), *wp = calloc(groups, sizeof *wp);
            for (int i = 0; i < n; i++) {
                want[i] = (double)a * x[i] + y[i];
                wp[(size_t)i / local] += want[i];
            }
            char what[160];
            snprintf(what, sizeof what, "%s: saxpy n=%d local=%zu", d[di].name, n, local);
            ck_assert_msg(pgd_test_allclose(gy, want, (size_t)n, 1e-6, 1e-6, what), "%s", what);
            /* A tree over `local` values of magnitude <= 2.5: log2(local) roundings. */
            ck_assert_msg(pgd_test_allclose(gp, wp, groups, 1e-5, 1e-5 * (double)local, what),
                          "%s: partial sums", what);
            pgd_tensor_destroy(tx);
            pgd_tensor_destroy(ty);
            pgd_tensor_destroy(tp);
            free(x);
            free(y);
            free(gy);
            free(gp);
            free(want);
            free(wp);
        }
        pgd_kernel_destroy(k);
        pgd_kernel_destroy(NULL);
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

START_TEST(build_and_name_errors)
{
    size_t nd;
    const pgd_device_info *d = pgd_test_devices(&nd);
    for (size_t di = 0; di < nd; di++) {
        pgd_ctx *ctx = pgd_test_ctx(&d[di]);
        pgd_kernel *k = (pgd_kernel *)&k; /* any non-NULL value: must become NULL */
        pgd_error *err = NULL;
        const char *bad = "__kernel void broken(__global float *y) { y[0] = undeclared_thing; }\n";
        int rc = pgd_kernel_create(ctx, "test_broken", bad, NULL, "broken", &k, &err);
        ck_assert_msg(rc == PGD_ERR_BUILD, "%s: bad source gave %s", d[di].name,
                      pgd_status_name(rc));
        ck_assert_ptr_null(k);
        ck_assert_ptr_nonnull(err);
        ck_assert_int_eq(pgd_error_get_code(err), PGD_ERR_BUILD);
        ck_assert_msg(pgd_error_get_log(err) && *pgd_error_get_log(err), "%s: no build log",
                      d[di].name);
        ck_assert_msg(strstr(pgd_error_get_log(err), "undeclared_thing") != NULL,
                      "%s: the log does not point at the error: %s", d[di].name,
                      pgd_error_get_log(err));
        pgd_error_destroy(err);
        err = NULL;

        k = (pgd_kernel *)&k;
        rc = pgd_kernel_create(ctx, "test_saxpy", saxpy_src, NULL, "no_such_function", &k, &err);
        ck_assert_int_ne(rc, PGD_OK);
        ck_assert_ptr_null(k);
        ck_assert_msg(strstr(pgd_error_get_message(err), "no_such_function") != NULL, "%s",
                      pgd_error_get_message(err));
        pgd_error_destroy(err);
        err = NULL;

        /* Missing pieces. */
        ck_assert_int_eq(pgd_kernel_create(ctx, "", saxpy_src, NULL, "scale", &k, &err),
                         PGD_ERR_INVALID_ARGUMENT);
        ck_assert_ptr_null(k);
        pgd_error_destroy(err);
        err = NULL;
        ck_assert_int_eq(pgd_kernel_create(ctx, "x", NULL, NULL, "scale", &k, NULL),
                         PGD_ERR_INVALID_ARGUMENT);
        ck_assert_int_eq(pgd_kernel_create(ctx, "x", saxpy_src, NULL, "", &k, NULL),
                         PGD_ERR_INVALID_ARGUMENT);
        ck_assert_int_eq(pgd_kernel_create(ctx, "x", saxpy_src, NULL, NULL, &k, NULL),
                         PGD_ERR_INVALID_ARGUMENT);
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

START_TEST(argument_and_launch_errors)
{
    size_t nd;
    const pgd_device_info *d = pgd_test_devices(&nd);
    for (size_t di = 0; di < nd; di++) {
        pgd_ctx *ctx = pgd_test_ctx(&d[di]), *other = pgd_test_ctx(&d[di]);
        pgd_kernel *k = create(ctx, "saxpy_sum");
        pgd_error *err = NULL;
        int64_t len = 64, one = 1;
        float xs[64], ys[64], got[64], part = 0;
        for (int i = 0; i < 64; i++) {
            xs[i] = (float)i;
            ys[i] = 1.0f;
        }
        pgd_tensor *tx = pgd_test_upload(ctx, 1, &len, xs), *ty = pgd_test_upload(ctx, 1, &len, ys);
        pgd_tensor *tp = pgd_test_upload(ctx, 1, &one, &part),
                   *far = pgd_test_upload(other, 1, &len, xs);
        size_t global = 64, local = 8;

        /* Launching with no argument set is an error naming the kernel, not a crash. */
        int rc = pgd_kernel_launch(k, 1, &global, &local, &err);
        ck_assert_int_ne(rc, PGD_OK);
        ck_assert_msg(strstr(pgd_error_get_message(err), "saxpy_sum") != NULL, "%s",
                      pgd_error_get_message(err));
        pgd_error_destroy(err);
        err = NULL;

        /* A double where a float is wanted: the index and the kernel are named. */
        double wide = 2.0;
        rc = pgd_kernel_set_value(k, 2, sizeof wide, &wide, &err);
        ck_assert_int_ne(rc, PGD_OK);
        const char *m = pgd_error_get_message(err);
        ck_assert_msg(strstr(m, "argument 2") && strstr(m, "saxpy_sum"), "%s", m);
        pgd_error_destroy(err);
        err = NULL;
        ck_assert_int_ne(pgd_kernel_set_value(k, 3, 2, &wide, NULL), PGD_OK);
        ck_assert_int_eq(pgd_kernel_set_value(k, 3, 4, NULL, &err), PGD_ERR_INVALID_ARGUMENT);
        ck_assert_msg(strstr(pgd_error_get_message(err), "saxpy_sum"), "%s",
                      pgd_error_get_message(err));
        pgd_error_destroy(err);
        err = NULL;
        /* Past the last argument; local memory of no bytes; a tensor of another context. */
        float f = 1.0f;
        rc = pgd_kernel_set_value(k, 6, sizeof f, &f, &err);
        ck_assert_int_ne(rc, PGD_OK);
        ck_assert_msg(strstr(pgd_error_get_message(err), "argument 6"), "%s",
                      pgd_error_get_message(err));
        pgd_error_destroy(err);
        err = NULL;
        ck_assert_int_ne(pgd_kernel_set_local(k, 4, 0, &err), PGD_OK);
        ck_assert_msg(strstr(pgd_error_get_message(err), "argument 4"), "%s",
                      pgd_error_get_message(err));
        pgd_error_destroy(err);
        err = NULL;
        ck_assert_int_eq(pgd_kernel_set_tensor(k, 0, far, &err), PGD_ERR_INVALID_ARGUMENT);
        ck_assert_msg(strstr(pgd_error_get_message(err), "argument 0") &&
                          strstr(pgd_error_get_message(err), "saxpy_sum"),
                      "%s", pgd_error_get_message(err));
        pgd_error_destroy(err);
        err = NULL;
        ck_assert_int_eq(pgd_kernel_set_tensor(k, 0, NULL, NULL), PGD_ERR_INVALID_ARGUMENT);

        /* Set in order, one refused on the way and then set right: a refusal already reported
         * must not fail a later launch. */
        float a = 2.0f;
        int n = 64;
        PGD_CHECK_OK(pgd_kernel_set_tensor(k, 0, tx, &err), &err);
        PGD_CHECK_OK(pgd_kernel_set_tensor(k, 1, ty, &err), &err);
        ck_assert_int_ne(pgd_kernel_set_value(k, 2, sizeof wide, &wide, NULL), PGD_OK);
        PGD_CHECK_OK(pgd_kernel_set_value(k, 2, sizeof a, &a, &err), &err);
        PGD_CHECK_OK(pgd_kernel_set_value(k, 3, sizeof n, &n, &err), &err);
        PGD_CHECK_OK(pgd_kernel_set_local(k, 4, local * sizeof(float), &err), &err);
        PGD_CHECK_OK(pgd_kernel_set_tensor(k, 5, tp, &err), &err);

        /* Launch shapes: not a multiple, a zero local size, 0 or 4 dimensions, no global. */
        size_t g2[2] = {64, 4}, l2[2] = {8, 3};
        size_t bad_local = 24, zero = 0;
        rc = pgd_kernel_launch(k, 1, &global, &bad_local, &err);
        ck_assert_int_eq(rc, PGD_ERR_INVALID_ARGUMENT);
        ck_assert_msg(strstr(pgd_error_get_message(err), "saxpy_sum") &&
                          strstr(pgd_error_get_message(err), "24"),
                      "%s", pgd_error_get_message(err));
        pgd_error_destroy(err);
        err = NULL;
        ck_assert_int_eq(pgd_kernel_launch(k, 2, g2, l2, &err), PGD_ERR_INVALID_ARGUMENT);
        ck_assert_msg(strstr(pgd_error_get_message(err), "dimension 1"), "%s",
                      pgd_error_get_message(err));
        pgd_error_destroy(err);
        err = NULL;
        ck_assert_int_eq(pgd_kernel_launch(k, 1, &global, &zero, NULL), PGD_ERR_INVALID_ARGUMENT);
        ck_assert_int_eq(pgd_kernel_launch(k, 0, &global, &local, NULL), PGD_ERR_INVALID_ARGUMENT);
        ck_assert_int_eq(pgd_kernel_launch(k, 4, &global, &local, NULL), PGD_ERR_INVALID_ARGUMENT);
        ck_assert_int_eq(pgd_kernel_launch(k, 1, NULL, &local, NULL), PGD_ERR_INVALID_ARGUMENT);
        /* None of the refused launches ran: y is still 1. */
        PGD_CHECK_OK(pgd_tensor_download(ty, got, &err), &err);
        for (int i = 0; i < 64; i++)
            ck_assert_float_eq(got[i], 1.0f);

        PGD_CHECK_OK(pgd_kernel_launch(k, 1, &global, &local, &err), &err);
        PGD_CHECK_OK(pgd_tensor_download(ty, got, &err), &err);
        for (int i = 0; i < 64; i++)
            ck_assert_float_eq(got[i], 2.0f * (float)i + 1.0f);
        pgd_kernel_destroy(k);
        pgd_tensor_destroy(tx);
        pgd_tensor_destroy(ty);
        pgd_tensor_destroy(tp);
        pgd_tensor_destroy(far);
        pgd_ctx_destroy(other);
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

/* Two handles of one function: each keeps its own arguments, and the program is built once. */
/* The caller's programs live beside the library's: a custom program named like an embedded
 * kernel file ("elementwise") neither replaces it nor is replaced by it, and two sources under
 * one name are two programs. */
START_TEST(names_do_not_collide)
{
    static const char *src_a =
        "__kernel void mine(__global float *y) { y[get_global_id(0)] = 7.0f; }\n";
    static const char *src_b =
        "__kernel void mine(__global float *y) { y[get_global_id(0)] = 9.0f; }\n";
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    for (size_t i = 0; i < n; i++) {
        pgd_ctx *ctx = pgd_test_ctx(&d[i]);
        pgd_error *err = NULL;
        int64_t len = 8;
        float x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, got[8];
        pgd_tensor *t = pgd_test_upload(ctx, 1, &len, x);
        PGD_CHECK_OK(pgd_scale(ctx, t, 2.0f, t, &err), &err); /* builds "elementwise" */
        pgd_kernel *ka = NULL, *kb = NULL;
        PGD_CHECK_OK(pgd_kernel_create(ctx, "elementwise", src_a, NULL, "mine", &ka, &err), &err);
        PGD_CHECK_OK(pgd_kernel_create(ctx, "elementwise", src_b, NULL, "mine", &kb, &err), &err);
        size_t global = 8;
        PGD_CHECK_OK(pgd_kernel_set_tensor(ka, 0, t, &err), &err);
        PGD_CHECK_OK(pgd_kernel_launch(ka, 1, &global, NULL, &err), &err);
        PGD_CHECK_OK(pgd_tensor_download(t, got, &err), &err);
        ck_assert_msg(got[3] == 7.0f, "source A ran as %g", (double)got[3]);
        PGD_CHECK_OK(pgd_kernel_set_tensor(kb, 0, t, &err), &err);
        PGD_CHECK_OK(pgd_kernel_launch(kb, 1, &global, NULL, &err), &err);
        PGD_CHECK_OK(pgd_tensor_download(t, got, &err), &err);
        ck_assert_msg(got[3] == 9.0f, "source B ran as %g", (double)got[3]);
        /* The library's own program is still the embedded one. */
        PGD_CHECK_OK(pgd_scale(ctx, t, 2.0f, t, &err), &err);
        PGD_CHECK_OK(pgd_tensor_download(t, got, &err), &err);
        ck_assert_msg(got[3] == 18.0f, "pgd_scale after the custom kernels gave %g",
                      (double)got[3]);
        pgd_kernel_destroy(ka);
        pgd_kernel_destroy(kb);
        pgd_tensor_destroy(t);
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

START_TEST(separate_handles_and_cache)
{
    size_t nd;
    const pgd_device_info *d = pgd_test_devices(&nd);
    for (size_t di = 0; di < nd; di++) {
        pgd_ctx *ctx = pgd_test_ctx(&d[di]);
        pgd_build_stats s0, s1, s2;
        pgd_kernel *k1 = create(ctx, "scale");
        pgd_ctx_get_build_stats(ctx, &s0);
        pgd_kernel *k2 = create(ctx, "scale");
        pgd_ctx_get_build_stats(ctx, &s1);
        ck_assert_uint_eq(s1.memory_hits, s0.memory_hits + 1);
        ck_assert_uint_eq(s1.source_builds, s0.source_builds);
        ck_assert_uint_eq(s1.disk_hits, s0.disk_hits);
        /* Other options are another program: built (or loaded from disk), not a memory hit. */
        pgd_kernel *k3 = NULL;
        pgd_error *err = NULL;
        PGD_CHECK_OK(
            pgd_kernel_create(ctx, "test_saxpy", saxpy_src, "-DUNUSED=1", "scale", &k3, &err),
            &err);
        pgd_ctx_get_build_stats(ctx, &s2);
        ck_assert_uint_eq(s2.memory_hits, s1.memory_hits);
        ck_assert_uint_eq(s2.source_builds + s2.disk_hits, s1.source_builds + s1.disk_hits + 1);

        int64_t len = 100;
        float x[100], g1[100], g2[100];
        for (int i = 0; i < 100; i++)
            x[i] = (float)i - 50.0f;
        pgd_tensor *tx = pgd_test_upload(ctx, 1, &len, x), *y1 = NULL, *y2 = NULL;
        PGD_CHECK_OK(pgd_tensor_create(ctx, 1, &len, &y1, &err), &err);
        PGD_CHECK_OK(pgd_tensor_create(ctx, 1, &len, &y2, &err), &err);
        float a1 = 2.0f, a2 = -3.0f;
        PGD_CHECK_OK(pgd_kernel_set_tensor(k1, 0, tx, &err), &err);
        PGD_CHECK_OK(pgd_kernel_set_tensor(k1, 1, y1, &err), &err);
        PGD_CHECK_OK(pgd_kernel_set_value(k1, 2, sizeof a1, &a1, &err), &err);
        /* k2's arguments are set after k1's; k1 is launched after both. */
        PGD_CHECK_OK(pgd_kernel_set_tensor(k2, 0, tx, &err), &err);
        PGD_CHECK_OK(pgd_kernel_set_tensor(k2, 1, y2, &err), &err);
        PGD_CHECK_OK(pgd_kernel_set_value(k2, 2, sizeof a2, &a2, &err), &err);
        size_t global = 100;
        PGD_CHECK_OK(pgd_kernel_launch(k1, 1, &global, NULL, &err), &err);
        PGD_CHECK_OK(pgd_kernel_launch(k2, 1, &global, NULL, &err), &err);
        PGD_CHECK_OK(pgd_tensor_download(y1, g1, &err), &err);
        PGD_CHECK_OK(pgd_tensor_download(y2, g2, &err), &err);
        for (int i = 0; i < 100; i++) {
            ck_assert_msg(g1[i] == 2.0f * x[i], "%s: k1 y[%d] = %g", d[di].name, i, g1[i]);
            ck_assert_msg(g2[i] == -3.0f * x[i], "%s: k2 y[%d] = %g", d[di].name, i, g2[i]);
        }
        /* Destroying one handle leaves the other working. */
        pgd_kernel_destroy(k2);
        a1 = 0.5f;
        PGD_CHECK_OK(pgd_kernel_set_value(k1, 2, sizeof a1, &a1, &err), &err);
        PGD_CHECK_OK(pgd_kernel_launch(k1, 1, &global, NULL, &err), &err);
        PGD_CHECK_OK(pgd_tensor_download(y1, g1, &err), &err);
        for (int i = 0; i < 100; i++)
            ck_assert_float_eq(g1[i], 0.5f * x[i]);
        pgd_kernel_destroy(k1);
        pgd_kernel_destroy(k3);
        pgd_tensor_destroy(tx);
        pgd_tensor_destroy(y1);
        pgd_tensor_destroy(y2);
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("kernel");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, saxpy_reduction);
    tcase_add_test(tc, build_and_name_errors);
    tcase_add_test(tc, argument_and_launch_errors);
    tcase_add_test(tc, separate_handles_and_cache);
    tcase_add_test(tc, names_do_not_collide);
    suite_add_tcase(s, tc);
    return pgd_test_run(s);
}
