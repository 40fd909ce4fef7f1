/* test_safetensors.c — the safetensors reader: valid files, exact conversions, upload on every
 * device, and one rejection per validation rule. The test writes its own files. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static char *tmp_dir;

static char *join(const char *fname)
{
    size_t n = strlen(tmp_dir) + strlen(fname) + 2;
    char *p = malloc(n);
    ck_assert_ptr_nonnull(p);
    snprintf(p, n, "%s/%s", tmp_dir, fname);
    return p;
}

/* Writes raw bytes; returns the malloc'd path. */
static char *write_raw(const char *fname, const void *bytes, size_t n)
{
    char *path = join(fname);
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "cannot create %s", path);
    if (n)
        ck_assert_uint_eq(fwrite(bytes, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
    return path;
}

/* Builds a safetensors image: 8-byte little-endian length of `header`, header bytes, data. */
static unsigned char *build(const char *header, size_t hlen, const void *data, size_t dlen,
                            size_t *total)
{
    *total = 8 + hlen + dlen;
    unsigned char *buf = malloc(*total ? *total : 1);
    ck_assert_ptr_nonnull(buf);
    for (int i = 0; i < 8; i++)
        buf[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    memcpy(buf + 8, header, hlen);
    if (dlen) {
        if (data)
            memcpy(buf + 8 + hlen, data, dlen);
        else
            memset(buf + 8 + hlen, 0, dlen);
    }
    return buf;
}

/* Writes a safetensors file with the given header text and data (NULL: dlen zero bytes). */
static char *write_st(const char *fname, const char *header, const void *data, size_t dlen)
{
    size_t total;
    unsigned char *buf = build(header, strlen(header), data, dlen, &total);
    char *path = write_raw(fname, buf, total);
    free(buf);
    return path;
}

static pgd_weights *open_ok(const char *path)
{
    pgd_error *err = NULL;
    pgd_weights *w = NULL;
    PGD_CHECK_OK(pgd_weights_open(path, &w, &err), &err);
    ck_assert_ptr_nonnull(w);
    return w;
}

/* Opens `path`, expecting `code`, the file name and `word` in the message. */
static void expect_fail_path(const char *path, const char *fname, int code, const char *word)
{
    pgd_error *err = NULL;
    pgd_weights *w = (pgd_weights *)&err; /* must be reset to NULL */
    int rc = pgd_weights_open(path, &w, &err);
    ck_assert_msg(rc == code, "%s: got %s, want %s (%s)", fname, pgd_status_name(rc),
                  pgd_status_name(code), err ? pgd_error_get_message(err) : "no error");
    ck_assert_ptr_null(w);
    ck_assert_ptr_nonnull(err);
    ck_assert_int_eq(pgd_error_get_code(err), code);
    const char *msg = pgd_error_get_message(err);
    ck_assert_msg(strstr(msg, fname) != NULL, "message lacks the file name: %s", msg);
    ck_assert_msg(strstr(msg, word) != NULL, "message lacks '%s': %s", word, msg);
    pgd_error_destroy(err);
}

/* Writes header + dlen zero bytes as fname and expects PGD_ERR_FORMAT naming `word`. */
static void reject(const char *fname, const char *header, size_t dlen, const char *word)
{
    char *path = write_st(fname, header, NULL, dlen);
    expect_fail_path(path, fname, PGD_ERR_FORMAT, word);
    free(path);
}

static void put_u16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}

static void put_f32(unsigned char *p, float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(u >> (8 * i));
}

static void put_f64(unsigned char *p, double d)
{
    uint64_t u;
    memcpy(&u, &d, 8);
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(u >> (8 * i));
}

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* Exact comparison; NaN matches NaN, and signed zeros must match. */
static void check_exact(const float *got, const double *want, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++) {
        if (isnan(want[i])) {
            ck_assert_msg(isnan(got[i]), "%s[%zu]: got %.9g, want NaN", what, i, got[i]);
            continue;
        }
        ck_assert_msg((double)got[i] == want[i] && !signbit(got[i]) == !signbit(want[i]),
                      "%s[%zu]: got %.9g (0x%08x), want %.17g", what, i, got[i], bits(got[i]),
                      want[i]);
    }
}

/* ---- the mixed valid file ---- */

/* half bit patterns and their values, computed independently of the reader */
static const uint16_t half_bits[] = {0x3c00, 0xc000, 0x7bff, 0x0001, 0x03ff, 0x0400,
                                     0x3555, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x0000};
static double half_want(size_t i)
{
    switch (i) {
    case 0: return 1.0;
    case 1: return -2.0;
    case 2: return 65504.0;
    case 3: return ldexp(1.0, -24);          /* smallest subnormal */
    case 4: return 1023.0 * ldexp(1.0, -24); /* largest subnormal */
    case 5: return ldexp(1.0, -14);          /* smallest normal */
    case 6: return 0.333251953125;           /* 0x3555 = 1365/4096 */
    case 7: return -0.0;
    case 8: return INFINITY;
    case 9: return -INFINITY;
    case 10: return NAN;
    default: return 0.0;
    }
}
#define N_HALF (sizeof half_bits / sizeof half_bits[0])

