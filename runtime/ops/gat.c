/* gat.c — graph attention (GATConv as PyTorch Geometric computes it): the graph's CSR built on
 * the host, and the launchers of cl/gat.cl.
 *
 * A graph holds its incoming edges per destination node in CSR order (stable: edges into the
 * same node keep their order in PyG's edge list), cut into segments of at most `seg` edges;
 * one segment is the unit of work of gat_segments, so a hub node with 10^5 in-edges becomes
 * ~100 work units instead of one long loop, and no launch is made per node. A layer is
 *   h = x·Wᵀ                                    pgd_linear (and h_dst = x·W_dstᵀ for lin_dst)
 *   a_src, a_dst [N, H]                         gat_scores
 *   (m, s, o) per segment, head, 8 channels     gat_segments: max, Σ exp, Σ exp·h_j
 *   y = merge(segments) (+ res) + bias, act     gat_combine
 *   α [E', H] in PyG's edge order (optional)    gat_alpha
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Edges per segment unless a node's degree asks for more (see seg_length). */
#define GAT_SEGMENT 1024
/* At most this many segments per node: gat_combine loops over a node's segments. */
#define GAT_MAX_SEGMENTS 40000

struct pgd_gat_graph {
    pgd_ctx *ctx;
    int64_t n, e;                            /* nodes; edges after the self-loop rule (E') */
    int64_t max_deg;                         /* the largest in-degree */
    int64_t k, seg;                          /* segments, and the edges per segment */
    int64_t *edges;                          /* [2, E'] in PyG's order: what α's rows follow */
    pgd_tensor *rowptr, *col, *dst, *perm;   /* int32 data in float tensors: [N+1], [E'] x 3 */
    pgd_tensor *seg_node, *seg_beg, *segptr; /* [K], [K], [N+1] */
};

struct pgd_gat {
    pgd_gat_desc d;
    pgd_linear *lin, *lin_dst, *res;
    pgd_tensor *att_src, *att_dst, *bias;
};

/* ---- graphs ---------------------------------------------------------------------------------- */

/* A tensor of max(n, 1) four-byte slots holding the int32 values v (OpenCL buffers cannot be
 * empty); the kernels read it as int. */
static int int_tensor(pgd_ctx *ctx, int64_t n, const int32_t *v, pgd_tensor **out, pgd_error **err)
{
    int64_t len = n > 0 ? n : 1;
    int rc = pgd_tensor_create(ctx, 1, &len, out, err);
    if (!rc && n > 0) {
        _Static_assert(sizeof(int32_t) == sizeof(float), "int32 travels in float slots");
        rc = pgd_tensor_upload(*out, (const float *)(const void *)v, err);
    }
    return rc;
}

/* The edges per segment: `want` (GAT_SEGMENT by default), more when the largest degree would
 * need over GAT_MAX_SEGMENTS segments. Both loops of the kernels stay below 65,535 iterations
 * for any E' < 2^31. */
static int64_t seg_length(int64_t want, int64_t max_deg)
{
    int64_t seg = want > 0 ? want : GAT_SEGMENT;
    int64_t need = (max_deg + GAT_MAX_SEGMENTS - 1) / GAT_MAX_SEGMENTS;
    return seg > need ? seg : need;
}

static int check_edges(int64_t n, const int64_t *ei, int64_t e, pgd_error **err)
{
    const char *op = "pgd_gat_graph_create";
    for (int r = 0; r < 2; r++)
        for (int64_t i = 0; i < e; i++) {
            int64_t v = ei[r * e + i];
            if (v < 0)
                return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                                      "%s: edge_index[%d][%lld] = %lld is negative (%s of edge "
                                      "%lld)",
                                      op, r, (long long)i, (long long)v,
                                      r ? "destination" : "source", (long long)i);
            if (v >= n)
                return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                                      "%s: edge_index[%d][%lld] = %lld is out of range for %lld "
                                      "nodes (%s of edge %lld; indices are 0..%lld)",
                                      op, r, (long long)i, (long long)v, (long long)n,
                                      r ? "destination" : "source", (long long)i,
                                      (long long)(n - 1));
        }
    return PGD_OK;
}

