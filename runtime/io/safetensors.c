/* safetensors.c — the safetensors weights reader.
 *
 * Layout: u64 little-endian N, N bytes of UTF-8 JSON header, data section. pgd_weights_open()
 * maps the file and checks everything the reference parser checks (and a little more) before it
 * returns, so the accessors can trust the entries: every byte range lies inside the data section
 * and matches shape x dtype size. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#ifndef _WIN32
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#define PGD__HAVE_MMAP 1
#endif

#include "internal.h"

#define MAX_HEADER 100000000u
#define MAX_TENSORS 1000000u
#define MAX_NAME 1024u

typedef struct st_entry {
    const char *name; /* owned by the JSON root */
    pgd_dtype dtype;
    int ndim;
    int64_t shape[PGD_MAX_DIMS];
    uint64_t numel, begin, end;
} st_entry;

struct pgd_weights {
    unsigned char *base; /* the whole file */
    size_t size;
    int mapped;
    const unsigned char *data; /* base + 8 + N */
    uint64_t data_size;
    json_t *root;
    json_t *meta;      /* borrowed from root, or NULL */
    st_entry *entries; /* offset order */
    size_t count;
    const st_entry **by_name; /* entries sorted by name */
    char *path;               /* for messages */
};

static const struct {
    const char *name;
    size_t size;
} dtypes[] = {
    [PGD_DTYPE_F64] = {"F64", 8},         [PGD_DTYPE_F32] = {"F32", 4},
    [PGD_DTYPE_F16] = {"F16", 2},         [PGD_DTYPE_BF16] = {"BF16", 2},
    [PGD_DTYPE_I64] = {"I64", 8},         [PGD_DTYPE_I32] = {"I32", 4},
    [PGD_DTYPE_I16] = {"I16", 2},         [PGD_DTYPE_I8] = {"I8", 1},
    [PGD_DTYPE_U8] = {"U8", 1},           [PGD_DTYPE_BOOL] = {"BOOL", 1},
    [PGD_DTYPE_U16] = {"U16", 2},         [PGD_DTYPE_U32] = {"U32", 4},
    [PGD_DTYPE_U64] = {"U64", 8},         [PGD_DTYPE_F8_E4M3] = {"F8_E4M3", 1},
    [PGD_DTYPE_F8_E5M2] = {"F8_E5M2", 1},
};
#define N_DTYPES (sizeof dtypes / sizeof dtypes[0])

const char *pgd_dtype_name(pgd_dtype dtype)
{
    return (unsigned)dtype < N_DTYPES ? dtypes[dtype].name : "?";
}

size_t pgd_dtype_size(pgd_dtype dtype)
{
    return (unsigned)dtype < N_DTYPES ? dtypes[dtype].size : 0;
}

/* ---- messages ---- */

/* Sets a format error "PATH: <formatted>". */
static int fail(pgd_error **err, int code, const char *path, const char *fmt, ...)
    PGD__PRINTF(4, 5);
