/* test_options.c — context options (core/options.c): the defaults, every PAGODA_* variable
 * parsed into its field, bad values refused naming the variable, and contexts with different
 * options side by side in one process. The variables are given as explicit lists
 * (pgd_ctx_options_from_envp): the process environment is shared by every test and only read,
 * through the PAGODA_CACHE_DIR that meson's test environment sets. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "internal.h" /* white-box: reaches library internals */
#include "tune.h"     /* white-box: the context's parameters */

static const char *const vars[] = {
    "PAGODA_DEVICE",
    "PAGODA_CACHE_DIR",
    "PAGODA_CL_DIR",
    "PAGODA_PROFILE",
    "PAGODA_GEMM",
    "PAGODA_GEMM_TUNE",
    "PAGODA_GEMM_KCHUNK",
    "PAGODA_CONV",
    "PAGODA_CONV_MB",
    "PAGODA_CONV_CHUNK",
    "PAGODA_ATTENTION",
    "PAGODA_ROW_WG",
    "PAGODA_MAX_LAUNCH_ROWS",
    "PAGODA_GLOBAL_MEM",
    "PAGODA_MAX_ALLOC",
    "PAGODA_MAX_BATCH",
    "PAGODA_NL_KEY_CHUNK",
    "PAGODA_WEIGHTS_DTYPE",
    NULL,
};

#define NVARS (sizeof vars / sizeof vars[0] - 1)

/* Whether o holds the defaults: pgd_ctx_options_init's, all zero but the size. */
static int all_zero(const pgd_ctx_options *o)
{
    pgd_ctx_options z;
    memset(&z, 0, sizeof z);
    z.size = sizeof z;
    return memcmp(o, &z, sizeof z) == 0;
}

START_TEST(defaults)
{
    pgd_ctx_options o;
    memset(&o, 0xA5, sizeof o);
    pgd_ctx_options_init(&o);
    ck_assert(all_zero(&o));
    ck_assert_int_eq(o.gemm_backend, PGD_GEMM_BACKEND_AUTO);
    ck_assert_int_eq(o.gemm_tuning, PGD_GEMM_TUNE_AT_CREATE);
    ck_assert_int_eq(o.conv_algo, PGD_CONV_ALGO_AUTO);
    ck_assert_int_eq(o.attention, PGD_ATTENTION_AUTO);
    pgd_error *err = NULL;
    static const char *const none[] = {NULL};
    PGD_CHECK_OK(pgd_ctx_options_from_envp(&o, none, &err), &err);
    ck_assert(all_zero(&o)); /* nothing set: nothing changes */
    /* empty values mean "default" too */
    char empty[NVARS][40];
    const char *empties[NVARS + 1];
    for (size_t i = 0; i < NVARS; i++) {
        snprintf(empty[i], sizeof empty[i], "%s=", vars[i]);
        empties[i] = empty[i];
    }
    empties[NVARS] = NULL;
    PGD_CHECK_OK(pgd_ctx_options_from_envp(&o, empties, &err), &err);
    ck_assert(all_zero(&o));
    /* only the variables set are written: a caller's values survive */
    pgd_test_knob(&o, "max_batch", 3);
    o.conv_algo = PGD_CONV_ALGO_DIRECT;
    PGD_CHECK_OK(
        pgd_ctx_options_from_envp(&o, (const char *const[]){"PAGODA_GEMM=pagoda", NULL}, &err),
        &err);
    ck_assert_str_eq(o.knobs, "max_batch=3");
    ck_assert_int_eq(o.conv_algo, PGD_CONV_ALGO_DIRECT);
    ck_assert_int_eq(o.gemm_backend, PGD_GEMM_BACKEND_PAGODA);

    /* pgd_ctx_options_from_env (and from_envp with NULL) read the process environment: meson's
     * test environment sets PAGODA_CACHE_DIR for every test */
    const char *cache = getenv("PAGODA_CACHE_DIR");
    ck_assert_msg(cache && *cache, "PAGODA_CACHE_DIR is unset: run the suite with meson test");
    pgd_ctx_options_init(&o);
    PGD_CHECK_OK(pgd_ctx_options_from_env(&o, &err), &err);
    ck_assert_str_eq(o.cache_dir, cache);
    pgd_ctx_options_init(&o);
    PGD_CHECK_OK(pgd_ctx_options_from_envp(&o, NULL, &err), &err);
    ck_assert_str_eq(o.cache_dir, cache);
}
END_TEST