void pgd_gat_graph_destroy(pgd_gat_graph *g)
{
    if (!g)
        return;
    pgd_tensor *all[] = {g->rowptr, g->col, g->dst, g->perm, g->seg_node, g->seg_beg, g->segptr};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        pgd_tensor_destroy(all[i]);
    free(g->edges);
    free(g);
}

/* The host arrays of a graph under construction. */
typedef struct csr_build {
    int32_t *rowptr, *col, *dst, *perm, *seg_node, *seg_beg, *segptr;
} csr_build;

static void csr_free(csr_build *b)
{
    free(b->rowptr), free(b->col), free(b->dst), free(b->perm);
    free(b->seg_node), free(b->seg_beg), free(b->segptr);
}

/* Fills g->edges (PyG's order) and the CSR arrays of b from edge_index. */
static int build_csr(pgd_gat_graph *g, const int64_t *ei, int64_t e_in, int add_loops, int64_t seg,
                     csr_build *b, pgd_error **err)
{
    int64_t n = g->n, e = g->e;
    size_t en = (size_t)(e > 0 ? e : 1);
    g->edges = malloc(2 * en * sizeof *g->edges);
    b->rowptr = calloc((size_t)n + 1, sizeof *b->rowptr);
    b->segptr = calloc((size_t)n + 1, sizeof *b->segptr);
    b->col = malloc(en * sizeof *b->col);
    b->dst = malloc(en * sizeof *b->dst);
    b->perm = malloc(en * sizeof *b->perm);
    int32_t *fill = malloc(((size_t)n + 1) * sizeof *fill);
    if (!g->edges || !b->rowptr || !b->segptr || !b->col || !b->dst || !b->perm || !fill) {
        free(fill);
        return pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY,
                              "pgd_gat_graph_create: CSR of %lld nodes and %lld edges",
                              (long long)n, (long long)e);
    }
    /* PyG's order: add_self_loops removes the existing loops (keeping the other edges in
     * order) and appends one loop per node, 0..N-1. */
    int64_t w = 0;
    for (int64_t i = 0; i < e_in; i++) {
        int64_t s = ei[i], d = ei[e_in + i];
        if (add_loops && s == d)
            continue;
        g->edges[w] = s, g->edges[e + w] = d, w++;
    }
    for (int64_t i = 0; add_loops && i < n; i++)
        g->edges[w] = i, g->edges[e + w] = i, w++;
    for (int64_t i = 0; i < e; i++)
        b->rowptr[g->edges[e + i] + 1]++;
    for (int64_t i = 0; i < n; i++) {
        int64_t deg = b->rowptr[i + 1];
        g->max_deg = deg > g->max_deg ? deg : g->max_deg;
        b->rowptr[i + 1] += b->rowptr[i];
    }
    memcpy(fill, b->rowptr, ((size_t)n + 1) * sizeof *fill);
    for (int64_t i = 0; i < e; i++) { /* stable: a node's edges keep their order */
        int64_t d = g->edges[e + i];
        int32_t p = fill[d]++;
        b->col[p] = (int32_t)g->edges[i];
        b->dst[p] = (int32_t)d;
        b->perm[p] = (int32_t)i;
    }
    free(fill);
    g->seg = seg_length(seg, g->max_deg);
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++) {
        k += (b->rowptr[i + 1] - b->rowptr[i] + g->seg - 1) / g->seg;
        b->segptr[i + 1] = (int32_t)k;
    }
    g->k = k;
    b->seg_node = malloc((size_t)(k > 0 ? k : 1) * sizeof *b->seg_node);
    b->seg_beg = malloc((size_t)(k > 0 ? k : 1) * sizeof *b->seg_beg);
    if (!b->seg_node || !b->seg_beg)
        return pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY,
                              "pgd_gat_graph_create: %lld segments", (long long)k);
    k = 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t p = b->rowptr[i]; p < b->rowptr[i + 1]; p += g->seg, k++) {
            b->seg_node[k] = (int32_t)i;
            b->seg_beg[k] = (int32_t)p;
        }
    return PGD_OK;
}