static int fail(pgd_error **err, int code, const char *path, const char *fmt, ...)
{
    char msg[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return pgd__error_set(err, code, "%s: %s", path, msg);
}

/* A printable rendering of an untrusted name: control bytes and quotes escaped, cut at 200
 * bytes. */
static const char *printable(const char *s, char *buf, size_t size)
{
    size_t o = 0;
    for (size_t i = 0; s[i] && o + 8 < size; i++) {
        unsigned char c = (unsigned char)s[i];
        if (i >= 200) {
            memcpy(buf + o, "...", 3);
            o += 3;
            break;
        }
        if (c < 0x20 || c == 0x7f || c == '\'' || c == '\\')
            o += (size_t)snprintf(buf + o, size - o, "\\x%02x", c);
        else
            buf[o++] = (char)c;
    }
    buf[o] = 0;
    return buf;
}

static void shape_str(const st_entry *e, char *buf, size_t size)
{
    size_t o = 0;
    buf[0] = 0;
    o += (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < e->ndim && o < size; i++)
        o += (size_t)snprintf(buf + o, size - o, "%s%" PRId64, i ? ", " : "", e->shape[i]);
    if (o < size)
        snprintf(buf + o, size - o, "]");
}

/* ---- validation helpers ---- */

/* Strict UTF-8: no overlong forms, no surrogates, nothing past U+10FFFF. Returns the offset of
 * the first bad byte, or len when all is well. */
static size_t utf8_check(const unsigned char *s, size_t len)
{
    size_t i = 0;
    while (i < len) {
        unsigned char c = s[i];
        size_t n;
        uint32_t cp, min;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xe0) == 0xc0) {
            n = 1, cp = c & 0x1f, min = 0x80;
        } else if ((c & 0xf0) == 0xe0) {
            n = 2, cp = c & 0x0f, min = 0x800;
        } else if ((c & 0xf8) == 0xf0) {
            n = 3, cp = c & 0x07, min = 0x10000;
        } else {
            return i;
        }
        if (len - i <= n)
            return i;
        for (size_t k = 1; k <= n; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                return i;
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return i;
        i += n + 1;
    }
    return len;
}

static int dtype_lookup(const char *s, pgd_dtype *out)
{
    for (size_t i = 0; i < N_DTYPES; i++) {
        if (!strcmp(dtypes[i].name, s)) {
            *out = (pgd_dtype)i;
            return 1;
        }
    }
    return 0;
}

/* *r = a * b; 0 on overflow. */
static int mul_u64(uint64_t a, uint64_t b, uint64_t *r)
{
    if (a && b > UINT64_MAX / a)
        return 0;
    *r = a * b;
    return 1;
}

