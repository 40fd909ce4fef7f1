/* npy.c — NumPy .npy files (format versions 1.0–3.0), float32 arrays in and out.
 *
 * Reading accepts little-endian float32 ('<f4') and float64 ('<f8', converted), C order, up to
 * PGD_MAX_DIMS dims; the header is a Python dict literal, parsed strictly as NumPy does (see
 * below). Writing goes through a pgd_outfile (core/outfile.c): complete or not at all. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

/* The header is the repr() of a Python dict, which NumPy reads with ast.literal_eval and then
 * checks: exactly the keys 'descr', 'fortran_order' and 'shape'; shape a tuple of ints;
 * fortran_order a bool. This parser accepts the subset of Python literal syntax such a dict is
 * written in — {'descr': '<f4', 'fortran_order': False, 'shape': (1, 3, 32, 32), } — and refuses
 * what NumPy refuses: a missing or unknown key, a value that is not a bool (`Falsey`, `0`), a
 * shape that is not a tuple of integers (`(1 3 32 32)`, `[2, 3]`, `(3)`), anything after the
 * closing brace but the padding. It is stricter than NumPy in four places, all of which NumPy's
 * own writer never produces: a duplicate key (NumPy keeps the last one), string escapes or
 * implicit concatenation, integer spellings other than plain decimal (0x10, 1_000, True), and
 * comments. Whitespace is Python's inside the braces: spaces, tabs, newlines. */

/* NumPy refuses a header longer than this (numpy.lib.format._MAX_HEADER_SIZE) by default. */
#define NPY_MAX_HEADER 10000

typedef struct npy_cursor {
    const char *start, *p, *end;
    const char *path;
    pgd_error **err;
} npy_cursor;

typedef struct npy_header {
    char descr[16];
    int fortran; /* -1 while unseen */
    int ndim;    /* -1 while unseen */
    int64_t shape[PGD_MAX_DIMS];
    uint64_t count;
} npy_header;

static int npy_fail(npy_cursor *c, const char *what)
{
    return pgd__error_set(c->err, PGD_ERR_FORMAT,
                          "%s: malformed .npy header: %s (at header "
                          "offset %td)",
                          c->path, what, c->p - c->start);
}

static void skip_ws(npy_cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

/* Consumes `ch` after optional whitespace; 0 when it is not there. */
static int accept(npy_cursor *c, char ch)
{
    skip_ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return 1;
    }
    return 0;
}

