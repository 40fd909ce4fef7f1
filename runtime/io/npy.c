/* npy.c — NumPy .npy files (format versions 1.0–3.0), float32 arrays in and out.
 *
 * Reading accepts little-endian float32 ('<f4') and float64 ('<f8', converted), C order, up to
 * PGD_MAX_DIMS dims; the header is a Python dict literal, parsed strictly for the three keys
 * NumPy writes. Writing goes through a pgd_outfile (core/outfile.c): complete or not at all. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

static const char *skip_ws(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    return p;
}

/* Finds 'key': in the header and returns a pointer just past the colon, or NULL. */
static const char *find_key(const char *h, const char *end, const char *key)
{
    char pat[32];
    snprintf(pat, sizeof pat, "'%s'", key);
    size_t n = strlen(pat);
    for (const char *p = h; p + n <= end; p++) {
        if (!memcmp(p, pat, n)) {
            const char *q = skip_ws(p + n, end);
            return q < end && *q == ':' ? skip_ws(q + 1, end) : NULL;
        }
    }
    return NULL;
}

int pgd_npy_read(const char *path, float **data, int *ndim, int64_t shape[PGD_MAX_DIMS],
                 pgd_error **err)
{
    *data = NULL;
    *ndim = 0;
    unsigned char *file = NULL;
    size_t size = 0;
    if (pgd__read_file(path, &file, &size) != 0)
        return pgd__error_set(err, PGD_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
    int rc = pgd__npy_parse(file, size, path, data, ndim, shape, err);
    free(file);
    return rc;
}

int pgd__npy_parse(const unsigned char *file, size_t size, const char *path, float **data,
                   int *ndim, int64_t shape[PGD_MAX_DIMS], pgd_error **err)
{
    *data = NULL;
    *ndim = 0;
    int rc = PGD_OK;
    size_t hlen = 0, hstart = 0;
    if (size < 10 || memcmp(file, "\x93NUMPY", 6) != 0) {
        rc = pgd__error_set(err, PGD_ERR_FORMAT, "%s: not a .npy file (no \\x93NUMPY magic)", path);
        goto done;
    }
    if (file[6] == 1) {
        hlen = (size_t)file[8] | (size_t)file[9] << 8;
        hstart = 10;
    } else if ((file[6] == 2 || file[6] == 3) && size >= 12) {
        hlen = (size_t)file[8] | (size_t)file[9] << 8 | (size_t)file[10] << 16 |
               (size_t)file[11] << 24;
        hstart = 12;
    } else {
        rc = pgd__error_set(err, PGD_ERR_FORMAT, "%s: unsupported .npy version %d.%d", path,
                            file[6], file[7]);
        goto done;
    }
    if (hlen > 65536 || hstart + hlen > size) {
        rc = pgd__error_set(err, PGD_ERR_FORMAT, "%s: header length %zu runs past the file (%zu "
                            "bytes) or exceeds 64 KiB", path, hlen, size);
        goto done;
    }
    const char *h = (const char *)file + hstart, *end = h + hlen;
    const char *descr = find_key(h, end, "descr");
    const char *fo = find_key(h, end, "fortran_order");
    const char *sh = find_key(h, end, "shape");
    if (!descr || !fo || !sh) {
        rc = pgd__error_set(err, PGD_ERR_FORMAT, "%s: header lacks 'descr', 'fortran_order' or "
                            "'shape'", path);
        goto done;
    }
    int f64 = 0;
    if (end - descr >= 5 && !memcmp(descr, "'<f4'", 5))
        f64 = 0;
    else if (end - descr >= 5 && !memcmp(descr, "'<f8'", 5))
        f64 = 1;
    else {
        rc = pgd__error_set(err, PGD_ERR_UNSUPPORTED,
                            "%s: dtype %.*s is not little-endian float32 or float64", path,
                            (int)(end - descr < 8 ? end - descr : 8), descr);
        goto done;
    }
    if (!(end - fo >= 5 && !memcmp(fo, "False", 5))) {
        rc = pgd__error_set(err, PGD_ERR_UNSUPPORTED, "%s: Fortran-order arrays are not supported",
                            path);
        goto done;
    }
    if (sh >= end || *sh != '(') {
        rc = pgd__error_set(err, PGD_ERR_FORMAT, "%s: 'shape' is not a tuple", path);
        goto done;
    }
    const char *p = sh + 1;
    uint64_t count = 1;
    for (;;) {
        p = skip_ws(p, end);
        if (p < end && *p == ')')
            break;
        if (p >= end || !isdigit((unsigned char)*p) || *ndim >= PGD_MAX_DIMS) {
            rc = pgd__error_set(err, PGD_ERR_FORMAT, "%s: bad 'shape' (at most %d non-negative "
                                "dims)", path, PGD_MAX_DIMS);
            goto done;
        }
        uint64_t v = 0;
        while (p < end && isdigit((unsigned char)*p)) {
            if (v > (UINT64_C(1) << 40)) {
                rc = pgd__error_set(err, PGD_ERR_FORMAT, "%s: dimension too large", path);
                goto done;
            }
            v = v * 10 + (uint64_t)(*p++ - '0');
        }
        if (v && count > (UINT64_C(1) << 40) / v) {
            rc = pgd__error_set(err, PGD_ERR_FORMAT, "%s: too many elements", path);
            goto done;
        }
        count *= v;
        shape[(*ndim)++] = (int64_t)v;
        p = skip_ws(p, end);
        if (p < end && *p == ',')
            p++;
    }
    size_t esize = f64 ? 8 : 4, body = size - hstart - hlen;
    if (count * esize != body) {
        rc = pgd__error_set(err, PGD_ERR_FORMAT, "%s: shape holds %llu elements (%llu bytes) but "
                            "the data has %zu bytes", path, (unsigned long long)count,
                            (unsigned long long)(count * esize), body);
        goto done;
    }
    float *out = malloc((size_t)count * sizeof *out + 1);
    if (!out) {
        rc = pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "%s: %llu floats", path,
                            (unsigned long long)count);
        goto done;
    }
    const unsigned char *src = file + hstart + hlen;
    for (uint64_t i = 0; i < count; i++) {
        if (f64) {
            double d;
            memcpy(&d, src + 8 * i, 8);
            out[i] = (float)d;
        } else {
            memcpy(&out[i], src + 4 * i, 4);
        }
    }
    *data = out;
done:
    if (rc)
        *ndim = 0;
    return rc;
}