static uint64_t get_u64le(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* Parses one tensor entry into *e. */
static int parse_entry(const char *path, const char *name, json_t *v, uint64_t data_size,
                       st_entry *e, pgd_error **err)
{
    char pn[1024];
    printable(name, pn, sizeof pn);
    e->name = name;
    if (!json_is_object(v))
        return fail(err, PGD_ERR_FORMAT, path,
                    "tensor '%s': entry is not an object (want dtype, shape, data_offsets)", pn);
    const char *key;
    json_t *field;
    json_object_foreach(v, key, field)
    {
        if (strcmp(key, "dtype") && strcmp(key, "shape") && strcmp(key, "data_offsets")) {
            char pk[1024];
            return fail(err, PGD_ERR_FORMAT, path,
                        "tensor '%s': unknown field '%s' (only dtype, shape, data_offsets)", pn,
                        printable(key, pk, sizeof pk));
        }
    }
    json_t *dt = json_object_get(v, "dtype"), *sh = json_object_get(v, "shape"),
           *off = json_object_get(v, "data_offsets");
    if (!dt || !sh || !off)
        return fail(err, PGD_ERR_FORMAT, path, "tensor '%s': missing field '%s'", pn,
                    !dt   ? "dtype"
                    : !sh ? "shape"
                          : "data_offsets");

    if (!json_is_string(dt))
        return fail(err, PGD_ERR_FORMAT, path, "tensor '%s': dtype is not a string", pn);
    if (!dtype_lookup(json_string_value(dt), &e->dtype)) {
        char pd[1024];
        return fail(err, PGD_ERR_FORMAT, path,
                    "tensor '%s': unknown dtype '%s' (known: F64 F32 F16 BF16 I64 I32 I16 I8 U8 "
                    "BOOL U16 U32 U64 F8_E4M3 F8_E5M2)",
                    pn, printable(json_string_value(dt), pd, sizeof pd));
    }

    if (!json_is_array(sh))
        return fail(err, PGD_ERR_FORMAT, path, "tensor '%s': shape is not an array", pn);
    size_t rank = json_array_size(sh);
    if (rank > PGD_MAX_DIMS)
        return fail(err, PGD_ERR_FORMAT, path, "tensor '%s': shape has rank %zu, at most %d", pn,
                    rank, PGD_MAX_DIMS);
    e->ndim = (int)rank;
    uint64_t numel = 1;
    int overflow = 0;
    for (size_t i = 0; i < rank; i++) {
        json_t *d = json_array_get(sh, i);
        if (!json_is_integer(d))
            return fail(err, PGD_ERR_FORMAT, path, "tensor '%s': shape entry %zu is not an integer",
                        pn, i);
        json_int_t n = json_integer_value(d);
        if (n < 0)
            return fail(err, PGD_ERR_FORMAT, path,
                        "tensor '%s': shape entry %zu is negative (%" JSON_INTEGER_FORMAT ")", pn,
                        i, n);
        e->shape[i] = (int64_t)n;
        if (!overflow && !mul_u64(numel, (uint64_t)n, &numel))
            overflow = 1;
    }
    uint64_t bytes = 0;
    char ss[256];
    shape_str(e, ss, sizeof ss);
    if (overflow || !mul_u64(numel, dtypes[e->dtype].size, &bytes))
        return fail(err, PGD_ERR_FORMAT, path,
                    "tensor '%s': shape %s of %s overflows 64-bit byte arithmetic", pn, ss,
                    dtypes[e->dtype].name);
    e->numel = numel;

    if (!json_is_array(off) || json_array_size(off) != 2 ||
        !json_is_integer(json_array_get(off, 0)) || !json_is_integer(json_array_get(off, 1)))
        return fail(err, PGD_ERR_FORMAT, path,
                    "tensor '%s': data_offsets is not an array of two integers [begin, end]", pn);
    json_int_t b = json_integer_value(json_array_get(off, 0));
    json_int_t en = json_integer_value(json_array_get(off, 1));
    if (b < 0 || en < 0)
        return fail(err, PGD_ERR_FORMAT, path,
                    "tensor '%s': data_offsets [%" JSON_INTEGER_FORMAT ", %" JSON_INTEGER_FORMAT
                    "] has a negative offset",
                    pn, b, en);
    if (b > en)
        return fail(err, PGD_ERR_FORMAT, path,
                    "tensor '%s': data_offsets [%" JSON_INTEGER_FORMAT ", %" JSON_INTEGER_FORMAT
                    "] has begin after end",
                    pn, b, en);
    e->begin = (uint64_t)b;
    e->end = (uint64_t)en;
    if (e->end - e->begin != bytes)
        return fail(err, PGD_ERR_FORMAT, path,
                    "tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] hold %" PRIu64
                    " bytes but shape %s of %s needs %" PRIu64,
                    pn, e->begin, e->end, e->end - e->begin, ss, dtypes[e->dtype].name, bytes);
    if (e->end > data_size)
        return fail(err, PGD_ERR_FORMAT, path,
                    "tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64
                    "] end beyond the data section (%" PRIu64 " bytes)",
                    pn, e->begin, e->end, data_size);
    return PGD_OK;
}

static int cmp_offsets(const void *pa, const void *pb)
{
    const st_entry *a = pa, *b = pb;
    if (a->begin != b->begin)
        return a->begin < b->begin ? -1 : 1;
    if (a->end != b->end)
        return a->end < b->end ? -1 : 1;
    return strcmp(a->name, b->name);
}

static int cmp_names(const void *pa, const void *pb)
{
    return strcmp((*(const st_entry *const *)pa)->name, (*(const st_entry *const *)pb)->name);
}

static int parse_header(pgd_weights *w, const char *path, const unsigned char *hdr, size_t n,
                        pgd_error **err)
{
    size_t bad = utf8_check(hdr, n);
    if (bad != n)
        return fail(err, PGD_ERR_FORMAT, path,
                    "header is not valid UTF-8 (byte 0x%02x at header offset %zu)", hdr[bad], bad);
    json_error_t je;
    w->root = json_loadb((const char *)hdr, n, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
    if (!w->root) {
        const char *what = json_error_code(&je) == json_error_duplicate_key
                               ? "header has a duplicate key"
                               : "header is not valid JSON";
        return fail(err, PGD_ERR_FORMAT, path, "%s: %s (line %d, column %d, header offset %d)",
                    what, je.text, je.line, je.column, je.position);
    }
    if (!json_is_object(w->root))
        return fail(err, PGD_ERR_FORMAT, path, "header is not a JSON object");

    size_t total = json_object_size(w->root);
    w->meta = json_object_get(w->root, "__metadata__");
    size_t count = total - (w->meta ? 1 : 0);
    if (count > MAX_TENSORS)
        return fail(err, PGD_ERR_FORMAT, path, "header lists %zu tensors, more than the limit %u",
                    count, MAX_TENSORS);
    if (w->meta) {
        if (!json_is_object(w->meta))
            return fail(err, PGD_ERR_FORMAT, path, "__metadata__ is not an object");
        const char *k;
        json_t *v;
        json_object_foreach(w->meta, k, v)
        {
            if (!json_is_string(v)) {
                char pk[1024];
                return fail(err, PGD_ERR_FORMAT, path, "__metadata__ value of '%s' is not a string",
                            printable(k, pk, sizeof pk));
            }
        }
    }

    if (count) {
        w->entries = calloc(count, sizeof *w->entries);
        w->by_name = calloc(count, sizeof *w->by_name);
        if (!w->entries || !w->by_name)
            return fail(err, PGD_ERR_OUT_OF_HOST_MEMORY, path, "index of %zu tensors", count);
    }
    const char *name;
    json_t *v;
    json_object_foreach(w->root, name, v)
    {
        if (v == w->meta)
            continue;
        size_t len = strlen(name);
        if (len == 0)
            return fail(err, PGD_ERR_FORMAT, path, "a tensor has an empty name");
        if (len > MAX_NAME) {
            char pn[1024];
            return fail(err, PGD_ERR_FORMAT, path,
                        "tensor '%s': name is too long (%zu bytes, at most %u)",
                        printable(name, pn, sizeof pn), len, MAX_NAME);
        }
        int rc = parse_entry(path, name, v, w->data_size, &w->entries[w->count], err);
        if (rc)
            return rc;
        w->count++;
    }

    /* The ranges, in offset order, must tile the data section exactly. */
    if (w->count)
        qsort(w->entries, w->count, sizeof *w->entries, cmp_offsets);
    uint64_t at = 0;
    for (size_t i = 0; i < w->count; i++) {
        const st_entry *e = &w->entries[i];
        char pn[1024];
        if (e->begin != at) {
            printable(e->name, pn, sizeof pn);
            if (i == 0)
                return fail(err, PGD_ERR_FORMAT, path,
                            "tensor '%s': the first data range starts at %" PRIu64
                            ", not 0 (offsets must start at 0)",
                            pn, e->begin);
            char pp[1024];
            printable(w->entries[i - 1].name, pp, sizeof pp);
            if (e->begin > at)
                return fail(err, PGD_ERR_FORMAT, path,
                            "tensor '%s': gap: data bytes [%" PRIu64 ", %" PRIu64
                            ") after tensor '%s' belong to no tensor",
                            pn, at, e->begin, pp);
            return fail(err, PGD_ERR_FORMAT, path,
                        "tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64
                        "] overlap tensor '%s', which ends at %" PRIu64,
                        pn, e->begin, e->end, pp, at);
        }
        at = e->end;
    }
    if (at != w->data_size)
        return fail(err, PGD_ERR_FORMAT, path,
                    "trailing bytes: the tensors end at data offset %" PRIu64
                    " but the data section holds %" PRIu64 " bytes",
                    at, w->data_size);

    for (size_t i = 0; i < w->count; i++)
        w->by_name[i] = &w->entries[i];
    if (w->count)
        qsort(w->by_name, w->count, sizeof *w->by_name, cmp_names);
    return PGD_OK;
}

/* ---- opening ---- */

static int load_file(pgd_weights *w, const char *path, pgd_error **err)
{
#ifdef PGD__HAVE_MMAP
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return fail(err, PGD_ERR_IO, path, "cannot open: %s", strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return fail(err, PGD_ERR_IO, path, "cannot stat: %s", strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return fail(err, PGD_ERR_IO, path, "not a regular file");
    }
    if ((uint64_t)st.st_size > (uint64_t)SIZE_MAX) {
        close(fd);
        return fail(err, PGD_ERR_IO, path, "file too large to address");
    }
    w->size = (size_t)st.st_size;
    if (w->size >= 8) {
        void *p = mmap(NULL, w->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p != MAP_FAILED) {
            w->base = p;
            w->mapped = 1;
            close(fd);
            return PGD_OK;
        }
    }
    /* Mapping failed (or the file is too short to be worth mapping): read it. */
    w->base = malloc(w->size ? w->size : 1);
    if (!w->base) {
        close(fd);
        return fail(err, PGD_ERR_OUT_OF_HOST_MEMORY, path, "%zu bytes to read the file", w->size);
    }
    size_t got = 0;
    while (got < w->size) {
        ssize_t r = read(fd, w->base + got, w->size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            int e = errno;
            close(fd);
            return fail(err, PGD_ERR_IO, path, "read failed after %zu of %zu bytes: %s", got,
                        w->size, r < 0 ? strerror(e) : "unexpected end of file");
        }
        got += (size_t)r;
    }
    close(fd);
    return PGD_OK;
#else
    unsigned char *data = NULL;
    size_t size = 0;
    if (pgd__read_file(path, &data, &size) != 0)
        return fail(err, PGD_ERR_IO, path, "cannot read: %s", strerror(errno));
    w->base = data;
    w->size = size;
    return PGD_OK;
#endif
}

void pgd_weights_close(pgd_weights *w)
{
    if (!w)
        return;
#ifdef PGD__HAVE_MMAP
    if (w->mapped)
        munmap(w->base, w->size);
    else
        free(w->base);
#else
    free(w->base);
#endif
    if (w->root)
        json_decref(w->root);
    free(w->entries);
    free(w->by_name);
    free(w->path);
    free(w);
}

/* A new handle with its path copied, or NULL (the error set). */
static pgd_weights *weights_new(const char *path, pgd_error **err)
{
    pgd_weights *w = calloc(1, sizeof *w);
    if (!w) {
        pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "%s: weights handle", path);
        return NULL;
    }
    w->path = pgd__strdup(path);
    if (!w->path) {
        free(w);
        pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "%s: weights handle", path);
        return NULL;
    }
    return w;
}

/* Validates the loaded bytes w->base[0, w->size); on failure closes w. */
static int weights_finish(pgd_weights *w, const char *path, int rc, pgd_weights **out,
                          pgd_error **err)
{
    if (rc == PGD_OK && w->size < 8)
        rc = fail(err, PGD_ERR_FORMAT, path,
                  "file too short: %zu bytes, less than the 8-byte header length", w->size);
    if (rc == PGD_OK) {
        uint64_t n = get_u64le(w->base);
        if (n > MAX_HEADER)
            rc = fail(err, PGD_ERR_FORMAT, path,
                      "header length %" PRIu64 " exceeds the limit of %u bytes", n, MAX_HEADER);
        else if (n > (uint64_t)w->size - 8)
            rc = fail(err, PGD_ERR_FORMAT, path,
                      "header length %" PRIu64 " runs past the end of the file (%zu bytes)", n,
                      w->size);
        else {
            w->data = w->base + 8 + n;
            w->data_size = (uint64_t)w->size - 8 - n;
            rc = parse_header(w, path, w->base + 8, (size_t)n, err);
        }
    }
    if (rc) {
        pgd_weights_close(w);
        return rc;
    }
    *out = w;
    return PGD_OK;
}

int pgd_weights_open(const char *path, pgd_weights **out, pgd_error **err)
{
    if (!out)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "pgd_weights_open: out is NULL");
    *out = NULL;
    if (!path)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "pgd_weights_open: path is NULL");
    pgd_weights *w = weights_new(path, err);
    if (!w)
        return PGD_ERR_OUT_OF_HOST_MEMORY;
    return weights_finish(w, path, load_file(w, path, err), out, err);
}

