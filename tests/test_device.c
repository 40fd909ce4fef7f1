/* test_device.c — device enumeration, capabilities, the selection rules, contexts. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static pgd_device_info fake(int p, int d, const char *name, const char *platform,
                            pgd_device_type type, unsigned cu)
{
    pgd_device_info i;
    memset(&i, 0, sizeof i);
    i.platform_index = p;
    i.device_index = d;
    snprintf(i.name, sizeof i.name, "%s", name);
    snprintf(i.platform, sizeof i.platform, "%s", platform);
    i.type = type;
    i.compute_units = cu;
    i.software_rasteriser = strstr(name, "llvmpipe") != NULL;
    return i;
}

static size_t pick(const pgd_device_info *list, size_t n, const char *sel)
{
    size_t idx = 999;
    pgd_error *err = NULL;
    int rc = pgd_device_select(list, n, sel, &idx, &err);
    ck_assert_msg(rc == PGD_OK, "selector '%s': %s", sel ? sel : "(null)",
                  pgd_error_get_message(err));
    ck_assert_uint_lt(idx, n);
    return idx;
}

static void pick_fails(const pgd_device_info *list, size_t n, const char *sel)
{
    size_t idx = 999;
    pgd_error *err = NULL;
    int rc = pgd_device_select(list, n, sel, &idx, &err);
    ck_assert_msg(rc == PGD_ERR_DEVICE_NOT_FOUND, "selector '%s' gave %s", sel,
                  pgd_status_name(rc));
    ck_assert_ptr_nonnull(err);
    const char *m = pgd_error_get_message(err);
    /* The message lists every device so the user can pick one. */
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(strstr(m, list[i].name) != NULL, "'%s' missing from: %s", list[i].name, m);
    ck_assert_uint_eq(idx, 999);
    pgd_error_destroy(err);
}

START_TEST(selection_rules)
{
    pgd_device_info l[5];
    l[0] = fake(0, 0, "pthread-haswell-AMD EPYC", "Portable Computing Language", PGD_DEVICE_CPU, 2);
    l[1] = fake(1, 0, "llvmpipe (LLVM 15.0.6, 256 bits)", "rusticl", PGD_DEVICE_CPU, 32);
    l[2] = fake(2, 0, "NVIDIA H200", "NVIDIA CUDA", PGD_DEVICE_GPU, 132);
    l[3] = fake(2, 1, "NVIDIA T4", "NVIDIA CUDA", PGD_DEVICE_GPU, 40);
    l[4] = fake(3, 0, "Big CPU", "Intel(R) OpenCL", PGD_DEVICE_CPU, 16);

    /* Default: a GPU first (the larger one), ... */
    ck_assert_uint_eq(pick(l, 5, NULL), 2);
    ck_assert_uint_eq(pick(l, 5, ""), 2);
    /* ... else the CPU with most compute units, with llvmpipe last despite its 32 units. */
    ck_assert_uint_eq(pick(l, 2, NULL), 0);
    pgd_device_info cpus[3] = {l[1], l[0], l[4]};
    ck_assert_uint_eq(pick(cpus, 3, NULL), 2);
    ck_assert_uint_eq(pick(cpus, 1, NULL), 0); /* llvmpipe alone is still usable */

    ck_assert_uint_eq(pick(l, 5, "cpu"), 4);
    ck_assert_uint_eq(pick(l, 5, "gpu"), 2);
    ck_assert_uint_eq(pick(l, 5, "2:1"), 3);
    ck_assert_uint_eq(pick(l, 5, "0:0"), 0);
    ck_assert_uint_eq(pick(l, 5, "LLVMPIPE"), 1);
    ck_assert_uint_eq(pick(l, 5, "rusticl"), 1); /* platform names match too */
    ck_assert_uint_eq(pick(l, 5, "t4"), 3);
    ck_assert_uint_eq(pick(l, 5, "portable"), 0);

    pick_fails(l, 5, "accelerator");
    pick_fails(l, 2, "gpu");
    pick_fails(l, 5, "9:9");
    pick_fails(l, 5, "0:1");
    pick_fails(l, 5, "no-such-device");

    /* A P:D selector is parsed strictly: an index past int is an error naming the selector,
     * never wrapped (sscanf's %d read 0:4294967296 as 0:0 and picked l[0]). */
    static const char *const bad_pd[] = {"0:4294967296", "4294967296:0", "0:99999999999999999999",
                                         "-1:0",         "0:-0x1",       "0:1:2"};
    for (size_t i = 0; i < sizeof bad_pd / sizeof bad_pd[0]; i++) {
        size_t idx = 999;
        pgd_error *e = NULL;
        int rc = pgd_device_select(l, 5, bad_pd[i], &idx, &e);
        ck_assert_msg(rc != PGD_OK, "selector '%s' picked %zu", bad_pd[i], idx);
        ck_assert_uint_eq(idx, 999);
        ck_assert_msg(e && strstr(pgd_error_get_message(e), bad_pd[i]), "selector '%s': %s",
                      bad_pd[i], e ? pgd_error_get_message(e) : "(no error)");
        pgd_error_destroy(e);
    }

    pgd_error *err = NULL;
    size_t idx;
    ck_assert_int_eq(pgd_device_select(l, 0, NULL, &idx, &err), PGD_ERR_NO_PLATFORM);
    ck_assert_msg(strstr(pgd_error_get_message(err), "pocl-opencl-icd") != NULL,
                  "no-device message should say how to get one: %s", pgd_error_get_message(err));
    pgd_error_destroy(err);
}
END_TEST