static const uint16_t bf16_bits[] = {0x3f80, 0xc0a0, 0x4049, 0x0001,
                                     0x7f80, 0xff80, 0x7fc0, 0x8000};
static double bf16_want(size_t i)
{
    switch (i) {
    case 0: return 1.0;
    case 1: return -5.0;
    case 2: return 3.140625;
    case 3: return ldexp(1.0, -133); /* smallest float subnormal */
    case 4: return INFINITY;
    case 5: return -INFINITY;
    case 6: return NAN;
    default: return -0.0;
    }
}
#define N_BF16 (sizeof bf16_bits / sizeof bf16_bits[0])

/* f32 [2,3] (24) | f16 [12] (24) | bf16 [2,4] (16) | i64 [3] (24) | f64 [6] (48) | scalar f32 (4)
 * | u16 [2] (4) | empty f32 [0,5] (0) */
static const char *mixed_header =
    "{\"__metadata__\":{\"format\":\"pt\",\"note\":\"caf\xc3\xa9\"},"
    "\"w.f32\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
    "\"w.f16\":{\"dtype\":\"F16\",\"shape\":[12],\"data_offsets\":[24,48]},"
    "\"w.bf16\":{\"shape\":[2,4],\"dtype\":\"BF16\",\"data_offsets\":[48,64]},"
    "\"ids\":{\"dtype\":\"I64\",\"shape\":[3],\"data_offsets\":[64,88]},"
    "\"w.f64\":{\"dtype\":\"F64\",\"shape\":[6],\"data_offsets\":[88,136]},"
    "\"scalar\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[136,140]},"
    "\"u16\":{\"dtype\":\"U16\",\"shape\":[2],\"data_offsets\":[140,144]},"
    "\"empty\":{\"dtype\":\"F32\",\"shape\":[0,5],\"data_offsets\":[144,144]}}";
#define MIXED_DATA 144

static const float f32_vals[6] = {1.5f, -2.25f, 3.0e-41f /* subnormal */, 1.0e30f, -0.0f, 7.0f};
static double f64_vals(size_t i)
{
    switch (i) {
    case 0: return 1.5;
    case 1: return 1e300;
    case 2: return -1e-300;
    case 3: return (double)FLT_MAX;
    case 4: return ldexp(1.0, 128) - ldexp(1.0, 103); /* halfway FLT_MAX .. 2^128: rounds to inf */
    default: return ldexp(1.0, 128) - ldexp(1.0, 103) - ldexp(1.0, 90); /* rounds to FLT_MAX */
    }
}
static double f64_want(size_t i)
{
    switch (i) {
    case 0: return 1.5;
    case 1: return INFINITY;
    case 2: return -0.0;
    case 3: return (double)FLT_MAX;
    case 4: return INFINITY;
    default: return (double)FLT_MAX;
    }
}

static void mixed_data(unsigned char *d)
{
    memset(d, 0, MIXED_DATA);
    for (int i = 0; i < 6; i++)
        put_f32(d + 4 * i, f32_vals[i]);
    for (size_t i = 0; i < N_HALF; i++)
        put_u16(d + 24 + 2 * i, half_bits[i]);
    for (size_t i = 0; i < N_BF16; i++)
        put_u16(d + 48 + 2 * i, bf16_bits[i]);
    for (int i = 0; i < 3; i++)
        d[64 + 8 * i] = (unsigned char)(i + 1);
    for (size_t i = 0; i < 6; i++)
        put_f64(d + 88 + 8 * i, f64_vals(i));
    put_f32(d + 136, 42.0f);
    put_u16(d + 140, 7);
    put_u16(d + 142, 9);
}

static char *write_mixed(const char *fname)
{
    unsigned char d[MIXED_DATA];
    mixed_data(d);
    return write_st(fname, mixed_header, d, sizeof d);
}

