/* test_parse.c — the strict number parsers (core/parse.c, pgd_parse_*): what they accept, and
 * every way a value can be refused (overflow, trailing characters, empty, space, signs, hex,
 * inf/nan, range), with *out untouched on refusal. Public API only. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "harness.h"

#define SENTINEL_I ((int64_t)0x5A5A5A5A)
#define SENTINEL_D 12345.678
#define SENTINEL_U ((uint64_t)0xA5A5A5A5)

static void int_ok(const char *s, int64_t min, int64_t max, int64_t want)
{
    int64_t v = SENTINEL_I;
    ck_assert_msg(pgd_parse_int64(s, min, max, &v) == PGD_OK, "'%s' refused", s);
    ck_assert_msg(v == want, "'%s' read as %lld, want %lld", s, (long long)v, (long long)want);
}

static void int_bad(const char *s, int64_t min, int64_t max)
{
    int64_t v = SENTINEL_I;
    ck_assert_msg(pgd_parse_int64(s, min, max, &v) == PGD_ERR_INVALID_ARGUMENT,
                  "'%s' accepted as %lld", s, (long long)v);
    ck_assert_msg(v == SENTINEL_I, "'%s': *out written on refusal", s);
}

START_TEST(int64_accepts)
{
    int_ok("0", INT64_MIN, INT64_MAX, 0);
    int_ok("7", 1, 10, 7);
    int_ok("-0", -5, 5, 0);
    int_ok("-42", -100, 100, -42);
    int_ok("010", 0, 100, 10); /* decimal, not octal */
    int_ok("1", 1, 1, 1);      /* both limits inclusive */
    int_ok("9223372036854775807", INT64_MIN, INT64_MAX, INT64_MAX);
    int_ok("-9223372036854775808", INT64_MIN, INT64_MAX, INT64_MIN);
    int_ok("00000000000000000000000000009", 0, 9, 9); /* leading zeros do not overflow */
}
END_TEST

START_TEST(int64_refuses)
{
    /* overflow, never wrapped or truncated: the old `(int)strtol` read 4294967299 as 3 */
    int_bad("4294967299", 1, 100000);
    int_bad("4294967296", 0, INT32_MAX);
    int_bad("9223372036854775808", INT64_MIN, INT64_MAX);
    int_bad("-9223372036854775809", INT64_MIN, INT64_MAX);
    int_bad("99999999999999999999999", INT64_MIN, INT64_MAX);
    /* range */
    int_bad("0", 1, 10);
    int_bad("11", 1, 10);
    int_bad("-1", 0, 10);
    int_bad("5", 10, 1); /* an empty range refuses everything */
    /* trailing garbage, space, empty */
    int_bad("", 0, 10);
    int_bad("16abc", 0, 100);
    int_bad("5 ", 0, 10);
    int_bad(" 5", 0, 10);
    int_bad("\t5", 0, 10);
    int_bad("5\n", 0, 10);
    int_bad("1.0", 0, 10);
    int_bad("1e3", 0, 10000);
    int_bad("1,2", 0, 10);
    /* signs and bases */
    int_bad("+5", 0, 10);
    int_bad("-", -10, 10);
    int_bad("--5", -10, 10);
    int_bad("-+5", -10, 10);
    int_bad("0x10", 0, 100);
    int_bad("0b1", 0, 100);
    int_bad("١", 0, 10); /* Arabic-Indic digit one: only ASCII digits */
    int64_t v = SENTINEL_I;
    ck_assert_int_eq(pgd_parse_int64(NULL, 0, 10, &v), PGD_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pgd_parse_int64("5", 0, 10, NULL), PGD_ERR_INVALID_ARGUMENT);
}
END_TEST

