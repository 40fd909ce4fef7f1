/* craft.c — see craft.h. Only the container is parsed here (jansson for the header); the
 * library's own reader is what the tests then exercise. */
#include "craft.h"

#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* One output tensor: its header entry and where its bytes come from in the input. */
typedef struct piece {
    json_t *entry;
    const unsigned char *bytes;
    size_t size;
    unsigned char *owned; /* bytes made here (CRAFT_RESIZE), freed after writing */
} piece;

static const craft_edit *find_edit(const craft_edit *e, size_t n, craft_op op, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (e[i].op == op && !strcmp(e[i].name, name))
            return &e[i];
    return NULL;
}

/* A copy of the input's entry `v` with the edits of its name applied (NULL: dropped). */
static json_t *edited_entry(const char *name, json_t *v, const craft_edit *e, size_t n)
{
    if (find_edit(e, n, CRAFT_DROP, name))
        return NULL;
    json_t *entry = json_deep_copy(v);
    const craft_edit *r = find_edit(e, n, CRAFT_RESHAPE, name);
    if (!r)
        r = find_edit(e, n, CRAFT_RESIZE, name);
    if (r) {
        json_t *shape = json_array();
        for (int d = 0; d < r->ndim; d++)
            json_array_append_new(shape, json_integer(r->shape[d]));
        json_object_set_new(entry, "shape", shape);
    }
    return entry;
}

static void poke(const char *name, unsigned char *bytes, size_t size, const craft_edit *e, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (e[i].op == CRAFT_POKE && !strcmp(e[i].name, name)) {
            ck_assert_msg((size_t)(e[i].index + 1) * 4 <= size, "poke past the end of %s", name);
            memcpy(bytes + e[i].index * 4, &e[i].value, 4);
        }
}

/* The bytes of `name` resized by a CRAFT_RESIZE edit: numel x the element size of `dtype`, the
 * old bytes repeated (a new malloc'd buffer, *size set), or NULL when there is no such edit. */
static unsigned char *resized(const char *name, const char *dtype, const unsigned char *old,
                              size_t old_size, const craft_edit *e, size_t n, size_t *size)
{
    const craft_edit *r = find_edit(e, n, CRAFT_RESIZE, name);
    if (!r)
        return NULL;
    size_t elt = !strcmp(dtype, "F64") || !strcmp(dtype, "I64")   ? 8
                 : !strcmp(dtype, "F32") || !strcmp(dtype, "I32") ? 4
                                                                  : 2;
    size_t numel = 1;
    for (int d = 0; d < r->ndim; d++)
        numel *= (size_t)r->shape[d];
    *size = numel * elt;
    unsigned char *b = malloc(*size + 1);
    ck_assert_ptr_nonnull(b);
    for (size_t i = 0; i < *size; i++)
        b[i] = old_size ? old[i % old_size] : 0;
    return b;
}