int pgd__graph_create_seg(pgd_ctx *ctx, int64_t num_nodes, const int64_t *edge_index,
                          int64_t num_edges, int add_self_loops, int64_t seg, pgd_gat_graph **out,
                          pgd_error **err)
{
    const char *op = "pgd_gat_graph_create";
    if (out)
        *out = NULL;
    if (!ctx || !out || (!edge_index && num_edges > 0))
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "%s: ctx, out and (with edges) edge_index are required", op);
    /* Node and edge indices are int32 on the device. */
    if (num_nodes < 1 || num_nodes > INT32_MAX - 1)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "%s: num_nodes must be 1..%d, got %lld", op, INT32_MAX - 1,
                              (long long)num_nodes);
    if (num_edges < 0)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "%s: num_edges must be >= 0, got %lld",
                              op, (long long)num_edges);
    if (add_self_loops != 0 && add_self_loops != 1)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "%s: add_self_loops must be 0 or 1, got %d", op, add_self_loops);
    int rc = check_edges(num_nodes, edge_index, num_edges, err);
    if (rc)
        return rc;
    int64_t loops = 0;
    for (int64_t i = 0; add_self_loops && i < num_edges; i++)
        loops += edge_index[i] == edge_index[num_edges + i];
    int64_t e = num_edges - loops + (add_self_loops ? num_nodes : 0);
    if (e > INT32_MAX - 1)
        return pgd__error_set(err, PGD_ERR_TOO_LARGE,
                              "%s: %lld edges (with self loops) exceed the %d edges of int32 "
                              "CSR indices",
                              op, (long long)e, INT32_MAX - 1);
    pgd_gat_graph *g = calloc(1, sizeof *g);
    if (!g)
        return pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "%s: graph", op);
    g->ctx = ctx;
    g->n = num_nodes;
    g->e = e;
    csr_build b;
    memset(&b, 0, sizeof b);
    rc = build_csr(g, edge_index, num_edges, add_self_loops, seg, &b, err);
    if (!rc)
        rc = int_tensor(ctx, g->n + 1, b.rowptr, &g->rowptr, err);
    if (!rc)
        rc = int_tensor(ctx, g->e, b.col, &g->col, err);
    if (!rc)
        rc = int_tensor(ctx, g->e, b.dst, &g->dst, err);
    if (!rc)
        rc = int_tensor(ctx, g->e, b.perm, &g->perm, err);
    if (!rc)
        rc = int_tensor(ctx, g->k, b.seg_node, &g->seg_node, err);
    if (!rc)
        rc = int_tensor(ctx, g->k, b.seg_beg, &g->seg_beg, err);
    if (!rc)
        rc = int_tensor(ctx, g->n + 1, b.segptr, &g->segptr, err);
    csr_free(&b);
    if (rc) {
        pgd_gat_graph_destroy(g);
        return rc;
    }
    *out = g;
    return PGD_OK;
}

pgd_status pgd_gat_graph_create(pgd_ctx *ctx, int64_t num_nodes, const int64_t *edge_index,
                                int64_t num_edges, int add_self_loops, pgd_gat_graph **out,
                                pgd_error **err)
{
    return pgd__graph_create_seg(ctx, num_nodes, edge_index, num_edges, add_self_loops, 0, out,
                                 err);
}

int64_t pgd_gat_graph_get_num_nodes(const pgd_gat_graph *g)
{
    return g ? g->n : 0;
}
int64_t pgd_gat_graph_get_num_edges(const pgd_gat_graph *g)
{
    return g ? g->e : 0;
}
int64_t pgd_gat_graph_get_max_in_degree(const pgd_gat_graph *g)
{
    return g ? g->max_deg : 0;
}
const int64_t *pgd_gat_graph_get_edge_index(const pgd_gat_graph *g)
{
    return g ? g->edges : NULL;
}
int64_t pgd__graph_segments(const pgd_gat_graph *g)
{
    return g ? g->k : 0;
}

/* ---- layers ---------------------------------------------------------------------------------- */

void pgd_gat_desc_init(pgd_gat_desc *d, int64_t in_channels, int64_t out_channels, int64_t heads)
{
    memset(d, 0, sizeof *d);
    d->in_channels = in_channels;
    d->out_channels = out_channels;
    d->heads = heads;
    d->concat = 1;
    d->negative_slope = 0.2f;
    d->act = PGD_GAT_ACT_NONE;
}

