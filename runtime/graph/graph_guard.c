/* graph_guard.c — what an ONNX file may ask of the parser before protobuf-c unpacks it.
 *
 * protobuf-c's unpack recurses once per nested message (a GraphProto in an AttributeProto in a
 * NodeProto in a GraphProto ...) with no limit, so a few kilobytes of nesting overflow the
 * stack, and it allocates a struct per message however small its bytes are. The wire format is
 * walked first with protobuf-c's own schema tables (the generated message descriptors: which
 * field numbers hold messages, and of which type), iteratively, counting depth and messages;
 * values are only skipped, never decoded. Whatever is malformed here protobuf-c refuses too, so
 * the walk stops there and leaves the message to unpack's error. */
#include "graph.h"
#include "internal.h" /* pgd__error_set_log */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Deep enough for ~20 levels of If/Loop subgraphs (3 messages per level) or nested TypeProtos;
 * far below what overflows a thread's stack in unpack (and free_unpacked) frames. */
#define MAX_NESTING 64
/* A million nodes (graph_load.c's cap) with a few attributes each, and their tensors. */
#define MAX_MESSAGES ((uint64_t)1 << 23)

static int read_varint(const uint8_t *p, size_t end, size_t *pos, uint64_t *v)
{
    uint64_t r = 0;
    for (int shift = 0; shift < 64 && *pos < end; shift += 7) {
        uint8_t b = p[(*pos)++];
        r |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = r;
            return 1;
        }
    }
    return 0;
}

typedef struct frame {
    const ProtobufCMessageDescriptor *desc;
    size_t end;
} frame;

int pgd__graph_check_nesting(const void *data, size_t size, const char *path, pgd_error **err)
{
    const uint8_t *p = data;
    frame st[MAX_NESTING + 1];
    int depth = 0;
    uint64_t messages = 1;
    size_t pos = 0;
    st[0].desc = &onnx__model_proto__descriptor;
    st[0].end = size;
    for (;;) {
        while (depth > 0 && pos == st[depth].end)
            depth--;
        if (pos >= st[depth].end)
            return PGD_OK; /* the whole file walked (or a child overran: unpack refuses it) */
        uint64_t key, v;
        if (!read_varint(p, st[depth].end, &pos, &key) || key >> 3 > UINT32_MAX)
            return PGD_OK;
        switch (key & 7) {
        case 0:
            if (!read_varint(p, st[depth].end, &pos, &v))
                return PGD_OK;
            break;
        case 1: pos += 8; break;
        case 5: pos += 4; break;
        case 2: {
            if (!read_varint(p, st[depth].end, &pos, &v) || v > st[depth].end - pos)
                return PGD_OK;
            const ProtobufCFieldDescriptor *f =
                protobuf_c_message_descriptor_get_field(st[depth].desc, (unsigned)(key >> 3));
            if (!f || f->type != PROTOBUF_C_TYPE_MESSAGE) {
                pos += (size_t)v;
                break;
            }
            if (depth == MAX_NESTING)
                return pgd_error_set(err, PGD_ERR_FORMAT,
                                     "%s: messages nested more than %d deep (at byte %zu, a %s "
                                     "inside %s): refused before parsing",
                                     path, MAX_NESTING, pos,
                                     ((const ProtobufCMessageDescriptor *)f->descriptor)->name,
                                     st[depth].desc->name);
            if (++messages > MAX_MESSAGES)
                return pgd_error_set(err, PGD_ERR_TOO_LARGE,
                                     "%s: more than %llu protobuf messages (nodes, attributes, "
                                     "tensors...): refused before parsing",
                                     path, (unsigned long long)MAX_MESSAGES);
            depth++;
            st[depth].desc = f->descriptor;
            st[depth].end = pos + (size_t)v;
            break;
        }
        default: return PGD_OK; /* groups and invalid wire types: protobuf-c refuses them */
        }
        if (pos > st[depth].end)
            return PGD_OK; /* a fixed-size value past its message's end */
    }
}

/* The host-evaluated nodes alone, without a device (for fuzzing the host evaluator): each
 * graph input stands as a zero host tensor of its declared shape (symbolic and absent dims 1,
 * at most max_elems elements, else the input stays unknown), then every host node runs in
 * order; device nodes are skipped, so host nodes reading their shapes fail cleanly. */