START_TEST(int64_list)
{
    int64_t v[8];
    int n = -1;
    ck_assert_int_eq(pgd_parse_int64_list("56,56,256", ',', 1, 8192, v, 3, 3, &n), PGD_OK);
    ck_assert_int_eq(n, 3);
    ck_assert(v[0] == 56 && v[1] == 56 && v[2] == 256);
    ck_assert_int_eq(pgd_parse_int64_list("1,2,3,4,5,6,7", ',', 1, 9, v, 7, 8, &n), PGD_OK);
    ck_assert_int_eq(n, 7);
    ck_assert_int_eq(pgd_parse_int64_list("0:-3", ':', -5, 5, v, 2, 2, &n), PGD_OK);
    ck_assert(n == 2 && v[0] == 0 && v[1] == -3);
    ck_assert_int_eq(pgd_parse_int64_list("9", ',', 0, 9, v, 1, 1, &n), PGD_OK);
    static const char *const bad[] = {
        "56,56,256xyz", /* trailing garbage on the last item */
        "56,56x,256",   /* and on one inside */
        "56,56",        /* too few */
        "1,2,3,4",      /* too many */
        "1,,3",         /* empty item */
        ",1,2",
        "1,2,",
        "",
        ",",
        "1, 2,3", /* space */
        "1,2,4294967296000000000000",
        "100000,1,1", /* out of range */
        "1;2;3",      /* another separator */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        n = -1;
        ck_assert_msg(pgd_parse_int64_list(bad[i], ',', 1, 8192, v, 3, 3, &n) ==
                          PGD_ERR_INVALID_ARGUMENT,
                      "'%s' accepted", bad[i]);
        ck_assert_msg(n == -1, "'%s': count written on refusal", bad[i]);
    }
    /* a separator that could be part of a number is refused outright */
    ck_assert_int_eq(pgd_parse_int64_list("1-2", '-', 0, 9, v, 2, 2, &n), PGD_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pgd_parse_int64_list("102", '0', 0, 9, v, 2, 2, &n), PGD_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(pgd_parse_int64_list("1", '\0', 0, 9, v, 1, 1, &n), PGD_ERR_INVALID_ARGUMENT);
}
END_TEST

static void dbl_ok(const char *s, double min, double max, double want)
{
    double v = SENTINEL_D;
    ck_assert_msg(pgd_parse_double(s, min, max, &v) == PGD_OK, "'%s' refused", s);
    ck_assert_msg(v == want, "'%s' read as %.17g, want %.17g", s, v, want);
}

static void dbl_bad(const char *s, double min, double max)
{
    double v = SENTINEL_D;
    ck_assert_msg(pgd_parse_double(s, min, max, &v) == PGD_ERR_INVALID_ARGUMENT,
                  "'%s' accepted as %.17g", s, v);
    ck_assert_msg(v == SENTINEL_D, "'%s': *out written on refusal", s);
}

START_TEST(double_accepts)
{
    dbl_ok("150", 0, 1e9, 150.0);
    dbl_ok("0.5", 0, 1, 0.5);
    dbl_ok(".5", 0, 1, 0.5);
    dbl_ok("5.", 0, 10, 5.0);
    dbl_ok("-2.25", -10, 10, -2.25);
    dbl_ok("1e3", 0, 1e9, 1000.0);
    dbl_ok("1E+3", 0, 1e9, 1000.0);
    dbl_ok("2.5e-1", 0, 1, 0.25);
    dbl_ok("1.7976931348623157e308", 0, DBL_MAX, DBL_MAX);
    dbl_ok("1e-400", 0, 1, 0.0); /* underflow reads as zero */
    dbl_ok("-0", -1, 1, 0.0);
}
END_TEST

START_TEST(double_refuses)
{
    static const char *const bad[] = {
        "nan",   "NaN",  "-nan", "inf", "-inf", "INF", "infinity", "1e999", "-1e999", /* overflow to
                                                                                         infinity */
        "0x1p3", "0x10", /* hexadecimal */
        "",      " 1",   "1 ",   "\t1", "1\n",  "+1",  "1.5x",     "1..5",  ".",      "-",
        "e5",    "1e",   "1e+",  "1,5", "1.0f", "--1", "nan,nan",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        dbl_bad(bad[i], -DBL_MAX, DBL_MAX);
    dbl_bad("-0.5", 0, 10); /* range */
    dbl_bad("10.000001", 0, 10);
    dbl_bad("1", NAN, NAN); /* a NaN limit admits nothing */
    double v;
    ck_assert_int_eq(pgd_parse_double(NULL, 0, 1, &v), PGD_ERR_INVALID_ARGUMENT);
}
END_TEST

static void bytes_ok(const char *s, uint64_t want)
{
    uint64_t v = SENTINEL_U;
    ck_assert_msg(pgd_parse_bytes(s, 1, UINT64_MAX, &v) == PGD_OK, "'%s' refused", s);
    ck_assert_msg(v == want, "'%s' read as %llu", s, (unsigned long long)v);
}

START_TEST(bytes)
{
    bytes_ok("4096", 4096);
    bytes_ok("1K", 1024);
    bytes_ok("512m", (uint64_t)512 << 20);
    bytes_ok("2G", (uint64_t)2 << 30);
    bytes_ok("18446744073709551615", UINT64_MAX);
    bytes_ok("17179869183G", (uint64_t)17179869183 << 30);
    static const char *const bad[] = {
        "0",
        "",
        "K",
        "G",
        "-1",
        "+1",
        " 1",
        "1 ",
        "1KB",
        "1T",
        "1.5G",
        "0x10",
        "18446744073709551616",
        "17179869184G", /* 2^64: overflow, before and after the shift */
        "1GG",
        "lots",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t v = SENTINEL_U;
        ck_assert_msg(pgd_parse_bytes(bad[i], 1, UINT64_MAX, &v) == PGD_ERR_INVALID_ARGUMENT,
                      "'%s' accepted as %llu", bad[i], (unsigned long long)v);
        ck_assert(v == SENTINEL_U);
    }
    uint64_t v;
    ck_assert_int_eq(pgd_parse_bytes("2G", 1, (uint64_t)1 << 30, &v), PGD_ERR_INVALID_ARGUMENT);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("parse");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, int64_accepts);
    tcase_add_test(tc, int64_refuses);
    tcase_add_test(tc, int64_list);
    tcase_add_test(tc, double_accepts);
    tcase_add_test(tc, double_refuses);
    tcase_add_test(tc, bytes);
    suite_add_tcase(s, tc);
    return pgd_test_run(s);
}
