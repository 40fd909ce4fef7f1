/* safetensors.c — the safetensors weights reader.
 *
 * Layout: u64 little-endian N, N bytes of UTF-8 JSON header, data section. pgd_weights_open()
 * reads the header and checks everything the reference parser checks (and a little more) before
 * it returns, so the accessors can trust the entries: every byte range lies inside the data
 * section and matches shape x dtype size.
 *
 * The data section is not mapped: the handle keeps the file open and reads a tensor's bytes with
 * pread when it is converted. A mapping turns a file truncated while open (another process
 * rewriting a checkpoint) into SIGBUS at the first touch of a vanished page, which a library
 * cannot catch without owning the process's signal handlers; pread turns it into a short read,
 * reported as PGD_ERR_IO naming the file and the tensor. Every byte is copied once either way
 * (conversion to float reads each byte once), so the cost is a copy through a small buffer. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <unistd.h>

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

/* Bytes converted per pread: large enough to amortise the call, small enough to stay in cache. */
#define READ_CHUNK ((size_t)1 << 20)

struct pgd_weights {
    int fd;                    /* the open file, or -1 for a handle on memory */
    unsigned char *base;       /* memory handles: the whole copy; NULL for a file */
    uint64_t size;             /* of the file */
    const unsigned char *data; /* memory handles: base + 8 + N */
    uint64_t data_start;       /* 8 + N: where the data section begins in the file */
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

/* The fields of an entry: an object with exactly dtype, shape and data_offsets. */
static int entry_fields(const char *path, const char *pn, json_t *v, pgd_error **err)
{
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
    if (!json_is_array(sh))
        return fail(err, PGD_ERR_FORMAT, path, "tensor '%s': shape is not an array", pn);
    return PGD_OK;
}

/* e->shape and e->numel from the shape array; *bytes = numel x dtype size, overflow-checked. */
static int entry_shape(const char *path, const char *pn, json_t *sh, st_entry *e, uint64_t *bytes,
                       pgd_error **err)
{
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
    if (overflow || !mul_u64(numel, dtypes[e->dtype].size, bytes)) {
        char ss[256];
        shape_str(e, ss, sizeof ss);
        return fail(err, PGD_ERR_FORMAT, path,
                    "tensor '%s': shape %s of %s overflows 64-bit byte arithmetic", pn, ss,
                    dtypes[e->dtype].name);
    }
    e->numel = numel;
    return PGD_OK;
}

/* e->begin and e->end from data_offsets, which must hold `bytes` inside the data section. */
static int entry_offsets(const char *path, const char *pn, json_t *off, uint64_t bytes,
                         uint64_t data_size, st_entry *e, pgd_error **err)
{
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
    if (e->end - e->begin != bytes) {
        char ss[256];
        shape_str(e, ss, sizeof ss);
        return fail(err, PGD_ERR_FORMAT, path,
                    "tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] hold %" PRIu64
                    " bytes but shape %s of %s needs %" PRIu64,
                    pn, e->begin, e->end, e->end - e->begin, ss, dtypes[e->dtype].name, bytes);
    }
    if (e->end > data_size)
        return fail(err, PGD_ERR_FORMAT, path,
                    "tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64
                    "] end beyond the data section (%" PRIu64 " bytes)",
                    pn, e->begin, e->end, data_size);
    return PGD_OK;
}

/* Parses one tensor entry into *e. */
static int parse_entry(const char *path, const char *name, json_t *v, uint64_t data_size,
                       st_entry *e, pgd_error **err)
{
    char pn[1024];
    printable(name, pn, sizeof pn);
    e->name = name;
    int rc = entry_fields(path, pn, v, err);
    if (rc)
        return rc;
    json_t *dt = json_object_get(v, "dtype");
    if (!dtype_lookup(json_string_value(dt), &e->dtype)) {
        char pd[1024];
        return fail(err, PGD_ERR_FORMAT, path,
                    "tensor '%s': unknown dtype '%s' (known: F64 F32 F16 BF16 I64 I32 I16 I8 U8 "
                    "BOOL U16 U32 U64 F8_E4M3 F8_E5M2)",
                    pn, printable(json_string_value(dt), pd, sizeof pd));
    }
    uint64_t bytes = 0;
    rc = entry_shape(path, pn, json_object_get(v, "shape"), e, &bytes, err);
    if (rc)
        return rc;
    return entry_offsets(path, pn, json_object_get(v, "data_offsets"), bytes, data_size, e, err);
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

/* w->root from the header bytes: strict UTF-8, a JSON object without duplicate keys; w->meta
 * checked (an object of strings) when present. */
static int header_json(pgd_weights *w, const char *path, const unsigned char *hdr, size_t n,
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
    w->meta = json_object_get(w->root, "__metadata__");
    if (!w->meta)
        return PGD_OK;
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
    return PGD_OK;
}

/* w->entries from every entry of the header but __metadata__. */
static int header_entries(pgd_weights *w, const char *path, pgd_error **err)
{
    size_t count = json_object_size(w->root) - (w->meta ? 1 : 0);
    if (count > MAX_TENSORS)
        return fail(err, PGD_ERR_FORMAT, path, "header lists %zu tensors, more than the limit %u",
                    count, MAX_TENSORS);
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
    return PGD_OK;
}

/* The ranges, in offset order, must tile the data section exactly. */
static int header_tiling(pgd_weights *w, const char *path, pgd_error **err)
{
    if (w->count)
        qsort(w->entries, w->count, sizeof *w->entries, cmp_offsets);
    uint64_t at = 0;
    for (size_t i = 0; i < w->count; i++) {
        const st_entry *e = &w->entries[i];
        char pn[1024], pp[1024];
        if (e->begin == at) {
            at = e->end;
            continue;
        }
        printable(e->name, pn, sizeof pn);
        if (i == 0)
            return fail(err, PGD_ERR_FORMAT, path,
                        "tensor '%s': the first data range starts at %" PRIu64
                        ", not 0 (offsets must start at 0)",
                        pn, e->begin);
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
    if (at != w->data_size)
        return fail(err, PGD_ERR_FORMAT, path,
                    "trailing bytes: the tensors end at data offset %" PRIu64
                    " but the data section holds %" PRIu64 " bytes",
                    at, w->data_size);
    return PGD_OK;
}

static int parse_header(pgd_weights *w, const char *path, const unsigned char *hdr, size_t n,
                        pgd_error **err)
{
    int rc = header_json(w, path, hdr, n, err);
    if (!rc)
        rc = header_entries(w, path, err);
    if (!rc)
        rc = header_tiling(w, path, err);
    if (rc)
        return rc;
    for (size_t i = 0; i < w->count; i++)
        w->by_name[i] = &w->entries[i];
    if (w->count)
        qsort(w->by_name, w->count, sizeof *w->by_name, cmp_names);
    return PGD_OK;
}

/* ---- opening ---- */

void pgd_weights_destroy(pgd_weights *w)
{
    if (!w)
        return;
    if (w->fd >= 0)
        close(w->fd);
    free(w->base);
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
    w->fd = -1;
    w->path = pgd__strdup(path);
    if (!w->path) {
        free(w);
        pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "%s: weights handle", path);
        return NULL;
    }
    return w;
}

/* What a file that is not safetensors looks like, from its first bytes (`n` of them, up to 8):
 * the formats people give as weights by mistake. NULL when none matches. */
static const char *looks_like(const unsigned char *p, size_t n)
{
    static const struct {
        const char *magic;
        size_t len;
        const char *what;
    } known[] = {
        {"\xff\xd8\xff", 3, "a JPEG image"},
        {"\x89PNG\r\n\x1a\n", 8, "a PNG image"},
        {"GIF8", 4, "a GIF image"},
        {"RIFF", 4, "a RIFF file (a WebP image, WAV or AVI)"},
        {"BM", 2, "a BMP image"},
        {"PK\x03\x04", 4,
         "a ZIP archive (as torch.save writes .pt/.pth checkpoints, and NumPy .npz)"},
        {"\x93NUMPY", 6, "a NumPy .npy array"},
        {"\x89HDF\r\n\x1a\n", 8, "an HDF5 file (Keras .h5)"},
        {"GGUF", 4, "a GGUF file (llama.cpp)"},
        {"\x1f\x8b", 2, "a gzip file"},
        {"\x7f"
         "ELF",
         4, "an executable (ELF)"},
        {"%PDF", 4, "a PDF document"},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (n >= known[i].len && !memcmp(p, known[i].magic, known[i].len))
            return known[i].what;
    /* torch.save before PyTorch 1.6 (and pickle.dump): protocol 2..5 opcode. */
    if (n >= 2 && p[0] == 0x80 && p[1] >= 2 && p[1] <= 5)
        return "a Python pickle (an old torch.save checkpoint)";
    /* ONNX: a ModelProto starts with field 1 (ir_version, a small varint), then usually
     * producer_name (field 2), producer_version (3), domain (4), opset_import (8) or graph (7). */
    if (n >= 3 && p[0] == 0x08 && p[1] >= 1 && p[1] <= 20 &&
        (p[2] == 0x12 || p[2] == 0x1a || p[2] == 0x22 || p[2] == 0x3a || p[2] == 0x42))
        return "an ONNX model (protobuf)";
    size_t i = 0;
    while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\r' || p[i] == '\n'))
        i++;
    if (i < n && (p[i] == '{' || p[i] == '['))
        return "JSON text (a safetensors file starts with the header's length, not the header)";
    return NULL;
}

/* A bad header length: when the first bytes look like another format, the error says that
 * (a JPEG's magic number read as a length is no help to anyone). */
static int bad_length(pgd_error **err, const char *path, const unsigned char *head, size_t n,
                      const char *why)
{
    const char *what = looks_like(head, n);
    if (what)
        return fail(err, PGD_ERR_FORMAT, path,
                    "not a safetensors file: it looks like %s (a safetensors file starts with an "
                    "8-byte header length, then a JSON header)",
                    what);
    return fail(err, PGD_ERR_FORMAT, path, "%s", why);
}

/* Checks the header length read from the first 8 bytes (`head`) against the file size and sets
 * the data section's place. */
static int header_length(pgd_weights *w, const char *path, const unsigned char *head,
                         pgd_error **err)
{
    uint64_t n = get_u64le(head);
    char why[200];
    if (n > MAX_HEADER) {
        snprintf(why, sizeof why, "header length %" PRIu64 " exceeds the limit of %u bytes", n,
                 MAX_HEADER);
        return bad_length(err, path, head, 8, why);
    }
    if (n > w->size - 8) {
        snprintf(why, sizeof why,
                 "header length %" PRIu64 " runs past the end of the file (%" PRIu64 " bytes)", n,
                 w->size);
        return bad_length(err, path, head, 8, why);
    }
    w->data_start = 8 + n;
    w->data_size = w->size - 8 - n;
    return PGD_OK;
}

/* A file of fewer than 8 bytes (`head` holds them). */
static int too_short(pgd_error **err, const char *path, const unsigned char *head, size_t n)
{
    char why[120];
    snprintf(why, sizeof why, "file too short: %zu bytes, less than the 8-byte header length", n);
    return bad_length(err, path, head, n, why);
}

/* Opens the file (pgd__file_open's rules: a regular file, no blocking on a FIFO), reads the
 * length and the header and parses it; the data section stays on disk. */
static int load_file(pgd_weights *w, const char *path, pgd_error **err)
{
    int rc = pgd__file_open(path, NULL, UINT64_MAX, &w->fd, &w->size, err);
    if (rc)
        return rc;
    unsigned char len[8];
    if (w->size < 8) {
        rc = pgd__file_pread(w->fd, NULL, path, len, (size_t)w->size, 0, err);
        return rc ? rc : too_short(err, path, len, (size_t)w->size);
    }
    rc = pgd__file_pread(w->fd, NULL, path, len, 8, 0, err);
    if (!rc)
        rc = header_length(w, path, len, err);
    if (rc)
        return rc;
    size_t n = (size_t)(w->data_start - 8);
    unsigned char *hdr = malloc(n ? n : 1);
    if (!hdr)
        return fail(err, PGD_ERR_OUT_OF_HOST_MEMORY, path, "%zu bytes for the header", n);
    rc = pgd__file_pread(w->fd, NULL, path, hdr, n, 8, err);
    if (!rc)
        rc = parse_header(w, path, hdr, n, err);
    free(hdr);
    return rc;
}

/* Parses the header of a memory handle's copy w->base[0, w->size). */
static int load_memory(pgd_weights *w, const char *path, pgd_error **err)
{
    if (w->size < 8)
        return too_short(err, path, w->base, (size_t)w->size);
    int rc = header_length(w, path, w->base, err);
    if (rc)
        return rc;
    w->data = w->base + w->data_start;
    return parse_header(w, path, w->base + 8, (size_t)(w->data_start - 8), err);
}

/* On failure closes w. */
static int weights_finish(pgd_weights *w, int rc, pgd_weights **out)
{
    if (rc) {
        pgd_weights_destroy(w);
        return rc;
    }
    *out = w;
    return PGD_OK;
}

pgd_status pgd_weights_open(const char *path, pgd_weights **out, pgd_error **err)
{
    if (!out)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "pgd_weights_open: out is NULL");
    *out = NULL;
    if (!path)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "pgd_weights_open: path is NULL");
    pgd_weights *w = weights_new(path, err);
    if (!w)
        return PGD_ERR_OUT_OF_HOST_MEMORY;
    return weights_finish(w, load_file(w, path, err), out);
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
    /* A private copy: the handle owns it. */
    int rc = PGD_OK;
    w->size = size;
    w->base = malloc(size ? size : 1);
    if (!w->base)
        rc = fail(err, PGD_ERR_OUT_OF_HOST_MEMORY, name, "%zu bytes to copy the file", size);
    else if (size)
        memcpy(w->base, data, size);
    if (!rc)
        rc = load_memory(w, name, err);
    return weights_finish(w, rc, out);
}

/* ---- accessors ---- */

size_t pgd_weights_get_count(const pgd_weights *w)
{
    return w ? w->count : 0;
}

const char *pgd_weights_get_name(const pgd_weights *w, size_t i)
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

pgd_status pgd_weights_find(const pgd_weights *w, const char *name, pgd_weight_info *info)
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
        info->data = w->data ? w->data + e->begin : NULL;
    }
    return PGD_OK;
}