START_TEST(valid_mixed)
{
    char *path = write_mixed("mixed.safetensors");
    pgd_weights *w = open_ok(path);
    ck_assert_uint_eq(pgd_weights_get_count(w), 8);
    /* listed in offset order; the zero-size tensor at the end */
    const char *order[] = {"w.f32", "w.f16", "w.bf16", "ids", "w.f64", "scalar", "u16", "empty"};
    for (size_t i = 0; i < 8; i++)
        ck_assert_str_eq(pgd_weights_get_name(w, i), order[i]);
    ck_assert_ptr_null(pgd_weights_get_name(w, 8));

    ck_assert_str_eq(pgd_weights_get_metadata(w, "format"), "pt");
    ck_assert_str_eq(pgd_weights_get_metadata(w, "note"), "caf\xc3\xa9");
    ck_assert_ptr_null(pgd_weights_get_metadata(w, "absent"));

    pgd_weight_info info;
    ck_assert_int_eq(pgd_weights_find(w, "w.f32", &info), PGD_OK);
    ck_assert_str_eq(info.name, "w.f32");
    ck_assert_int_eq(info.dtype, PGD_DTYPE_F32);
    ck_assert_str_eq(info.dtype_name, "F32");
    ck_assert_int_eq(info.ndim, 2);
    ck_assert_int_eq(info.shape[0], 2);
    ck_assert_int_eq(info.shape[1], 3);
    ck_assert_uint_eq(info.numel, 6);
    ck_assert_uint_eq(info.bytes, 24);
    ck_assert_uint_eq(info.offset, 0);
    unsigned char expect_bytes[MIXED_DATA];
    mixed_data(expect_bytes);
    ck_assert_ptr_null(info.data); /* the bytes stay on disk */
    unsigned char got[24];
    ck_assert_int_eq(pgd_weights_read(w, "w.f32", got, NULL), PGD_OK);
    ck_assert_int_eq(memcmp(got, expect_bytes, 24), 0);

    ck_assert_int_eq(pgd_weights_find(w, "ids", &info), PGD_OK);
    ck_assert_int_eq(info.dtype, PGD_DTYPE_I64);
    ck_assert_uint_eq(info.bytes, 24);
    ck_assert_int_eq(pgd_weights_read(w, "ids", got, NULL), PGD_OK);
    ck_assert_int_eq(memcmp(got, expect_bytes + 64, 24), 0);
    ck_assert_int_eq(pgd_weights_read(w, "nope", got, NULL), PGD_ERR_NOT_FOUND);
    ck_assert_int_eq(pgd_weights_find(w, "scalar", &info), PGD_OK);
    ck_assert_int_eq(info.ndim, 0);
    ck_assert_uint_eq(info.numel, 1);
    ck_assert_int_eq(pgd_weights_find(w, "empty", &info), PGD_OK);
    ck_assert_uint_eq(info.numel, 0);
    ck_assert_uint_eq(info.bytes, 0);
    ck_assert_int_eq(pgd_weights_find(w, "u16", &info), PGD_OK);
    ck_assert_str_eq(info.dtype_name, "U16");
    ck_assert_int_eq(pgd_weights_find(w, "w.f16", NULL), PGD_OK);
    ck_assert_int_eq(pgd_weights_find(w, "nope", &info), PGD_ERR_NOT_FOUND);
    ck_assert_int_eq(pgd_weights_find(w, "__metadata__", &info), PGD_ERR_NOT_FOUND);

    pgd_error *err = NULL;
    float out[16];
    double want[16];
    PGD_CHECK_OK(pgd_weights_to_float(w, "w.f32", out, &err), &err);
    for (int i = 0; i < 6; i++)
        ck_assert_uint_eq(bits(out[i]), bits(f32_vals[i]));
    PGD_CHECK_OK(pgd_weights_to_float(w, "w.f16", out, &err), &err);
    for (size_t i = 0; i < N_HALF; i++)
        want[i] = half_want(i);
    check_exact(out, want, N_HALF, "f16");
    PGD_CHECK_OK(pgd_weights_to_float(w, "w.bf16", out, &err), &err);
    for (size_t i = 0; i < N_BF16; i++)
        want[i] = bf16_want(i);
    check_exact(out, want, N_BF16, "bf16");
    PGD_CHECK_OK(pgd_weights_to_float(w, "w.f64", out, &err), &err);
    for (size_t i = 0; i < 6; i++)
        want[i] = f64_want(i);
    check_exact(out, want, 6, "f64");
    PGD_CHECK_OK(pgd_weights_to_float(w, "scalar", out, &err), &err);
    ck_assert(out[0] == 42.0f);
    PGD_CHECK_OK(pgd_weights_to_float(w, "empty", NULL, &err), &err);

    ck_assert_int_eq(pgd_weights_to_float(w, "ids", out, &err), PGD_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(pgd_error_get_message(err), "I64") &&
                      strstr(pgd_error_get_message(err), "mixed.safetensors"),
                  "%s", pgd_error_get_message(err));
    pgd_error_destroy(err);
    err = NULL;
    ck_assert_int_eq(pgd_weights_to_float(w, "u16", out, &err), PGD_ERR_UNSUPPORTED);
    ck_assert(strstr(pgd_error_get_message(err), "U16") != NULL);
    pgd_error_destroy(err);
    err = NULL;
    ck_assert_int_eq(pgd_weights_to_float(w, "missing", out, &err), PGD_ERR_NOT_FOUND);
    ck_assert(strstr(pgd_error_get_message(err), "missing") != NULL);
    pgd_error_destroy(err);

    ck_assert_str_eq(pgd_dtype_name(PGD_DTYPE_BF16), "BF16");
    ck_assert_uint_eq(pgd_dtype_size(PGD_DTYPE_F8_E5M2), 1);
    ck_assert_uint_eq(pgd_dtype_size(PGD_DTYPE_I64), 8);
    pgd_weights_destroy(w);
    pgd_weights_destroy(NULL);
    free(path);
}
END_TEST

