/* graph_fuse.c — the fused groups, found once from the graph's structure: a chain qualifies
 * when each intermediate value has exactly one reader (the next member) and is not a graph
 * output. Values the pattern needs (the GELU constants, scales, bias shapes) are checked when
 * the group runs, and a group whose values do not fit runs its members one by one: a fusion
 * never changes results.
 *   linear:    MatMul(x, W) | Gemm(x, W[, c])  [+ Add(bias)]  [+ Relu | Gelu | erf-GELU]
 *              [+ Add(residual)]
 *   conv:      Conv [+ BatchNormalization] [+ Add(residual)] [+ Relu]
 *   attention: [Mul(q, s)] MatMul(q, kᵀ) [Mul|Div s]* Softmax(last axis) MatMul(p, v)
 *   gelu:      the erf-GELU subgraph alone -> one GELU */
#include "graph.h"

#include <stdlib.h>
#include <string.h>

typedef struct fctx {
    pgd_graph *g;
    int *consumer; /* the one node reading a value, -1 none, -2 several */
    int *pos;      /* run position of each node */
} fctx;

static int is_op(const gnode *n, const char *op)
{
    return !strcmp(n->op, op) && !n->host && !n->fuse;
}

/* The only node reading value v (and v is not a graph output), or NULL. */
static gnode *only_reader(fctx *c, int v)
{
    if (v < 0 || c->g->values[v].graph_out || c->consumer[v] < 0)
        return NULL;
    return &c->g->nodes[c->consumer[v]];
}

static int is_const(fctx *c, int v)
{
    return v >= 0 && c->g->values[v].kind != V_DEVICE;
}

static int is_dev(fctx *c, int v)
{
    return v >= 0 && c->g->values[v].kind == V_DEVICE;
}

/* The other input of a two-input node n, given one of them. */
static int other_in(const gnode *n, int v)
{
    if (n->nin != 2)
        return -1;
    return n->in[0] == v ? n->in[1] : n->in[1] == v ? n->in[0] : -1;
}

static int add_group(fctx *c, gfuse *f, const int *members, int nm)
{
    pgd_graph *g = c->g;
    gfuse *nf = realloc(g->fuses, sizeof(gfuse) * (size_t)(g->nfuses + 1));
    if (!nf)
        return PGD_ERR_OUT_OF_HOST_MEMORY;
    g->fuses = nf;
    int tail = members[0];
    for (int i = 1; i < nm; i++)
        if (c->pos[members[i]] > c->pos[tail])
            tail = members[i];
    f->tail = tail;
    g->fuses[g->nfuses++] = *f;
    for (int i = 0; i < nm; i++)
        g->nodes[members[i]].fuse = g->nfuses;
    /* every input from outside the group stays alive until the tail runs */
    for (int i = 0; i < nm; i++) {
        gnode *n = &g->nodes[members[i]];
        for (int k = 0; k < n->nin; k++)
            if (n->in[k] >= 0 && g->values[n->in[k]].last_use < c->pos[tail])
                g->values[n->in[k]].last_use = c->pos[tail];
    }
    return PGD_OK;
}

/* The erf-GELU subgraph starting at x (read by exactly Div/Mul and the final Mul): returns the
 * value it produces and appends its nodes, or -1. */
static int match_gelu(fctx *c, int x, int *members, int *nm)
{
    pgd_graph *g = c->g;
    int div = -1, mul = -1, cnt = 0;
    for (int i = 0; i < g->nnodes; i++) {
        gnode *n = &g->nodes[i];
        for (int k = 0; k < n->nin; k++)
            if (n->in[k] == x) {
                cnt++;
                if (is_op(n, "Div") && k == 0 && is_const(c, n->in[1]))
                    div = i;
                else if (is_op(n, "Mul") && is_const(c, other_in(n, x)) && div < 0 && mul < 0 &&
                         cnt == 1)
                    div = i; /* x * (1/sqrt 2) */
                else if (is_op(n, "Mul"))
                    mul = i;
            }
    }
    if (cnt != 2 || div < 0 || mul < 0 || g->values[x].graph_out)
        return -1;
    gnode *e = only_reader(c, g->nodes[div].out[0]);
    if (!e || !is_op(e, "Erf"))
        return -1;
    gnode *a = only_reader(c, e->out[0]);
    if (!a || !is_op(a, "Add") || !is_const(c, other_in(a, e->out[0])))
        return -1;
    gnode *m1 = &g->nodes[mul];
    if (only_reader(c, a->out[0]) != m1 || other_in(m1, a->out[0]) != x)
        return -1;
    gnode *m2 = only_reader(c, m1->out[0]);
    if (!m2 || !is_op(m2, "Mul") || !is_const(c, other_in(m2, m1->out[0])))
        return -1;
    members[(*nm)++] = div;
    members[(*nm)++] = (int)(e - g->nodes);
    members[(*nm)++] = (int)(a - g->nodes);
    members[(*nm)++] = mul;
    members[(*nm)++] = (int)(m2 - g->nodes);
    return m2->out[0];
}