int64_t pgd_gat_out_width(const pgd_gat_desc *d)
{
    return d ? (d->concat ? d->heads * d->out_channels : d->out_channels) : 0;
}

static int check_gat_desc(const pgd_gat_desc *d, pgd_error **err)
{
    const char *op = "pgd_gat_create";
    /* H·C and F are row lengths of int-indexed kernels and GEMMs. */
    const int64_t lim = 1 << 24;
    if (d->in_channels < 1 || d->in_channels > lim)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "%s: in_channels must be 1..%lld, got %lld", op, (long long)lim,
                              (long long)d->in_channels);
    if (d->out_channels < 1 || d->out_channels > lim)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "%s: out_channels must be 1..%lld, got %lld", op, (long long)lim,
                              (long long)d->out_channels);
    if (d->heads < 1 || d->heads > lim / d->out_channels)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "%s: heads must be 1..%lld for %lld out_channels (heads x "
                              "out_channels <= %lld), got %lld",
                              op, (long long)(lim / d->out_channels), (long long)d->out_channels,
                              (long long)lim, (long long)d->heads);
    if (d->concat != 0 && d->concat != 1)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "%s: concat must be 0 or 1, got %d",
                              op, d->concat);
    if (!isfinite(d->negative_slope))
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "%s: negative_slope must be finite, got %g", op,
                              (double)d->negative_slope);
    if ((unsigned)d->act > PGD_GAT_ACT_RELU)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "%s: unknown activation %d (none 0, ELU 1, ReLU 2)", op, (int)d->act);
    return PGD_OK;
}

/* A linear layer from host weights [rows, cols]. */
static int host_linear(pgd_ctx *ctx, int64_t rows, int64_t cols, const float *w, pgd_linear **out,
                       pgd_error **err)
{
    int64_t s[2] = {rows, cols};
    pgd_tensor *t = NULL;
    int rc = pgd_tensor_create_from(ctx, 2, s, w, &t, err);
    if (!rc)
        rc = pgd_linear_create(ctx, t, NULL, out, err);
    pgd_tensor_destroy(t);
    return rc;
}

pgd_status pgd_gat_create(pgd_ctx *ctx, const pgd_gat_desc *desc, const pgd_gat_params *params,
                          pgd_gat **out, pgd_error **err)
{
    const char *op = "pgd_gat_create";
    if (out)
        *out = NULL;
    if (!ctx || !desc || !params || !out)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "%s: ctx, desc, params and out are required", op);
    int rc = check_gat_desc(desc, err);
    if (rc)
        return rc;
    const char *need = !params->weight    ? "weight"
                       : !params->att_src ? "att_src"
                       : !params->att_dst ? "att_dst"
                                          : NULL;
    if (need)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "%s: params.%s is required", op, need);
    pgd_gat *g = calloc(1, sizeof *g);
    if (!g)
        return pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "%s: layer", op);
    g->d = *desc;
    int64_t F = desc->in_channels, H = desc->heads, C = desc->out_channels, HC = H * C;
    int64_t OD = pgd_gat_out_width(desc);
    rc = host_linear(ctx, HC, F, params->weight, &g->lin, err);
    if (!rc && params->weight_dst)
        rc = host_linear(ctx, HC, F, params->weight_dst, &g->lin_dst, err);
    if (!rc && params->residual_weight)
        rc = host_linear(ctx, OD, F, params->residual_weight, &g->res, err);
    if (!rc)
        rc = pgd_tensor_create_from(ctx, 1, &HC, params->att_src, &g->att_src, err);
    if (!rc)
        rc = pgd_tensor_create_from(ctx, 1, &HC, params->att_dst, &g->att_dst, err);
    if (!rc && params->bias)
        rc = pgd_tensor_create_from(ctx, 1, &OD, params->bias, &g->bias, err);
    if (rc) {
        pgd_gat_destroy(g);
        return rc;
    }
    *out = g;
    return PGD_OK;
}