/* Every half bit pattern against an independent decoding by the formula. */
START_TEST(half_all_patterns)
{
    size_t n = 65536;
    unsigned char *d = malloc(2 * n);
    for (size_t i = 0; i < n; i++)
        put_u16(d + 2 * i, (uint16_t)i);
    char *path = write_st(
        "half.safetensors",
        "{\"h\":{\"dtype\":\"F16\",\"shape\":[256,256],\"data_offsets\":[0,131072]}}", d, 2 * n);
    pgd_weights *w = open_ok(path);
    float *out = malloc(n * sizeof *out);
    double *want = malloc(n * sizeof *want);
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_weights_to_float(w, "h", out, &err), &err);
    for (size_t i = 0; i < n; i++) {
        int s = (int)(i >> 15), e = (int)((i >> 10) & 31), m = (int)(i & 1023);
        double v = e == 0    ? ldexp(m, -24)
                   : e == 31 ? (m ? NAN : INFINITY)
                             : ldexp(1024 + m, e - 25);
        want[i] = s ? -v : v;
    }
    check_exact(out, want, n, "f16 all");
    /* NaN payloads survive: quiet bit and low bits shifted into place */
    ck_assert_uint_eq(bits(out[0x7e01]), 0x7fc02000u);
    ck_assert_uint_eq(bits(out[0x7c01]), 0x7f802000u);
    pgd_weights_destroy(w);
    free(out);
    free(want);
    free(d);
    free(path);
}
END_TEST

START_TEST(many_and_empty)
{
    /* 3000 tensors of sizes 0..4 F32 elements, names given in reverse order of offsets. */
    size_t n = 3000, cap = 200 * n + 16, len = 0;
    char *h = malloc(cap);
    uint64_t *begin = malloc(n * sizeof *begin);
    uint64_t at = 0;
    for (size_t i = 0; i < n; i++) {
        begin[i] = at;
        at += 4 * (i % 5);
    }
    len += (size_t)snprintf(h + len, cap - len, "{");
    for (size_t k = 0; k < n; k++) {
        size_t i = n - 1 - k;
        len += (size_t)snprintf(h + len, cap - len,
                                "%s\"layer.%zu.w\":{\"dtype\":\"F32\",\"shape\":[%zu],"
                                "\"data_offsets\":[%llu,%llu]}",
                                k ? "," : "", i, i % 5, (unsigned long long)begin[i],
                                (unsigned long long)(begin[i] + 4 * (i % 5)));
    }
    snprintf(h + len, cap - len, "}");
    unsigned char *d = malloc(at);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < i % 5; j++)
            put_f32(d + begin[i] + 4 * j, (float)(i * 10 + j));
    char *path = write_st("many.safetensors", h, d, at);
    pgd_weights *w = open_ok(path);
    ck_assert_uint_eq(pgd_weights_get_count(w), n);
    pgd_error *err = NULL;
    for (size_t i = 0; i < n; i++) {
        char name[64];
        snprintf(name, sizeof name, "layer.%zu.w", i);
        pgd_weight_info info;
        ck_assert_int_eq(pgd_weights_find(w, name, &info), PGD_OK);
        ck_assert_uint_eq(info.numel, i % 5);
        ck_assert_uint_eq(info.offset, begin[i]);
        float v[4];
        PGD_CHECK_OK(pgd_weights_to_float(w, name, v, &err), &err);
        for (size_t j = 0; j < i % 5; j++)
            ck_assert(v[j] == (float)(i * 10 + j));
    }
    /* listing follows the offsets: every name's offset is non-decreasing */
    uint64_t prev = 0;
    for (size_t i = 0; i < n; i++) {
        pgd_weight_info info;
        ck_assert_int_eq(pgd_weights_find(w, pgd_weights_get_name(w, i), &info), PGD_OK);
        ck_assert_uint_ge(info.offset, prev);
        prev = info.offset;
    }
    pgd_weights_destroy(w);
    free(path);

    /* no tensors at all */
    path = write_st("empty.safetensors", "{}", NULL, 0);
    w = open_ok(path);
    ck_assert_uint_eq(pgd_weights_get_count(w), 0);
    ck_assert_ptr_null(pgd_weights_get_name(w, 0));
    ck_assert_ptr_null(pgd_weights_get_metadata(w, "x"));
    ck_assert_int_eq(pgd_weights_find(w, "x", NULL), PGD_ERR_NOT_FOUND);
    pgd_weights_destroy(w);
    free(path);
    /* only metadata, padded header (trailing spaces are allowed by the format) */
    path = write_st("meta-only.safetensors", "{\"__metadata__\":{\"a\":\"b\"}}    ", NULL, 0);
    w = open_ok(path);
    ck_assert_uint_eq(pgd_weights_get_count(w), 0);
    ck_assert_str_eq(pgd_weights_get_metadata(w, "a"), "b");
    pgd_weights_destroy(w);
    free(path);
    /* only zero-size tensors */
    path = write_st("zeros.safetensors",
                    "{\"a\":{\"dtype\":\"BF16\",\"shape\":[0],\"data_offsets\":[0,0]},"
                    "\"b\":{\"dtype\":\"I8\",\"shape\":[4,0,2],\"data_offsets\":[0,0]}}",
                    NULL, 0);
    w = open_ok(path);
    ck_assert_uint_eq(pgd_weights_get_count(w), 2);
    pgd_weights_destroy(w);
    free(path);
    free(d);
    free(h);
    free(begin);
}
END_TEST