int pgd__graph_host_only_run(pgd_graph *g, int64_t max_elems, pgd_error **err)
{
    for (int i = 0; i < g->ninputs; i++) {
        pgd_graph_io io;
        int64_t dim[PGD_MAX_DIMS], n = 1;
        pgd_graph_get_input(g, i, &io);
        int nd = io.ndim < 0 ? 0 : io.ndim;
        for (int d = 0; d < nd; d++) {
            dim[d] = io.shape[d] < 0 ? 1 : io.shape[d];
            n = dim[d] && n > max_elems / dim[d] ? max_elems + 1 : n * dim[d];
        }
        gvalue *x = &g->values[g->inputs[i]];
        if (n <= max_elems && !x->h)
            x->h = pgd__ghost_new(io.elem_type ? io.elem_type : G_FLOAT, nd, dim);
    }
    int rc = PGD_OK;
    for (int oi = 0; !rc && oi < g->nnodes; oi++) {
        gnode *n = &g->nodes[g->order[oi]];
        if (n->host)
            rc = pgd__graph_host_eval(g, n, err);
    }
    for (int i = 0; i < g->ninputs; i++) {
        gvalue *x = &g->values[g->inputs[i]];
        pgd__ghost_free(x->h);
        x->h = NULL;
    }
    return rc;
}

/* The length of the UTF-8 sequence at s (as strict as Jansson, which the report is written
 * with: no overlong forms, surrogates or code points past U+10FFFF), 0 when it is not one. */
static int utf8_seq(const unsigned char *s)
{
    unsigned c = s[0], n = c < 0x80   ? 1
                           : c < 0xc2 ? 0
                           : c < 0xe0 ? 2
                           : c < 0xf0 ? 3
                           : c < 0xf5 ? 4
                                      : 0;
    uint32_t cp = n == 2 ? c & 0x1f : n == 3 ? c & 0x0f : c & 0x07;
    for (unsigned k = 1; k < n; k++) {
        if ((s[k] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[k] & 0x3f);
    }
    if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
        (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0;
    return (int)n;
}

static int utf8_ok(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        int n = utf8_seq(p);
        if (!n)
            return 0;
        p += n;
    }
    return 1;
}

/* The first string field of m (or of a message inside it) that is not UTF-8: its message type
 * and field name, by protobuf-c's descriptors. Depth is bounded by pgd__graph_check_nesting. */
static int find_bad_string(const ProtobufCMessage *m, const char **type, const char **field)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        const char *member = (const char *)m + f->offset;
        if (f->type != PROTOBUF_C_TYPE_STRING && f->type != PROTOBUF_C_TYPE_MESSAGE)
            continue;
        /* a oneof's members share their storage: only the one set is read */
        if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
            *(const uint32_t *)((const char *)m + f->quantifier_offset) != f->id)
            continue;
        size_t n = 1;
        const void *const *items = (const void *const *)member;
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            n = *(const size_t *)((const char *)m + f->quantifier_offset);
            items = *(const void *const *const *)member;
        }
        for (size_t k = 0; k < n; k++) {
            if (!items[k])
                continue;
            if (f->type == PROTOBUF_C_TYPE_STRING ? !utf8_ok(items[k])
                                                  : find_bad_string(items[k], type, field)) {
                if (f->type == PROTOBUF_C_TYPE_STRING)
                    *type = d->name, *field = f->name;
                return 1;
            }
        }
    }
    return 0;
}

int pgd__graph_check_strings(const Onnx__ModelProto *m, const char *path, pgd_error **err)
{
    const char *type = NULL, *field = NULL;
    if (find_bad_string(&m->base, &type, &field))
        return pgd_error_set(err, PGD_ERR_FORMAT,
                             "%s: a %s's %s is not UTF-8 (protobuf strings are; names and the "
                             "report are printed as UTF-8)",
                             path, type, field);
    return PGD_OK;
}

/* s with each byte that does not start a UTF-8 sequence as U+FFFD (malloc'd; NULL when out of
 * memory): the model's path in the JSON report, which Jansson refuses unless UTF-8 (a Latin-1
 * file name made the whole report NULL). */
char *pgd__graph_utf8_copy(const char *s)
{
    size_t len = strlen(s);
    char *out = malloc(3 * len + 1), *o = out;
    if (!out)
        return NULL;
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        int n = utf8_seq(p);
        if (n) {
            memcpy(o, p, (size_t)n);
            o += n, p += n;
        } else {
            memcpy(o, "\xef\xbf\xbd", 3);
            o += 3, p++;
        }
    }
    *o = 0;
    return out;
}

/* A node's failure inside the op API (pgd_gather, pgd_avgpool, a tensor of an impossible shape)
 * names the op's arguments only: its message is prefixed with the file, node, op and opset, as
 * the graph's own checks are. Returns rc. */
int pgd__graph_error_context(const pgd_graph *g, const gnode *n, int rc, pgd_error **err)
{
    if (!err || !*err || strstr(pgd_error_get_message(*err), g->path))
        return rc;
    pgd_error *old = *err;
    const char *log = pgd_error_get_log(old);
    *err = NULL;
    pgd__graph_fail(err, pgd_error_get_code(old), g, n, "%s", pgd_error_get_message(old));
    if (log)
        pgd__error_set_log(err, log);
    pgd_error_destroy(old);
    return rc;
}
