/* graph_load.c — an ONNX file into Pagoda's graph: protobuf-c parses (the schema is ONNX's own
 * onnx.proto, compiled at build time), then every reference is checked before anything runs:
 * inputs produced by a node, an initialiser or a graph input; each value produced once; no
 * cycle (Kahn's order); tensor sizes against their data, external data inside its file and
 * beside the model. Values known on the host (initialisers, Constant nodes, shapes and what is
 * computed from them) are told apart from those computed on the device. */
#include "graph.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Files above 2 GiB cannot be one protobuf message: their weights are external data. */
#define MAX_MODEL_BYTES ((uint64_t)2 << 30)
/* One tensor (initialiser, Constant, external) at most 2^31 elements: more than any layer. */
#define MAX_TENSOR_ELEMS ((int64_t)1 << 31)
#define MAX_NODES 1000000

int pgd__graph_fail(pgd_error **err, int code, const pgd_graph *g, const gnode *n, const char *fmt,
                    ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *file = g && g->path ? g->path : "model";
    if (n)
        return pgd_error_set(err, code, "%s: node '%s' (%s, opset %lld): %s", file,
                             n->p->name && *n->p->name ? n->p->name : "(unnamed)", n->op,
                             (long long)(g ? g->opset : 0), msg);
    return pgd_error_set(err, code, "%s: %s", file, msg);
}

/* ---- names ------------------------------------------------------------------------------ */

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

typedef struct name_map {
    int *slot; /* value index + 1, 0 empty */
    size_t cap;
} name_map;

static int map_find(const pgd_graph *g, const name_map *m, const char *name)
{
    if (!m->cap)
        return -1;
    for (size_t i = hash_str(name) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (!m->slot[i])
            return -1;
        if (!strcmp(g->values[m->slot[i] - 1].name, name))
            return m->slot[i] - 1;
    }
}

static void map_put(const pgd_graph *g, name_map *m, int idx)
{
    for (size_t i = hash_str(g->values[idx].name) & (m->cap - 1);; i = (i + 1) & (m->cap - 1))
        if (!m->slot[i]) {
            m->slot[i] = idx + 1;
            return;
        }
}

int pgd__graph_value(const pgd_graph *g, const char *name)
{
    for (int i = 0; i < g->nvalues; i++)
        if (!strcmp(g->values[i].name, name))
            return i;
    return -1;
}

/* Adds a value (or returns the existing one); -1 on allocation failure. */
static int value_add(pgd_graph *g, name_map *m, const char *name, int *existed)
{
    int idx = map_find(g, m, name);
    *existed = idx >= 0;
    if (idx >= 0)
        return idx;
    idx = g->nvalues++;
    gvalue *v = &g->values[idx];
    memset(v, 0, sizeof *v);
    v->name = name;
    v->producer = -1;
    v->last_use = -1;
    map_put(g, m, idx);
    return idx;
}

/* ---- attributes ------------------------------------------------------------------------- */

const Onnx__AttributeProto *pgd__graph_attr(const gnode *n, const char *name)
{
    for (size_t i = 0; i < n->p->n_attribute; i++)
        if (n->p->attribute[i]->name && !strcmp(n->p->attribute[i]->name, name))
            return n->p->attribute[i];
    return NULL;
}

int64_t pgd__graph_attr_i(const gnode *n, const char *name, int64_t dflt)
{
    const Onnx__AttributeProto *a = pgd__graph_attr(n, name);
    return a && a->has_i ? a->i : dflt;
}

float pgd__graph_attr_f(const gnode *n, const char *name, float dflt)
{
    const Onnx__AttributeProto *a = pgd__graph_attr(n, name);
    return a && a->has_f ? a->f : dflt;
}

int pgd__graph_attr_ints(const gnode *n, const char *name, const int64_t **v)
{
    const Onnx__AttributeProto *a = pgd__graph_attr(n, name);
    *v = a ? a->ints : NULL;
    return a ? (int)(a->n_ints > INT_MAX ? INT_MAX : a->n_ints) : -1;
}

const char *pgd__graph_attr_s(const gnode *n, const char *name, const char *dflt)
{
    static __thread char buf[64];
    const Onnx__AttributeProto *a = pgd__graph_attr(n, name);
    if (!a || !a->has_s)
        return dflt;
    size_t len = a->s.len < sizeof buf - 1 ? a->s.len : sizeof buf - 1;
    memcpy(buf, a->s.data, len);
    buf[len] = 0;
    return buf;
}