int pgd_npy_write_to(pgd_outfile *f, const float *data, int ndim, const int64_t *shape,
                     pgd_error **err)
{
    if (!f || ndim < 0 || ndim > PGD_MAX_DIMS || (ndim > 0 && !shape))
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "pgd_npy_write: no file, or ndim %d not in 0..%d", ndim,
                              PGD_MAX_DIMS);
    const char *path = pgd_outfile_path(f);
    char dims[256] = "";
    size_t used = 0;
    uint64_t count = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "%s: negative dimension %lld",
                                  path, (long long)shape[i]);
        used += (size_t)snprintf(dims + used, sizeof dims - used, "%lld%s", (long long)shape[i],
                                 ndim == 1 || i < ndim - 1 ? ", " : "");
        count *= (uint64_t)shape[i];
    }
    if (count && !data)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "%s: no data", path);
    /* "(2, 3)"; a 1-tuple keeps its comma: "(6, )"; a 0-d array is "()". */
    char header[512];
    int n = snprintf(header, sizeof header, "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }",
                     dims);
    /* Pad with spaces so that magic + length + header + newline is a multiple of 64. */
    size_t total = 10 + (size_t)n + 1, pad = (64 - total % 64) % 64;
    size_t hl = (size_t)n + pad + 1;
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hl & 255),
                             (unsigned char)(hl >> 8)};
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

int pgd_npy_write(const char *path, const float *data, int ndim, const int64_t *shape,
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