/* A quoted string without escapes into buf (at most size - 1 bytes). */
static int lit_string(npy_cursor *c, char *buf, size_t size, const char *what)
{
    skip_ws(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"'))
        return npy_fail(c, what);
    char q = *c->p++;
    size_t n = 0;
    while (c->p < c->end && *c->p != q) {
        unsigned char ch = (unsigned char)*c->p;
        if (ch == '\\' || ch == '\n' || ch < 0x20 || ch >= 0x7f)
            return npy_fail(c, "string with an escape, a control or a non-ASCII byte");
        if (n + 1 >= size)
            return npy_fail(c, "string too long");
        buf[n++] = *c->p++;
    }
    if (c->p >= c->end)
        return npy_fail(c, "unterminated string");
    c->p++;
    buf[n] = 0;
    return PGD_OK;
}

/* True or False, ending at a character that cannot continue a Python name. */
static int lit_bool(npy_cursor *c, int *out)
{
    skip_ws(c);
    size_t left = (size_t)(c->end - c->p), n = 0;
    if (left >= 4 && !memcmp(c->p, "True", 4))
        n = 4, *out = 1;
    else if (left >= 5 && !memcmp(c->p, "False", 5))
        n = 5, *out = 0;
    if (!n || (n < left && (isalnum((unsigned char)c->p[n]) || c->p[n] == '_')))
        return npy_fail(c, "'fortran_order' is not True or False");
    c->p += n;
    return PGD_OK;
}

/* A non-negative decimal integer (no sign, no leading zeros but "0", at most 2^40). */
static int lit_dim(npy_cursor *c, uint64_t *v)
{
    skip_ws(c);
    const char *s = c->p;
    *v = 0;
    while (c->p < c->end && isdigit((unsigned char)*c->p)) {
        if (*v > (UINT64_C(1) << 40))
            return npy_fail(c, "dimension too large");
        *v = *v * 10 + (uint64_t)(*c->p++ - '0');
    }
    if (c->p == s)
        return npy_fail(c, "'shape' entry is not a non-negative integer");
    if (c->p - s > 1 && *s == '0')
        return npy_fail(c, "'shape' entry has a leading zero");
    if (c->p < c->end && (isalpha((unsigned char)*c->p) || *c->p == '_' || *c->p == '.'))
        return npy_fail(c, "'shape' entry is not a plain decimal integer");
    return PGD_OK;
}

/* A tuple of dims: "()", "(3,)", "(2, 3)", "(2, 3,)"; "(3)" is an int in Python, not a tuple. */
static int lit_shape(npy_cursor *c, npy_header *h)
{
    if (!accept(c, '('))
        return npy_fail(c, "'shape' is not a tuple");
    h->ndim = 0;
    h->count = 1;
    int commas = 0;
    while (!accept(c, ')')) {
        if (h->ndim >= PGD_MAX_DIMS)
            return pgd__error_set(c->err, PGD_ERR_FORMAT, "%s: 'shape' has more than %d dims",
                                  c->path, PGD_MAX_DIMS);
        if (h->ndim > commas)
            return npy_fail(c, "'shape' entries are not separated by commas");
        uint64_t v;
        int rc = lit_dim(c, &v);
        if (rc)
            return rc;
        if (v && h->count > (UINT64_C(1) << 40) / v)
            return npy_fail(c, "'shape' holds too many elements");
        h->count *= v;
        h->shape[h->ndim++] = (int64_t)v;
        commas += accept(c, ',');
    }
    if (h->ndim == 1 && commas == 0)
        return npy_fail(c, "'shape' is an integer in parentheses, not a 1-tuple (write (n,))");
    return PGD_OK;
}

/* One "'key': value" pair. */
static int header_item(npy_cursor *c, npy_header *h)
{
    char key[32];
    const char *at = c->p;
    int rc = lit_string(c, key, sizeof key, "expected a quoted key");
    if (rc)
        return rc;
    int seen = !strcmp(key, "descr")           ? h->descr[0] != 0
               : !strcmp(key, "fortran_order") ? h->fortran >= 0
               : !strcmp(key, "shape")         ? h->ndim >= 0
                                               : -1;
    if (seen) {
        c->p = at;
        return npy_fail(c, seen < 0 ? "unknown key (only 'descr', 'fortran_order', 'shape')"
                                    : "duplicate key");
    }
    if (!accept(c, ':'))
        return npy_fail(c, "expected ':' after the key");
    if (!strcmp(key, "descr")) {
        rc = lit_string(c, h->descr, sizeof h->descr, "'descr' is not a quoted string");
        if (!rc && !h->descr[0])
            rc = npy_fail(c, "'descr' is empty");
        return rc;
    }
    if (!strcmp(key, "fortran_order"))
        return lit_bool(c, &h->fortran);
    return lit_shape(c, h);
}

/* The dict, then nothing but whitespace. */
static int parse_dict(npy_cursor *c, npy_header *h)
{
    memset(h, 0, sizeof *h);
    h->fortran = h->ndim = -1;
    if (!accept(c, '{'))
        return npy_fail(c, "not a dict (no '{')");
    while (!accept(c, '}')) {
        int rc = header_item(c, h);
        if (rc)
            return rc;
        if (!accept(c, ',')) {
            if (!accept(c, '}'))
                return npy_fail(c, "expected ',' or '}'");
            break;
        }
    }
    skip_ws(c);
    if (c->p != c->end)
        return npy_fail(c, "bytes after the closing '}'");
    if (!h->descr[0] || h->fortran < 0 || h->ndim < 0)
        return pgd__error_set(c->err, PGD_ERR_FORMAT, "%s: .npy header lacks '%s'", c->path,
                              !h->descr[0]     ? "descr"
                              : h->fortran < 0 ? "fortran_order"
                                               : "shape");
    return PGD_OK;
}

/* Magic, version and header length: *hstart and *hlen locate the header in the file. */
static int parse_preamble(const unsigned char *file, size_t size, const char *path, size_t *hstart,
                          size_t *hlen, pgd_error **err)
{
    if (size < 10 || memcmp(file, "\x93NUMPY", 6) != 0)
        return pgd__error_set(err, PGD_ERR_FORMAT, "%s: not a .npy file (no \\x93NUMPY magic)",
                              path);
    if (file[6] == 1 && file[7] == 0) {
        *hlen = (size_t)file[8] | (size_t)file[9] << 8;
        *hstart = 10;
    } else if ((file[6] == 2 || file[6] == 3) && file[7] == 0 && size >= 12) {
        *hlen = (size_t)file[8] | (size_t)file[9] << 8 | (size_t)file[10] << 16 |
                (size_t)file[11] << 24;
        *hstart = 12;
    } else {
        return pgd__error_set(err, PGD_ERR_FORMAT, "%s: unsupported .npy version %d.%d", path,
                              file[6], file[7]);
    }
    if (*hlen > NPY_MAX_HEADER || *hstart + *hlen > size)
        return pgd__error_set(err, PGD_ERR_FORMAT,
                              "%s: header length %zu runs past the file "
                              "(%zu bytes) or exceeds NumPy's limit of %d bytes",
                              path, *hlen, size, NPY_MAX_HEADER);
    return PGD_OK;
}

/* The data section as floats, once the header has been checked against it. */
static int convert_body(const unsigned char *src, const npy_header *h, int f64, const char *path,
                        float **data, pgd_error **err)
{
    float *out = malloc((size_t)h->count * sizeof *out + 1);
    if (!out)
        return pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "%s: %llu floats", path,
                              (unsigned long long)h->count);
    for (uint64_t i = 0; i < h->count; i++) {
        if (f64) {
            double d;
            memcpy(&d, src + 8 * i, 8);
            out[i] = (float)d;
        } else {
            memcpy(&out[i], src + 4 * i, 4);
        }
    }
    *data = out;
    return PGD_OK;
}