/* ---- tensors ---------------------------------------------------------------------------- */

static size_t elem_bytes(int dtype)
{
    switch (dtype) {
    case G_FLOAT:
    case G_INT32:
    case G_UINT32: return 4;
    case G_DOUBLE:
    case G_INT64:
    case G_UINT64: return 8;
    case G_FLOAT16:
    case G_BFLOAT16:
    case G_INT16:
    case G_UINT16: return 2;
    case G_INT8:
    case G_UINT8:
    case G_BOOL: return 1;
    default: return 0;
    }
}

static float half_to_float(uint16_t h)
{
    uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31, m = h & 1023;
    float f;
    if (e == 0)
        f = ldexpf((float)m, -24);
    else if (e == 31)
        f = m ? NAN : INFINITY;
    else
        f = ldexpf((float)(m | 1024), (int)e - 25);
    return s ? -f : f;
}

/* Element k of little-endian raw data of `dtype` into the host tensor. */
static void raw_elem(ghost *h, const uint8_t *p, int64_t k)
{
    switch (h->dtype) {
    case G_FLOAT: {
        float f;
        memcpy(&f, p, 4);
        h->f[k] = f;
        break;
    }
    case G_DOUBLE: {
        double d;
        memcpy(&d, p, 8);
        h->f[k] = (float)d;
        break;
    }
    case G_FLOAT16: {
        uint16_t u;
        memcpy(&u, p, 2);
        h->f[k] = half_to_float(u);
        break;
    }
    case G_BFLOAT16: {
        uint32_t u = (uint32_t)p[0] << 16 | (uint32_t)p[1] << 24;
        float f;
        memcpy(&f, &u, 4);
        h->f[k] = f;
        break;
    }
    case G_INT64:
    case G_UINT64: {
        int64_t v;
        memcpy(&v, p, 8);
        h->i[k] = v;
        break;
    }
    case G_INT32: {
        int32_t v;
        memcpy(&v, p, 4);
        h->i[k] = v;
        break;
    }
    case G_UINT32: {
        uint32_t v;
        memcpy(&v, p, 4);
        h->i[k] = v;
        break;
    }
    case G_INT16: {
        int16_t v;
        memcpy(&v, p, 2);
        h->i[k] = v;
        break;
    }
    case G_UINT16: {
        uint16_t v;
        memcpy(&v, p, 2);
        h->i[k] = v;
        break;
    }
    case G_INT8: h->i[k] = (int8_t)p[0]; break;
    default: h->i[k] = p[0]; break; /* UINT8, BOOL */
    }
}

/* The external data of t (ONNX's location / offset / length keys), read from a file beside the
 * model: a relative path without "..", inside its file, exactly the tensor's bytes. */