int pgd__weights_open_memory(const void *data, size_t size, const char *name, pgd_weights **out,
                             pgd_error **err)
{
    if (!out)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "pgd_weights_open: out is NULL");
    *out = NULL;
    if (!data && size)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "pgd_weights_open: data is NULL");
    if (!name)
        name = "<memory>";
    pgd_weights *w = weights_new(name, err);
    if (!w)
        return PGD_ERR_OUT_OF_HOST_MEMORY;
    /* A private copy, exactly as load_file's read fallback leaves it: the handle owns it. */
    int rc = PGD_OK;
    w->size = size;
    w->base = malloc(size ? size : 1);
    if (!w->base)
        rc = fail(err, PGD_ERR_OUT_OF_HOST_MEMORY, name, "%zu bytes to copy the file", size);
    else if (size)
        memcpy(w->base, data, size);
    return weights_finish(w, name, rc, out, err);
}

/* ---- accessors ---- */

size_t pgd_weights_count(const pgd_weights *w)
{
    return w ? w->count : 0;
}

const char *pgd_weights_name(const pgd_weights *w, size_t i)
{
    return w && i < w->count ? w->entries[i].name : NULL;
}

static const st_entry *lookup(const pgd_weights *w, const char *name)
{
    if (!w || !name)
        return NULL;
    size_t lo = 0, hi = w->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const st_entry *e = w->by_name[mid];
        int c = strcmp(name, e->name);
        if (c == 0)
            return e;
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

int pgd_weights_find(const pgd_weights *w, const char *name, pgd_weight_info *info)
{
    const st_entry *e = lookup(w, name);
    if (!e)
        return PGD_ERR_NOT_FOUND;
    if (info) {
        memset(info, 0, sizeof *info);
        info->name = e->name;
        info->dtype = e->dtype;
        info->dtype_name = dtypes[e->dtype].name;
        info->ndim = e->ndim;
        memcpy(info->shape, e->shape, sizeof e->shape);
        info->numel = e->numel;
        info->bytes = e->end - e->begin;
        info->offset = e->begin;
        info->data = w->data + e->begin;
    }
    return PGD_OK;
}

const char *pgd_weights_metadata(const pgd_weights *w, const char *key)
{
    if (!w || !w->meta || !key)
        return NULL;
    return json_string_value(json_object_get(w->meta, key));
}

/* ---- conversion ---- */

static float f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* IEEE binary16 to binary32, exact. */
static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0x1f) /* inf, or NaN with its payload */
        return f32_from_bits(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        if (man == 0)
            return f32_from_bits(sign);
        /* subnormal man·2^-24: normalise so the leading 1 reaches bit 10 */
        int e = -14;
        while (!(man & 0x400)) {
            man <<= 1;
            e--;
        }
        man &= 0x3ff;
        return f32_from_bits(sign | ((uint32_t)(e + 127) << 23) | (man << 13));
    }
    return f32_from_bits(sign | ((exp - 15 + 127) << 23) | (man << 13));
}

