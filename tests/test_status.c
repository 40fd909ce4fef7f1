/* test_status.c — status names and messages, OpenCL error names, the error object. */
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "internal.h" /* white-box: reaches library internals */

static const int all_codes[] = {
#define X(name, value, msg) value,
    PGD_STATUS_MAP(X)
#undef X
};

START_TEST(names_and_messages)
{
    for (size_t i = 0; i < sizeof all_codes / sizeof all_codes[0]; i++) {
        const char *n = pgd_status_name(all_codes[i]);
        ck_assert_msg(strncmp(n, "PGD_", 4) == 0 && strcmp(n, "PGD_UNKNOWN") != 0,
                      "code %d has name %s", all_codes[i], n);
        ck_assert_str_ne(pgd_status_str(all_codes[i]), "unknown status");
        for (size_t j = 0; j < i; j++)
            ck_assert_int_ne(all_codes[i], all_codes[j]);
    }
    ck_assert_str_eq(pgd_status_name(PGD_OK), "PGD_OK");
    ck_assert_str_eq(pgd_status_name(PGD_ERR_BUILD), "PGD_ERR_BUILD");
    ck_assert_int_eq(PGD_ERR_BUILD, CL_BUILD_PROGRAM_FAILURE);
    ck_assert_int_eq(PGD_ERR_OUT_OF_RESOURCES, CL_OUT_OF_RESOURCES);
    ck_assert_str_eq(pgd_status_name(12345), "PGD_UNKNOWN");
    ck_assert_str_eq(pgd_status_str(12345), "unknown status");
}
END_TEST

START_TEST(cl_error_names)
{
    ck_assert_str_eq(pgd_cl_error_name(CL_OUT_OF_RESOURCES), "CL_OUT_OF_RESOURCES");
    ck_assert_str_eq(pgd_cl_error_name(CL_INVALID_WORK_GROUP_SIZE), "CL_INVALID_WORK_GROUP_SIZE");
    ck_assert_str_eq(pgd_cl_error_name(-9999), "CL_UNKNOWN_ERROR");
    for (int c = 0; c >= -68; c--) {
        const char *n = pgd_cl_error_name(c);
        ck_assert(n != NULL && strncmp(n, "CL_", 3) == 0);
    }
    ck_assert_int_eq(pgd__status_from_cl(CL_MEM_OBJECT_ALLOCATION_FAILURE), PGD_ERR_ALLOCATION);
    ck_assert_int_eq(pgd__status_from_cl(CL_OUT_OF_HOST_MEMORY), PGD_ERR_OUT_OF_HOST_MEMORY);
    ck_assert_int_eq(pgd__status_from_cl(CL_INVALID_KERNEL_ARGS), PGD_ERR_OPENCL);
}
END_TEST

START_TEST(error_object)
{
    pgd_error *err = NULL;
    int rc = pgd__error_set(&err, PGD_ERR_SHAPE, "tensor %s is [%d]", "x", 3);
    ck_assert_int_eq(rc, PGD_ERR_SHAPE);
    ck_assert_ptr_nonnull(err);
    ck_assert_int_eq(pgd_error_get_code(err), PGD_ERR_SHAPE);
    ck_assert_str_eq(pgd_error_get_message(err), "tensor x is [3]");
    ck_assert_str_eq(pgd_error_get_summary(err), pgd_status_str(PGD_ERR_SHAPE));
    ck_assert_ptr_null(pgd_error_get_log(err));
    /* Set at most once: the first cause stays. */
    rc = pgd__error_set(&err, PGD_ERR_IO, "second");
    ck_assert_int_eq(rc, PGD_ERR_IO);
    ck_assert_str_eq(pgd_error_get_message(err), "tensor x is [3]");
    pgd_error_destroy(err);

    /* A NULL out-parameter is allowed everywhere. */
    ck_assert_int_eq(pgd__error_set(NULL, PGD_ERR_IO, "ignored"), PGD_ERR_IO);
    pgd_error_destroy(NULL);

    err = NULL;
    rc = pgd__cl_fail(&err, CL_OUT_OF_RESOURCES, "clEnqueueNDRangeKernel", "kernel '%s'", "k");
    ck_assert_int_eq(rc, PGD_ERR_OUT_OF_RESOURCES);
    ck_assert_int_eq(pgd_error_get_cl_code(err), CL_OUT_OF_RESOURCES);
    const char *m = pgd_error_get_message(err);
    ck_assert_msg(strstr(m, "clEnqueueNDRangeKernel") && strstr(m, "CL_OUT_OF_RESOURCES") &&
                      strstr(m, "(-5)") && strstr(m, "kernel 'k'"),
                  "message: %s", m);
    pgd__error_set_log(&err, "line 1: error");
    ck_assert_str_eq(pgd_error_get_log(err), "line 1: error");
    pgd_error_destroy(err);
}
END_TEST