void pgd_gat_destroy(pgd_gat *g)
{
    if (!g)
        return;
    pgd_linear_destroy(g->lin);
    pgd_linear_destroy(g->lin_dst);
    pgd_linear_destroy(g->res);
    pgd_tensor_destroy(g->att_src);
    pgd_tensor_destroy(g->att_dst);
    pgd_tensor_destroy(g->bias);
    free(g);
}

const pgd_gat_desc *pgd_gat_get_desc(const pgd_gat *g)
{
    return g ? &g->d : NULL;
}

/* ---- forward --------------------------------------------------------------------------------- */

/* Enqueues k over `total` items (its last argument, index `total_arg`, must already hold
 * total) in ranges of at most 2^24 items, each with its global offset. */
static int launch_flat(pgd_ctx *ctx, cl_kernel k, const char *name, int64_t total, pgd_error **err)
{
    size_t wg = pgd__flat_wg(ctx, k);
    size_t chunk = pgd__round_up((size_t)1 << 24, wg);
    int rc = PGD_OK;
    for (int64_t b = 0; b < total && !rc; b += (int64_t)chunk) {
        size_t n = (size_t)(total - b) < chunk ? (size_t)(total - b) : chunk;
        size_t off[1] = {(size_t)b}, global[1] = {pgd__round_up(n, wg)}, local[1] = {wg};
        rc = pgd__enqueue_at(ctx, k, name, 1, off, global, local, err);
    }
    return rc;
}

static int new2(pgd_ctx *ctx, int64_t a, int64_t b, pgd_tensor **out, pgd_error **err)
{
    int64_t s[2] = {a > 0 ? a : 1, b > 0 ? b : 1};
    return pgd_tensor_create(ctx, 2, s, out, err);
}

static int check_forward(const pgd_gat *gat, const pgd_gat_graph *g, const pgd_tensor *x,
                         const pgd_tensor *y, const pgd_tensor *alpha, pgd_error **err)
{
    const char *op = "pgd_gat_forward";
    char got[128];
    int64_t N = g->n, F = gat->d.in_channels, OD = pgd_gat_out_width(&gat->d);
    int64_t H = gat->d.heads;
    if (x->ndim != 2 || x->shape[0] != N || x->shape[1] != F)
        return pgd__error_set(err, PGD_ERR_SHAPE,
                              "%s: x is %s, expected [%lld, %lld] (the graph's %lld nodes, %lld "
                              "input channels)",
                              op, pgd_tensor_shape_str(x, got, sizeof got), (long long)N,
                              (long long)F, (long long)N, (long long)F);
    if (y->ndim != 2 || y->shape[0] != N || y->shape[1] != OD)
        return pgd__error_set(err, PGD_ERR_SHAPE, "%s: y is %s, expected [%lld, %lld] (%s)", op,
                              pgd_tensor_shape_str(y, got, sizeof got), (long long)N, (long long)OD,
                              gat->d.concat ? "heads x out_channels, concatenated"
                                            : "out_channels, heads averaged");
    if (alpha && (alpha->ndim != 2 || alpha->shape[0] != g->e || alpha->shape[1] != H))
        return pgd__error_set(err, PGD_ERR_SHAPE,
                              "%s: alpha is %s, expected [%lld, %lld] (the graph's edges, with "
                              "self loops, x heads)",
                              op, pgd_tensor_shape_str(alpha, got, sizeof got), (long long)g->e,
                              (long long)H);
    if (y == x || alpha == x || (alpha && alpha == y))
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "%s: x, y and alpha must be distinct tensors", op);
    return PGD_OK;
}

/* Scratch tensors of one forward pass. */
typedef struct gat_scratch {
    pgd_tensor *h, *hd, *res, *as, *ad, *pm, *ps, *po, *nm, *ns;
} gat_scratch;

static void scratch_free(gat_scratch *s)
{
    pgd_tensor *all[] = {s->h, s->hd, s->res, s->as, s->ad, s->pm, s->ps, s->po, s->nm, s->ns};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        pgd_tensor_destroy(all[i]);
}