static float double_to_float(double d)
{
    /* Halfway between FLT_MAX and 2^128: from there on round-to-nearest gives infinity. Done by
     * hand because converting an out-of-range double is undefined in ISO C. */
    const double limit = 340282356779733661637539395458142568448.0; /* 2^128 - 2^103 */
    if (d >= limit)
        return f32_from_bits(0x7f800000u);
    if (d <= -limit)
        return f32_from_bits(0xff800000u);
    return (float)d; /* NaN stays NaN */
}

static int convert(const pgd_weights *w, const st_entry *e, const char *what, float *dst,
                   pgd_error **err)
{
    const unsigned char *p = w->data + e->begin;
    uint64_t n = e->numel;
    switch (e->dtype) {
    case PGD_DTYPE_F32:
        for (uint64_t i = 0; i < n; i++, p += 4)
            dst[i] = f32_from_bits((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                                   (uint32_t)p[3] << 24);
        break;
    case PGD_DTYPE_F16:
        for (uint64_t i = 0; i < n; i++, p += 2)
            dst[i] = half_to_float((uint16_t)(p[0] | p[1] << 8));
        break;
    case PGD_DTYPE_BF16:
        for (uint64_t i = 0; i < n; i++, p += 2)
            dst[i] = f32_from_bits(((uint32_t)p[0] | (uint32_t)p[1] << 8) << 16);
        break;
    case PGD_DTYPE_F64:
        for (uint64_t i = 0; i < n; i++, p += 8) {
            uint64_t u = get_u64le(p);
            double d;
            memcpy(&d, &u, sizeof d);
            dst[i] = double_to_float(d);
        }
        break;
    default: {
        char pn[1024];
        return pgd__error_set(err, PGD_ERR_UNSUPPORTED,
                              "%s: %s: tensor '%s': dtype %s cannot be converted to float32 "
                              "(F32, F16, BF16 and F64 can)",
                              what, w->path, printable(e->name, pn, sizeof pn),
                              dtypes[e->dtype].name);
    }
    }
    return PGD_OK;
}

static int not_found(const pgd_weights *w, const char *name, const char *what, pgd_error **err)
{
    char pn[1024];
    return pgd__error_set(err, PGD_ERR_NOT_FOUND, "%s: %s: no tensor '%s'", what, w->path,
                          name ? printable(name, pn, sizeof pn) : "(null)");
}

int pgd_weights_to_float(const pgd_weights *w, const char *name, float *dst, pgd_error **err)
{
    if (!w)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "pgd_weights_to_float: w is NULL");
    const st_entry *e = lookup(w, name);
    if (!e)
        return not_found(w, name, "pgd_weights_to_float", err);
    if (!dst && e->numel)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "pgd_weights_to_float: dst is NULL");
    return convert(w, e, "pgd_weights_to_float", dst, err);
}

