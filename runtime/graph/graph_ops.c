/* graph_ops.c — one device node outside a fused group: views for the ops that only move data
 * (Identity, Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Slice, Gather of one index,
 * Split, Expand), elementwise ops run in the physical order of their largest operand (so an
 * NHWC convolution output stays NHWC through ReLU and Add), and the rest through the public
 * ops. */
#include "graph.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static gvalue *out_value(pgd_graph *g, gnode *n, int k)
{
    return k < n->nout && n->out[k] >= 0 ? &g->values[n->out[k]] : NULL;
}

static void set_view(pgd_graph *g, gnode *n, int k, gview *v)
{
    gvalue *y = out_value(g, n, k);
    if (!y) {
        pgd__gview_drop(v);
        return;
    }
    pgd__gview_drop(&y->v);
    y->v = *v;
}

static const ghost *in_host(pgd_graph *g, gnode *n, int k)
{
    if (k >= n->nin || n->in[k] < 0)
        return NULL;
    gvalue *x = &g->values[n->in[k]];
    return x->kind == V_DEVICE ? NULL : x->h;
}

/* ---- views ------------------------------------------------------------------------------ */

static int reshape_to(pgd_graph *g, gnode *n, const gview *x, int nd, const int64_t *dim)
{
    gview y;
    if (pgd__gview_reshape(x, nd, dim, &y)) {
        y.b->refs++;
        set_view(g, n, 0, &y);
        return PGD_OK;
    }
    gview m;
    int rc = pgd__gview_materialise(g, x, &m, NULL);
    if (rc)
        return rc;
    pgd__gview_reshape(&m, nd, dim, &y);
    set_view(g, n, 0, &y);
    return PGD_OK;
}

static int op_reshape(pgd_graph *g, gnode *n, const gview *x, pgd_error **err)
{
    int64_t dim[PGD_MAX_DIMS], spec[PGD_MAX_DIMS], xn = 1;
    for (int d = 0; d < x->nd; d++)
        xn *= x->dim[d];
    int nd = -1;
    const char *op = n->op;
    if (!strcmp(op, "Flatten")) {
        int64_t axis = pgd__graph_attr_i(n, "axis", 1), a = 1, b = 1;
        axis = axis < 0 ? axis + x->nd : axis;
        if (axis < 0 || axis > x->nd)
            return pgd__graph_fail(err, PGD_ERR_SHAPE, g, n, "axis %lld out of range for %d dims",
                                   (long long)pgd__graph_attr_i(n, "axis", 1), x->nd);
        for (int d = 0; d < x->nd; d++) /* [0, 3] flattens to [0, 3], not [0, 0] */
            *(d < axis ? &a : &b) *= x->dim[d];
        dim[0] = a, dim[1] = b, nd = 2;
    } else if (!strcmp(op, "Reshape")) {
        int ns = pgd__graph_ints(g, n, 1, "shape", spec, PGD_MAX_DIMS);
        if (ns == -2)
            return pgd__graph_fail(err, PGD_ERR_UNSUPPORTED, g, n,
                                   "the target shape is computed on the device");
        nd = ns < 0 ? -1
                    : pgd__graph_reshape_dims(x->dim, x->nd, xn, spec, ns,
                                              (int)pgd__graph_attr_i(n, "allowzero", 0), dim);
    } else { /* Squeeze, Unsqueeze */
        int64_t axes[PGD_MAX_DIMS];
        int na = pgd__graph_ints(g, n, 1, "axes", axes, PGD_MAX_DIMS), uns = op[0] == 'U';
        int out_nd = uns ? x->nd + (na < 0 ? 0 : na) : x->nd, mark[PGD_MAX_DIMS] = {0};
        if (na == -2 || out_nd > PGD_MAX_DIMS)
            return pgd__graph_fail(err, PGD_ERR_UNSUPPORTED, g, n, "axes unsupported");
        for (int j = 0; j < na; j++) {
            int64_t a = axes[j] < 0 ? axes[j] + out_nd : axes[j];
            if (a < 0 || a >= out_nd || (!uns && x->dim[a] != 1))
                return pgd__graph_fail(err, PGD_ERR_SHAPE, g, n, "axis %lld does not fit",
                                       (long long)axes[j]);
            mark[a] = 1;
        }
        nd = 0;
        if (uns)
            for (int d = 0, s = 0; d < out_nd; d++)
                dim[nd++] = mark[d] ? 1 : x->dim[s++];
        else
            for (int d = 0; d < x->nd; d++)
                if (!(na < 0 ? x->dim[d] == 1 : mark[d]))
                    dim[nd++] = x->dim[d];
    }
    if (nd < 0)
        return pgd__graph_fail(err, PGD_ERR_SHAPE, g, n,
                               "the target shape does not fit the input's %lld elements",
                               (long long)xn);
    return reshape_to(g, n, x, nd, dim);
}