/* Writes header `hdr` (padded to 8 bytes) and the pieces' bytes to `out`. */
static void write_out(const char *out, json_t *hdr, piece *p, size_t np, const craft_edit *e,
                      size_t n)
{
    char *text = json_dumps(hdr, JSON_COMPACT);
    ck_assert_ptr_nonnull(text);
    size_t hl = strlen(text), padded = (hl + 7) / 8 * 8;
    FILE *f = fopen(out, "wb");
    ck_assert_msg(f != NULL, "cannot write %s", out);
    unsigned char len8[8];
    for (int i = 0; i < 8; i++)
        len8[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    fwrite(len8, 1, 8, f);
    fwrite(text, 1, hl, f);
    for (size_t i = hl; i < padded; i++)
        fputc(' ', f);
    for (size_t i = 0; i < np; i++) {
        unsigned char *copy = malloc(p[i].size + 1);
        memcpy(copy, p[i].bytes, p[i].size);
        const char *name = json_string_value(json_object_get(p[i].entry, "name"));
        poke(name, copy, p[i].size, e, n);
        fwrite(copy, 1, p[i].size, f);
        free(copy);
    }
    ck_assert_int_eq(fclose(f), 0);
    free(text);
}

/* Adds tensor `name` (entry, bytes) at the end of the output being built. */
static void add_piece(json_t *hdr, piece *p, size_t *np, size_t *offset, const char *name,
                      json_t *entry, const unsigned char *bytes, size_t size)
{
    json_t *offs = json_array();
    json_array_append_new(offs, json_integer((json_int_t)*offset));
    json_array_append_new(offs, json_integer((json_int_t)(*offset + size)));
    json_object_set_new(entry, "data_offsets", offs);
    json_object_set(hdr, name, entry);
    json_object_set_new(entry, "name", json_string(name)); /* for poke; removed before writing */
    p[(*np)++] = (piece){entry, bytes, size, NULL};
    *offset += size;
}

void craft_safetensors(const char *in, const char *out, const craft_edit *e, size_t n)
{
    unsigned char *data = NULL;
    size_t size = 0;
    ck_assert_msg(pgd_test_read_file(in, &data, &size) == 0, "cannot read %s", in);
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++)
        hl |= (uint64_t)data[i] << (8 * i);
    json_error_t je;
    json_t *src = json_loadb((const char *)data + 8, hl, 0, &je);
    ck_assert_msg(src != NULL, "%s: %s", in, je.text);
    const unsigned char *base = data + 8 + hl;
    size_t cap = json_object_size(src) + n + 1, np = 0, offset = 0;
    piece *p = calloc(cap, sizeof *p);
    json_t *hdr = json_object(), *v;
    const char *name;
    json_object_foreach(src, name, v)
    {
        if (!strcmp(name, "__metadata__")) {
            json_object_set(hdr, name, v);
            continue;
        }
        json_t *offs = json_object_get(v, "data_offsets");
        size_t a = (size_t)json_integer_value(json_array_get(offs, 0));
        size_t b = (size_t)json_integer_value(json_array_get(offs, 1));
        json_t *entry = edited_entry(name, v, e, n);
        size_t rs = 0;
        unsigned char *rb = resized(name, json_string_value(json_object_get(v, "dtype")), base + a,
                                    b - a, e, n, &rs);
        if (entry && rb) {
            add_piece(hdr, p, &np, &offset, name, entry, rb, rs);
            p[np - 1].owned = rb;
        } else if (entry) {
            add_piece(hdr, p, &np, &offset, name, entry, base + a, b - a);
        } else {
            free(rb);
        }
        for (size_t k = 0; k < n; k++)
            if (e[k].op == CRAFT_COPY && !strcmp(e[k].name, name))
                add_piece(hdr, p, &np, &offset, e[k].to, json_deep_copy(v), base + a, b - a);
    }
    /* The names ride along for poke; the header written must not carry them. */
    json_t *clean = json_deep_copy(hdr);
    json_object_foreach(clean, name, v) json_object_del(v, "name");
    write_out(out, clean, p, np, e, n);
    for (size_t i = 0; i < np; i++) {
        json_decref(p[i].entry);
        free(p[i].owned);
    }
    json_decref(clean);
    json_decref(hdr);
    json_decref(src);
    free(p);
    free(data);
}

void craft_try_variant(pgd_ctx *ctx, const craft_loader *l, const char *base, const char *tag,
                       const craft_edit *edits, size_t n, const char *named, const char *also)
{
    char in[4096], out[4096];
    snprintf(in, sizeof in, "%s/%s", pgd_test_data_dir(), base);
    const char *tmp = getenv("PAGODA_TEST_TMP");
    snprintf(out, sizeof out, "%s/craft-%s-%s.safetensors", tmp && *tmp ? tmp : ".", l->family,
             tag);
    craft_safetensors(in, out, edits, n);
    pgd_weights *w = NULL;
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_weights_open(out, &w, &err), &err);
    model_source src;
    model_weights_source(&src, w, out);
    void *m = NULL;
    int rc = l->load(ctx, &src, l->user, &m, &err);
    if (!named) {
        ck_assert_msg(rc == PGD_OK, "%s: %s", tag, err ? pgd_error_get_message(err) : "?");
        ck_assert_ptr_nonnull(m);
    } else {
        ck_assert_msg(rc != PGD_OK, "%s: the variant loaded", tag);
        ck_assert_ptr_null(m);
        const char *msg = pgd_error_get_message(err);
        ck_assert_msg(strstr(msg, named) && (!also || strstr(msg, also)),
                      "%s: '%s'%s%s not named in: %s", tag, named, also ? " and " : "",
                      also ? also : "", msg);
        printf("%s: %s\n", tag, msg);
    }
    pgd_error_destroy(err);
    l->unload(m);
    pgd_weights_destroy(w);
    remove(out);
}