int pgd_weights_upload(pgd_ctx *ctx, const pgd_weights *w, const char *name, pgd_tensor **out,
                       pgd_error **err)
{
    if (!out)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "pgd_weights_upload: out is NULL");
    *out = NULL;
    if (!ctx || !w)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "pgd_weights_upload: ctx or w is NULL");
    const st_entry *e = lookup(w, name);
    if (!e)
        return not_found(w, name, "pgd_weights_upload", err);
    if (e->dtype != PGD_DTYPE_F32 && e->dtype != PGD_DTYPE_F16 && e->dtype != PGD_DTYPE_BF16 &&
        e->dtype != PGD_DTYPE_F64)
        return convert(w, e, "pgd_weights_upload", NULL, err);
    if (e->numel > SIZE_MAX / sizeof(float))
        return pgd__error_set(err, PGD_ERR_TOO_LARGE, "pgd_weights_upload: %" PRIu64 " elements",
                              e->numel);
    int64_t one = 1;
    pgd_tensor *t = NULL;
    int rc = pgd_tensor_create(ctx, e->ndim ? e->ndim : 1, e->ndim ? e->shape : &one, &t, err);
    if (rc)
        return rc;
    float *host = NULL;
    if (e->numel) {
        host = malloc((size_t)e->numel * sizeof *host);
        if (!host) {
            pgd_tensor_destroy(t);
            return pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY,
                                  "pgd_weights_upload: %" PRIu64 " floats for tensor on the host",
                                  e->numel);
        }
        rc = convert(w, e, "pgd_weights_upload", host, err);
    }
    if (rc == PGD_OK)
        rc = pgd_tensor_upload(t, host, err);
    free(host);
    if (rc) {
        pgd_tensor_destroy(t);
        return rc;
    }
    *out = t;
    return PGD_OK;
}