static int read_external(const pgd_graph *g, const Onnx__TensorProto *t, const char *what,
                         size_t want, uint8_t **out, pgd_error **err)
{
    const char *loc = NULL;
    long long off = 0, len = -1;
    for (size_t i = 0; i < t->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = t->external_data[i];
        if (!e->key || !e->value)
            continue;
        char *end;
        if (!strcmp(e->key, "location"))
            loc = e->value;
        else if (!strcmp(e->key, "offset") || !strcmp(e->key, "length")) {
            errno = 0;
            long long v = strtoll(e->value, &end, 10);
            if (errno || *end || v < 0)
                return pgd__graph_fail(err, PGD_ERR_FORMAT, g, NULL,
                                       "tensor '%s': external %s '%s' is not a byte count", what,
                                       e->key, e->value);
            *(!strcmp(e->key, "offset") ? &off : &len) = v;
        }
    }
    if (!loc || !*loc || loc[0] == '/' || strstr(loc, "..") || strchr(loc, '\\'))
        return pgd__graph_fail(err, PGD_ERR_FORMAT, g, NULL,
                               "tensor '%s': external data location '%s' must be a file name "
                               "relative to the model's folder (no '..', no absolute path)",
                               what, loc ? loc : "(none)");
    if (!g->external_ok)
        return pgd__graph_fail(err, PGD_ERR_FORMAT, g, NULL,
                               "tensor '%s': external data, but the model was given as bytes "
                               "without a name (no folder to read '%s' from)",
                               what, loc);
    if (len >= 0 && (unsigned long long)len != want)
        return pgd__graph_fail(err, PGD_ERR_FORMAT, g, NULL,
                               "tensor '%s': external length %lld, but its shape and type need "
                               "%zu bytes",
                               what, len, want);
    const char *slash = strrchr(g->path, '/');
    size_t dirlen = slash ? (size_t)(slash - g->path + 1) : 0;
    char *full = malloc(dirlen + strlen(loc) + 1);
    if (!full)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    memcpy(full, g->path, dirlen);
    strcpy(full + dirlen, loc);
    FILE *f = fopen(full, "rb");
    struct stat st;
    int rc = PGD_OK;
    if (!f || fstat(fileno(f), &st) || !S_ISREG(st.st_mode))
        rc = pgd__graph_fail(err, PGD_ERR_IO, g, NULL, "tensor '%s': external data file %s: %s",
                             what, full, f ? "not a regular file" : strerror(errno));
    else if ((unsigned long long)off > (unsigned long long)st.st_size ||
             want > (unsigned long long)st.st_size - (unsigned long long)off)
        rc = pgd__graph_fail(err, PGD_ERR_FORMAT, g, NULL,
                             "tensor '%s': external bytes [%lld, %lld) run past the end of %s "
                             "(%lld bytes)",
                             what, off, off + (long long)want, full, (long long)st.st_size);
    uint8_t *buf = NULL;
    if (!rc && !(buf = malloc(want ? want : 1)))
        rc = pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    if (!rc && (fseeko(f, (off_t)off, SEEK_SET) || fread(buf, 1, want, f) != want))
        rc = pgd__graph_fail(err, PGD_ERR_IO, g, NULL, "tensor '%s': cannot read %s", what, full);
    if (f)
        fclose(f);
    free(full);
    if (rc) {
        free(buf);
        return rc;
    }
    *out = buf;
    return PGD_OK;
}

/* The typed repeated field holding t's data when there is no raw_data, and its count. */
static int64_t typed_count(const Onnx__TensorProto *t)
{
    switch (t->data_type) {
    case G_FLOAT: return (int64_t)t->n_float_data;
    case G_DOUBLE: return (int64_t)t->n_double_data;
    case G_INT64: return (int64_t)t->n_int64_data;
    case G_UINT32:
    case G_UINT64: return (int64_t)t->n_uint64_data;
    default: return (int64_t)t->n_int32_data; /* int32/16/8, uint16/8, bool, float16, bf16 */
    }
}

static void typed_elem(ghost *h, const Onnx__TensorProto *t, int64_t k)
{
    switch (t->data_type) {
    case G_FLOAT: h->f[k] = t->float_data[k]; break;
    case G_DOUBLE: h->f[k] = (float)t->double_data[k]; break;
    case G_INT64: h->i[k] = t->int64_data[k]; break;
    case G_UINT32:
    case G_UINT64: h->i[k] = (int64_t)t->uint64_data[k]; break;
    case G_FLOAT16: h->f[k] = half_to_float((uint16_t)t->int32_data[k]); break;
    case G_BFLOAT16: {
        uint32_t u = (uint32_t)t->int32_data[k] << 16;
        float f;
        memcpy(&f, &u, 4);
        h->f[k] = f;
        break;
    }
    default: h->i[k] = t->int32_data[k]; break;
    }
}