static int run_scores(pgd_ctx *ctx, const pgd_gat *gat, int64_t N, gat_scratch *s, pgd_error **err)
{
    cl_kernel k;
    pgd__args a;
    int64_t H = gat->d.heads, C = gat->d.out_channels, total = N * H;
    int rc = pgd__args_kernel(&a, ctx, "gat", NULL, "gat_scores", &k, err);
    if (rc)
        return rc;
    pgd__arg_mem(&a, s->h->buf);
    pgd__arg_mem(&a, (s->hd ? s->hd : s->h)->buf);
    pgd__arg_int(&a, (cl_int)(H * C));
    pgd__arg_mem(&a, gat->att_src->buf);
    pgd__arg_mem(&a, gat->att_dst->buf);
    pgd__arg_mem(&a, s->as->buf);
    pgd__arg_mem(&a, s->ad->buf);
    pgd__arg_int(&a, (cl_int)H);
    pgd__arg_int(&a, (cl_int)C);
    pgd__arg_long(&a, total);
    if ((rc = pgd__args_end(&a, err)))
        return rc;
    return launch_flat(ctx, k, "gat_scores", total, err);
}

/* The groups of channels a work-item of gat_segments and gat_combine takes (CW in gat.cl). */
static int64_t chunks(int64_t C)
{
    return (C + 7) / 8;
}

static int run_segments(pgd_ctx *ctx, const pgd_gat *gat, const pgd_gat_graph *g, gat_scratch *s,
                        pgd_error **err)
{
    cl_kernel k;
    pgd__args a;
    int64_t H = gat->d.heads, C = gat->d.out_channels, total = g->k * H * chunks(C);
    int rc = pgd__args_kernel(&a, ctx, "gat", NULL, "gat_segments", &k, err);
    if (rc)
        return rc;
    pgd__arg_mem(&a, s->h->buf);
    pgd__arg_mem(&a, s->as->buf);
    pgd__arg_mem(&a, s->ad->buf);
    pgd__arg_mem(&a, g->rowptr->buf);
    pgd__arg_mem(&a, g->col->buf);
    pgd__arg_mem(&a, g->seg_node->buf);
    pgd__arg_mem(&a, g->seg_beg->buf);
    pgd__arg_int(&a, (cl_int)g->seg);
    pgd__arg_int(&a, (cl_int)H);
    pgd__arg_int(&a, (cl_int)C);
    pgd__arg_float(&a, gat->d.negative_slope);
    pgd__arg_mem(&a, s->pm->buf);
    pgd__arg_mem(&a, s->ps->buf);
    pgd__arg_mem(&a, s->po->buf);
    pgd__arg_long(&a, total);
    if ((rc = pgd__args_end(&a, err)))
        return rc;
    return launch_flat(ctx, k, "gat_segments", total, err);
}

static int run_combine(pgd_ctx *ctx, const pgd_gat *gat, const pgd_gat_graph *g, gat_scratch *s,
                       int keep, pgd_tensor *y, pgd_error **err)
{
    cl_kernel k;
    pgd__args a;
    int64_t H = gat->d.heads, C = gat->d.out_channels;
    int64_t total = g->n * (gat->d.concat ? H : 1) * chunks(C);
    int rc = pgd__args_kernel(&a, ctx, "gat", NULL, "gat_combine", &k, err);
    if (rc)
        return rc;
    pgd__arg_mem(&a, s->pm->buf);
    pgd__arg_mem(&a, s->ps->buf);
    pgd__arg_mem(&a, s->po->buf);
    pgd__arg_mem(&a, g->segptr->buf);
    pgd__arg_int(&a, (cl_int)H);
    pgd__arg_int(&a, (cl_int)C);
    pgd__arg_int(&a, gat->d.concat);
    pgd__arg_mem(&a, (s->res ? s->res : y)->buf);
    pgd__arg_int(&a, s->res != NULL);
    pgd__arg_mem(&a, (gat->bias ? gat->bias : y)->buf);
    pgd__arg_int(&a, gat->bias != NULL);
    pgd__arg_int(&a, (cl_int)gat->d.act);
    pgd__arg_int(&a, keep);
    pgd__arg_mem(&a, (keep ? s->nm : y)->buf);
    pgd__arg_mem(&a, (keep ? s->ns : y)->buf);
    pgd__arg_mem(&a, y->buf);
    pgd__arg_long(&a, total);
    if ((rc = pgd__args_end(&a, err)))
        return rc;
    return launch_flat(ctx, k, "gat_combine", total, err);
}