START_TEST(upload_every_device)
{
    /* finite values only; the device copies what the host converted, bit for bit */
    size_t n = 1000;
    unsigned char *d = malloc(2 * n + 2 * n + 4 * n + 4);
    pgd_rng r;
    pgd_rng_seed(&r, 5);
    for (size_t i = 0; i < n; i++) {
        put_u16(d + 2 * i, (uint16_t)(pgd_rng_next(&r) & 0x7bff)); /* exponent < 31 */
        put_u16(d + 2 * n + 2 * i, (uint16_t)((pgd_rng_next(&r) & 0x3fff) + 0x2000));
        put_f32(d + 4 * n + 4 * i, pgd_rng_float(&r));
    }
    put_f32(d + 8 * n, -3.5f);
    char h[1024];
    snprintf(h, sizeof h,
             "{\"h\":{\"dtype\":\"F16\",\"shape\":[10,100],\"data_offsets\":[0,%zu]},"
             "\"b\":{\"dtype\":\"BF16\",\"shape\":[2,5,100],\"data_offsets\":[%zu,%zu]},"
             "\"f\":{\"dtype\":\"F32\",\"shape\":[1000],\"data_offsets\":[%zu,%zu]},"
             "\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[%zu,%zu]},"
             "\"z\":{\"dtype\":\"F16\",\"shape\":[3,0],\"data_offsets\":[%zu,%zu]},"
             "\"i\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[%zu,%zu]}}",
             2 * n, 2 * n, 4 * n, 4 * n, 8 * n, 8 * n, 8 * n + 4, 8 * n + 4, 8 * n + 4, 8 * n + 4,
             8 * n + 8);
    unsigned char *d2 = realloc(d, 8 * n + 8);
    ck_assert_ptr_nonnull(d2);
    d = d2;
    memset(d + 8 * n + 4, 0, 4);
    char *path = write_st("upload.safetensors", h, d, 8 * n + 8);
    pgd_weights *w = open_ok(path);

    size_t nd;
    const pgd_device_info *devs = pgd_test_devices(&nd);
    const char *names[] = {"h", "b", "f", "s", "z"};
    float *host = malloc(n * sizeof *host), *back = malloc(n * sizeof *back);
    for (size_t k = 0; k < nd; k++) {
        pgd_ctx *ctx = pgd_test_ctx(&devs[k]);
        pgd_error *err = NULL;
        for (size_t t = 0; t < 5; t++) {
            pgd_weight_info info;
            ck_assert_int_eq(pgd_weights_find(w, names[t], &info), PGD_OK);
            pgd_tensor *x = NULL;
            PGD_CHECK_OK(pgd_weights_upload(ctx, w, names[t], &x, &err), &err);
            if (info.ndim == 0) {
                ck_assert_int_eq(pgd_tensor_get_ndim(x), 1);
                ck_assert_int_eq(pgd_tensor_get_dim(x, 0), 1);
            } else {
                ck_assert_int_eq(pgd_tensor_get_ndim(x), info.ndim);
                for (int i = 0; i < info.ndim; i++)
                    ck_assert_int_eq(pgd_tensor_get_dim(x, i), info.shape[i]);
            }
            ck_assert_uint_eq((uint64_t)pgd_tensor_get_numel(x), info.numel);
            if (info.numel) {
                PGD_CHECK_OK(pgd_weights_to_float(w, names[t], host, &err), &err);
                PGD_CHECK_OK(pgd_tensor_download(x, back, &err), &err);
                ck_assert_msg(memcmp(host, back, info.numel * sizeof *host) == 0,
                              "%s on %s differs after download", names[t], devs[k].name);
            }
            pgd_tensor_destroy(x);
        }
        /* spot checks against independent values */
        pgd_tensor *x = NULL;
        PGD_CHECK_OK(pgd_weights_upload(ctx, w, "s", &x, &err), &err);
        PGD_CHECK_OK(pgd_tensor_download(x, back, &err), &err);
        ck_assert(back[0] == -3.5f);
        pgd_tensor_destroy(x);
        x = (pgd_tensor *)&err;
        ck_assert_int_eq(pgd_weights_upload(ctx, w, "i", &x, &err), PGD_ERR_UNSUPPORTED);
        ck_assert_ptr_null(x);
        ck_assert(strstr(pgd_error_get_message(err), "I32") != NULL);
        pgd_error_destroy(err);
        err = NULL;
        ck_assert_int_eq(pgd_weights_upload(ctx, w, "absent", &x, &err), PGD_ERR_NOT_FOUND);
        pgd_error_destroy(err);
        pgd_ctx_destroy(ctx);
    }
    free(host);
    free(back);
    pgd_weights_destroy(w);
    free(path);
    free(d);
}
END_TEST

