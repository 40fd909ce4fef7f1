/* test_program.c — building programs: embedded sources, build options, build logs,
 * PAGODA_CL_DIR, the in-memory table. Runs on every device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "internal.h" /* white-box: reaches library internals */

static const char broken_src[] = "__kernel void broken(__global float *x)\n"
                                 "{\n"
                                 "    x[0] = this_is_not_defined + ;\n"
                                 "}\n";

static void with_cache_off(void) { setenv("PAGODA_CACHE_DIR", "off", 1); }

START_TEST(embedded_sources_listed)
{
    const char *const *names = pgd_program_names();
    int found = 0;
    for (size_t i = 0; names[i]; i++)
        found |= !strcmp(names[i], "elementwise");
    ck_assert_msg(found, "elementwise.cl is not embedded");
    char *src = NULL;
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd__source_load(NULL, "elementwise", &src, &err), &err);
    ck_assert(strstr(src, "elementwise_scale") != NULL);
    free(src);
    ck_assert_int_eq(pgd__source_load(NULL, "no_such_file", &src, &err), PGD_ERR_NOT_FOUND);
    ck_assert(strstr(pgd_error_message(err), "no_such_file") != NULL);
    pgd_error_free(err);
}
END_TEST

START_TEST(syntax_error_returns_log)
{
    with_cache_off();
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    for (size_t i = 0; i < n; i++) {
        pgd_ctx *ctx = pgd_test_ctx(&d[i]);
        pgd_error *err = NULL;
        cl_program prog = NULL;
        int rc = pgd__program_get_source(ctx, "broken", broken_src, "-DPGD_TEST_OPTION=3", &prog,
                                         &err);
        ck_assert_int_eq(rc, PGD_ERR_BUILD);
        ck_assert_ptr_null(prog);
        const char *m = pgd_error_message(err);
        ck_assert_msg(strstr(m, d[i].name) != NULL, "device name missing: %s", m);
        ck_assert_msg(strstr(m, "-DPGD_TEST_OPTION=3") != NULL, "options missing: %s", m);
        ck_assert_msg(strstr(m, "clBuildProgram") != NULL, "call missing: %s", m);
        const char *log = pgd_error_log(err);
        ck_assert_ptr_nonnull(log);
        ck_assert_msg(strstr(log, "this_is_not_defined") != NULL || strstr(log, "error") != NULL,
                      "build log on %s does not show the error: %s", d[i].name, log);
        pgd_error_free(err);
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

START_TEST(memory_table_and_options)
{
    with_cache_off();
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    for (size_t i = 0; i < n; i++) {
        pgd_ctx *ctx = pgd_test_ctx(&d[i]);
        pgd_error *err = NULL;
        cl_kernel k1 = NULL, k2 = NULL, k3 = NULL;
        PGD_CHECK_OK(pgd__kernel_get(ctx, "elementwise", NULL, "elementwise_scale", &k1, &err), &err);
        PGD_CHECK_OK(pgd__kernel_get(ctx, "elementwise", NULL, "elementwise_add", &k2, &err), &err);
        pgd_build_stats st;
        pgd_ctx_build_stats(ctx, &st);
        ck_assert_uint_eq(st.source_builds, 1);
        ck_assert_uint_eq(st.memory_hits, 1);
        ck_assert_uint_eq(st.disk_writes, 0); /* caching is off */
        /* Other options are another program. */
        PGD_CHECK_OK(pgd__kernel_get(ctx, "elementwise", "-DUNUSED=1", "elementwise_add", &k3, &err),
                     &err);
        ck_assert_ptr_ne(k2, k3);
        pgd_ctx_build_stats(ctx, &st);
        ck_assert_uint_eq(st.source_builds, 2);
        ck_assert_int_eq(pgd__kernel_get(ctx, "elementwise", NULL, "nope", &k1, &err),
                         PGD_ERR_NOT_FOUND);
        ck_assert(strstr(pgd_error_message(err), "nope") != NULL);
        pgd_error_free(err);
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

START_TEST(cl_dir_override)
{
    with_cache_off();
    char *dir = pgd_test_tempdir("cldir");
    ck_assert_ptr_nonnull(dir);
    char path[4200];
    snprintf(path, sizeof path, "%s/elementwise.cl", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("__kernel void elementwise_scale(__global const float *x, __global float *y, float a,"
          " uint n) { uint i = get_global_id(0); if (i < n) y[i] = a * x[i] + 1.0f; }\n"
          "__kernel void elementwise_add(__global const float *a, __global const float *b,"
          " __global float *y, uint n) { uint i = get_global_id(0); if (i < n) y[i] = 0; }\n",
          f);
    fclose(f);
    setenv("PAGODA_CL_DIR", dir, 1);
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    pgd_ctx *ctx = pgd_test_ctx(&d[0]);
    pgd_error *err = NULL;
    int64_t shape[1] = {5};
    pgd_tensor *t = NULL;
    float x[5] = {1, 2, 3, 4, 5}, y[5];
    PGD_CHECK_OK(pgd_tensor_create(ctx, 1, shape, &t, &err), &err);
    PGD_CHECK_OK(pgd_tensor_upload(t, x, &err), &err);
    PGD_CHECK_OK(pgd_scale(ctx, t, 2.0f, t, &err), &err);
    PGD_CHECK_OK(pgd_tensor_download(t, y, &err), &err);
    for (int i = 0; i < 5; i++)
        ck_assert_float_eq(y[i], 2.0f * x[i] + 1.0f); /* the file's version ran, not the embedded */
    pgd_tensor_destroy(t);
    pgd_ctx_destroy(ctx);
    /* A directory without the file is a clear error naming the path. */
    unlink(path);
    ctx = pgd_test_ctx(&d[0]);
    cl_kernel k;
    ck_assert_int_eq(pgd__kernel_get(ctx, "elementwise", NULL, "elementwise_scale", &k, &err),
                     PGD_ERR_IO);
    ck_assert(strstr(pgd_error_message(err), "elementwise.cl") != NULL);
    pgd_error_free(err);
    pgd_ctx_destroy(ctx);
    unsetenv("PAGODA_CL_DIR");
    pgd_test_rmtree(dir);
    free(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("program");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, embedded_sources_listed);
    tcase_add_test(tc, syntax_error_returns_log);
    tcase_add_test(tc, memory_table_and_options);
    tcase_add_test(tc, cl_dir_override);
    suite_add_tcase(s, tc);
    return pgd_test_run(s);
}