static int op_transpose(pgd_graph *g, gnode *n, const gview *x, pgd_error **err)
{
    const int64_t *perm;
    int np = pgd__graph_attr_ints(n, "perm", &perm), seen[PGD_MAX_DIMS] = {0};
    if (np >= 0 && np != x->nd)
        return pgd__graph_fail(err, PGD_ERR_INVALID_ARGUMENT, g, n,
                               "perm has %d entries for %d dims", np, x->nd);
    gview y = *x;
    for (int d = 0; d < x->nd; d++) {
        int64_t p = np >= 0 ? perm[d] : x->nd - 1 - d;
        if (p < 0 || p >= x->nd || seen[p]++)
            return pgd__graph_fail(err, PGD_ERR_INVALID_ARGUMENT, g, n,
                                   "perm must name each dim once");
        y.dim[d] = x->dim[p];
        y.st[d] = x->st[p];
    }
    y.b->refs++;
    set_view(g, n, 0, &y);
    return PGD_OK;
}

static int op_slice(pgd_graph *g, gnode *n, const gview *x, pgd_error **err)
{
    int64_t st[PGD_MAX_DIMS], en[PGD_MAX_DIMS], ax[PGD_MAX_DIMS], sp[PGD_MAX_DIMS];
    int ns = pgd__graph_ints(g, n, 1, "starts", st, PGD_MAX_DIMS);
    int ne = pgd__graph_ints(g, n, 2, "ends", en, PGD_MAX_DIMS);
    int na = pgd__graph_ints(g, n, 3, "axes", ax, PGD_MAX_DIMS);
    int np = pgd__graph_ints(g, n, 4, NULL, sp, PGD_MAX_DIMS);
    if (ns < 0 || ne != ns || (na >= 0 && na != ns) || (np >= 0 && np != ns) || na == -2 ||
        np == -2)
        return pgd__graph_fail(err, PGD_ERR_UNSUPPORTED, g, n,
                               "starts, ends, axes and steps must be host constants of one "
                               "length");
    gview y = *x;
    for (int j = 0; j < ns; j++) {
        int64_t a = na >= 0 ? ax[j] : j, s = np >= 0 ? sp[j] : 1, len;
        a = a < 0 ? a + x->nd : a;
        if (a < 0 || a >= x->nd || s == 0)
            return pgd__graph_fail(err, PGD_ERR_INVALID_ARGUMENT, g, n,
                                   "axis %lld or step %lld out of range", (long long)a,
                                   (long long)s);
        if (s < 0)
            return pgd__graph_fail(err, PGD_ERR_UNSUPPORTED, g, n,
                                   "a negative step on a device tensor");
        int64_t dn = x->dim[a];
        int64_t b = st[j] < 0 ? st[j] + dn : st[j], e = en[j] < 0 ? en[j] + dn : en[j];
        b = b < 0 ? 0 : b > dn ? dn : b;
        e = e < 0 ? 0 : e > dn ? dn : e;
        len = e > b ? 1 + (e - b - 1) / s : 0;
        if (len)
            y.off += b * x->st[a];
        y.dim[a] = len;
        y.st[a] = x->st[a] * s;
    }
    y.b->refs++;
    set_view(g, n, 0, &y);
    return PGD_OK;
}