START_TEST(every_variable)
{
    static const char *const all[] = {
        "PAGODA_DEVICE=cpu",        "PAGODA_CACHE_DIR=/tmp/somewhere",
        "PAGODA_CL_DIR=cl/",        "PAGODA_PROFILE=1",
        "PAGODA_GEMM=clblast",      "PAGODA_GEMM_TUNE=request",
        "PAGODA_GEMM_KCHUNK=97",    "PAGODA_CONV=im2col",
        "PAGODA_CONV_MB=4",         "PAGODA_CONV_CHUNK=4K",
        "PAGODA_ATTENTION=generic", "PAGODA_ROW_WG=1024",
        "PAGODA_MAX_LAUNCH_ROWS=1", "PAGODA_GLOBAL_MEM=2G",
        "PAGODA_MAX_ALLOC=512m",    "PAGODA_MAX_BATCH=8",
        "PAGODA_NL_KEY_CHUNK=5",    NULL,
    };
    pgd_ctx_options o;
    pgd_ctx_options_init(&o);
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_ctx_options_from_envp(&o, all, &err), &err);
    ck_assert_str_eq(o.device, "cpu");
    ck_assert_str_eq(o.cache_dir, "/tmp/somewhere");
    ck_assert_str_eq(o.kernel_dir, "cl/");
    ck_assert_int_eq(o.profiling, 1);
    ck_assert_int_eq(o.profile_print_at_destroy, 1);
    ck_assert_int_eq(o.gemm_backend, PGD_GEMM_BACKEND_CLBLAST);
    ck_assert_int_eq(o.gemm_tuning, PGD_GEMM_TUNE_ON_REQUEST);
    ck_assert_int_eq(o.conv_algo, PGD_CONV_ALGO_IM2COL);
    ck_assert_int_eq(o.attention, PGD_ATTENTION_GENERIC);
    ck_assert_uint_eq(o.global_mem_limit, UINT64_C(2) << 30);
    ck_assert_uint_eq(o.max_alloc_limit, UINT64_C(512) << 20);
    /* the test and tuning variables become knobs, in the table's order */
    ck_assert_str_eq(o.knobs, "gemm_k_chunk=97,conv_mb=4,conv_chunk_bytes=4096,row_wg=1024,"
                              "max_launch_rows=1,nl_key_chunk=5,max_batch=8");

    /* the other spellings of each enumeration and boolean */
    static const struct {
        const char *var, *value;
        int want;
    } spell[] = {
        {"PAGODA_GEMM", "auto", PGD_GEMM_BACKEND_AUTO},
        {"PAGODA_GEMM", "pagoda", PGD_GEMM_BACKEND_PAGODA},
        {"PAGODA_GEMM_TUNE", "create", PGD_GEMM_TUNE_AT_CREATE},
        {"PAGODA_CONV", "auto", PGD_CONV_ALGO_AUTO},
        {"PAGODA_CONV", "gemm", PGD_CONV_ALGO_GEMM},
        {"PAGODA_CONV", "implicit", PGD_CONV_ALGO_IMPLICIT},
        {"PAGODA_CONV", "direct", PGD_CONV_ALGO_DIRECT},
        {"PAGODA_CONV", "winograd", PGD_CONV_ALGO_WINOGRAD},
        {"PAGODA_ATTENTION", "auto", PGD_ATTENTION_AUTO},
        {"PAGODA_ATTENTION", "rows", PGD_ATTENTION_ROWS},
        {"PAGODA_ATTENTION", "tiled", PGD_ATTENTION_TILED},
        {"PAGODA_ATTENTION", "kt", PGD_ATTENTION_KT},
        {"PAGODA_WEIGHTS_DTYPE", "f32", 0},
        {"PAGODA_WEIGHTS_DTYPE", "f16", 1},
        {"PAGODA_PROFILE", "0", 0},
        {"PAGODA_PROFILE", "off", 0},
        {"PAGODA_PROFILE", "yes", 1},
        {"PAGODA_PROFILE", "true", 1},
    };
    for (size_t i = 0; i < sizeof spell / sizeof spell[0]; i++) {
        char var[64];
        snprintf(var, sizeof var, "%s=%s", spell[i].var, spell[i].value);
        pgd_ctx_options_init(&o);
        PGD_CHECK_OK(pgd_ctx_options_from_envp(&o, (const char *const[]){var, NULL}, &err), &err);
        int got = !strcmp(spell[i].var, "PAGODA_GEMM")            ? (int)o.gemm_backend
                  : !strcmp(spell[i].var, "PAGODA_GEMM_TUNE")     ? (int)o.gemm_tuning
                  : !strcmp(spell[i].var, "PAGODA_CONV")          ? (int)o.conv_algo
                  : !strcmp(spell[i].var, "PAGODA_ATTENTION")     ? (int)o.attention
                  : !strcmp(spell[i].var, "PAGODA_WEIGHTS_DTYPE") ? o.weights_f16
                                                                  : o.profiling;
        ck_assert_msg(got == spell[i].want, "%s=%s gave %d, not %d", spell[i].var, spell[i].value,
                      got, spell[i].want);
    }
}
END_TEST

