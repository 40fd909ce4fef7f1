/* fuzz_options.c — libFuzzer target: the context options read from a list of PAGODA_*
 * settings (pgd_ctx_options_from_envp, the reader behind pgd_ctx_options_from_env) and the strict
 * number parsers behind them (pgd_parse_int64, pgd_parse_int64_list, pgd_parse_double,
 * pgd_parse_bytes). The input is lines: line i is the value of the i-th PAGODA_* variable (a
 * missing line leaves it unset); every line is also fed to each parser with bounds taken from the
 * first byte. No device or context is involved. */
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pagoda.h"
#include "pagoda_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const vars[] = {
    "PAGODA_DEVICE",          "PAGODA_CACHE_DIR",   "PAGODA_CL_DIR",
    "PAGODA_PROFILE",         "PAGODA_GEMM",        "PAGODA_GEMM_TUNE",
    "PAGODA_GEMM_KCHUNK",     "PAGODA_CONV",        "PAGODA_CONV_MB",
    "PAGODA_CONV_CHUNK",      "PAGODA_ATTENTION",   "PAGODA_ROW_WG",
    "PAGODA_MAX_LAUNCH_ROWS", "PAGODA_GLOBAL_MEM",  "PAGODA_MAX_ALLOC",
    "PAGODA_MAX_BATCH",       "PAGODA_NL_KEY_CHUNK"};
#define NVARS (sizeof vars / sizeof vars[0])

/* Whether s is an optional '-' then only digits, at least one (what pgd_parse_int64 accepts). */
static int int_grammar(const char *s)
{
    s += *s == '-';
    if (!*s)
        return 0;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return 0;
    return 1;
}

static void check_int(const char *s, uint8_t knob)
{
    static const int64_t lo[] = {INT64_MIN, 0, 1, -5, 0};
    static const int64_t hi[] = {INT64_MAX, INT64_MAX, 4096, 5, 0};
    int64_t min = lo[knob % 5], max = hi[knob % 5], v = 42;
    if (pgd_parse_int64(s, min, max, &v) == PGD_OK) {
        /* Accepted text is plain decimal and means what strtoll says it means. */
        if (!int_grammar(s) || v < min || v > max || strtoll(s, NULL, 10) != v)
            abort();
    } else if (v != 42) {
        abort(); /* *out unchanged on refusal */
    }
}

static void check_list(const char *s, uint8_t knob)
{
    static const char seps[] = {',', 'x', ':', ' '};
    int64_t out[8];
    int count = -1, min_count = knob % 3, max_count = 1 + (knob >> 2) % 8;
    if (pgd_parse_int64_list(s, seps[knob % 4], -100, 1000000, out, min_count, max_count, &count) ==
        PGD_OK) {
        if (count < min_count || count > max_count || count < 1)
            abort();
        for (int i = 0; i < count; i++)
            if (out[i] < -100 || out[i] > 1000000)
                abort();
    } else if (count != -1) {
        abort();
    }
}

static void check_double(const char *s, uint8_t knob)
{
    double min = knob & 1 ? 0.0 : -HUGE_VAL, max = knob & 2 ? 1.0 : HUGE_VAL, v = 42.0;
    if (pgd_parse_double(s, min, max, &v) == PGD_OK) {
        if (!isfinite(v) || v < min || v > max || strtod(s, NULL) != v)
            abort();
    } else if (v != 42.0) {
        abort();
    }
}

static void check_bytes(const char *s, uint8_t knob)
{
    uint64_t min = knob & 1 ? 1 : 0, max = knob & 2 ? (uint64_t)1 << 40 : UINT64_MAX, v = 42;
    if (pgd_parse_bytes(s, min, max, &v) == PGD_OK) {
        if (v < min || v > max)
            abort();
        /* The digits times the suffix's power of two, exactly. */
        size_t n = strlen(s);
        char c = s[n - 1];
        int shift = c == 'K' || c == 'k'   ? 10
                    : c == 'M' || c == 'm' ? 20
                    : c == 'G' || c == 'g' ? 30
                                           : 0;
        uint64_t digits = strtoull(s, NULL, 10);
        if (s[0] < '0' || s[0] > '9' || (digits << shift) != v ||
            (digits << shift >> shift) != digits)
            abort();
    } else if (v != 42) {
        abort();
    }
}

/* The parsed options are what the ops rely on: enums in range, positive limits. */
static void check_options(const pgd_ctx_options *o)
{
    if ((unsigned)o->profiling > 1 || o->profile_print_at_destroy != o->profiling ||
        (unsigned)o->gemm_backend > 2 || (unsigned)o->gemm_tuning > 1 ||
        (unsigned)o->conv_algo > PGD_CONV_ALGO_WINOGRAD ||
        (unsigned)o->attention > PGD_ATTENTION_KT || !memchr(o->knobs, 0, sizeof o->knobs))
        abort();
    /* the knobs written are a list the library reads back (the setter parses the whole text) */
    pgd_ctx_options copy = *o;
    pgd_error *err = NULL;
    if (pgd_ctx_options_set_knob(&copy, "conv_mb", NULL, &err) != PGD_OK)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = 0;
    uint8_t knob = size ? data[0] : 0;
    char *line = text;
    char *envp[NVARS + 1] = {0}; /* "NAME=VALUE" of each line given; a missing line: unset */
    int nenv = 0;
    for (size_t i = 0; i < NVARS; i++) {
        char *nl = line ? strchr(line, '\n') : NULL;
        if (nl)
            *nl = 0;
        if (line) {
            size_t len = strlen(vars[i]) + strlen(line) + 2;
            if ((envp[nenv] = malloc(len)) != NULL)
                snprintf(envp[nenv++], len, "%s=%s", vars[i], line);
            check_int(line, (uint8_t)(knob + i));
            check_list(line, (uint8_t)(knob + i));
            check_double(line, (uint8_t)(knob + i));
            check_bytes(line, (uint8_t)(knob + i));
        }
        line = nl ? nl + 1 : NULL;
    }
    pgd_ctx_options o, before;
    pgd_ctx_options_init(&o);
    before = o;
    pgd_error *err = NULL;
    if (pgd_ctx_options_from_envp(&o, (const char *const *)envp, &err) == PGD_OK) {
        if (err)
            abort();
        check_options(&o);
    } else {
        /* Refused: a message naming a variable, and the options untouched. */
        if (!err || !strstr(pgd_error_get_message(err), "PAGODA_") ||
            memcmp(&o, &before, sizeof o) != 0)
            abort();
        pgd_error_destroy(err);
    }
    for (int i = 0; i < nenv; i++)
        free(envp[i]);
    free(text);
    return 0;
}