static int op_split(pgd_graph *g, gnode *n, const gview *x, pgd_error **err)
{
    int64_t axis = pgd__graph_attr_i(n, "axis", 0), sizes[64];
    axis = axis < 0 ? axis + x->nd : axis;
    if (axis < 0 || axis >= x->nd || n->nout > 64)
        return pgd__graph_fail(err, PGD_ERR_INVALID_ARGUMENT, g, n, "axis out of range");
    int ns = pgd__graph_ints(g, n, 1, "split", sizes, 64);
    int64_t total = 0, dn = x->dim[axis];
    if (ns < 0) {
        int64_t parts = n->nout, each = (dn + parts - 1) / parts;
        for (int k = 0; k < n->nout; k++)
            sizes[k] = k < n->nout - 1 ? each : dn - each * (parts - 1);
        ns = n->nout;
    }
    if (ns != n->nout)
        return pgd__graph_fail(err, PGD_ERR_SHAPE, g, n, "%d sizes for %d outputs", ns, n->nout);
    for (int k = 0; k < ns; k++) {
        if (sizes[k] < 0 || total + sizes[k] > dn)
            return pgd__graph_fail(err, PGD_ERR_SHAPE, g, n, "the sizes exceed the dim");
        gview y = *x;
        y.off += total * x->st[axis];
        y.dim[axis] = sizes[k];
        total += sizes[k];
        y.b->refs++;
        set_view(g, n, k, &y);
    }
    return PGD_OK;
}

static int op_gather(pgd_graph *g, gnode *n, const gview *x, pgd_error **err)
{
    const ghost *idx = in_host(g, n, 1);
    int64_t axis = pgd__graph_attr_i(n, "axis", 0);
    axis = axis < 0 ? axis + x->nd : axis;
    if (!idx || !idx->i || axis < 0 || axis >= x->nd)
        return pgd__graph_fail(err, PGD_ERR_UNSUPPORTED, g, n,
                               "indices must be host integers and the axis in range");
    if (idx->nd == 0) {
        int64_t i = idx->i[0] < 0 ? idx->i[0] + x->dim[axis] : idx->i[0];
        if (i < 0 || i >= x->dim[axis])
            return pgd__graph_fail(err, PGD_ERR_INVALID_ARGUMENT, g, n, "index %lld out of range",
                                   (long long)idx->i[0]);
        gview y = *x;
        y.off += i * x->st[axis];
        for (int d = (int)axis; d < x->nd - 1; d++)
            y.dim[d] = x->dim[d + 1], y.st[d] = x->st[d + 1];
        y.nd--;
        y.b->refs++;
        set_view(g, n, 0, &y);
        return PGD_OK;
    }
    gview m, y;
    int64_t dim[PGD_MAX_DIMS];
    int nd = 0;
    if (x->nd - 1 + idx->nd > PGD_MAX_DIMS)
        return pgd__graph_fail(err, PGD_ERR_UNSUPPORTED, g, n, "too many dims");
    for (int d = 0; d < axis; d++)
        dim[nd++] = x->dim[d];
    for (int d = 0; d < idx->nd; d++)
        dim[nd++] = idx->dim[d];
    for (int d = (int)axis + 1; d < x->nd; d++)
        dim[nd++] = x->dim[d];
    int rc = pgd__gview_materialise(g, x, &m, err);
    if (!rc && !(rc = pgd__gview_new(g, nd, dim, &y, err))) {
        rc = pgd_gather(g->ctx, pgd__gview_tensor(&m), (int)axis, idx->i, idx->nd, idx->dim,
                        pgd__gview_tensor(&y), err);
        if (rc)
            pgd__gview_drop(&y);
        else
            set_view(g, n, 0, &y);
    }
    pgd__gview_drop(&m);
    return rc;
}

static int op_expand(pgd_graph *g, gnode *n, const gview *x, pgd_error **err)
{
    int64_t shp[PGD_MAX_DIMS];
    int ns = pgd__graph_ints(g, n, 1, NULL, shp, PGD_MAX_DIMS);
    if (ns < 0)
        return pgd__graph_fail(err, PGD_ERR_UNSUPPORTED, g, n, "the shape must be known");
    int nd = ns > x->nd ? ns : x->nd;
    gview y = *x;
    y.nd = nd;
    for (int d = 0; d < nd; d++) {
        int dx = d - (nd - x->nd), ds = d - (nd - ns);
        int64_t a = dx >= 0 ? x->dim[dx] : 1, b = ds >= 0 ? shp[ds] : 1;
        if (a != b && a != 1 && b != 1)
            return pgd__graph_fail(err, PGD_ERR_SHAPE, g, n,
                                   "dim %d: %lld does not expand to "
                                   "%lld",
                                   d, (long long)a, (long long)b);
        y.dim[d] = a == 1 ? b : a;
        y.st[d] = a == 1 ? 0 : x->st[dx];
    }
    y.b->refs++;
    set_view(g, n, 0, &y);
    return PGD_OK;
}