static int run_alpha(pgd_ctx *ctx, const pgd_gat *gat, const pgd_gat_graph *g, gat_scratch *s,
                     pgd_tensor *alpha, pgd_error **err)
{
    cl_kernel k;
    pgd__args a;
    int64_t H = gat->d.heads, total = g->e * H;
    int rc = pgd__args_kernel(&a, ctx, "gat", NULL, "gat_alpha", &k, err);
    if (rc)
        return rc;
    pgd__arg_mem(&a, s->as->buf);
    pgd__arg_mem(&a, s->ad->buf);
    pgd__arg_mem(&a, g->col->buf);
    pgd__arg_mem(&a, g->dst->buf);
    pgd__arg_mem(&a, g->perm->buf);
    pgd__arg_int(&a, (cl_int)H);
    pgd__arg_float(&a, gat->d.negative_slope);
    pgd__arg_mem(&a, s->nm->buf);
    pgd__arg_mem(&a, s->ns->buf);
    pgd__arg_mem(&a, alpha->buf);
    pgd__arg_long(&a, total);
    if ((rc = pgd__args_end(&a, err)))
        return rc;
    return launch_flat(ctx, k, "gat_alpha", total, err);
}

pgd_status pgd_gat_forward(pgd_ctx *ctx, const pgd_gat *gat, const pgd_gat_graph *g,
                           const pgd_tensor *x, pgd_tensor *y, pgd_tensor *alpha, pgd_error **err)
{
    const char *op = "pgd_gat_forward";
    if (!ctx || !gat || !g || !x || !y)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "%s: ctx, gat, graph, x and y are required", op);
    if (g->ctx != ctx || x->ctx != ctx || y->ctx != ctx || (alpha && alpha->ctx != ctx))
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "%s: the graph and the tensors must belong to ctx", op);
    int rc = check_forward(gat, g, x, y, alpha, err);
    if (rc)
        return rc;
    int64_t N = g->n, H = gat->d.heads, HC = H * gat->d.out_channels;
    int64_t OD = pgd_gat_out_width(&gat->d);
    gat_scratch s;
    memset(&s, 0, sizeof s);
    rc = new2(ctx, N, HC, &s.h, err);
    if (!rc)
        rc = pgd_linear_forward(ctx, gat->lin, x, PGD_ACT_NONE, NULL, s.h, err);
    if (!rc && gat->lin_dst) {
        rc = new2(ctx, N, HC, &s.hd, err);
        if (!rc)
            rc = pgd_linear_forward(ctx, gat->lin_dst, x, PGD_ACT_NONE, NULL, s.hd, err);
    }
    if (!rc && gat->res) {
        rc = new2(ctx, N, OD, &s.res, err);
        if (!rc)
            rc = pgd_linear_forward(ctx, gat->res, x, PGD_ACT_NONE, NULL, s.res, err);
    }
    /* Empty scratch (no segments, no α) still gets one element: kernels take valid buffers. */
    if (!rc)
        rc = new2(ctx, N, H, &s.as, err);
    if (!rc)
        rc = new2(ctx, N, H, &s.ad, err);
    if (!rc)
        rc = new2(ctx, g->k, H, &s.pm, err);
    if (!rc)
        rc = new2(ctx, g->k, H, &s.ps, err);
    if (!rc)
        rc = new2(ctx, g->k, HC, &s.po, err);
    if (!rc && alpha)
        rc = new2(ctx, N, H, &s.nm, err);
    if (!rc && alpha)
        rc = new2(ctx, N, H, &s.ns, err);
    if (!rc)
        rc = run_scores(ctx, gat, N, &s, err);
    if (!rc && g->k > 0)
        rc = run_segments(ctx, gat, g, &s, err);
    if (!rc)
        rc = run_combine(ctx, gat, g, &s, alpha != NULL, y, err);
    if (!rc && alpha && g->e > 0)
        rc = run_alpha(ctx, gat, g, &s, alpha, err);
    scratch_free(&s);
    return rc;
}