/* The public pgd_error_set: the library's contract for code outside it. */
/* The running library's version is the header's, and the number orders as the string does. */
START_TEST(version)
{
    ck_assert_int_eq(pgd_version(), PGD_VERSION_NUMBER);
    ck_assert_str_eq(pgd_version_string(), PGD_VERSION_STRING);
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", PGD_VERSION_MAJOR, PGD_VERSION_MINOR,
             PGD_VERSION_PATCH);
    ck_assert_str_eq(want, PGD_VERSION_STRING);
    ck_assert_int_eq(PGD_VERSION_NUMBER,
                     PGD_VERSION_MAJOR * 10000 + PGD_VERSION_MINOR * 100 + PGD_VERSION_PATCH);
}
END_TEST

START_TEST(public_error_set)
{
    pgd_error *err = NULL;
    int rc = pgd_error_set(&err, PGD_ERR_IO, "reading '%s': %d of %zu bytes, %.2f%%", "w.bin", 7,
                           (size_t)16, 43.75);
    ck_assert_int_eq(rc, PGD_ERR_IO);
    ck_assert_ptr_nonnull(err);
    ck_assert_int_eq(pgd_error_get_code(err), PGD_ERR_IO);
    ck_assert_str_eq(pgd_error_get_message(err), "reading 'w.bin': 7 of 16 bytes, 43.75%");
    ck_assert_str_eq(pgd_error_get_summary(err), pgd_status_str(PGD_ERR_IO));
    ck_assert_int_eq(pgd_error_get_cl_code(err), 0);
    ck_assert_ptr_null(pgd_error_get_log(err));
    /* Set once: a second call returns its own code but keeps the first error. */
    pgd_error *first = err;
    rc = pgd_error_set(&err, PGD_ERR_SHAPE, "second %d", 2);
    ck_assert_int_eq(rc, PGD_ERR_SHAPE);
    ck_assert_ptr_eq(err, first);
    ck_assert_int_eq(pgd_error_get_code(err), PGD_ERR_IO);
    ck_assert_str_eq(pgd_error_get_message(err), "reading 'w.bin': 7 of 16 bytes, 43.75%");
    /* The library's own errors keep it too, and it keeps theirs. */
    ck_assert_int_eq(pgd__error_set(&err, PGD_ERR_BUILD, "internal"), PGD_ERR_BUILD);
    ck_assert_int_eq(pgd_error_get_code(err), PGD_ERR_IO);
    pgd_error_destroy(err);
    err = NULL;
    pgd__error_set(&err, PGD_ERR_TOO_LARGE, "from the library");
    ck_assert_int_eq(pgd_error_set(&err, PGD_ERR_IO, "from a model"), PGD_ERR_IO);
    ck_assert_str_eq(pgd_error_get_message(err), "from the library");
    pgd_error_destroy(err);

    /* A NULL out-parameter: the code comes back, nothing else happens. */
    ck_assert_int_eq(pgd_error_set(NULL, PGD_ERR_INVALID_ARGUMENT, "ignored %s", "x"),
                     PGD_ERR_INVALID_ARGUMENT);

    /* A message of no length, one with a literal percent sign, and one past any fixed buffer
     * (cut, but still a NUL-terminated prefix of the text). */
    err = NULL;
    pgd_error_set(&err, PGD_ERR_UNSUPPORTED, "%s", "");
    ck_assert_str_eq(pgd_error_get_message(err), "");
    pgd_error_destroy(err);
    err = NULL;
    pgd_error_set(&err, PGD_ERR_UNSUPPORTED, "100%% of %s", "it");
    ck_assert_str_eq(pgd_error_get_message(err), "100% of it");
    pgd_error_destroy(err);
    static char longtext[10000];
    memset(longtext, 'a', sizeof longtext - 1);
    err = NULL;
    pgd_error_set(&err, PGD_ERR_IO, "%s!", longtext);
    const char *m = pgd_error_get_message(err);
    ck_assert_uint_gt(strlen(m), 100);
    ck_assert_uint_le(strlen(m), sizeof longtext);
    ck_assert_int_eq(strncmp(m, longtext, strlen(m) < 9999 ? strlen(m) : 9999), 0);
    pgd_error_destroy(err);
    /* Every status code round-trips, with its summary. */
    for (size_t i = 0; i < sizeof all_codes / sizeof all_codes[0]; i++) {
        if (all_codes[i] == PGD_OK)
            continue;
        err = NULL;
        ck_assert_int_eq(pgd_error_set(&err, all_codes[i], "code %d", all_codes[i]), all_codes[i]);
        ck_assert_int_eq(pgd_error_get_code(err), all_codes[i]);
        ck_assert_str_eq(pgd_error_get_summary(err), pgd_status_str(all_codes[i]));
        pgd_error_destroy(err);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("status");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, names_and_messages);
    tcase_add_test(tc, cl_error_names);
    tcase_add_test(tc, error_object);
    tcase_add_test(tc, version);
    tcase_add_test(tc, public_error_set);
    suite_add_tcase(s, tc);
    return pgd_test_run(s);
}