/* ---- elementwise ------------------------------------------------------------------------ */

typedef struct ew_cache {
    int perm[PGD_MAX_DIMS];
    int nd;
    gview c[3]; /* constants uploaded in that order */
} ew_cache;

static void ew_free(void *p)
{
    ew_cache *c = p;
    for (int k = 0; k < 3; k++)
        pgd__gview_drop(&c->c[k]);
    free(c);
}

/* Operand k broadcast to (nd, dim) and permuted by perm, contiguous: a device view or an
 * uploaded constant (kept in the node's cache). */
static int ew_operand(pgd_graph *g, gnode *n, int k, int nd, const int64_t *dim, const int *perm,
                      gview *out, pgd_error **err)
{
    gvalue *x = &g->values[n->in[k]];
    int64_t pd[PGD_MAX_DIMS], st[PGD_MAX_DIMS];
    const int64_t *xd = x->kind == V_DEVICE ? x->v.dim : x->h->dim;
    int xnd = x->kind == V_DEVICE ? x->v.nd : x->h->nd;
    /* the operand's dims aligned to nd, permuted */
    int64_t al[PGD_MAX_DIMS], as[PGD_MAX_DIMS], hs[PGD_MAX_DIMS];
    int64_t s = 1;
    for (int d = xnd - 1; d >= 0; d--)
        hs[d] = s, s *= xd[d];
    for (int d = 0; d < nd; d++) {
        int dx = d - (nd - xnd);
        al[d] = dx >= 0 ? xd[dx] : 1;
        as[d] = dx >= 0 ? (x->kind == V_DEVICE ? x->v.st[dx] : hs[dx]) : 0;
        if (al[d] != dim[d] && al[d] != 1)
            return pgd__graph_fail(err, PGD_ERR_SHAPE, g, n,
                                   "input '%s' does not broadcast to the output", x->name);
    }
    for (int d = 0; d < nd; d++)
        pd[d] = al[perm[d]], st[d] = as[perm[d]];
    if (x->kind != V_DEVICE) {
        ew_cache *c = n->prep;
        if (c && c->c[k].b) {
            *out = c->c[k];
            out->b->refs++;
            return PGD_OK;
        }
        /* the constant permuted on the host */
        ghost tmp = *x->h;
        float *buf = malloc(sizeof(float) * (size_t)(x->h->n ? x->h->n : 1));
        if (!buf || !x->h->f) {
            free(buf);
            return pgd__graph_fail(err, PGD_ERR_UNSUPPORTED, g, n,
                                   "input '%s' is an integer tensor", x->name);
        }
        int64_t cnt[PGD_MAX_DIMS] = {0};
        for (int64_t e = 0; e < x->h->n; e++) {
            int64_t src = 0;
            for (int d = 0; d < nd; d++)
                src += cnt[d] * st[d];
            buf[e] = x->h->f[src];
            for (int d = nd - 1; d >= 0; d--) {
                if (++cnt[d] < pd[d])
                    break;
                cnt[d] = 0;
            }
        }
        tmp.f = buf;
        int rc = pgd__graph_const_tensor(g, &tmp, nd, pd, out, err);
        free(buf);
        if (!rc && c) {
            c->c[k] = *out;
            out->b->refs++;
        }
        return rc;
    }
    gview v = x->v;
    v.nd = nd;
    for (int d = 0; d < nd; d++)
        v.dim[d] = pd[d], v.st[d] = st[d];
    return pgd__gview_materialise(g, &v, out, err);
}

/* Output dims (broadcast) and the physical order: the stride order of the first device operand
 * that already has the output's dims and covers its buffer. */