const char *pgd_weights_get_metadata(const pgd_weights *w, const char *key)
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

/* Converts n elements of dtype at p (little-endian bytes) to floats. */
static void convert_bytes(pgd_dtype dtype, const unsigned char *p, uint64_t n, float *dst)
{
    switch (dtype) {
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
    default: break;
    }
}

/* Copies n bytes of tensor e from its byte `off` on: from the file with pread (a file truncated
 * since it was opened gives PGD_ERR_IO, never a fault), or from a memory handle's copy. */
static int read_range(const pgd_weights *w, const st_entry *e, uint64_t off, void *dst, size_t n,
                      const char *what, pgd_error **err)
{
    if (w->fd < 0) {
        memcpy(dst, w->data + e->begin + off, n);
        return PGD_OK;
    }
    char pn[1024], in[1100];
    snprintf(in, sizeof in, "%s: tensor '%s' in", what, printable(e->name, pn, sizeof pn));
    return pgd__file_pread(w->fd, in, w->path, dst, n, w->data_start + e->begin + off, err);
}

static int convert(const pgd_weights *w, const st_entry *e, const char *what, float *dst,
                   pgd_error **err)
{
    if (e->dtype != PGD_DTYPE_F32 && e->dtype != PGD_DTYPE_F16 && e->dtype != PGD_DTYPE_BF16 &&
        e->dtype != PGD_DTYPE_F64) {
        char pn[1024];
        return pgd__error_set(err, PGD_ERR_UNSUPPORTED,
                              "%s: %s: tensor '%s': dtype %s cannot be converted to float32 "
                              "(F32, F16, BF16 and F64 can)",
                              what, w->path, printable(e->name, pn, sizeof pn),
                              dtypes[e->dtype].name);
    }
    size_t es = dtypes[e->dtype].size;
    uint64_t total = e->end - e->begin;
    if (w->fd < 0 || total == 0) {
        convert_bytes(e->dtype, w->data ? w->data + e->begin : NULL, e->numel, dst);
        return PGD_OK;
    }
    if (e->dtype == PGD_DTYPE_F32) {
        /* Same size in and out: read straight into dst and convert in place (each element is
         * read whole before it is written; on a little-endian host it is the identity). */
        int rc = read_range(w, e, 0, dst, (size_t)total, what, err);
        if (!rc)
            convert_bytes(e->dtype, (const unsigned char *)dst, e->numel, dst);
        return rc;
    }
    size_t chunk = total < READ_CHUNK ? (size_t)total : READ_CHUNK; /* a multiple of es */
    unsigned char *buf = malloc(chunk);
    if (!buf)
        return pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "%s: %s: %zu bytes to read into",
                              what, w->path, chunk);
    int rc = PGD_OK;
    for (uint64_t at = 0; at < total && !rc; at += chunk) {
        size_t n = total - at < chunk ? (size_t)(total - at) : chunk;
        rc = read_range(w, e, at, buf, n, what, err);
        if (!rc)
            convert_bytes(e->dtype, buf, n / es, dst + at / es);
    }
    free(buf);
    return rc;
}