int pgd__graph_tensor_to_host(const pgd_graph *g, const Onnx__TensorProto *t, const char *what,
                              ghost **out, pgd_error **err)
{
    *out = NULL;
    size_t esz = elem_bytes(t->data_type);
    if (!esz)
        return pgd__graph_fail(err, PGD_ERR_UNSUPPORTED, g, NULL,
                               "tensor '%s': data type %d is not supported (float, float16, "
                               "bfloat16, double, integers and bool are)",
                               what, (int)t->data_type);
    if (t->n_dims > PGD_MAX_DIMS)
        return pgd__graph_fail(err, PGD_ERR_UNSUPPORTED, g, NULL,
                               "tensor '%s' has %zu dims (at most %d)", what, t->n_dims,
                               PGD_MAX_DIMS);
    int64_t n = 1, nz = 1; /* nz: the non-zero dims' product, bounded too (0 x 2^62) */
    for (size_t d = 0; d < t->n_dims; d++) {
        if (t->dims[d] < 0 || (t->dims[d] && nz > MAX_TENSOR_ELEMS / t->dims[d]))
            return pgd__graph_fail(err, PGD_ERR_FORMAT, g, NULL,
                                   "tensor '%s': dim %zu is %lld (dims are 0 to 2^31 "
                                   "elements in all)",
                                   what, d, (long long)t->dims[d]);
        nz *= t->dims[d] ? t->dims[d] : 1;
        n *= t->dims[d];
    }
    size_t want = (size_t)n * esz;
    const uint8_t *raw = NULL;
    uint8_t *ext = NULL;
    int rc;
    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
        if ((rc = read_external(g, t, what, want, &ext, err)))
            return rc;
        raw = ext;
    } else if (t->has_raw_data) {
        if (t->raw_data.len != want)
            return pgd__graph_fail(err, PGD_ERR_FORMAT, g, NULL,
                                   "tensor '%s': %zu bytes of data, but its shape and type "
                                   "need %zu",
                                   what, t->raw_data.len, want);
        raw = t->raw_data.data;
    } else if (typed_count(t) != n) {
        return pgd__graph_fail(err, PGD_ERR_FORMAT, g, NULL,
                               "tensor '%s': %lld values, but its shape holds %lld", what,
                               (long long)typed_count(t), (long long)n);
    }
    int64_t dim[PGD_MAX_DIMS];
    for (size_t d = 0; d < t->n_dims; d++)
        dim[d] = t->dims[d];
    ghost *h = pgd__ghost_new((int)t->data_type, (int)t->n_dims, dim);
    if (!h) {
        free(ext);
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "%s: tensor '%s': out of host memory",
                             g->path, what);
    }
    for (int64_t k = 0; k < n; k++) {
        if (raw)
            raw_elem(h, raw + (size_t)k * esz, k);
        else
            typed_elem(h, t, k);
    }
    free(ext);
    *out = h;
    return PGD_OK;
}

/* ---- the graph -------------------------------------------------------------------------- */

static int add_node_values(pgd_graph *g, name_map *m, int ni, pgd_error **err)
{
    gnode *n = &g->nodes[ni];
    const Onnx__NodeProto *p = n->p;
    n->nin = (int)p->n_input;
    n->nout = (int)p->n_output;
    n->in = malloc(sizeof(int) * (p->n_input + 1));
    n->out = malloc(sizeof(int) * (p->n_output + 1));
    if (!n->in || !n->out)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    for (size_t k = 0; k < p->n_output; k++) {
        int existed;
        if (!p->output[k] || !*p->output[k]) {
            n->out[k] = -1;
            continue;
        }
        int v = value_add(g, m, p->output[k], &existed);
        if (existed &&
            (g->values[v].producer >= 0 || g->values[v].kind == V_CONST || g->values[v].graph_in))
            return pgd__graph_fail(err, PGD_ERR_FORMAT, g, n,
                                   "value '%s' is produced twice (ONNX values are assigned "
                                   "once)",
                                   p->output[k]);
        g->values[v].producer = ni;
        n->out[k] = v;
    }
    return PGD_OK;
}

static int resolve_inputs(pgd_graph *g, name_map *m, pgd_error **err)
{
    for (int ni = 0; ni < g->nnodes; ni++) {
        gnode *n = &g->nodes[ni];
        for (int k = 0; k < n->nin; k++) {
            const char *name = n->p->input[k];
            if (!name || !*name) {
                n->in[k] = -1;
                continue;
            }
            int v = map_find(g, m, name);
            if (v < 0 || (g->values[v].producer < 0 && g->values[v].kind != V_CONST &&
                          !g->values[v].graph_in))
                return pgd__graph_fail(err, PGD_ERR_FORMAT, g, n,
                                       "input '%s' is not produced by any node, initialiser "
                                       "or graph input",
                                       name);
            n->in[k] = v;
            g->values[v].uses++;
        }
    }
    return PGD_OK;
}