pgd_status pgd_npy_read(const char *path, float **data, int *ndim, int64_t shape[PGD_MAX_DIMS],
                        pgd_error **err)
{
    *data = NULL;
    *ndim = 0;
    unsigned char *file = NULL;
    size_t size = 0;
    int rc = pgd__file_read(path, NULL, PGD_NPY_MAX_BYTES, &file, &size, err);
    if (rc)
        return rc;
    rc = pgd__npy_parse(file, size, path, data, ndim, shape, err);
    free(file);
    return rc;
}

int pgd__npy_parse(const unsigned char *file, size_t size, const char *path, float **data,
                   int *ndim, int64_t shape[PGD_MAX_DIMS], pgd_error **err)
{
    *data = NULL;
    *ndim = 0;
    size_t hstart = 0, hlen = 0;
    int rc = parse_preamble(file, size, path, &hstart, &hlen, err);
    if (rc)
        return rc;
    const char *h = (const char *)file + hstart;
    npy_cursor c = {h, h, h + hlen, path, err};
    npy_header hd;
    rc = parse_dict(&c, &hd);
    if (rc)
        return rc;
    int f64 = !strcmp(hd.descr, "<f8");
    if (!f64 && strcmp(hd.descr, "<f4"))
        return pgd__error_set(err, PGD_ERR_UNSUPPORTED,
                              "%s: dtype '%s' is not little-endian float32 or float64", path,
                              hd.descr);
    if (hd.fortran)
        return pgd__error_set(err, PGD_ERR_UNSUPPORTED,
                              "%s: Fortran-order arrays are not supported", path);
    size_t esize = f64 ? 8 : 4, body = size - hstart - hlen;
    if (hd.count * esize != body)
        return pgd__error_set(err, PGD_ERR_FORMAT,
                              "%s: shape holds %llu elements (%llu bytes) "
                              "but the data has %zu bytes",
                              path, (unsigned long long)hd.count,
                              (unsigned long long)(hd.count * esize), body);
    rc = convert_body(file + hstart + hlen, &hd, f64, path, data, err);
    if (rc)
        return rc;
    *ndim = hd.ndim;
    memcpy(shape, hd.shape, (size_t)hd.ndim * sizeof *shape);
    return PGD_OK;
}

pgd_status pgd_npy_write_to(pgd_outfile *f, const float *data, int ndim, const int64_t *shape,
                            pgd_error **err)
{
    if (!f || ndim < 0 || ndim > PGD_MAX_DIMS || (ndim > 0 && !shape))
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "pgd_npy_write: no file, or ndim %d not in 0..%d", ndim,
                              PGD_MAX_DIMS);
    const char *path = pgd_outfile_get_path(f);
    char dims[256] = "";
    size_t used = 0;
    uint64_t count = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "%s: negative dimension %lld",
                                  path, (long long)shape[i]);
        used += (size_t)snprintf(dims + used, sizeof dims - used, "%lld%s", (long long)shape[i],
                                 ndim == 1 || i < ndim - 1 ? ", " : "");
        if (shape[i] && count > (UINT64_MAX / sizeof(float)) / (uint64_t)shape[i])
            return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "%s: shape [%s...] is too large",
                                  path, dims);
        count *= (uint64_t)shape[i];
    }
    if (count && !data)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "%s: no data", path);
    /* "(2, 3)"; a 1-tuple keeps its comma: "(6, )"; a 0-d array is "()". */
    char header[512];
    int n = snprintf(header, sizeof header,
                     "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }", dims);
    /* Pad with spaces so that magic + length + header + newline is a multiple of 64. */
    size_t total = 10 + (size_t)n + 1, pad = (64 - total % 64) % 64;
    size_t hl = (size_t)n + pad + 1;
    unsigned char pre[10] = {
        0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hl & 255), (unsigned char)(hl >> 8)};
    char spaces[64];
    memset(spaces, ' ', sizeof spaces);
    int rc = pgd_outfile_write(f, pre, sizeof pre, err);
    if (!rc)
        rc = pgd_outfile_write(f, header, (size_t)n, err);
    if (!rc)
        rc = pgd_outfile_write(f, spaces, pad, err);
    if (!rc)
        rc = pgd_outfile_write(f, "\n", 1, err);
    if (!rc && count)
        rc = pgd_outfile_write(f, data, (size_t)count * sizeof(float), err);
    return rc;
}

pgd_status pgd_npy_write(const char *path, const float *data, int ndim, const int64_t *shape,
                         pgd_error **err)
{
    pgd_outfile *f = NULL;
    int rc = pgd_outfile_open(path, &f, err);
    if (!rc)
        rc = pgd_npy_write_to(f, data, ndim, shape, err);
    if (rc) {
        pgd_outfile_abort(f);
        return rc;
    }
    return pgd_outfile_commit(f, err);
}