/* ---- rejections ---- */

START_TEST(truncated_every_length)
{
    static const char *hdr = "{\"__metadata__\":{\"k\":\"v\"},"
                             "\"a\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[0,6]},"
                             "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[6,14]}}";
    unsigned char data[14];
    for (int i = 0; i < 14; i++)
        data[i] = (unsigned char)(0x30 + i);
    size_t total;
    unsigned char *full = build(hdr, strlen(hdr), data, sizeof data, &total);
    for (size_t len = 0; len <= total; len++) {
        char *path = write_raw("trunc.safetensors", full, len);
        pgd_error *err = NULL;
        pgd_weights *w = NULL;
        int rc = pgd_weights_open(path, &w, &err);
        if (len == total) {
            ck_assert_msg(rc == PGD_OK, "full file rejected: %s", pgd_error_get_message(err));
            ck_assert_uint_eq(pgd_weights_get_count(w), 2);
            pgd_weights_destroy(w);
        } else {
            ck_assert_msg(rc == PGD_ERR_FORMAT, "prefix of %zu bytes: %s", len,
                          pgd_status_name(rc));
            ck_assert_ptr_null(w);
            ck_assert(strstr(pgd_error_get_message(err), "trunc.safetensors") != NULL);
            pgd_error_destroy(err);
        }
        free(path);
    }
    /* and one byte more is trailing data */
    unsigned char *longer = malloc(total + 1);
    memcpy(longer, full, total);
    longer[total] = 0;
    char *path = write_raw("long.safetensors", longer, total + 1);
    expect_fail_path(path, "long.safetensors", PGD_ERR_FORMAT, "trailing");
    free(path);
    free(longer);
    free(full);
}
END_TEST

START_TEST(reject_header_length)
{
    /* header length just above the limit, file otherwise plausible */
    unsigned char raw[64] = {0};
    uint64_t n = 100000001;
    for (int i = 0; i < 8; i++)
        raw[i] = (unsigned char)(n >> (8 * i));
    memcpy(raw + 8, "{}", 2);
    char *path = write_raw("hlen.safetensors", raw, sizeof raw);
    expect_fail_path(path, "hlen.safetensors", PGD_ERR_FORMAT, "exceeds the limit");
    free(path);
    /* all ones */
    memset(raw, 0xff, 8);
    path = write_raw("hlen2.safetensors", raw, sizeof raw);
    expect_fail_path(path, "hlen2.safetensors", PGD_ERR_FORMAT, "header length");
    free(path);
    /* within the limit but past the end of the file */
    n = 1000;
    for (int i = 0; i < 8; i++)
        raw[i] = (unsigned char)(n >> (8 * i));
    path = write_raw("eof.safetensors", raw, sizeof raw);
    expect_fail_path(path, "eof.safetensors", PGD_ERR_FORMAT, "past the end of the file");
    free(path);
    /* shorter than the length field */
    path = write_raw("short.safetensors", raw, 5);
    expect_fail_path(path, "short.safetensors", PGD_ERR_FORMAT, "too short");
    free(path);
    /* empty header */
    reject("empty-header.safetensors", "", 0, "JSON");
}
END_TEST

/* Other formats given as weights: the error says the file is not a safetensors file and what it
 * looks like, not that the header length read from its magic number is absurd. */