/* Kahn's order; a node left over sits on a cycle. */
static int topo_order(pgd_graph *g, pgd_error **err)
{
    int *pending = calloc((size_t)g->nnodes + 1, sizeof(int));
    int *queue = malloc(sizeof(int) * ((size_t)g->nnodes + 1));
    /* consumers lists */
    int *cnt = calloc((size_t)g->nvalues + 1, sizeof(int));
    int *start = calloc((size_t)g->nvalues + 2, sizeof(int));
    size_t total = 0;
    for (int ni = 0; ni < g->nnodes; ni++)
        total += (size_t)g->nodes[ni].nin;
    int *cons = malloc(sizeof(int) * (total + 1));
    g->order = malloc(sizeof(int) * ((size_t)g->nnodes + 1));
    if (!pending || !queue || !cnt || !start || !cons || !g->order) {
        free(pending), free(queue), free(cnt), free(start), free(cons);
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    }
    for (int ni = 0; ni < g->nnodes; ni++)
        for (int k = 0; k < g->nodes[ni].nin; k++) {
            int v = g->nodes[ni].in[k];
            if (v >= 0 && g->values[v].producer >= 0) {
                pending[ni]++;
                cnt[v]++;
            }
        }
    for (int v = 0; v < g->nvalues; v++)
        start[v + 1] = start[v] + cnt[v];
    memset(cnt, 0, sizeof(int) * (size_t)g->nvalues);
    for (int ni = 0; ni < g->nnodes; ni++)
        for (int k = 0; k < g->nodes[ni].nin; k++) {
            int v = g->nodes[ni].in[k];
            if (v >= 0 && g->values[v].producer >= 0)
                cons[start[v] + cnt[v]++] = ni;
        }
    int qh = 0, qt = 0, done = 0;
    for (int ni = 0; ni < g->nnodes; ni++)
        if (!pending[ni])
            queue[qt++] = ni;
    while (qh < qt) {
        int ni = queue[qh++];
        g->order[done++] = ni;
        for (int k = 0; k < g->nodes[ni].nout; k++) {
            int v = g->nodes[ni].out[k];
            if (v < 0)
                continue;
            for (int c = start[v]; c < start[v + 1]; c++)
                if (--pending[cons[c]] == 0)
                    queue[qt++] = cons[c];
        }
    }
    int rc = PGD_OK;
    if (done < g->nnodes) {
        int ni = 0;
        while (!pending[ni])
            ni++;
        rc = pgd__graph_fail(err, PGD_ERR_FORMAT, g, &g->nodes[ni],
                             "the graph has a cycle through this node (%d of %d nodes can be "
                             "ordered)",
                             done, g->nnodes);
    }
    free(pending), free(queue), free(cnt), free(start), free(cons);
    return rc;
}

/* Which values the host knows: constants, shapes, and what only they feed. */
static void classify(pgd_graph *g)
{
    for (int oi = 0; oi < g->nnodes; oi++) {
        gnode *n = &g->nodes[g->order[oi]];
        int host = !strcmp(n->op, "Shape") || !strcmp(n->op, "Size");
        if (!host) {
            host = 1;
            for (int k = 0; k < n->nin; k++)
                if (n->in[k] >= 0 && g->values[n->in[k]].kind == V_DEVICE)
                    host = 0;
        }
        /* a random op is never folded */
        if (!strncmp(n->op, "Random", 6))
            host = 0;
        n->host = host && pgd__graph_host_supported(n->op);
        for (int k = 0; k < n->nout; k++)
            if (n->out[k] >= 0)
                g->values[n->out[k]].kind = n->host ? V_HOST : V_DEVICE;
    }
    for (int oi = 0; oi < g->nnodes; oi++) {
        int ni = g->order[oi];
        gnode *n = &g->nodes[ni];
        for (int k = 0; k < n->nin; k++)
            if (n->in[k] >= 0)
                g->values[n->in[k]].last_use = oi;
    }
}

static int read_io(pgd_graph *g, name_map *m, pgd_error **err)
{
    Onnx__GraphProto *gp = g->model->graph;
    g->inputs = malloc(sizeof(int) * (gp->n_input + 1));
    g->outputs = malloc(sizeof(int) * (gp->n_output + 1));
    if (!g->inputs || !g->outputs)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    for (size_t i = 0; i < gp->n_input; i++) {
        const char *name = gp->input[i]->name;
        int existed, v;
        if (!name || !*name)
            return pgd__graph_fail(err, PGD_ERR_FORMAT, g, NULL, "graph input %zu has no name", i);
        v = value_add(g, m, name, &existed);
        if (existed && g->values[v].kind == V_CONST)
            continue; /* an initialiser listed as an input (IR < 4): a constant */
        if (existed || g->ninputs >= 64)
            return pgd__graph_fail(err, PGD_ERR_FORMAT, g, NULL,
                                   "graph input '%s' is listed twice, or there are more than 64",
                                   name);
        g->values[v].kind = V_DEVICE;
        g->values[v].graph_in = ++g->ninputs;
        g->inputs[g->ninputs - 1] = v;
        const Onnx__TypeProto *tp = gp->input[i]->type;
        if (tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && tp->tensor_type)
            g->values[v].dtype = tp->tensor_type->elem_type;
    }
    return PGD_OK;
}

