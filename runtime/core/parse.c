/* parse.c — strict number parsing (pgd_parse_*): the one parser behind every PAGODA_* variable,
 * the device selector and the apps' options and item specs. Hand-written rather than strtol:
 * strtol skips leading space, takes "0x" and a '+', and its result is usually cast to int, which
 * truncates 4294967299 to 3. Here the whole string is the number or it is refused. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* The magnitude of the digits s[0..n), all of which must be digits (at least one), refused if it
 * exceeds `limit`. */
static int parse_magnitude(const char *s, size_t n, uint64_t limit, uint64_t *out)
{
    if (n == 0)
        return PGD_ERR_INVALID_ARGUMENT;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (!is_digit(s[i]))
            return PGD_ERR_INVALID_ARGUMENT;
        unsigned d = (unsigned)(s[i] - '0');
        if (d > limit || v > (limit - d) / 10)
            return PGD_ERR_INVALID_ARGUMENT;
        v = v * 10 + d;
    }
    *out = v;
    return PGD_OK;
}

/* pgd_parse_int64 on the n characters at s (the list parser's items are not NUL-terminated). */
static int parse_int64n(const char *s, size_t n, int64_t min, int64_t max, int64_t *out)
{
    int neg = n > 0 && s[0] == '-';
    uint64_t limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX, mag;
    if (parse_magnitude(s + neg, n - (size_t)neg, limit, &mag))
        return PGD_ERR_INVALID_ARGUMENT;
    /* -(INT64_MAX + 1) without overflowing: negate the magnitude less one, then subtract one. */
    int64_t v = neg ? (mag ? -(int64_t)(mag - 1) - 1 : 0) : (int64_t)mag;
    if (v < min || v > max)
        return PGD_ERR_INVALID_ARGUMENT;
    *out = v;
    return PGD_OK;
}

pgd_status pgd_parse_int64(const char *s, int64_t min, int64_t max, int64_t *out)
{
    if (!s || !out)
        return PGD_ERR_INVALID_ARGUMENT;
    return parse_int64n(s, strlen(s), min, max, out);
}

pgd_status pgd_parse_int64_list(const char *s, char sep, int64_t min, int64_t max, int64_t *out,
                                int min_count, int max_count, int *count)
{
    if (!s || !out || !count || sep == '\0' || is_digit(sep) || sep == '-' || max_count < 1)
        return PGD_ERR_INVALID_ARGUMENT;
    int n = 0;
    const char *p = s;
    for (;;) {
        const char *e = strchr(p, sep);
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (n == max_count)
            return PGD_ERR_INVALID_ARGUMENT; /* one item too many */
        int64_t v;
        if (parse_int64n(p, len, min, max, &v))
            return PGD_ERR_INVALID_ARGUMENT;
        out[n++] = v;
        if (!e)
            break;
        p = e + 1;
    }
    if (n < min_count)
        return PGD_ERR_INVALID_ARGUMENT;
    *count = n;
    return PGD_OK;
}

pgd_status pgd_parse_double(const char *s, double min, double max, double *out)
{
    if (!s || !out)
        return PGD_ERR_INVALID_ARGUMENT;
    /* The grammar first: strtod alone would also take "inf", "nan", "0x1p3" and leading space. */
    const char *p = s;
    if (*p == '-')
        p++;
    size_t whole = 0, frac = 0;
    while (is_digit(p[whole]))
        whole++;
    p += whole;
    if (*p == '.') {
        p++;
        while (is_digit(p[frac]))
            frac++;
        p += frac;
    }
    if (whole + frac == 0)
        return PGD_ERR_INVALID_ARGUMENT;
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-')
            p++;
        if (!is_digit(*p))
            return PGD_ERR_INVALID_ARGUMENT;
        while (is_digit(*p))
            p++;
    }
    if (*p)
        return PGD_ERR_INVALID_ARGUMENT;
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    /* end short of the string: a locale whose decimal point is not '.'; refused, not misread.
     * Overflow gives ±HUGE_VAL and is refused; underflow gives 0 or a subnormal, kept. */
    if (end != p || !isfinite(v) || !(v >= min && v <= max))
        return PGD_ERR_INVALID_ARGUMENT;
    *out = v;
    return PGD_OK;
}

pgd_status pgd_parse_bytes(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    if (!s || !out)
        return PGD_ERR_INVALID_ARGUMENT;
    size_t n = strlen(s);
    int shift = 0;
    if (n > 0) {
        char c = s[n - 1];
        shift = c == 'K' || c == 'k'   ? 10
                : c == 'M' || c == 'm' ? 20
                : c == 'G' || c == 'g' ? 30
                                       : 0;
    }
    uint64_t v;
    if (parse_magnitude(s, n - (shift ? 1 : 0), UINT64_MAX >> shift, &v))
        return PGD_ERR_INVALID_ARGUMENT;
    v <<= shift;
    if (v < min || v > max)
        return PGD_ERR_INVALID_ARGUMENT;
    *out = v;
    return PGD_OK;
}