START_TEST(real_devices)
{
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    ck_assert_uint_gt(n, 0);
    for (size_t i = 0; i < n; i++) {
        ck_assert_msg(d[i].name[0] && d[i].platform[0], "device %zu has no name", i);
        ck_assert_uint_gt(d[i].compute_units, 0);
        ck_assert_uint_gt(d[i].max_work_group, 0);
        ck_assert(d[i].max_alloc > 0 && d[i].max_alloc <= d[i].global_mem);
        ck_assert_uint_gt(d[i].local_mem, 0);
        ck_assert_uint_ge(d[i].max_work_item[0], 1);
        ck_assert_int_ge(d[i].opencl_c_major, 1);
        /* Each device is reachable by its P:D selector and by its exact name. */
        pgd_ctx *ctx = pgd_test_ctx(&d[i]);
        ck_assert_str_eq(pgd_ctx_get_device(ctx)->name, d[i].name);
        ck_assert_int_eq(pgd_ctx_get_device(ctx)->platform_index, d[i].platform_index);
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

/* Low-precision capabilities agree with the extension list, and a precision the device cannot
 * run is refused by name at context creation (PGD_ERR_UNSUPPORTED naming the device and the
 * extension), never run silently in float32. On PoCL 3.1 and rusticl both are refused; on
 * Intel's CPU runtime both are accepted. */
START_TEST(lowp_capabilities_and_refusals)
{
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    for (size_t i = 0; i < n; i++) {
        pgd_device_lowp l;
        memset(&l, 0xff, sizeof l);
        l.size = sizeof l;
        pgd_error *err = NULL;
        ck_assert_int_eq(pgd_device_get_lowp(&d[i], &l, &err), PGD_OK);
        ck_assert_int_eq(l.fp16, d[i].fp16);
        ck_assert(l.int_dot == 0 || l.int_dot == 1);
        ck_assert_msg(l.int_dot || (l.int_dot_caps == 0 && l.dot8_accel == 0),
                      "%s: dot-product properties without the extension", d[i].name);
        ck_assert_msg(l.fp16 || l.half_fp_config == 0, "%s: half config without fp16", d[i].name);
        static const char *const precisions[] = {"f16", "int8"};
        for (int p = 0; p < 2; p++) {
            int can = p == 0 ? l.fp16 : l.int_dot && (l.int_dot_caps & 1);
            pgd_ctx_options o;
            pgd_test_options(&d[i], NULL, &o);
            ck_assert_int_eq(pgd_ctx_options_set_knob(&o, "precision", precisions[p], NULL), 0);
            pgd_ctx *ctx = NULL;
            err = NULL;
            int rc = pgd_ctx_create_with_options(&o, &ctx, &err);
            if (can) {
                ck_assert_msg(rc == PGD_OK, "%s on %s: %s", precisions[p], d[i].name,
                              pgd_error_get_message(err));
                int64_t v = 0;
                ck_assert_int_eq(pgd_ctx_get_knob(ctx, "precision", &v), PGD_OK);
                ck_assert_int_eq(v, p + 2); /* 1 f32, 2 f16, 3 int8 */
                pgd_ctx_destroy(ctx);
                continue;
            }
            ck_assert_ptr_null(ctx);
            ck_assert_msg(err && strstr(pgd_error_get_message(err), d[i].name) &&
                              strstr(pgd_error_get_message(err),
                                     p == 0 ? "cl_khr_fp16" : "cl_khr_integer_dot_product"),
                          "refusal on %s should name it and the extension: %s", d[i].name,
                          pgd_error_get_message(err));
            pgd_test_expect_error(rc, err, PGD_ERR_UNSUPPORTED, precisions[p]);
        }
    }
    /* A result too small for the first fields, and an unknown precision, are refused. */
    pgd_device_lowp tiny = {.size = 4};
    pgd_error *err = NULL;
    int rc = pgd_device_get_lowp(&d[0], &tiny, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_INVALID_ARGUMENT, "sizeof(pgd_device_lowp)");
    pgd_ctx_options o;
    pgd_ctx_options_init(&o);
    err = NULL;
    rc = pgd_ctx_options_set_knob(&o, "precision", "bf16", &err);
    pgd_test_expect_error(rc, err, PGD_ERR_INVALID_ARGUMENT, "one of f32, f16, int8");
}
END_TEST

/* PAGODA_DEVICE picks the device, read from an explicit list (the process environment is
 * shared by every test, so it is never changed here). */
START_TEST(env_selector)
{
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    const pgd_device_info *last = &d[n - 1];
    char var[96];
    snprintf(var, sizeof var, "PAGODA_DEVICE=%s", pgd_test_selector(last));
    pgd_ctx_options o;
    pgd_ctx_options_init(&o);
    pgd_ctx *ctx = NULL;
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_ctx_options_from_envp(&o, (const char *const[]){var, NULL}, &err), &err);
    PGD_CHECK_OK(pgd_ctx_create_with_options(&o, &ctx, &err), &err);
    ck_assert_str_eq(pgd_ctx_get_device(ctx)->name, last->name);
    pgd_ctx_destroy(ctx);
    /* pgd_ctx_create's selector picks the device (meson's environment sets no PAGODA_DEVICE for
     * it to win over: that precedence is not tested without changing the environment). */
    PGD_CHECK_OK(pgd_ctx_create(pgd_test_selector(&d[0]), &ctx, &err), &err);
    ck_assert_str_eq(pgd_ctx_get_device(ctx)->name, d[0].name);
    pgd_ctx_destroy(ctx);
    pgd_ctx_options_init(&o);
    PGD_CHECK_OK(pgd_ctx_options_from_envp(
                     &o, (const char *const[]){"PAGODA_DEVICE=surely-not-a-device", NULL}, &err),
                 &err);
    ck_assert_int_eq(pgd_ctx_create_with_options(&o, &ctx, &err), PGD_ERR_DEVICE_NOT_FOUND);
    ck_assert_ptr_null(ctx);
    ck_assert(strstr(pgd_error_get_message(err), "surely-not-a-device") != NULL);
    pgd_error_destroy(err);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("device");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, selection_rules);
    tcase_add_test(tc, real_devices);
    tcase_add_test(tc, env_selector);
    tcase_add_test(tc, lowp_capabilities_and_refusals);
    suite_add_tcase(s, tc);
    return pgd_test_run(s);
}