static int read_outputs(pgd_graph *g, name_map *m, pgd_error **err)
{
    Onnx__GraphProto *gp = g->model->graph;
    for (size_t i = 0; i < gp->n_output; i++) {
        const char *name = gp->output[i]->name;
        int v = name ? map_find(g, m, name) : -1;
        if (v < 0)
            return pgd__graph_fail(err, PGD_ERR_FORMAT, g, NULL,
                                   "graph output '%s' is not produced by any node, initialiser "
                                   "or input",
                                   name ? name : "(unnamed)");
        g->outputs[g->noutputs++] = v;
        if (!g->values[v].graph_out)
            g->values[v].graph_out = g->noutputs;
        g->values[v].uses++;
    }
    if (!g->noutputs)
        return pgd__graph_fail(err, PGD_ERR_FORMAT, g, NULL, "the graph has no outputs");
    return PGD_OK;
}

static int read_opset(pgd_graph *g, pgd_error **err)
{
    const Onnx__ModelProto *mp = g->model;
    g->opset = -1;
    for (size_t i = 0; i < mp->n_opset_import; i++) {
        const char *d = mp->opset_import[i]->domain;
        if (!d || !*d || !strcmp(d, "ai.onnx"))
            g->opset = mp->opset_import[i]->version;
    }
    /* 28 is ONNX 1.23's: of the ops Pagoda runs only Cast changed after 25 (new types, refused
     * by the type checks like any other non-float cast) */
    if (g->opset < 11 || g->opset > 28)
        return pgd__graph_fail(err, PGD_ERR_UNSUPPORTED, g, NULL,
                               "default-domain opset %lld: Pagoda reads opsets 11 to 28 (export "
                               "with opset_version=17 or newer)",
                               (long long)g->opset);
    return PGD_OK;
}

static int read_initialisers(pgd_graph *g, name_map *m, pgd_error **err)
{
    Onnx__GraphProto *gp = g->model->graph;
    for (size_t i = 0; i < gp->n_initializer; i++) {
        const Onnx__TensorProto *t = gp->initializer[i];
        if (!t->name || !*t->name)
            return pgd__graph_fail(err, PGD_ERR_FORMAT, g, NULL, "initialiser %zu has no name", i);
        int existed, v = value_add(g, m, t->name, &existed);
        if (existed)
            return pgd__graph_fail(err, PGD_ERR_FORMAT, g, NULL,
                                   "initialiser '%s' is defined twice", t->name);
        g->values[v].kind = V_CONST;
        g->values[v].dtype = (int)t->data_type;
        int rc = pgd__graph_tensor_to_host(g, t, t->name, &g->values[v].h, err);
        if (rc)
            return rc;
    }
    return PGD_OK;
}

static int build(pgd_graph *g, pgd_error **err)
{
    Onnx__GraphProto *gp = g->model->graph;
    if (!gp)
        return pgd__graph_fail(err, PGD_ERR_FORMAT, g, NULL, "the model has no graph");
    int rc = read_opset(g, err);
    if (rc)
        return rc;
    if (gp->n_node > MAX_NODES)
        return pgd__graph_fail(err, PGD_ERR_TOO_LARGE, g, NULL, "%zu nodes (at most %d)",
                               gp->n_node, MAX_NODES);
    size_t maxv = gp->n_initializer + gp->n_input + 1;
    for (size_t i = 0; i < gp->n_node; i++)
        maxv += gp->node[i]->n_output;
    g->values = calloc(maxv, sizeof(gvalue));
    g->nodes = calloc(gp->n_node + 1, sizeof(gnode));
    name_map m = {0};
    for (m.cap = 16; m.cap < 2 * maxv; m.cap *= 2)
        ;
    m.slot = calloc(m.cap, sizeof(int));
    if (!g->values || !g->nodes || !m.slot) {
        free(m.slot);
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    }
    g->nnodes = (int)gp->n_node;
    for (int ni = 0; ni < g->nnodes; ni++) {
        g->nodes[ni].p = gp->node[ni];
        g->nodes[ni].op = gp->node[ni]->op_type ? gp->node[ni]->op_type : "";
    }
    rc = read_initialisers(g, &m, err);
    if (!rc)
        rc = read_io(g, &m, err);
    for (int ni = 0; !rc && ni < g->nnodes; ni++)
        rc = add_node_values(g, &m, ni, err);
    if (!rc)
        rc = resolve_inputs(g, &m, err);
    if (!rc)
        rc = read_outputs(g, &m, err);
    free(m.slot);
    if (!rc)
        rc = topo_order(g, err);
    if (!rc) {
        classify(g);
        rc = pgd__graph_fuse(g, err);
    }
    return rc;
}