static int not_found(const pgd_weights *w, const char *name, const char *what, pgd_error **err)
{
    char pn[1024];
    return pgd__error_set(err, PGD_ERR_NOT_FOUND, "%s: %s: no tensor '%s'", what, w->path,
                          name ? printable(name, pn, sizeof pn) : "(null)");
}

pgd_status pgd_weights_to_float(const pgd_weights *w, const char *name, float *dst, pgd_error **err)
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

pgd_status pgd_weights_read(const pgd_weights *w, const char *name, void *dst, pgd_error **err)
{
    if (!w)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "pgd_weights_read: w is NULL");
    const st_entry *e = lookup(w, name);
    if (!e)
        return not_found(w, name, "pgd_weights_read", err);
    uint64_t n = e->end - e->begin;
    if (!dst && n)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "pgd_weights_read: dst is NULL");
    if (n > SIZE_MAX)
        return pgd__error_set(err, PGD_ERR_TOO_LARGE, "pgd_weights_read: %" PRIu64 " bytes", n);
    return n ? read_range(w, e, 0, dst, (size_t)n, "pgd_weights_read", err) : PGD_OK;
}

pgd_status pgd_weights_upload(pgd_ctx *ctx, const pgd_weights *w, const char *name,
                              pgd_tensor **out, pgd_error **err)
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