START_TEST(reject_other_formats)
{
    static const struct {
        const char *name;
        const char *magic;
        size_t len;
        const char *says;
    } cases[] = {
        {"photo.jpg", "\xff\xd8\xff\xe0\x00\x10JFIF\x00", 11, "JPEG"},
        {"img.png", "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", 16, "PNG"},
        {"model.pth", "PK\x03\x04\x14\x00\x00\x00\x08\x00", 10, "ZIP"},
        {"old.pt",
         "\x80\x02\x8a\x0alZ\xfc\x9c"
         "F\xf9",
         10, "pickle"},
        {"model.onnx",
         "\x08\x07\x12\x07pytorch\x1a\x03"
         "2.1",
         16, "ONNX"},
        {"arr.npy", "\x93NUMPY\x01\x00v\x00{'descr'", 19, "NumPy"},
        {"w.h5", "\x89HDF\r\n\x1a\n\x00\x00", 10, "HDF5"},
        {"m.gguf", "GGUF\x03\x00\x00\x00\x00\x00", 10, "GGUF"},
        {"w.gz", "\x1f\x8b\x08\x00\x00\x00\x00\x00", 8, "gzip"},
        {"cfg.json", "{\"architectures\": [\"ViT\"]}", 27, "JSON"},
        {"short.jpg", "\xff\xd8\xff\xe0", 4, "JPEG"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        unsigned char raw[256] = {0};
        memcpy(raw, cases[i].magic, cases[i].len);
        size_t n = cases[i].len < 8 ? cases[i].len : sizeof raw;
        char *path = write_raw(cases[i].name, raw, n);
        expect_fail_path(path, cases[i].name, PGD_ERR_FORMAT, "not a safetensors file");
        expect_fail_path(path, cases[i].name, PGD_ERR_FORMAT, cases[i].says);
        free(path);
    }
}
END_TEST

START_TEST(reject_io)
{
    char *path = join("does-not-exist.safetensors");
    expect_fail_path(path, "does-not-exist.safetensors", PGD_ERR_NOT_FOUND, "cannot open");
    free(path);
    expect_fail_path(tmp_dir, "pagoda-safetensors", PGD_ERR_IO, "regular file");
    pgd_error *err = NULL;
    ck_assert_int_eq(pgd_weights_open(NULL, NULL, &err), PGD_ERR_INVALID_ARGUMENT);
    pgd_error_destroy(err);
}
END_TEST

#define T(name, body) "\"" name "\":" body
#define F32_2(off0, off1) "{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[" #off0 "," #off1 "]}"

START_TEST(reject_json)
{
    reject("badjson.safetensors", "{\"a\": ", 0, "not valid JSON");
    reject("badjson2.safetensors", "{\"a\":{}} x", 0, "not valid JSON");
    reject("utf8.safetensors",
           "{\"a\xff\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "UTF-8");
    reject("utf8-overlong.safetensors",
           "{\"a\xc0\xaf\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "UTF-8");
    reject("utf8-surrogate.safetensors",
           "{\"a\xed\xa0\x80\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
           "UTF-8");
    reject("utf8-meta.safetensors", "{\"__metadata__\":{\"k\":\"v\xe2\x82\"}}", 0, "UTF-8");
    reject("dup.safetensors", "{" T("a", F32_2(0, 8)) "," T("a", F32_2(8, 16)) "}", 16,
           "duplicate");
    reject("dup-field.safetensors",
           "{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
           "duplicate");
    reject("array.safetensors", "[1,2]", 0, "not a JSON object");
    reject("string.safetensors", "\"hi\"", 0, "not a JSON object");
    reject("entry.safetensors", "{\"a\":5}", 0, "not an object");
    reject("nul.safetensors",
           "{\"a\\u0000b\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}", 4, "JSON");
}
END_TEST

START_TEST(reject_fields)
{
    reject("dtype.safetensors", "{\"a\":{\"dtype\":\"F17\",\"shape\":[2],\"data_offsets\":[0,8]}}",
           8, "unknown dtype 'F17'");
    /* names are escaped in messages */
    reject("escape.safetensors",
           "{\"a\\u0001'b\":{\"dtype\":\"F17\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
           "tensor 'a\\x01\\x27b'");
    reject("dtype-case.safetensors",
           "{\"a\":{\"dtype\":\"f32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "unknown dtype");
    reject("dtype-type.safetensors", "{\"a\":{\"dtype\":4,\"shape\":[2],\"data_offsets\":[0,8]}}",
           8, "dtype is not a string");
    reject("missing.safetensors", "{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", 8,
           "missing field 'shape'");
    reject("missing2.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8,
           "missing field 'data_offsets'");
    reject("missing3.safetensors", "{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
           "missing field 'dtype'");
    reject("extra.safetensors",
           "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"foo\":1}}", 8,
           "unknown field 'foo'");
    reject("neg.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}",
           8, "negative");
    reject("real.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}",
           8, "not an integer");
    reject("str-dim.safetensors",
           "{\"a\":{\"dtype\":\"F32\",\"shape\":[\"2\"],\"data_offsets\":[0,8]}}", 8,
           "not an integer");
    reject("shape-obj.safetensors",
           "{\"a\":{\"dtype\":\"F32\",\"shape\":{},\"data_offsets\":[0,8]}}", 8,
           "shape is not an array");
    reject("rank9.safetensors",
           "{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}", 1,
           "rank 9");
    reject("overflow.safetensors",
           "{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904,16],\"data_offsets\":[0,0]}}",
           0, "overflow");
    reject("overflow2.safetensors",
           "{\"a\":{\"dtype\":\"F64\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,0]}}",
           0, "overflow");
    reject("bigint.safetensors",
           "{\"a\":{\"dtype\":\"U8\",\"shape\":[99999999999999999999],\"data_offsets\":[0,0]}}", 0,
           "JSON");
    reject("offs-len.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}",
           8, "two integers");
    reject("offs-real.safetensors",
           "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8.0]}}", 8, "two integers");
    reject("offs-neg.safetensors",
           "{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[-4,-4]}}", 0, "negative");
    reject("offs-order.safetensors",
           "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8,
           "begin after end");
    reject("size.safetensors",
           "{\"blocks.0.attn.qkv.weight\":{\"dtype\":\"F32\",\"shape\":[3,4],"
           "\"data_offsets\":[0,100]}}",
           100,
           "tensor 'blocks.0.attn.qkv.weight': data_offsets [0, 100] hold 100 bytes but shape "
           "[3, 4] of F32 needs 48");
    reject("empty-name.safetensors",
           "{\"\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "empty name");
    char h[2048];
    char longname[1026];
    memset(longname, 'n', 1025);
    longname[1025] = 0;
    snprintf(h, sizeof h, "{\"%s\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
             longname);
    reject("long-name.safetensors", h, 8, "too long");
    /* 1024 bytes is fine */
    longname[1024] = 0;
    snprintf(h, sizeof h, "{\"%s\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
             longname);
    char *path = write_st("name1024.safetensors", h, NULL, 8);
    pgd_weights *w = open_ok(path);
    ck_assert_int_eq(pgd_weights_find(w, longname, NULL), PGD_OK);
    pgd_weights_destroy(w);
    free(path);
    reject("meta.safetensors", "{\"__metadata__\":{\"a\":\"b\",\"n\":1}}", 0,
           "__metadata__ value of 'n' is not a string");
    reject("meta-null.safetensors", "{\"__metadata__\":{\"n\":null}}", 0, "not a string");
    reject("meta-obj.safetensors", "{\"__metadata__\":[\"a\"]}", 0,
           "__metadata__ is not an object");
}
END_TEST

START_TEST(reject_layout)
{
    reject("start.safetensors", "{" T("a", F32_2(4, 12)) "}", 12, "start at 0");
    reject("gap.safetensors", "{" T("a", F32_2(0, 8)) "," T("b", F32_2(12, 20)) "}", 20, "gap");
    reject("overlap.safetensors", "{" T("a", F32_2(0, 8)) "," T("b", F32_2(4, 12)) "}", 12,
           "overlap");
    reject("same.safetensors", "{" T("a", F32_2(0, 8)) "," T("b", F32_2(0, 8)) "}", 8, "overlap");
    reject("beyond.safetensors", "{" T("a", F32_2(0, 8)) "," T("b", F32_2(8, 16)) "}", 12,
           "beyond the data section");
    reject("trailing.safetensors", "{" T("a", F32_2(0, 8)) "}", 9, "trailing");
    reject("trailing-empty.safetensors", "{}", 3, "trailing");
    /* out-of-order listing with contiguous ranges is fine */
    char *path = write_st("unordered.safetensors",
                          "{" T("b", F32_2(8, 16)) "," T("a", F32_2(0, 8)) "}", NULL, 16);
    pgd_weights *w = open_ok(path);
    ck_assert_str_eq(pgd_weights_get_name(w, 0), "a");
    ck_assert_str_eq(pgd_weights_get_name(w, 1), "b");
    pgd_weights_destroy(w);
    free(path);
}
END_TEST

int main(void)
{
    tmp_dir = pgd_test_tempdir("safetensors");
    if (!tmp_dir) {
        fprintf(stderr, "cannot create a temp dir\n");
        return 1;
    }
    Suite *s = suite_create("safetensors");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, valid_mixed);
    tcase_add_test(tc, half_all_patterns);
    tcase_add_test(tc, many_and_empty);
    tcase_add_test(tc, truncated_every_length);
    tcase_add_test(tc, reject_header_length);
    tcase_add_test(tc, reject_other_formats);
    tcase_add_test(tc, reject_io);
    tcase_add_test(tc, reject_json);
    tcase_add_test(tc, reject_fields);
    tcase_add_test(tc, reject_layout);
    tcase_add_test(tc, upload_every_device);
    suite_add_tcase(s, tc);
    int rc = pgd_test_run(s);
    pgd_test_rmtree(tmp_dir);
    free(tmp_dir);
    return rc;
}