/* A group of `kind` headed by node `head`, with no value of its own named yet. */
static gfuse new_group(int kind, int head)
{
    return (gfuse){.kind = kind,
                   .head = head,
                   .act = PGD_ACT_NONE,
                   .residual = -1,
                   .bias = -1,
                   .out = -1,
                   .q = -1,
                   .k = -1,
                   .v = -1,
                   .mask = -1};
}

static int fuse_linear(fctx *c, int ni)
{
    pgd_graph *g = c->g;
    gnode *n = &g->nodes[ni];
    int gemm = !strcmp(n->op, "Gemm");
    if (n->nin < 2 || !is_dev(c, n->in[0]) || !is_const(c, n->in[1]) ||
        (gemm && n->nin > 2 && n->in[2] >= 0 && !is_const(c, n->in[2])))
        return PGD_OK;
    int members[16], nm = 0;
    members[nm++] = ni;
    gfuse f = new_group(F_LINEAR, ni);
    int y = n->out[0];
    gnode *r = only_reader(c, y);
    if (!gemm && r && is_op(r, "Add") && is_const(c, other_in(r, y))) {
        f.bias = other_in(r, y);
        members[nm++] = (int)(r - g->nodes);
        y = r->out[0];
        r = only_reader(c, y);
    }
    if (r && (is_op(r, "Relu") || (is_op(r, "Gelu") && r->nin == 1))) {
        f.act = !strcmp(r->op, "Relu") ? PGD_ACT_RELU : PGD_ACT_GELU;
        if (f.act == PGD_ACT_GELU && !strcmp(pgd__graph_attr_s(r, "approximate", "none"), "tanh"))
            f.act = PGD_ACT_NONE;
        if (f.act != PGD_ACT_NONE) {
            members[nm++] = (int)(r - g->nodes);
            y = r->out[0];
            r = only_reader(c, y);
        }
    } else {
        int save = nm, gy = match_gelu(c, y, members, &nm);
        if (gy >= 0) {
            f.act = PGD_ACT_GELU;
            y = gy;
            r = only_reader(c, y);
        } else {
            nm = save;
        }
    }
    if (r && is_op(r, "Add") && is_dev(c, other_in(r, y)) && other_in(r, y) != y) {
        f.residual = other_in(r, y);
        members[nm++] = (int)(r - g->nodes);
        y = r->out[0];
    }
    f.out = y;
    return add_group(c, &f, members, nm);
}

static int fuse_conv(fctx *c, int ni)
{
    pgd_graph *g = c->g;
    gnode *n = &g->nodes[ni];
    if (n->nin < 2 || !is_dev(c, n->in[0]) || !is_const(c, n->in[1]) ||
        (n->nin > 2 && n->in[2] >= 0 && !is_const(c, n->in[2])))
        return PGD_OK;
    int members[8], nm = 0;
    members[nm++] = ni;
    gfuse f = new_group(F_CONV, ni);
    int y = n->out[0];
    gnode *r = only_reader(c, y);
    if (r && is_op(r, "BatchNormalization") && r->nout == 1) {
        int ok = 1;
        for (int k = 1; k < r->nin; k++)
            ok &= is_const(c, r->in[k]);
        if (ok && r->nin == 5) {
            f.bias = (int)(r - g->nodes); /* the BN node */
            members[nm++] = f.bias;
            y = r->out[0];
            r = only_reader(c, y);
        }
    }
    if (r && is_op(r, "Add") && is_dev(c, other_in(r, y)) && other_in(r, y) != y) {
        f.residual = other_in(r, y);
        members[nm++] = (int)(r - g->nodes);
        y = r->out[0];
        r = only_reader(c, y);
    }
    if (r && is_op(r, "Relu")) {
        f.act = PGD_ACT_RELU;
        members[nm++] = (int)(r - g->nodes);
        y = r->out[0];
    }
    if (nm == 1)
        return PGD_OK;
    f.out = y;
    return add_group(c, &f, members, nm);
}