/* The shared part of both loaders: parse the bytes, check and build the graph. `name` is the
 * file (external data resolves beside it) or the caller's label (path_is_file 0: no external
 * data; NULL stands for "<memory>"). The bytes are not kept. */
static int load_bytes(pgd_ctx *ctx, const void *data, size_t size, const char *name,
                      int path_is_file, pgd_graph **out, pgd_error **err)
{
    pgd_graph *g = calloc(1, sizeof *g);
    if (!g || !(g->path = strdup(name ? name : "<memory>"))) {
        free(g);
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    }
    g->ctx = ctx;
    g->external_ok = path_is_file;
    /* protobuf-c's unpack recurses per nested message: the depth is checked first */
    int rc = pgd__graph_check_nesting(data, size, g->path, err);
    if (rc) {
        pgd_graph_destroy(g);
        return rc;
    }
    g->model = onnx__model_proto__unpack(NULL, size, data);
    if (!g->model) {
        rc = pgd__graph_fail(err, PGD_ERR_FORMAT, g, NULL,
                             "not an ONNX model (the protobuf message is truncated or "
                             "malformed)");
        pgd_graph_destroy(g);
        return rc;
    }
    rc = pgd__graph_check_strings(g->model, g->path, err);
    if (!rc)
        rc = build(g, err);
    if (rc) {
        pgd_graph_destroy(g);
        return rc;
    }
    *out = g;
    return PGD_OK;
}

pgd_status pgd_graph_load(pgd_ctx *ctx, const char *path, pgd_graph **out, pgd_error **err)
{
    if (!out || !path)
        return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT, "graph_load: NULL path or out");
    *out = NULL;
    void *data = NULL;
    size_t size = 0;
    int rc = pgd_file_read(path, MAX_MODEL_BYTES, &data, &size, err);
    if (rc)
        return rc;
    rc = load_bytes(ctx, data, size, path, 1, out, err);
    free(data);
    return rc;
}

pgd_status pgd_graph_load_memory(pgd_ctx *ctx, const void *data, size_t size, const char *name,
                                 pgd_graph **out, pgd_error **err)
{
    if (!out || (!data && size))
        return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT, "graph_load_memory: NULL data or out");
    *out = NULL;
    if ((uint64_t)size > MAX_MODEL_BYTES)
        return pgd_error_set(err, PGD_ERR_TOO_LARGE,
                             "%s: %zu bytes: an ONNX message is at most 2 GiB (larger models "
                             "keep their weights as external data)",
                             name ? name : "<memory>", size);
    /* with a name, external data resolves as for a file of that name */
    return load_bytes(ctx, data ? data : "", size, name, name != NULL, out, err);
}

void pgd_graph_destroy(pgd_graph *g)
{
    if (!g)
        return;
    pgd__graph_release_all(g);
    for (int i = 0; i < g->nvalues; i++)
        pgd__ghost_free(g->values[i].h);
    for (int i = 0; g->nodes && i < g->nnodes; i++) {
        if (g->nodes[i].prep && g->nodes[i].prep_free)
            g->nodes[i].prep_free(g->nodes[i].prep);
        free(g->nodes[i].in);
        free(g->nodes[i].out);
    }
    free(g->values);
    free(g->nodes);
    free(g->order);
    free(g->fuses);
    free(g->inputs);
    free(g->outputs);
    if (g->model)
        onnx__model_proto__free_unpacked(g->model, NULL);
    free(g->path);
    free(g);
}