static int ew_layout(pgd_graph *g, gnode *n, int nin, int64_t *dim, int *perm, pgd_error **err)
{
    int nd = 0;
    for (int k = 0; k < nin; k++) {
        gvalue *x = &g->values[n->in[k]];
        int xnd = x->kind == V_DEVICE ? x->v.nd : x->h ? x->h->nd : 0;
        if (xnd > nd) {
            for (int d = nd; d < xnd; d++)
                dim[d] = 1;
            memmove(dim + (xnd - nd), dim, sizeof(int64_t) * (size_t)nd);
            for (int d = 0; d < xnd - nd; d++)
                dim[d] = 1;
            nd = xnd;
        }
        const int64_t *xd = x->kind == V_DEVICE ? x->v.dim : x->h->dim;
        for (int d = 0; d < xnd; d++) {
            int64_t *o = &dim[d + nd - xnd];
            if (*o == 1)
                *o = xd[d];
            else if (xd[d] != 1 && xd[d] != *o)
                return pgd__graph_fail(err, PGD_ERR_SHAPE, g, n,
                                       "the inputs' shapes do not broadcast");
        }
    }
    for (int d = 0; d < nd; d++)
        perm[d] = d;
    for (int k = 0; k < nin; k++) {
        gvalue *x = &g->values[n->in[k]];
        if (x->kind != V_DEVICE || x->v.nd != nd || !pgd__gview_dense(&x->v))
            continue;
        int same = 1;
        for (int d = 0; d < nd; d++)
            same &= x->v.dim[d] == dim[d];
        if (!same)
            continue;
        for (int d = 0; d < nd; d++)
            perm[d] = d;
        for (int i = 1; i < nd; i++)
            for (int j = i; j > 0; j--) {
                int a = perm[j - 1], b = perm[j];
                if (x->v.st[b] > x->v.st[a] || (x->v.st[b] == x->v.st[a] && b < a))
                    perm[j - 1] = b, perm[j] = a;
            }
        break;
    }
    return nd;
}

/* The output view over a new buffer of the permuted dims, seen in logical order. */
static int ew_output(pgd_graph *g, int nd, const int64_t *dim, const int *perm, gview *y,
                     pgd_error **err)
{
    int64_t pd[PGD_MAX_DIMS];
    for (int d = 0; d < nd; d++)
        pd[d] = dim[perm[d]];
    gview p;
    int rc = pgd__gview_new(g, nd, pd, &p, err);
    if (rc)
        return rc;
    *y = p;
    for (int d = 0; d < nd; d++) {
        y->dim[perm[d]] = pd[d];
        y->st[perm[d]] = p.st[d];
    }
    return PGD_OK;
}