static int fuse_attention(fctx *c, int ni)
{
    pgd_graph *g = c->g;
    gnode *n = &g->nodes[ni];
    if (n->nin != 2 || !is_dev(c, n->in[0]) || !is_dev(c, n->in[1]))
        return PGD_OK;
    int members[16], nm = 0;
    gfuse f = new_group(F_ATTENTION, ni);
    f.q = n->in[0], f.k = n->in[1];
    /* scalings of q and kᵀ before the product */
    for (int side = 0; side < 2; side++) {
        int v = n->in[side];
        gnode *p = g->values[v].producer >= 0 ? &g->nodes[g->values[v].producer] : NULL;
        if (p && is_op(p, "Mul") && only_reader(c, v) == n && is_const(c, other_in(p, p->in[0])) &&
            is_dev(c, p->in[0])) {
            members[nm++] = (int)(p - g->nodes);
            if (side == 0)
                f.q = p->in[0];
            else
                f.k = p->in[0];
        }
    }
    members[nm++] = ni;
    int y = n->out[0];
    gnode *r = only_reader(c, y);
    while (r && (is_op(r, "Mul") || is_op(r, "Div")) && r->in[0] == y && is_const(c, r->in[1])) {
        members[nm++] = (int)(r - g->nodes);
        y = r->out[0];
        r = only_reader(c, y);
    }
    if (r && is_op(r, "Add") && other_in(r, y) >= 0 && other_in(r, y) != y) {
        f.mask = other_in(r, y);
        members[nm++] = (int)(r - g->nodes);
        y = r->out[0];
        r = only_reader(c, y);
    }
    if (!r || !is_op(r, "Softmax"))
        return PGD_OK;
    members[nm++] = (int)(r - g->nodes);
    gnode *pv = only_reader(c, r->out[0]);
    if (!pv || !is_op(pv, "MatMul") || pv->in[0] != r->out[0] || !is_dev(c, pv->in[1]))
        return PGD_OK;
    members[nm++] = (int)(pv - g->nodes);
    f.v = pv->in[1];
    f.out = pv->out[0];
    return add_group(c, &f, members, nm);
}

static int fuse_gelu(fctx *c, int ni)
{
    /* a standalone erf-GELU: Div(x, s) is the first member */
    gnode *n = &c->g->nodes[ni];
    if (!is_dev(c, n->in[0]))
        return PGD_OK;
    int members[8], nm = 0;
    int y = match_gelu(c, n->in[0], members, &nm);
    if (y < 0 || members[0] != ni)
        return PGD_OK;
    gfuse f = new_group(F_GELU, ni);
    f.q = n->in[0], f.out = y;
    return add_group(c, &f, members, nm);
}

int pgd__graph_fuse(pgd_graph *g, pgd_error **err)
{
    fctx c = {.g = g};
    c.consumer = malloc(sizeof(int) * ((size_t)g->nvalues + 1));
    c.pos = malloc(sizeof(int) * ((size_t)g->nnodes + 1));
    if (!c.consumer || !c.pos) {
        free(c.consumer), free(c.pos);
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    }
    for (int v = 0; v < g->nvalues; v++)
        c.consumer[v] = -1;
    for (int oi = 0; oi < g->nnodes; oi++) {
        int ni = g->order[oi];
        c.pos[ni] = oi;
        gnode *n = &g->nodes[ni];
        for (int k = 0; k < n->nin; k++) {
            int v = n->in[k];
            if (v >= 0)
                c.consumer[v] = c.consumer[v] == -1 || c.consumer[v] == ni ? ni : -2;
        }
    }
    int rc = PGD_OK;
    /* attention first (its MatMuls must not become linears), then the rest in order */
    for (int oi = 0; oi < g->nnodes && !rc; oi++)
        if (is_op(&g->nodes[g->order[oi]], "MatMul"))
            rc = fuse_attention(&c, g->order[oi]);
    for (int oi = 0; oi < g->nnodes && !rc; oi++) {
        int ni = g->order[oi];
        gnode *n = &g->nodes[ni];
        if (is_op(n, "MatMul") || is_op(n, "Gemm"))
            rc = fuse_linear(&c, ni);
        else if (is_op(n, "Conv"))
            rc = fuse_conv(&c, ni);
        else if (is_op(n, "Div") || is_op(n, "Mul"))
            rc = fuse_gelu(&c, ni);
    }
    free(c.consumer);
    free(c.pos);
    if (rc)
        return pgd_error_set(err, rc, "%s: out of host memory", g->path);
    return PGD_OK;
}
