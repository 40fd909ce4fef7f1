/* test_program.c — building programs: embedded sources, build options, build logs,
 * kernel sources from a directory (kernel_dir), the in-memory table. Runs on every device. */
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

/* A context on device d with the disk cache off, so that every build below is from source, and
 * kernel sources from `kernel_dir` (NULL: as meson's environment says, the embedded ones). */
static pgd_ctx *ctx_cache_off(const pgd_device_info *d, const char *kernel_dir)
{
    pgd_ctx_options o;
    pgd_test_options(d, NULL, &o);
    o.cache_dir = "off";
    if (kernel_dir)
        o.kernel_dir = kernel_dir;
    return pgd_test_ctx_opts(&o);
}

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
    ck_assert(strstr(pgd_error_get_message(err), "no_such_file") != NULL);
    pgd_error_destroy(err);
}
END_TEST

START_TEST(syntax_error_returns_log)
{
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    for (size_t i = 0; i < n; i++) {
        pgd_ctx *ctx = ctx_cache_off(&d[i], NULL);
        pgd_error *err = NULL;
        cl_program prog = NULL;
        int rc =
            pgd__program_get_source(ctx, "broken", broken_src, "-DPGD_TEST_OPTION=3", &prog, &err);
        ck_assert_int_eq(rc, PGD_ERR_BUILD);
        ck_assert_ptr_null(prog);
        const char *m = pgd_error_get_message(err);
        ck_assert_msg(strstr(m, d[i].name) != NULL, "device name missing: %s", m);
        ck_assert_msg(strstr(m, "-DPGD_TEST_OPTION=3") != NULL, "options missing: %s", m);
        ck_assert_msg(strstr(m, "clBuildProgram") != NULL, "call missing: %s", m);
        const char *log = pgd_error_get_log(err);
        ck_assert_ptr_nonnull(log);
        ck_assert_msg(strstr(log, "this_is_not_defined") != NULL || strstr(log, "error") != NULL,
                      "build log on %s does not show the error: %s", d[i].name, log);
        pgd_error_destroy(err);
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

START_TEST(memory_table_and_options)
{
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    for (size_t i = 0; i < n; i++) {
        pgd_ctx *ctx = ctx_cache_off(&d[i], NULL);
        pgd_error *err = NULL;
        cl_kernel k1 = NULL, k2 = NULL, k3 = NULL;
        PGD_CHECK_OK(pgd__kernel_get(ctx, "elementwise", NULL, "elementwise_scale", &k1, &err),
                     &err);
        PGD_CHECK_OK(pgd__kernel_get(ctx, "elementwise", NULL, "elementwise_add", &k2, &err), &err);
        pgd_build_stats st;
        pgd_ctx_get_build_stats(ctx, &st);
        ck_assert_uint_eq(st.source_builds, 1);
        ck_assert_uint_eq(st.memory_hits, 1);
        ck_assert_uint_eq(st.disk_writes, 0); /* caching is off */
        /* Other options are another program. */
        PGD_CHECK_OK(
            pgd__kernel_get(ctx, "elementwise", "-DUNUSED=1", "elementwise_add", &k3, &err), &err);
        ck_assert_ptr_ne(k2, k3);
        pgd_ctx_get_build_stats(ctx, &st);
        ck_assert_uint_eq(st.source_builds, 2);
        ck_assert_int_eq(pgd__kernel_get(ctx, "elementwise", NULL, "nope", &k1, &err),
                         PGD_ERR_NOT_FOUND);
        ck_assert(strstr(pgd_error_get_message(err), "nope") != NULL);
        pgd_error_destroy(err);
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

START_TEST(cl_dir_override)
{
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
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    pgd_ctx *ctx = ctx_cache_off(&d[0], dir);
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
    ctx = ctx_cache_off(&d[0], dir);
    cl_kernel k;
    ck_assert_int_eq(pgd__kernel_get(ctx, "elementwise", NULL, "elementwise_scale", &k, &err),
                     PGD_ERR_NOT_FOUND);
    ck_assert(strstr(pgd_error_get_message(err), "elementwise.cl") != NULL);
    pgd_error_destroy(err);
    pgd_ctx_destroy(ctx);
    pgd_test_rmtree(dir);
    free(dir);
}
END_TEST

/* The argument helper: arguments set in order reach the kernel; the first failing one is
 * reported with its index, the kernel, the device and OpenCL's own code, and the calls after a
 * failure change nothing. elementwise_scale(x, y, float a, uint n) is a real kernel. */
START_TEST(kernel_args_checked)
{
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    for (size_t i = 0; i < n; i++) {
        pgd_ctx *ctx = pgd_test_ctx(&d[i]);
        pgd_error *err = NULL;
        cl_kernel k;
        PGD_CHECK_OK(pgd__kernel_get(ctx, "elementwise", NULL, "elementwise_scale", &k, &err),
                     &err);
        int64_t shape[1] = {4};
        float x[4] = {1, 2, 3, 4}, y[4];
        pgd_tensor *tx = pgd_test_upload(ctx, 1, shape, x), *ty = NULL;
        PGD_CHECK_OK(pgd_tensor_create(ctx, 1, shape, &ty, &err), &err);

        /* A cl_mem argument given 4 bytes: OpenCL says CL_INVALID_ARG_SIZE (a driver may
         * prefer CL_INVALID_MEM_OBJECT). Argument 3 is wrong too, but the first failure is
         * the one reported. */
        pgd__args a;
        pgd__args_begin(&a, ctx, k, "elementwise_scale");
        pgd__arg_mem(&a, tx->buf);
        cl_int four = 0;
        pgd__arg(&a, sizeof four, &four);
        pgd__arg_float(&a, 2.0f);
        pgd__arg_long(&a, 4);
        ck_assert_uint_eq(a.failed, 1);
        ck_assert_uint_eq(a.next, 4);
        int rc = pgd__args_end(&a, &err);
        ck_assert_int_ne(rc, PGD_OK);
        cl_int cl = pgd_error_get_cl_code(err);
        ck_assert_msg(cl == CL_INVALID_ARG_SIZE || cl == CL_INVALID_MEM_OBJECT,
                      "%s: clSetKernelArg of a 4-byte cl_mem gave %s (%d)", d[i].name,
                      pgd_cl_error_name(cl), (int)cl);
        ck_assert_int_eq(rc, pgd__status_from_cl(cl));
        const char *m = pgd_error_get_message(err);
        ck_assert_msg(strstr(m, "clSetKernelArg") != NULL, "call missing: %s", m);
        ck_assert_msg(strstr(m, pgd_cl_error_name(cl)) != NULL, "CL code missing: %s", m);
        ck_assert_msg(strstr(m, "argument 1 of kernel 'elementwise_scale'") != NULL,
                      "argument or kernel missing: %s", m);
        ck_assert_msg(strstr(m, d[i].name) != NULL, "device name missing: %s", m);
        pgd_error_destroy(err);
        err = NULL;

        /* An index past the kernel's arguments, reached with seek. */
        pgd__args_begin(&a, ctx, k, "elementwise_scale");
        pgd__args_seek(&a, 7);
        pgd__arg_uint(&a, 4);
        ck_assert_int_ne(pgd__args_end(&a, &err), PGD_OK);
        ck_assert_int_eq(pgd_error_get_cl_code(err), CL_INVALID_ARG_INDEX);
        m = pgd_error_get_message(err);
        ck_assert_msg(strstr(m, "argument 7 of kernel 'elementwise_scale'") != NULL,
                      "argument or kernel missing: %s", m);
        pgd_error_destroy(err);
        err = NULL;

        /* Set right, the values reach the kernel (the float and the uint by value). */
        pgd__args_begin(&a, ctx, k, "elementwise_scale");
        pgd__arg_mem(&a, tx->buf);
        pgd__arg_mem(&a, ty->buf);
        pgd__arg_float(&a, 3.0f);
        pgd__arg_uint(&a, 4);
        PGD_CHECK_OK(pgd__args_end(&a, &err), &err);
        ck_assert_ptr_null(err);
        size_t g = 4;
        PGD_CHECK_OK(pgd__enqueue(ctx, k, "elementwise_scale", 1, &g, NULL, &err), &err);
        PGD_CHECK_OK(pgd_tensor_download(ty, y, &err), &err);
        for (int j = 0; j < 4; j++)
            ck_assert_float_eq(y[j], 3.0f * x[j]);
        pgd_tensor_destroy(tx);
        pgd_tensor_destroy(ty);
        pgd_ctx_destroy(ctx);
    }
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
    tcase_add_test(tc, kernel_args_checked);
    suite_add_tcase(s, tc);
    return pgd_test_run(s);
}