START_TEST(bad_values)
{
    static const struct {
        const char *var, *value, *accepted;
    } cases[] = {
        {"PAGODA_GEMM", "fast", "auto, pagoda, clblast"},
        {"PAGODA_GEMM", "CLBlast", "auto, pagoda, clblast"},
        {"PAGODA_GEMM_TUNE", "always", "create, request"},
        {"PAGODA_GEMM_KCHUNK", "0", "positive whole number"},
        {"PAGODA_GEMM_KCHUNK", "97x", "positive whole number"},
        {"PAGODA_CONV", "fft", "winograd"},
        {"PAGODA_CONV_MB", "-1", "positive whole number"},
        {"PAGODA_CONV_CHUNK", "4T", "byte count"},
        {"PAGODA_ATTENTION", "flash", "generic"},
        {"PAGODA_WEIGHTS_DTYPE", "fp16", "f32, f16"},
        {"PAGODA_ROW_WG", "wide", "positive whole number"},
        {"PAGODA_MAX_LAUNCH_ROWS", " 1", "positive whole number"},
        {"PAGODA_GLOBAL_MEM", "lots", "byte count"},
        {"PAGODA_GLOBAL_MEM", "-5G", "byte count"},
        {"PAGODA_GLOBAL_MEM", "0", "byte count"},
        {"PAGODA_MAX_ALLOC", "1GB", "byte count"},
        {"PAGODA_MAX_ALLOC", "99999999999999999999", "byte count"},
        {"PAGODA_MAX_BATCH", "-3", "positive whole number"},
        {"PAGODA_MAX_BATCH", "2.5", "positive whole number"},
        {"PAGODA_MAX_BATCH", "99999999999", "positive whole number"},
        {"PAGODA_NL_KEY_CHUNK", "some", "positive whole number"},
        {"PAGODA_PROFILE", "2", "one of 0, 1, off, on"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char var[96];
        snprintf(var, sizeof var, "%s=%s", cases[i].var, cases[i].value);
        /* a good value beside the bad one */
        const char *const list[] = {"PAGODA_MAX_BATCH=4", var, NULL};
        pgd_ctx_options o, before;
        pgd_ctx_options_init(&o);
        pgd_test_knob(&o, "row_wg", 7);
        before = o;
        pgd_error *err = NULL;
        ck_assert_int_eq(pgd_ctx_options_from_envp(&o, list, &err), PGD_ERR_INVALID_ARGUMENT);
        ck_assert_ptr_nonnull(err);
        ck_assert_int_eq(pgd_error_get_code(err), PGD_ERR_INVALID_ARGUMENT);
        const char *msg = pgd_error_get_message(err);
        ck_assert_msg(strstr(msg, cases[i].var) && strstr(msg, cases[i].value) &&
                          strstr(msg, cases[i].accepted),
                      "%s=%s: message '%s' lacks the variable, value or '%s'", cases[i].var,
                      cases[i].value, msg, cases[i].accepted);
        ck_assert_msg(memcmp(&o, &before, sizeof o) == 0, "%s: options changed on error",
                      cases[i].var);
        pgd_error_destroy(err);
    }
}
END_TEST

/* Two contexts in one process with different options behave differently, each as told. */
START_TEST(contexts_apart)
{
    if (!pgd_test_primary())
        return;
    const char *keep = getenv("PAGODA_CACHE_DIR"); /* meson's, kept for the build cache */
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    pgd_error *err = NULL;
    char selector[64];
    snprintf(selector, sizeof selector, "%s", pgd_test_selector(&d[0]));

    pgd_ctx_options oa, ob;
    pgd_ctx_options_init(&oa);
    pgd_ctx_options_init(&ob);
    oa.device = selector;
    oa.cache_dir = keep;
    oa.conv_algo = PGD_CONV_ALGO_DIRECT;
    oa.gemm_backend = PGD_GEMM_BACKEND_PAGODA;
    pgd_test_knob(&oa, "max_batch", 2);
    oa.global_mem_limit = UINT64_C(64) << 20;
    ob.device = selector;
    ob.cache_dir = "off";
    ob.conv_algo = PGD_CONV_ALGO_IM2COL;
    ob.gemm_backend = PGD_GEMM_BACKEND_CLBLAST;
    ob.profiling = 1;
    pgd_ctx *a = NULL, *b = NULL;
    PGD_CHECK_OK(pgd_ctx_create_with_options(&oa, &a, &err), &err);
    PGD_CHECK_OK(pgd_ctx_create_with_options(&ob, &b, &err), &err);
    /* the contexts keep copies: the caller's strings may change */
    memset(selector, 'x', sizeof selector - 1);
    ck_assert_str_eq(pgd_ctx_get_options(a)->device, pgd_test_selector(&d[0]));
    ck_assert_str_eq(pgd_ctx_get_options(b)->cache_dir, "off");
    int64_t cap = -1;
    ck_assert_int_eq(pgd_ctx_get_knob(a, "max_batch", &cap), PGD_OK);
    ck_assert_int_eq(cap, 2);
    ck_assert_int_eq(pgd_ctx_get_knob(b, "max_batch", &cap), PGD_OK);
    ck_assert_int_eq(cap, 0);
    ck_assert_int_eq(pgd_ctx_get_knob(b, "max_bath", &cap), PGD_ERR_NOT_FOUND);
    ck_assert_str_eq(pgd_ctx_get_options(a)->knobs, "max_batch=2");
    ck_assert_ptr_null(pgd_ctx_get_cache_dir(b));
    if (keep)
        ck_assert_ptr_nonnull(pgd_ctx_get_cache_dir(a));
    uint64_t real = d[0].global_mem;
    ck_assert_uint_eq(pgd_ctx_get_device(a)->global_mem,
                      real < (UINT64_C(64) << 20) ? real : UINT64_C(64) << 20);
    ck_assert_uint_eq(pgd_ctx_get_device(b)->global_mem, real);
    ck_assert_int_eq(a->profiling, 0);
    ck_assert_int_eq(b->profiling, 1);

    /* the same 3x3 convolution, two algorithms */
    pgd_conv2d_desc desc = {8, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1};
    float w[8 * 8 * 9];
    for (int i = 0; i < 8 * 8 * 9; i++)
        w[i] = (float)(i % 7) * 0.1f;
    pgd_conv2d *ca = NULL, *cb = NULL;
    PGD_CHECK_OK(pgd_conv2d_create(a, &desc, w, NULL, NULL, &ca, &err), &err);
    PGD_CHECK_OK(pgd_conv2d_create(b, &desc, w, NULL, NULL, &cb, &err), &err);
    ck_assert_str_eq(pgd_conv2d_algorithm(a, ca, 9, 9), "direct");
    ck_assert_str_eq(pgd_conv2d_algorithm(b, cb, 9, 9), "im2col");
    pgd_conv2d_destroy(ca);
    pgd_conv2d_destroy(cb);

    /* the same GEMM, two back ends (forced: nothing measured) */
    pgd__gemm_call g;
    memset(&g, 0, sizeof g);
    g.M = g.N = g.K = 32;
    g.batch = 1;
    ck_assert_int_eq(pgd__gemm_backend(a, &g, 0), PGD__GEMM_PAGODA);
    ck_assert_int_eq(pgd__gemm_backend(b, &g, 0), PGD__GEMM_CLBLAST);
    pgd_gemm_backend chosen = PGD_GEMM_BACKEND_AUTO;
    PGD_CHECK_OK(pgd_gemm_tune(b, 0, 0, 32, 32, 32, 1, &chosen, &err), &err);
    ck_assert_int_eq(chosen, PGD_GEMM_BACKEND_CLBLAST);
    ck_assert_uint_eq(pgd__params_of(a)->gemm_measurements + pgd__params_of(b)->gemm_measurements,
                      0);

    pgd_ctx_destroy(a);
    pgd_ctx_destroy(b);

    /* NULL options: the defaults, the environment (meson's PAGODA_CACHE_DIR) unread */
    pgd_ctx *c = NULL;
    PGD_CHECK_OK(pgd_ctx_create_with_options(NULL, &c, &err), &err);
    ck_assert_int_eq(pgd_ctx_get_options(c)->conv_algo, PGD_CONV_ALGO_AUTO);
    ck_assert_ptr_null(pgd_ctx_get_options(c)->cache_dir);
    pgd_ctx_destroy(c);
    /* pgd_ctx_create: the environment (meson's PAGODA_CACHE_DIR), and the selector */
    PGD_CHECK_OK(pgd_ctx_create(pgd_test_selector(&d[0]), &c, &err), &err);
    if (keep)
        ck_assert_str_eq(pgd_ctx_get_options(c)->cache_dir, keep);
    ck_assert_str_eq(pgd_ctx_get_options(c)->device, pgd_test_selector(&d[0]));
    pgd_ctx_destroy(c);
}
END_TEST

/* Knobs: set by key, checked at context creation with a message naming the key and value,
 * read back from the context. */
START_TEST(knobs)
{
    pgd_ctx_options o, before;
    pgd_error *err = NULL;
    pgd_ctx_options_init(&o);
    PGD_CHECK_OK(pgd_ctx_options_set_knob(&o, "conv_mb", "4", &err), &err);
    PGD_CHECK_OK(pgd_ctx_options_set_knob(&o, "conv_chunk_bytes", "4K", &err), &err);
    PGD_CHECK_OK(pgd_ctx_options_set_knob(&o, "conv_mb", "8", &err), &err); /* replaces */
    ck_assert_str_eq(o.knobs, "conv_mb=8,conv_chunk_bytes=4096");
    PGD_CHECK_OK(pgd_ctx_options_set_knob(&o, "conv_mb", "", &err), &err); /* removes */
    ck_assert_str_eq(o.knobs, "conv_chunk_bytes=4096");
    /* refused by the setter, naming the key and value; o unchanged */
    static const struct {
        const char *key, *value, *want;
    } refused[] = {
        {"conv_mbx", "4", "unknown knob 'conv_mbx'"},
        {"conv_mb", "4097", "conv_mb='4097'"},
        {"row_wg", "-1", "row_wg='-1'"},
        {"conv_chunk_bytes", "4T", "conv_chunk_bytes='4T'"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        before = o;
        ck_assert_int_eq(pgd_ctx_options_set_knob(&o, refused[i].key, refused[i].value, &err),
                         PGD_ERR_INVALID_ARGUMENT);
        ck_assert_msg(strstr(pgd_error_get_message(err), refused[i].want), "'%s' lacks '%s'",
                      pgd_error_get_message(err), refused[i].want);
        ck_assert(memcmp(&o, &before, sizeof o) == 0);
        pgd_error_destroy(err);
        err = NULL;
    }
    /* written as text: checked when the context is created */
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    static const struct {
        const char *text, *want;
    } bad[] = {
        {"conv_mb=abc", "conv_mb='abc'"},
        {"fast=1", "unknown knob 'fast'"},
        {"conv_mb", "'conv_mb' in 'conv_mb' is not key=value"},
        {"conv_mb=2,", "ends in a comma"},
        {"conv_mb=2,,row_wg=4", "is not key=value"},
        {"max_batch=0", "max_batch='0'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pgd_ctx_options_init(&o);
        o.device = pgd_test_selector(&d[0]);
        snprintf(o.knobs, sizeof o.knobs, "%s", bad[i].text);
        pgd_ctx *ctx = (pgd_ctx *)&ctx;
        ck_assert_int_eq(pgd_ctx_create_with_options(&o, &ctx, &err), PGD_ERR_INVALID_ARGUMENT);
        ck_assert_ptr_null(ctx);
        ck_assert_msg(strstr(pgd_error_get_message(err), bad[i].want), "%s: '%s' lacks '%s'",
                      bad[i].text, pgd_error_get_message(err), bad[i].want);
        pgd_error_destroy(err);
        err = NULL;
    }
    /* a good text reaches the ops, normalised */
    pgd_ctx_options_init(&o);
    o.device = pgd_test_selector(&d[0]);
    snprintf(o.knobs, sizeof o.knobs, "row_wg=16,gemm_k_chunk=97,conv_chunk_bytes=1K");
    pgd_ctx *ctx = pgd_test_ctx_opts(&o);
    ck_assert_int_eq(ctx->knobs.row_wg, 16);
    ck_assert_int_eq(ctx->knobs.gemm_k_chunk, 97);
    ck_assert_int_eq(ctx->knobs.conv_chunk_bytes, 1024);
    ck_assert_str_eq(pgd_ctx_get_options(ctx)->knobs,
                     "gemm_k_chunk=97,conv_chunk_bytes=1024,row_wg=16");
    pgd_ctx_destroy(ctx);
}
END_TEST

/* The size field: options not made by pgd_ctx_options_init are refused; a caller built with a
 * larger (newer) layout is read as far as the library knows it. */
START_TEST(options_size)
{
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    pgd_error *err = NULL;
    pgd_ctx_options zero = {0};
    zero.device = pgd_test_selector(&d[0]);
    pgd_ctx *ctx = (pgd_ctx *)&ctx;
    ck_assert_int_eq(pgd_ctx_create_with_options(&zero, &ctx, &err), PGD_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(ctx);
    ck_assert_msg(strstr(pgd_error_get_message(err), "pgd_ctx_options_init"), "%s",
                  pgd_error_get_message(err));
    pgd_error_destroy(err);
    err = NULL;
    ck_assert_int_eq(pgd_ctx_options_from_envp(&zero, (const char *const[]){NULL}, &err),
                     PGD_ERR_INVALID_ARGUMENT);
    pgd_error_destroy(err);
    err = NULL;
    /* a newer caller: 64 more bytes the library does not know; init clears only its own */
    struct {
        pgd_ctx_options o;
        unsigned char more[64];
    } big;
    memset(&big, 0x5A, sizeof big);
    pgd_ctx_options_init_size(&big.o, sizeof big);
    ck_assert_uint_eq(big.o.size, sizeof big);
    ck_assert_uint_eq(big.more[0], 0x5A);
    big.o.device = pgd_test_selector(&d[0]);
    big.o.conv_algo = PGD_CONV_ALGO_DIRECT;
    PGD_CHECK_OK(
        pgd_ctx_options_from_envp(&big.o, (const char *const[]){"PAGODA_CONV_MB=2", NULL}, &err),
        &err);
    ck_assert_uint_eq(big.o.size, sizeof big);
    ck_assert_uint_eq(big.more[0], 0x5A);
    ck_assert_str_eq(big.o.knobs, "conv_mb=2");
    PGD_CHECK_OK(pgd_ctx_create_with_options(&big.o, &ctx, &err), &err);
    ck_assert_int_eq(pgd_ctx_get_options(ctx)->conv_algo, PGD_CONV_ALGO_DIRECT);
    ck_assert_uint_eq(pgd_ctx_get_options(ctx)->size, sizeof(pgd_ctx_options));
    ck_assert_int_eq(ctx->knobs.conv_mb, 2);
    pgd_ctx_destroy(ctx);
}
END_TEST

/* pgd_ctx_create reads the process environment; that environment is set for these two cases
 * by meson (tests options-env-bad and options-env-create), never by the test itself. */

/* PAGODA_MAX_BATCH=abc in the environment: pgd_ctx_create fails naming the variable, with no
 * context. */
START_TEST(env_bad)
{
    pgd_ctx *ctx = (pgd_ctx *)&ctx; /* not NULL: the call must clear it */
    pgd_error *err = NULL;
    ck_assert_int_eq(pgd_ctx_create(NULL, &ctx, &err), PGD_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(ctx);
    ck_assert_msg(strstr(pgd_error_get_message(err), "PAGODA_MAX_BATCH") &&
                      strstr(pgd_error_get_message(err), "abc"),
                  "message: %s", pgd_error_get_message(err));
    pgd_error_destroy(err);
}
END_TEST

/* PAGODA_CONV=direct and PAGODA_DEVICE=surely-not-a-device in the environment: pgd_ctx_create
 * takes the convolution algorithm from it, and its selector goes over PAGODA_DEVICE. */
START_TEST(env_create)
{
    if (!pgd_test_primary())
        return;
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    pgd_ctx *ctx = NULL;
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_ctx_create(pgd_test_selector(&d[0]), &ctx, &err), &err);
    ck_assert_int_eq(pgd_ctx_get_options(ctx)->conv_algo, PGD_CONV_ALGO_DIRECT);
    ck_assert_str_eq(pgd_ctx_get_device(ctx)->name, d[0].name);
    pgd_ctx_destroy(ctx);
}
END_TEST

int main(int argc, char **argv)
{
    if (argc == 2 && (!strcmp(argv[1], "--env-bad") || !strcmp(argv[1], "--env-create"))) {
        Suite *s = suite_create("options-env");
        TCase *tc = tcase_create("env");
        tcase_add_test(tc, !strcmp(argv[1], "--env-bad") ? env_bad : env_create);
        suite_add_tcase(s, tc);
        return pgd_test_run(s);
    }
    Suite *s = suite_create("options");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, defaults);
    tcase_add_test(tc, every_variable);
    tcase_add_test(tc, bad_values);
    tcase_add_test(tc, contexts_apart);
    tcase_add_test(tc, knobs);
    tcase_add_test(tc, options_size);
    suite_add_tcase(s, tc);
    return pgd_test_run(s);
}