static int binary_code(const char *op)
{
    static const char *const names[] = {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", NULL};
    static const int codes[] = {PGD_BINARY_ADD, PGD_BINARY_SUB, PGD_BINARY_MUL, PGD_BINARY_DIV,
                                PGD_BINARY_POW, PGD_BINARY_MAX, PGD_BINARY_MIN};
    for (int i = 0; names[i]; i++)
        if (!strcmp(op, names[i]))
            return codes[i];
    return -1;
}

static int unary_code(gnode *n)
{
    static const char *const names[] = {"Exp",     "Log", "Sqrt", "Erf",  "Tanh",
                                        "Sigmoid", "Abs", "Neg",  "Relu", NULL};
    static const int codes[] = {PGD_UNARY_EXP, PGD_UNARY_LOG,  PGD_UNARY_SQRT,
                                PGD_UNARY_ERF, PGD_UNARY_TANH, PGD_UNARY_SIGMOID,
                                PGD_UNARY_ABS, PGD_UNARY_NEG,  PGD_UNARY_RELU};
    for (int i = 0; names[i]; i++)
        if (!strcmp(n->op, names[i]))
            return codes[i];
    if (!strcmp(n->op, "Gelu"))
        return strcmp(pgd__graph_attr_s(n, "approximate", "none"), "tanh") ? PGD_UNARY_GELU
                                                                           : PGD_UNARY_GELU_TANH;
    return -1;
}

static int op_elementwise(pgd_graph *g, gnode *n, pgd_error **err)
{
    int nin = n->nin > 3 ? 3 : n->nin, perm[PGD_MAX_DIMS];
    int64_t dim[PGD_MAX_DIMS];
    int bin = binary_code(n->op), un = unary_code(n), clip = !strcmp(n->op, "Clip");
    int where = !strcmp(n->op, "Where");
    if (bin >= 0 && nin != 2)
        return pgd__graph_fail(err, PGD_ERR_UNSUPPORTED, g, n, "%d inputs (2 supported)", nin);
    if (clip || un >= 0 || !strcmp(n->op, "Reciprocal"))
        nin = 1;
    if (!n->prep) {
        n->prep = calloc(1, sizeof(ew_cache));
        n->prep_free = ew_free;
    }
    int nd = ew_layout(g, n, nin, dim, perm, err);
    if (nd < 0)
        return PGD_ERR_SHAPE;
    gview a[3] = {{0}}, y;
    int rc = PGD_OK;
    for (int k = 0; k < nin && !rc; k++)
        rc = ew_operand(g, n, k, nd, dim, perm, &a[k], err);
    if (!rc)
        rc = ew_output(g, nd, dim, perm, &y, err);
    if (!rc) {
        pgd_tensor *yt = y.b->t;
        int64_t pd[PGD_MAX_DIMS];
        for (int d = 0; d < nd; d++)
            pd[d] = dim[perm[d]];
        pgd_tensor_reshape(yt, nd ? nd : 1, nd ? pd : (int64_t[]){1}, NULL);
        pgd_tensor *t0 = a[0].b ? pgd__gview_tensor(&a[0]) : NULL;
        if (bin >= 0) {
            pgd_tensor *t1 = pgd__gview_tensor(&a[1]);
            pgd_tensor_reshape(yt, nd ? nd : 1, nd ? pd : (int64_t[]){1}, NULL);
            rc = pgd_binary(g->ctx, (pgd_binary_op)bin, t0, t1, yt, err);
        } else if (un >= 0) {
            rc = pgd_unary(g->ctx, (pgd_unary_op)un, t0, yt, err);
        } else if (clip) {
            const ghost *lo = in_host(g, n, 1), *hi = in_host(g, n, 2);
            float l = lo && lo->f ? lo->f[0] : pgd__graph_attr_f(n, "min", -INFINITY);
            float h = hi && hi->f ? hi->f[0] : pgd__graph_attr_f(n, "max", INFINITY);
            if ((n->nin > 1 && n->in[1] >= 0 && !lo) || (n->nin > 2 && n->in[2] >= 0 && !hi))
                rc = pgd__graph_fail(err, PGD_ERR_UNSUPPORTED, g, n,
                                     "min and max computed on the device");
            else
                rc = pgd_clip(g->ctx, t0, l, h, yt, err);
        } else if (where) {
            pgd_tensor *t1 = pgd__gview_tensor(&a[1]), *t2 = pgd__gview_tensor(&a[2]);
            pgd_tensor_reshape(yt, nd ? nd : 1, nd ? pd : (int64_t[]){1}, NULL);
            rc = pgd_where(g->ctx, t0, t1, t2, yt, err);
        } else { /* Reciprocal: 1 / x */
            pgd_tensor *one = NULL;
            int64_t d1 = 1;
            rc = pgd_tensor_create(g->ctx, 1, &d1, &one, err);
            if (!rc && !(rc = pgd_tensor_fill(one, 1.0f, err)))
                rc = pgd_binary(g->ctx, PGD_BINARY_DIV, one, t0, yt, err);
            pgd_tensor_destroy(one);
        }
        if (rc)
            pgd__gview_drop(&y);
        else
            set_view(g, n, 0, &y);
    }
    for (int k = 0; k < 3; k++)
        pgd__gview_drop(&a[k]);
    return rc;
}

/* ---- the rest --------------------------------------------------------------------------- */

static const char *const device_ops[] = {"Identity",
                                         "Dropout",
                                         "Cast",
                                         "CastLike",
                                         "Reshape",
                                         "Flatten",
                                         "Squeeze",
                                         "Unsqueeze",
                                         "Transpose",
                                         "Slice",
                                         "Split",
                                         "Gather",
                                         "Expand",
                                         "Add",
                                         "Sub",
                                         "Mul",
                                         "Div",
                                         "Pow",
                                         "Max",
                                         "Min",
                                         "Exp",
                                         "Log",
                                         "Sqrt",
                                         "Erf",
                                         "Tanh",
                                         "Sigmoid",
                                         "Abs",
                                         "Neg",
                                         "Relu",
                                         "Gelu",
                                         "Clip",
                                         "Where",
                                         "Reciprocal",
                                         "Conv",
                                         "MaxPool",
                                         "AveragePool",
                                         "GlobalAveragePool",
                                         "GlobalMaxPool",
                                         "Softmax",
                                         "LogSoftmax",
                                         "LayerNormalization",
                                         "BatchNormalization",
                                         "ReduceMean",
                                         "ReduceSum",
                                         "ReduceMax",
                                         "ReduceMin",
                                         "MatMul",
                                         "Gemm",
                                         "Concat",
                                         "Pad",
                                         "HardSigmoid",
                                         "HardSwish",
                                         NULL};

int pgd__graph_device_supported(const char *op)
{
    for (int i = 0; device_ops[i]; i++)
        if (!strcmp(op, device_ops[i]))
            return 1;
    return 0;
}

static int op_concat(pgd_graph *g, gnode *n, pgd_error **err)
{
    gview parts[64], y;
    const pgd_tensor *ts[64];
    int k, rc = PGD_OK;
    if (n->nin > 64 || n->nin < 1)
        return pgd__graph_fail(err, PGD_ERR_UNSUPPORTED, g, n, "1 to 64 inputs");
    for (k = 0; k < n->nin && !rc; k++) {
        gview v;
        rc = pgd__graph_input_view(g, n, k, &v, err);
        if (!rc) {
            rc = pgd__gview_materialise(g, &v, &parts[k], err);
            pgd__gview_drop(&v);
        }
        if (rc)
            break;
    }
    int got = k;
    int64_t axis = pgd__graph_attr_i(n, "axis", 0), dim[PGD_MAX_DIMS];
    if (!rc) {
        int nd = parts[0].nd;
        axis = axis < 0 ? axis + nd : axis;
        memcpy(dim, parts[0].dim, sizeof dim);
        dim[axis] = 0;
        for (k = 0; k < n->nin; k++) {
            dim[axis] += parts[k].dim[axis];
            ts[k] = pgd__gview_tensor(&parts[k]);
        }
        /* gview_tensor reshapes buffers: inputs that share one are distinct views here */
        rc = pgd__gview_new(g, nd, dim, &y, err);
        if (!rc) {
            for (k = 0; k < n->nin; k++)
                ts[k] = pgd__gview_tensor(&parts[k]);
            rc = pgd_concat(g->ctx, n->nin, ts, (int)axis, pgd__gview_tensor(&y), err);
            if (rc)
                pgd__gview_drop(&y);
            else
                set_view(g, n, 0, &y);
        }
    }
    for (k = 0; k < got; k++)
        pgd__gview_drop(&parts[k]);
    return rc;
}

static int op_pad(pgd_graph *g, gnode *n, const gview *x, pgd_error **err)
{
    int64_t pads[2 * PGD_MAX_DIMS], dim[PGD_MAX_DIMS];
    int np = pgd__graph_ints(g, n, 1, "pads", pads, 2 * PGD_MAX_DIMS);
    const char *mode = pgd__graph_attr_s(n, "mode", "constant");
    const ghost *cv = in_host(g, n, 2);
    if (np != 2 * x->nd || (n->nin > 3 && n->in[3] >= 0))
        return pgd__graph_fail(err, PGD_ERR_UNSUPPORTED, g, n,
                               "pads must be host constants for every dim (no axes input)");
    if (n->nin > 2 && n->in[2] >= 0 && !(cv && cv->f && cv->n == 1))
        return pgd__graph_fail(err, PGD_ERR_UNSUPPORTED, g, n,
                               "constant_value must be one float constant (not computed on the "
                               "device)");
    pgd_pad_mode m = !strcmp(mode, "reflect") ? PGD_PAD_REFLECT
                     : !strcmp(mode, "edge")  ? PGD_PAD_EDGE
                     : !strcmp(mode, "wrap")  ? PGD_PAD_WRAP
                                              : PGD_PAD_CONSTANT;
    int any = 0;
    for (int d = 0; d < x->nd; d++) {
        dim[d] = x->dim[d] + pads[d] + pads[x->nd + d];
        any |= pads[d] != 0 || pads[x->nd + d] != 0;
    }
    if (!any) { /* no padding (Swin's pad to whole windows at sizes already whole): a view */
        gview y = *x;
        y.b->refs++;
        set_view(g, n, 0, &y);
        return PGD_OK;
    }
    gview xm, y;
    int rc = pgd__gview_materialise(g, x, &xm, err);
    if (!rc && !(rc = pgd__gview_new(g, x->nd, dim, &y, err))) {
        rc = pgd_pad(g->ctx, pgd__gview_tensor(&xm), pads, m, cv && cv->f ? cv->f[0] : 0.0f,
                     pgd__gview_tensor(&y), err);
        if (rc)
            pgd__gview_drop(&y);
        else
            set_view(g, n, 0, &y);
    }
    pgd__gview_drop(&xm);
    return rc;
}

/* Dropout is the identity at inference only: training mode (a true constant) drops at random,
 * and the mask output is not made here. */
static int dropout_check(pgd_graph *g, gnode *n, pgd_error **err)
{
    const ghost *tm = in_host(g, n, 2);
    if (n->nin > 2 && n->in[2] >= 0 && (!tm || pgd__ghost_get(tm, 0) != 0))
        return pgd__graph_fail(err, PGD_ERR_UNSUPPORTED, g, n,
                               "training_mode true or computed on the device (only inference "
                               "Dropout, the identity, is supported)");
    /* a mask nobody reads (as converters emit) is fine: it is never made */
    if (n->nout > 1 && n->out[1] >= 0 &&
        (g->values[n->out[1]].uses || g->values[n->out[1]].graph_out))
        return pgd__graph_fail(err, PGD_ERR_UNSUPPORTED, g, n, "the mask output is not supported");
    return PGD_OK;
}

int pgd__graph_exec_node(pgd_graph *g, gnode *n, pgd_error **err)
{
    const char *op = n->op;
    if (strcmp(n->p->domain ? n->p->domain : "", "") &&
        strcmp(n->p->domain ? n->p->domain : "", "ai.onnx"))
        return pgd__graph_fail(err, PGD_ERR_UNSUPPORTED, g, n,
                               "domain '%s' is not supported (the default ONNX domain is)",
                               n->p->domain);
    if (!pgd__graph_device_supported(op))
        return pgd__graph_fail(err, PGD_ERR_UNSUPPORTED, g, n,
                               "the op is not supported on the device path");
    g->steps++;
    if (binary_code(op) >= 0 || unary_code(n) >= 0 || !strcmp(op, "Clip") || !strcmp(op, "Where") ||
        !strcmp(op, "Reciprocal"))
        return op_elementwise(g, n, err);
    if (!strcmp(op, "Conv"))
        return pgd__graph_exec_conv(g, n, NULL, err);
    if (strstr(op, "Pool"))
        return pgd__graph_exec_pool(g, n, err);
    if (!strcmp(op, "MatMul") || !strcmp(op, "Gemm"))
        return pgd__graph_exec_matmul(g, n, err);
    if (!strcmp(op, "Concat"))
        return op_concat(g, n, err);
    if (strstr(op, "Softmax") || !strcmp(op, "LayerNormalization") ||
        !strcmp(op, "BatchNormalization") || !strncmp(op, "Reduce", 6) || !strncmp(op, "Hard", 4))
        return pgd__graph_exec_rowop(g, n, err);
    gview x;
    int rc = pgd__graph_input_view(g, n, 0, &x, err);
    if (rc)
        return rc;
    if (!strcmp(op, "Identity") || !strcmp(op, "Dropout") || !strcmp(op, "Cast") ||
        !strcmp(op, "CastLike")) {
        int to = !strcmp(op, "Cast") ? (int)pgd__graph_attr_i(n, "to", G_FLOAT) : G_FLOAT;
        if (!strcmp(op, "Dropout"))
            rc = dropout_check(g, n, err);
        if (!rc && !pgd__ghost_is_float(to))
            rc = pgd__graph_fail(err, PGD_ERR_UNSUPPORTED, g, n,
                                 "a cast of device data to type %d (Pagoda computes float32)", to);
        else if (!rc) {
            gview y = x;
            y.b->refs++;
            set_view(g, n, 0, &y);
        }
    } else if (!strcmp(op, "Transpose"))
        rc = op_transpose(g, n, &x, err);
    else if (!strcmp(op, "Slice"))
        rc = op_slice(g, n, &x, err);
    else if (!strcmp(op, "Split"))
        rc = op_split(g, n, &x, err);
    else if (!strcmp(op, "Gather"))
        rc = op_gather(g, n, &x, err);
    else if (!strcmp(op, "Expand"))
        rc = op_expand(g, n, &x, err);
    else if (!strcmp(op, "Pad"))
        rc = op_pad(g, n, &x, err);
    else
        rc = op_reshape(g, n, &x, err);
    pgd__gview_drop(&x);
    return rc;
}
