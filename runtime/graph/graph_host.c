/* graph_host.c — the ops a graph evaluates on the host: the shape arithmetic exporters emit
 * (Shape, Gather, Unsqueeze, Concat, Reshape, Slice, Cast, Range, Expand, ...) and any node
 * whose inputs are all constants (constant folding). Integers are int64, floats float32, with
 * NumPy's broadcasting; results are checked against the 2^31-element cap before allocation. */
#include "graph.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HOST_MAX_ELEMS ((int64_t)1 << 31)

int pgd__ghost_is_float(int dtype)
{
    return dtype == G_FLOAT || dtype == G_FLOAT16 || dtype == G_DOUBLE || dtype == G_BFLOAT16;
}

/* Elements of one host tensor at most; the onnx fuzz target lowers it (a 100-byte file may ask
 * a Tile or Expand for 2^31 elements: legal, but minutes of work for every such input). */
int64_t pgd__ghost_max_elems = HOST_MAX_ELEMS;

ghost *pgd__ghost_new(int dtype, int nd, const int64_t *dim)
{
    /* the product of the non-zero dims is bounded too: a zero dim must not let the others be
     * 2^62, which Concat would add and Tile or Flatten multiply */
    int64_t n = 1, nz = 1;
    for (int d = 0; d < nd; d++) {
        if (dim[d] < 0 || (dim[d] && nz > HOST_MAX_ELEMS / dim[d]))
            return NULL;
        if (dim[d] && n > pgd__ghost_max_elems / dim[d])
            return NULL;
        nz *= dim[d] ? dim[d] : 1;
        n *= dim[d];
    }
    ghost *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->dtype = dtype;
    h->nd = nd;
    h->n = n;
    if (nd)
        memcpy(h->dim, dim, sizeof(int64_t) * (size_t)nd);
    if (pgd__ghost_is_float(dtype))
        h->f = calloc((size_t)(n ? n : 1), sizeof(float));
    else
        h->i = calloc((size_t)(n ? n : 1), sizeof(int64_t));
    if (!h->f && !h->i) {
        free(h);
        return NULL;
    }
    return h;
}

void pgd__ghost_free(ghost *h)
{
    if (h) {
        free(h->f);
        free(h->i);
        free(h);
    }
}

double pgd__ghost_get(const ghost *h, int64_t k)
{
    return h->f ? (double)h->f[k] : (double)h->i[k];
}

/* v as an int64, saturated (NaN is 0): a float out of range converts with undefined behaviour. */
static int64_t sat_i64(double v)
{
    if (!(v == v))
        return 0;
    if (v >= 9223372036854775807.0)
        return INT64_MAX;
    return v <= -9223372036854775808.0 ? INT64_MIN : (int64_t)v;
}

static void ghost_set(ghost *h, int64_t k, double v)
{
    if (h->f)
        h->f[k] = (float)v;
    else
        h->i[k] = sat_i64(v);
}

/* The ops the host evaluates, each between spaces. */
static const char host_ops[] =
    " Constant Shape Size Gather Unsqueeze Squeeze Concat Reshape Slice Cast "
    "ConstantOfShape Range Add Sub Mul Div Mod Pow Equal Less Greater LessOrEqual "
    "GreaterOrEqual And Or Not Where Expand Identity Transpose Sqrt Neg Abs Floor "
    "Ceil Min Max Flatten Dropout Reciprocal Exp ReduceProd ReduceSum ReduceMax "
    "ReduceMin Tile CastLike ScatterND Sin Cos Log Tanh Sigmoid Erf Relu CumSum Resize ";

int pgd__graph_host_supported(const char *op)
{
    char key[64];
    if (strlen(op) + 3 > sizeof key || strchr(op, ' '))
        return 0;
    snprintf(key, sizeof key, " %s ", op);
    return strstr(host_ops, key) != NULL;
}

static ghost *in_h(pgd_graph *g, gnode *n, int k)
{
    if (k >= n->nin || n->in[k] < 0)
        return NULL;
    return g->values[n->in[k]].h;
}

static int set_out(pgd_graph *g, gnode *n, int k, ghost *h, pgd_error **err)
{
    if (!h)
        return pgd__graph_fail(err, PGD_ERR_TOO_LARGE, g, n,
                               "output %d would exceed 2^31 elements or host memory", k);
    if (k < n->nout && n->out[k] >= 0) {
        gvalue *v = &g->values[n->out[k]];
        pgd__ghost_free(v->h);
        v->h = h;
        v->dtype = h->dtype;
    } else {
        pgd__ghost_free(h);
    }
    return PGD_OK;
}

/* The broadcast shape of a and b (NumPy's rule); -1 when they do not broadcast. */
static int bcast(const ghost *a, const ghost *b, int64_t *dim)
{
    int nd = a->nd > b->nd ? a->nd : b->nd;
    for (int d = 0; d < nd; d++) {
        int da = d - (nd - a->nd), db = d - (nd - b->nd);
        int64_t x = da >= 0 ? a->dim[da] : 1, y = db >= 0 ? b->dim[db] : 1;
        if (x != y && x != 1 && y != 1)
            return -1;
        dim[d] = x == 1 ? y : x;
    }
    return nd;
}

/* The flat index into t of output coordinate `idx` (of nd dims) under broadcasting. */
static int64_t bidx(const ghost *t, int nd, const int64_t *coord)
{
    int64_t k = 0;
    for (int d = 0; d < t->nd; d++) {
        int64_t c = coord[d + nd - t->nd];
        k = k * t->dim[d] + (t->dim[d] == 1 ? 0 : c);
    }
    return k;
}

static void next_coord(int nd, const int64_t *dim, int64_t *c)
{
    for (int d = nd - 1; d >= 0; d--) {
        if (++c[d] < dim[d])
            return;
        c[d] = 0;
    }
}

static double binop(const char *op, double x, double y, int isf)
{
    if (!strcmp(op, "Add"))
        return x + y;
    if (!strcmp(op, "Sub"))
        return x - y;
    if (!strcmp(op, "Mul"))
        return x * y;
    if (!strcmp(op, "Div"))
        return isf ? x / y : (y == 0 ? 0 : y == -1 ? -x : (double)(sat_i64(x) / sat_i64(y)));
    if (!strcmp(op, "Mod")) {
        if (isf)
            return fmod(x, y);
        if (y == 0 || y == -1) /* INT64_MIN % -1 overflows */
            return 0;
        int64_t r = sat_i64(x) % sat_i64(y);
        return (double)((r != 0 && ((r < 0) != (y < 0))) ? r + sat_i64(y) : r);
    }
    if (!strcmp(op, "Pow"))
        return pow(x, y);
    if (!strcmp(op, "Equal"))
        return x == y;
    if (!strcmp(op, "Less"))
        return x < y;
    if (!strcmp(op, "Greater"))
        return x > y;
    if (!strcmp(op, "LessOrEqual"))
        return x <= y;
    if (!strcmp(op, "GreaterOrEqual"))
        return x >= y;
    if (!strcmp(op, "And"))
        return x != 0 && y != 0;
    if (!strcmp(op, "Or"))
        return x != 0 || y != 0;
    if (!strcmp(op, "Min"))
        return x < y ? x : y;
    if (!strcmp(op, "Max"))
        return x > y ? x : y;
    return NAN; /* not reached: eval_binary checks the op first */
}

static int is_binop(const char *op)
{
    static const char names[] = " Add Sub Mul Div Mod Pow Equal Less Greater LessOrEqual "
                                "GreaterOrEqual And Or Min Max ";
    char key[40];
    if (strlen(op) + 3 > sizeof key)
        return 0;
    snprintf(key, sizeof key, " %s ", op);
    return strstr(names, key) != NULL;
}

static int eval_binary(pgd_graph *g, gnode *n, pgd_error **err)
{
    ghost *a = in_h(g, n, 0), *b = in_h(g, n, 1);
    if (!is_binop(n->op))
        return pgd__graph_fail(err, PGD_ERR_UNSUPPORTED, g, n, "no host evaluator for 2 inputs");
    if (!a || !b)
        return pgd__graph_fail(err, PGD_ERR_FORMAT, g, n, "needs two inputs");
    int64_t dim[PGD_MAX_DIMS];
    int nd = bcast(a, b, dim);
    if (nd < 0)
        return pgd__graph_fail(err, PGD_ERR_SHAPE, g, n, "the inputs' shapes do not broadcast");
    const char *op = n->op;
    int cmp = !strcmp(op, "Equal") || !strcmp(op, "Less") || !strcmp(op, "Greater") ||
              !strcmp(op, "LessOrEqual") || !strcmp(op, "GreaterOrEqual") || !strcmp(op, "And") ||
              !strcmp(op, "Or");
    ghost *y = pgd__ghost_new(cmp ? G_BOOL : a->dtype, nd, dim);
    if (!y)
        return set_out(g, n, 0, NULL, err);
    int64_t c[PGD_MAX_DIMS] = {0};
    int isf = pgd__ghost_is_float(a->dtype);
    for (int64_t k = 0; k < y->n; k++, next_coord(nd, dim, c))
        ghost_set(
            y, k,
            binop(op, pgd__ghost_get(a, bidx(a, nd, c)), pgd__ghost_get(b, bidx(b, nd, c)), isf));
    return set_out(g, n, 0, y, err);
}

/* The unary ops the host evaluates, in the order of unary_fns. */
static const char *const unary_names[] = {"Sqrt", "Neg",  "Abs", "Floor", "Ceil", "Reciprocal",
                                          "Exp",  "Sin",  "Cos", "Log",   "Tanh", "Sigmoid",
                                          "Erf",  "Relu", "Not", NULL};

static double unop(int k, double x)
{
    switch (k) {
    case 0: return sqrt(x);
    case 1: return -x;
    case 2: return fabs(x);
    case 3: return floor(x);
    case 4: return ceil(x);
    case 5: return 1.0 / x;
    case 6: return exp(x);
    case 7: return sin(x);
    case 8: return cos(x);
    case 9: return log(x);
    case 10: return tanh(x);
    case 11: return 1 / (1 + exp(-x));
    case 12: return erf(x);
    case 13: return x > 0 ? x : 0;
    default: return x == 0; /* Not */
    }
}

static int eval_unary(pgd_graph *g, gnode *n, pgd_error **err)
{
    int k = 0;
    while (unary_names[k] && strcmp(unary_names[k], n->op))
        k++;
    if (!unary_names[k]) /* never a silent default: an op without an evaluator is refused */
        return pgd__graph_fail(err, PGD_ERR_UNSUPPORTED, g, n, "no host evaluator");
    ghost *a = in_h(g, n, 0);
    ghost *y = a ? pgd__ghost_new(!strcmp(n->op, "Not") ? G_BOOL : a->dtype, a->nd, a->dim) : NULL;
    if (!y)
        return set_out(g, n, 0, NULL, err);
    for (int64_t e = 0; e < a->n; e++)
        ghost_set(y, e, unop(k, pgd__ghost_get(a, e)));
    return set_out(g, n, 0, y, err);
}

static ghost *copy_reshaped(const ghost *a, int dtype, int nd, const int64_t *dim)
{
    ghost *y = pgd__ghost_new(dtype, nd, dim);
    if (!y || y->n != a->n) {
        pgd__ghost_free(y);
        return NULL;
    }
    for (int64_t k = 0; k < a->n; k++)
        ghost_set(y, k, pgd__ghost_get(a, k));
    return y;
}

/* Integer list input k (or attribute `attr` for older opsets) into v; count or -1. */
/* Integer list input k (or, where the input is absent, attribute `attr`: older opsets) into
 * v[max]: its count, -1 when there is neither or it is too long, -2 when the input is computed on
 * the device (the graph needs it on the host). */
int pgd__graph_ints(pgd_graph *g, gnode *n, int k, const char *attr, int64_t *v, int max)
{
    const gvalue *x = k < n->nin && n->in[k] >= 0 ? &g->values[n->in[k]] : NULL;
    const ghost *h = x && x->kind != V_DEVICE ? x->h : NULL;
    if (h && h->i && h->n <= max) {
        for (int64_t j = 0; j < h->n; j++)
            v[j] = h->i[j];
        return (int)h->n;
    }
    if (x && !h)
        return -2;
    const int64_t *a;
    int na = attr ? pgd__graph_attr_ints(n, attr, &a) : -1;
    if (na < 0 || na > max)
        return -1;
    memcpy(v, a, sizeof(int64_t) * (size_t)na);
    return na;
}

static int eval_shape(pgd_graph *g, gnode *n, pgd_error **err)
{
    if (n->nin < 1 || n->in[0] < 0)
        return pgd__graph_fail(err, PGD_ERR_FORMAT, g, n, "no input");
    int v = n->in[0];
    gvalue *x = &g->values[v];
    int nd = x->h ? x->h->nd : x->v.nd;
    const int64_t *dim = x->h ? x->h->dim : x->v.dim;
    if (!x->h && !x->v.b)
        return pgd__graph_fail(err, PGD_ERR_INTERNAL, g, n, "the shape of '%s' is not known",
                               x->name);
    if (!strcmp(n->op, "Size")) {
        ghost *y = pgd__ghost_new(G_INT64, 0, NULL);
        if (y) {
            y->i[0] = 1;
            for (int d = 0; d < nd; d++)
                y->i[0] *= dim[d];
        }
        return set_out(g, n, 0, y, err);
    }
    int64_t start = pgd__graph_attr_i(n, "start", 0), end = pgd__graph_attr_i(n, "end", nd);
    start = start < 0 ? start + nd : start;
    end = end < 0 ? end + nd : end;
    start = start < 0 ? 0 : start > nd ? nd : start;
    end = end < start ? start : end > nd ? nd : end;
    int64_t len = end - start;
    ghost *y = pgd__ghost_new(G_INT64, 1, &len);
    for (int64_t d = 0; y && d < len; d++)
        y->i[d] = dim[start + d];
    return set_out(g, n, 0, y, err);
}

static int eval_gather(pgd_graph *g, gnode *n, pgd_error **err)
{
    ghost *x = in_h(g, n, 0), *idx = in_h(g, n, 1);
    if (!x || !idx || !idx->i)
        return pgd__graph_fail(err, PGD_ERR_FORMAT, g, n, "needs data and integer indices");
    int64_t axis = pgd__graph_attr_i(n, "axis", 0);
    if (axis < 0)
        axis += x->nd;
    if (axis < 0 || axis >= x->nd || x->nd - 1 + idx->nd > PGD_MAX_DIMS)
        return pgd__graph_fail(err, PGD_ERR_SHAPE, g, n, "axis out of range");
    int64_t dim[PGD_MAX_DIMS], outer = 1, inner = 1, nd = 0;
    for (int d = 0; d < axis; d++)
        outer *= (dim[nd++] = x->dim[d]);
    for (int d = 0; d < idx->nd; d++)
        dim[nd++] = idx->dim[d];
    for (int d = (int)axis + 1; d < x->nd; d++)
        inner *= (dim[nd++] = x->dim[d]);
    ghost *y = pgd__ghost_new(x->dtype, (int)nd, dim);
    if (!y)
        return set_out(g, n, 0, NULL, err);
    int64_t an = x->dim[axis], k = 0;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < idx->n; j++) {
            int64_t i = idx->i[j] < 0 ? idx->i[j] + an : idx->i[j];
            if (i < 0 || i >= an) {
                pgd__ghost_free(y);
                return pgd__graph_fail(err, PGD_ERR_INVALID_ARGUMENT, g, n,
                                       "index %lld out of range for a dim of %lld",
                                       (long long)idx->i[j], (long long)an);
            }
            for (int64_t r = 0; r < inner; r++)
                ghost_set(y, k++, pgd__ghost_get(x, (o * an + i) * inner + r));
        }
    return set_out(g, n, 0, y, err);
}

static int eval_squeeze(pgd_graph *g, gnode *n, pgd_error **err)
{
    ghost *x = in_h(g, n, 0);
    int64_t axes[PGD_MAX_DIMS], dim[PGD_MAX_DIMS];
    int na = pgd__graph_ints(g, n, 1, "axes", axes, PGD_MAX_DIMS), nd = 0;
    int uns = !strcmp(n->op, "Unsqueeze");
    if (!x)
        return pgd__graph_fail(err, PGD_ERR_FORMAT, g, n, "no input");
    int out_nd = uns ? x->nd + (na < 0 ? 0 : na) : x->nd;
    if (out_nd > PGD_MAX_DIMS)
        return pgd__graph_fail(err, PGD_ERR_UNSUPPORTED, g, n, "more than %d dims", PGD_MAX_DIMS);
    int mark[PGD_MAX_DIMS] = {0};
    for (int j = 0; j < na; j++) {
        int64_t a = axes[j] < 0 ? axes[j] + out_nd : axes[j];
        if (a < 0 || a >= out_nd)
            return pgd__graph_fail(err, PGD_ERR_SHAPE, g, n, "axis %lld out of range",
                                   (long long)axes[j]);
        mark[a] = 1;
    }
    if (uns) {
        for (int d = 0, s = 0; d < out_nd; d++)
            dim[nd++] = mark[d] ? 1 : x->dim[s++];
    } else {
        for (int d = 0; d < x->nd; d++)
            if (!(na < 0 ? x->dim[d] == 1 : mark[d]))
                dim[nd++] = x->dim[d];
    }
    return set_out(g, n, 0, copy_reshaped(x, x->dtype, nd, dim), err);
}

static int eval_concat(pgd_graph *g, gnode *n, pgd_error **err)
{
    ghost *x0 = in_h(g, n, 0);
    if (!x0)
        return pgd__graph_fail(err, PGD_ERR_FORMAT, g, n, "no input");
    int64_t axis = pgd__graph_attr_i(n, "axis", 0);
    axis = axis < 0 ? axis + x0->nd : axis;
    if (axis < 0 || axis >= x0->nd)
        return pgd__graph_fail(err, PGD_ERR_SHAPE, g, n, "axis out of range");
    int64_t dim[PGD_MAX_DIMS];
    memcpy(dim, x0->dim, sizeof dim);
    dim[axis] = 0;
    for (int k = 0; k < n->nin; k++) {
        ghost *x = in_h(g, n, k);
        if (!x || x->nd != x0->nd)
            return pgd__graph_fail(err, PGD_ERR_SHAPE, g, n, "inputs of different ranks");
        for (int d = 0; d < x->nd; d++)
            if (d != axis && x->dim[d] != x0->dim[d])
                return pgd__graph_fail(err, PGD_ERR_SHAPE, g, n, "inputs differ in dim %d", d);
        dim[axis] += x->dim[axis];
    }
    ghost *y = pgd__ghost_new(x0->dtype, x0->nd, dim);
    if (!y)
        return set_out(g, n, 0, NULL, err);
    int64_t outer = 1, inner = 1, k = 0;
    for (int d = 0; d < axis; d++)
        outer *= dim[d];
    for (int d = (int)axis + 1; d < x0->nd; d++)
        inner *= dim[d];
    for (int64_t o = 0; o < outer; o++)
        for (int j = 0; j < n->nin; j++) {
            ghost *x = in_h(g, n, j);
            int64_t run = x->dim[axis] * inner;
            for (int64_t r = 0; r < run; r++)
                ghost_set(y, k++, pgd__ghost_get(x, o * run + r));
        }
    return set_out(g, n, 0, y, err);
}

/* ONNX Reshape's target shape (0 copies the input's dim unless allowzero, -1 inferred). */
int pgd__graph_reshape_dims(const int64_t *xdim, int xnd, int64_t xn, const int64_t *spec,
                            int nspec, int allowzero, int64_t *dim)
{
    int64_t known = 1;
    int infer = -1;
    if (nspec > PGD_MAX_DIMS)
        return -1;
    for (int d = 0; d < nspec; d++) {
        dim[d] = spec[d];
        if (spec[d] == 0 && !allowzero) {
            if (d >= xnd)
                return -1;
            dim[d] = xdim[d];
        }
        if (dim[d] == -1) {
            if (infer >= 0)
                return -1;
            infer = d;
        } else if (dim[d] < 0) {
            return -1;
        } else {
            if (dim[d] && known > INT64_MAX / dim[d])
                return -1;
            known *= dim[d];
        }
    }
    if (infer >= 0) {
        if (known == 0 || xn % known)
            return -1;
        dim[infer] = xn / known;
    } else if (known != xn) {
        return -1;
    }
    return nspec;
}

static int eval_reshape(pgd_graph *g, gnode *n, pgd_error **err)
{
    ghost *x = in_h(g, n, 0);
    int64_t spec[PGD_MAX_DIMS], dim[PGD_MAX_DIMS];
    if (!x)
        return pgd__graph_fail(err, PGD_ERR_FORMAT, g, n, "no input");
    int nd;
    if (!strcmp(n->op, "Flatten")) {
        int64_t axis = pgd__graph_attr_i(n, "axis", 1), a = 1, b = 1;
        axis = axis < 0 ? axis + x->nd : axis;
        if (axis < 0 || axis > x->nd)
            return pgd__graph_fail(err, PGD_ERR_SHAPE, g, n, "axis %lld out of range for %d dims",
                                   (long long)pgd__graph_attr_i(n, "axis", 1), x->nd);
        for (int d = 0; d < x->nd; d++) /* [0, 3] flattens to [0, 3], not [0, 0] */
            *(d < axis ? &a : &b) *= x->dim[d];
        dim[0] = a;
        dim[1] = b;
        nd = 2;
    } else {
        int ns = pgd__graph_ints(g, n, 1, "shape", spec, PGD_MAX_DIMS);
        nd = ns < 0 ? -1
                    : pgd__graph_reshape_dims(x->dim, x->nd, x->n, spec, ns,
                                              (int)pgd__graph_attr_i(n, "allowzero", 0), dim);
    }
    if (nd < 0)
        return pgd__graph_fail(err, PGD_ERR_SHAPE, g, n,
                               "the target shape does not fit %lld elements", (long long)x->n);
    return set_out(g, n, 0, copy_reshaped(x, x->dtype, nd, dim), err);
}

static int eval_slice(pgd_graph *g, gnode *n, pgd_error **err)
{
    ghost *x = in_h(g, n, 0);
    int64_t st[PGD_MAX_DIMS], en[PGD_MAX_DIMS], ax[PGD_MAX_DIMS], sp[PGD_MAX_DIMS];
    if (!x)
        return pgd__graph_fail(err, PGD_ERR_FORMAT, g, n, "no input");
    int ns = pgd__graph_ints(g, n, 1, "starts", st, PGD_MAX_DIMS);
    int ne = pgd__graph_ints(g, n, 2, "ends", en, PGD_MAX_DIMS);
    int na = pgd__graph_ints(g, n, 3, "axes", ax, PGD_MAX_DIMS);
    int np = pgd__graph_ints(g, n, 4, NULL, sp, PGD_MAX_DIMS);
    if (ns < 0 || ne != ns || (na >= 0 && na != ns) || (np >= 0 && np != ns))
        return pgd__graph_fail(err, PGD_ERR_FORMAT, g, n, "starts, ends, axes, steps disagree");
    int64_t first[PGD_MAX_DIMS], step[PGD_MAX_DIMS], dim[PGD_MAX_DIMS];
    for (int d = 0; d < x->nd; d++)
        first[d] = 0, step[d] = 1, dim[d] = x->dim[d];
    for (int j = 0; j < ns; j++) {
        int64_t a = na >= 0 ? ax[j] : j, s = np >= 0 ? sp[j] : 1, len = 0;
        s = s < -INT64_MAX ? -INT64_MAX : s; /* -s must exist */
        a = a < 0 ? a + x->nd : a;
        if (a < 0 || a >= x->nd || s == 0)
            return pgd__graph_fail(err, PGD_ERR_INVALID_ARGUMENT, g, n, "bad axis or step");
        int64_t dn = x->dim[a], lo = s > 0 ? 0 : -1, hi = s > 0 ? dn : dn - 1;
        int64_t b = st[j] < 0 ? st[j] + dn : st[j], e = en[j] < 0 ? en[j] + dn : en[j];
        b = b < lo ? lo : b > hi ? hi : b;
        e = e < lo ? lo : e > hi ? hi : e;
        if (s > 0)
            len = e > b ? 1 + (e - b - 1) / s : 0;
        else
            len = b > e ? 1 + (b - e - 1) / -s : 0;
        first[a] = b, step[a] = s, dim[a] = len;
    }
    ghost *y = pgd__ghost_new(x->dtype, x->nd, dim);
    if (!y)
        return set_out(g, n, 0, NULL, err);
    int64_t c[PGD_MAX_DIMS] = {0};
    for (int64_t k = 0; k < y->n; k++, next_coord(x->nd, dim, c)) {
        int64_t src = 0;
        for (int d = 0; d < x->nd; d++)
            src = src * x->dim[d] + first[d] + c[d] * step[d];
        ghost_set(y, k, pgd__ghost_get(x, src));
    }
    return set_out(g, n, 0, y, err);
}

static int eval_fill(pgd_graph *g, gnode *n, pgd_error **err)
{
    /* ConstantOfShape and Range */
    if (!strcmp(n->op, "ConstantOfShape")) {
        ghost *s = in_h(g, n, 0);
        if (!s || !s->i || s->n > PGD_MAX_DIMS)
            return pgd__graph_fail(err, PGD_ERR_FORMAT, g, n, "needs a shape of <= 8 dims");
        const Onnx__AttributeProto *a = pgd__graph_attr(n, "value");
        ghost *val = NULL;
        int rc = a && a->t ? pgd__graph_tensor_to_host(g, a->t, "value", &val, err) : 0;
        if (rc)
            return rc;
        ghost *y = pgd__ghost_new(val ? val->dtype : G_FLOAT, (int)s->n, s->i);
        for (int64_t k = 0; y && k < y->n; k++)
            ghost_set(y, k, val && val->n ? pgd__ghost_get(val, 0) : 0);
        pgd__ghost_free(val);
        return set_out(g, n, 0, y, err);
    }
    ghost *s = in_h(g, n, 0), *l = in_h(g, n, 1), *d = in_h(g, n, 2);
    if (!s || !l || !d || s->n != 1 || l->n != 1 || d->n != 1)
        return pgd__graph_fail(err, PGD_ERR_FORMAT, g, n, "needs scalar start, limit, delta");
    double a = pgd__ghost_get(s, 0), b = pgd__ghost_get(l, 0), st = pgd__ghost_get(d, 0);
    double cnt = st != 0 ? ceil((b - a) / st) : -1;
    if (!(cnt >= 0) || cnt > (double)HOST_MAX_ELEMS)
        cnt = st != 0 && (b - a) / st <= 0 ? 0 : -1;
    if (cnt < 0)
        return pgd__graph_fail(err, PGD_ERR_INVALID_ARGUMENT, g, n, "delta 0 or too many");
    int64_t len = (int64_t)cnt;
    ghost *y = pgd__ghost_new(s->dtype, 1, &len);
    for (int64_t k = 0; y && k < len; k++)
        ghost_set(y, k, a + (double)k * st);
    return set_out(g, n, 0, y, err);
}

static int eval_where_expand(pgd_graph *g, gnode *n, pgd_error **err)
{
    ghost *a = in_h(g, n, 0), *b = in_h(g, n, 1), *c = in_h(g, n, 2);
    int64_t dim[PGD_MAX_DIMS], d2[PGD_MAX_DIMS];
    int nd;
    if (!strcmp(n->op, "Expand") || !strcmp(n->op, "Tile")) {
        if (!a || !b || !b->i || b->n > PGD_MAX_DIMS)
            return pgd__graph_fail(err, PGD_ERR_FORMAT, g, n, "needs data and a shape");
        ghost shp = {.dtype = G_INT64, .nd = (int)b->n};
        for (int64_t k = 0; k < b->n; k++)
            shp.dim[k] = b->i[k];
        if (!strcmp(n->op, "Tile")) {
            if (b->n != a->nd)
                return pgd__graph_fail(err, PGD_ERR_SHAPE, g, n, "repeats of the wrong rank");
            for (int k = 0; k < a->nd; k++) {
                if (b->i[k] < 0 || (a->dim[k] && b->i[k] > HOST_MAX_ELEMS / a->dim[k]))
                    return pgd__graph_fail(err, PGD_ERR_TOO_LARGE, g, n,
                                           "repeats[%d] = %lld: negative or past 2^31 elements", k,
                                           (long long)b->i[k]);
                dim[k] = a->dim[k] * b->i[k];
            }
            ghost *y = pgd__ghost_new(a->dtype, a->nd, dim);
            int64_t cc[PGD_MAX_DIMS] = {0};
            for (int64_t k = 0; y && k < y->n; k++, next_coord(a->nd, dim, cc)) {
                int64_t src = 0;
                for (int d = 0; d < a->nd; d++)
                    src = src * a->dim[d] + cc[d] % a->dim[d];
                ghost_set(y, k, pgd__ghost_get(a, src));
            }
            return set_out(g, n, 0, y, err);
        }
        if ((nd = bcast(a, &shp, dim)) < 0)
            return pgd__graph_fail(err, PGD_ERR_SHAPE, g, n, "the shape does not broadcast");
        b = NULL;
    } else {
        if (!a || !b || !c)
            return pgd__graph_fail(err, PGD_ERR_FORMAT, g, n, "needs three inputs");
        if ((nd = bcast(a, b, d2)) < 0)
            return pgd__graph_fail(err, PGD_ERR_SHAPE, g, n, "the shapes do not broadcast");
        ghost t = {.nd = nd};
        memcpy(t.dim, d2, sizeof d2);
        if ((nd = bcast(&t, c, dim)) < 0)
            return pgd__graph_fail(err, PGD_ERR_SHAPE, g, n, "the shapes do not broadcast");
    }
    ghost *y = pgd__ghost_new(b ? b->dtype : a->dtype, nd, dim);
    int64_t cc[PGD_MAX_DIMS] = {0};
    for (int64_t k = 0; y && k < y->n; k++, next_coord(nd, dim, cc)) {
        if (!b)
            ghost_set(y, k, pgd__ghost_get(a, bidx(a, nd, cc)));
        else
            ghost_set(y, k,
                      pgd__ghost_get(a, bidx(a, nd, cc)) != 0 ? pgd__ghost_get(b, bidx(b, nd, cc))
                                                              : pgd__ghost_get(c, bidx(c, nd, cc)));
    }
    return set_out(g, n, 0, y, err);
}

static int eval_transpose(pgd_graph *g, gnode *n, pgd_error **err)
{
    ghost *x = in_h(g, n, 0);
    const int64_t *perm;
    int np = pgd__graph_attr_ints(n, "perm", &perm);
    if (!x || (np >= 0 && np != x->nd))
        return pgd__graph_fail(err, PGD_ERR_FORMAT, g, n, "perm does not match the rank");
    int64_t p[PGD_MAX_DIMS], dim[PGD_MAX_DIMS], st[PGD_MAX_DIMS];
    int seen[PGD_MAX_DIMS] = {0};
    for (int d = 0; d < x->nd; d++) {
        p[d] = np >= 0 ? perm[d] : x->nd - 1 - d;
        if (p[d] < 0 || p[d] >= x->nd || seen[p[d]]++)
            return pgd__graph_fail(err, PGD_ERR_INVALID_ARGUMENT, g, n, "perm is not one");
    }
    int64_t s = 1;
    for (int d = x->nd - 1; d >= 0; d--)
        st[d] = s, s *= x->dim[d];
    for (int d = 0; d < x->nd; d++)
        dim[d] = x->dim[p[d]];
    ghost *y = pgd__ghost_new(x->dtype, x->nd, dim);
    int64_t c[PGD_MAX_DIMS] = {0};
    for (int64_t k = 0; y && k < y->n; k++, next_coord(x->nd, dim, c)) {
        int64_t src = 0;
        for (int d = 0; d < x->nd; d++)
            src += c[d] * st[p[d]];
        ghost_set(y, k, pgd__ghost_get(x, src));
    }
    return set_out(g, n, 0, y, err);
}

static int eval_reduce(pgd_graph *g, gnode *n, pgd_error **err)
{
    ghost *x = in_h(g, n, 0);
    int64_t axes[PGD_MAX_DIMS];
    if (!x)
        return pgd__graph_fail(err, PGD_ERR_FORMAT, g, n, "no input");
    int na = pgd__graph_ints(g, n, 1, "axes", axes, PGD_MAX_DIMS);
    int keep = (int)pgd__graph_attr_i(n, "keepdims", 1), red[PGD_MAX_DIMS] = {0};
    for (int j = 0; j < na; j++) {
        int64_t a = axes[j] < 0 ? axes[j] + x->nd : axes[j];
        if (a < 0 || a >= x->nd)
            return pgd__graph_fail(err, PGD_ERR_SHAPE, g, n, "axis out of range");
        red[a] = 1;
    }
    int64_t dim[PGD_MAX_DIMS], kd[PGD_MAX_DIMS];
    int nd = 0;
    for (int d = 0; d < x->nd; d++) {
        int r = na <= 0 ? !pgd__graph_attr_i(n, "noop_with_empty_axes", 0) : red[d];
        red[d] = r;
        kd[d] = r ? 1 : x->dim[d];
        if (!r || keep)
            dim[nd++] = kd[d];
    }
    ghost *y = pgd__ghost_new(x->dtype, nd, dim);
    if (!y)
        return set_out(g, n, 0, NULL, err);
    int prod = !strcmp(n->op, "ReduceProd"), sum = !strcmp(n->op, "ReduceSum");
    int mx = !strcmp(n->op, "ReduceMax");
    int64_t *seen = calloc((size_t)(y->n ? y->n : 1), sizeof(int64_t));
    int64_t c[PGD_MAX_DIMS] = {0};
    for (int64_t k = 0; seen && k < x->n; k++, next_coord(x->nd, x->dim, c)) {
        int64_t o = 0;
        for (int d = 0; d < x->nd; d++)
            o = o * kd[d] + (red[d] ? 0 : c[d]);
        double v = pgd__ghost_get(x, k), cur = pgd__ghost_get(y, o);
        double r = prod       ? (seen[o] ? cur * v : v)
                   : sum      ? cur + v
                   : !seen[o] ? v
                   : mx       ? (v > cur ? v : cur)
                              : (v < cur ? v : cur);
        ghost_set(y, o, r);
        seen[o]++;
    }
    if (prod)
        for (int64_t o = 0; seen && o < y->n; o++)
            if (!seen[o])
                ghost_set(y, o, 1);
    free(seen);
    return set_out(g, n, 0, y, err);
}

/* ScatterND without reduction: data with updates written at the index tuples. */
static int eval_scatter_nd(pgd_graph *g, gnode *n, pgd_error **err)
{
    ghost *x = in_h(g, n, 0), *idx = in_h(g, n, 1), *up = in_h(g, n, 2);
    if (!x || !idx || !up || !idx->i || idx->nd < 1)
        return pgd__graph_fail(err, PGD_ERR_FORMAT, g, n, "needs data, indices and updates");
    if (strcmp(pgd__graph_attr_s(n, "reduction", "none"), "none"))
        return pgd__graph_fail(err, PGD_ERR_UNSUPPORTED, g, n, "reduction '%s'",
                               pgd__graph_attr_s(n, "reduction", "none"));
    int64_t k = idx->dim[idx->nd - 1], tuples = idx->n / (k ? k : 1), slice = 1;
    if (k < 1 || k > x->nd)
        return pgd__graph_fail(err, PGD_ERR_SHAPE, g, n, "index tuples of %lld for %d dims",
                               (long long)k, x->nd);
    for (int d = (int)k; d < x->nd; d++)
        slice *= x->dim[d];
    if (up->n != tuples * slice)
        return pgd__graph_fail(err, PGD_ERR_SHAPE, g, n, "updates hold %lld values, %lld needed",
                               (long long)up->n, (long long)(tuples * slice));
    ghost *y = copy_reshaped(x, x->dtype, x->nd, x->dim);
    for (int64_t t = 0; y && t < tuples; t++) {
        int64_t off = 0;
        for (int64_t j = 0; j < k; j++) {
            int64_t i = idx->i[t * k + j], dn = x->dim[j];
            i = i < 0 ? i + dn : i;
            if (i < 0 || i >= dn) {
                pgd__ghost_free(y);
                return pgd__graph_fail(err, PGD_ERR_INVALID_ARGUMENT, g, n,
                                       "index %lld out of range for a dim of %lld",
                                       (long long)idx->i[t * k + j], (long long)dn);
            }
            off = off * dn + i;
        }
        for (int64_t r = 0; r < slice; r++)
            ghost_set(y, off * slice + r, pgd__ghost_get(up, t * slice + r));
    }
    return set_out(g, n, 0, y, err);
}

/* CumSum along the axis input (exclusive and reverse as ONNX defines them). */
static int eval_cumsum(pgd_graph *g, gnode *n, pgd_error **err)
{
    ghost *x = in_h(g, n, 0), *ax = in_h(g, n, 1);
    if (!x || !ax || ax->n != 1)
        return pgd__graph_fail(err, PGD_ERR_FORMAT, g, n, "needs data and a scalar axis");
    int64_t a = sat_i64(pgd__ghost_get(ax, 0)); /* a float axis of 1e30 must not wrap */
    a = a < 0 ? a + x->nd : a;
    if (a < 0 || a >= x->nd)
        return pgd__graph_fail(err, PGD_ERR_SHAPE, g, n, "axis out of range");
    int excl = (int)pgd__graph_attr_i(n, "exclusive", 0),
        rev = (int)pgd__graph_attr_i(n, "reverse", 0);
    int64_t outer = 1, inner = 1, len = x->dim[a];
    for (int d = 0; d < a; d++)
        outer *= x->dim[d];
    for (int d = (int)a + 1; d < x->nd; d++)
        inner *= x->dim[d];
    ghost *y = copy_reshaped(x, x->dtype, x->nd, x->dim);
    for (int64_t o = 0; y && o < outer; o++)
        for (int64_t r = 0; r < inner; r++) {
            double acc = 0;
            for (int64_t j = 0; j < len; j++) {
                int64_t jj = rev ? len - 1 - j : j, k = (o * len + jj) * inner + r;
                double v = pgd__ghost_get(x, k);
                if (excl) {
                    ghost_set(y, k, acc);
                    acc += v;
                } else {
                    acc += v;
                    ghost_set(y, k, acc);
                }
            }
        }
    return set_out(g, n, 0, y, err);
}

/* Resize in nearest mode (what exporters emit for masks): the output size from `sizes` or
 * `scales`, each output coordinate mapped back as coordinate_transformation_mode says and
 * rounded as nearest_mode says. */
static int eval_resize(pgd_graph *g, gnode *n, pgd_error **err)
{
    ghost *x = in_h(g, n, 0), *sc = in_h(g, n, 2), *sz = in_h(g, n, 3);
    const char *mode = pgd__graph_attr_s(n, "mode", "nearest");
    if (!x || strcmp(mode, "nearest"))
        return pgd__graph_fail(err, PGD_ERR_UNSUPPORTED, g, n, "mode '%s' on the host", mode);
    char ctm[64], nm[64];
    snprintf(ctm, sizeof ctm, "%s",
             pgd__graph_attr_s(n, "coordinate_transformation_mode", "half_pixel"));
    snprintf(nm, sizeof nm, "%s", pgd__graph_attr_s(n, "nearest_mode", "round_prefer_floor"));
    int64_t dim[PGD_MAX_DIMS];
    double scale[PGD_MAX_DIMS];
    for (int d = 0; d < x->nd; d++) {
        double want;
        if (sz && sz->n == x->nd)
            want = pgd__ghost_get(sz, d);
        else if (sc && sc->n == x->nd)
            want = floor((double)x->dim[d] * pgd__ghost_get(sc, d));
        else
            return pgd__graph_fail(err, PGD_ERR_UNSUPPORTED, g, n,
                                   "needs scales or sizes for "
                                   "every dim");
        /* a size past the cap, NaN, or elements made from an empty dim (read before x) */
        if (!(want >= 0 && want <= (double)HOST_MAX_ELEMS) || (!x->dim[d] && want > 0))
            return pgd__graph_fail(err, PGD_ERR_SHAPE, g, n,
                                   "dim %d of %lld elements cannot be resized to %g", d,
                                   (long long)x->dim[d], want);
        dim[d] = (int64_t)want;
        scale[d] = sz && sz->n == x->nd ? (double)dim[d] / (double)(x->dim[d] ? x->dim[d] : 1)
                                        : pgd__ghost_get(sc, d);
    }
    ghost *y = pgd__ghost_new(x->dtype, x->nd, dim);
    int64_t c[PGD_MAX_DIMS] = {0};
    for (int64_t k = 0; y && k < y->n; k++, next_coord(x->nd, dim, c)) {
        int64_t src = 0;
        for (int d = 0; d < x->nd; d++) {
            double o = (double)c[d], in;
            if (!strcmp(ctm, "asymmetric"))
                in = o / scale[d];
            else if (!strcmp(ctm, "align_corners"))
                in = dim[d] > 1 ? o * (double)(x->dim[d] - 1) / (double)(dim[d] - 1) : 0;
            else /* half_pixel, pytorch_half_pixel */
                in = (o + 0.5) / scale[d] - 0.5;
            /* saturated: a scale of 1e-30 maps coordinates far past int64 */
            int64_t i = !strcmp(nm, "floor")               ? sat_i64(floor(in))
                        : !strcmp(nm, "ceil")              ? sat_i64(ceil(in))
                        : !strcmp(nm, "round_prefer_ceil") ? sat_i64(floor(in + 0.5))
                                                           : sat_i64(ceil(in - 0.5));
            i = i < 0 ? 0 : i >= x->dim[d] ? x->dim[d] - 1 : i;
            src = src * x->dim[d] + i;
        }
        ghost_set(y, k, pgd__ghost_get(x, src));
    }
    return set_out(g, n, 0, y, err);
}

static int cast_type(gnode *n, int src)
{
    int to = (int)pgd__graph_attr_i(n, "to", src);
    return to;
}

int pgd__graph_host_eval(pgd_graph *g, gnode *n, pgd_error **err)
{
    const char *op = n->op;
    if (!strcmp(op, "Constant")) {
        const Onnx__AttributeProto *a = pgd__graph_attr(n, "value");
        ghost *h = NULL;
        if (a && a->t) {
            int rc = pgd__graph_tensor_to_host(
                g, a->t, n->nout > 0 && n->out[0] >= 0 ? g->values[n->out[0]].name : "Constant", &h,
                err);
            return rc ? rc : set_out(g, n, 0, h, err);
        }
        if ((a = pgd__graph_attr(n, "value_float")) || (a = pgd__graph_attr(n, "value_int"))) {
            h = pgd__ghost_new(a->has_f ? G_FLOAT : G_INT64, 0, NULL);
            if (h)
                ghost_set(h, 0, a->has_f ? a->f : (double)a->i);
            return set_out(g, n, 0, h, err);
        }
        if ((a = pgd__graph_attr(n, "value_floats")) || (a = pgd__graph_attr(n, "value_ints"))) {
            int isf = a->n_floats > 0 || !a->n_ints;
            int64_t len = isf ? (int64_t)a->n_floats : (int64_t)a->n_ints;
            h = pgd__ghost_new(isf ? G_FLOAT : G_INT64, 1, &len);
            for (int64_t k = 0; h && k < len; k++)
                ghost_set(h, k, isf ? a->floats[k] : (double)a->ints[k]);
            return set_out(g, n, 0, h, err);
        }
        return pgd__graph_fail(err, PGD_ERR_UNSUPPORTED, g, n,
                               "a Constant without a tensor, float(s) or int(s) value");
    }
    if (!strcmp(op, "Shape") || !strcmp(op, "Size"))
        return eval_shape(g, n, err);
    if (!strcmp(op, "Gather"))
        return eval_gather(g, n, err);
    if (!strcmp(op, "Unsqueeze") || !strcmp(op, "Squeeze"))
        return eval_squeeze(g, n, err);
    if (!strcmp(op, "Concat"))
        return eval_concat(g, n, err);
    if (!strcmp(op, "Reshape") || !strcmp(op, "Flatten"))
        return eval_reshape(g, n, err);
    if (!strcmp(op, "Slice"))
        return eval_slice(g, n, err);
    if (!strcmp(op, "ConstantOfShape") || !strcmp(op, "Range"))
        return eval_fill(g, n, err);
    if (!strcmp(op, "Where") || !strcmp(op, "Expand") || !strcmp(op, "Tile"))
        return eval_where_expand(g, n, err);
    if (!strcmp(op, "Transpose"))
        return eval_transpose(g, n, err);
    if (!strncmp(op, "Reduce", 6))
        return eval_reduce(g, n, err);
    if (!strcmp(op, "ScatterND"))
        return eval_scatter_nd(g, n, err);
    if (!strcmp(op, "CumSum"))
        return eval_cumsum(g, n, err);
    if (!strcmp(op, "Resize"))
        return eval_resize(g, n, err);
    ghost *x = in_h(g, n, 0);
    if (!strcmp(op, "Identity") || !strcmp(op, "Dropout") || !strcmp(op, "Cast") ||
        !strcmp(op, "CastLike")) {
        if (!x)
            return pgd__graph_fail(err, PGD_ERR_FORMAT, g, n, "no input");
        int to = !strcmp(op, "Cast")                        ? cast_type(n, x->dtype)
                 : !strcmp(op, "CastLike") && in_h(g, n, 1) ? in_h(g, n, 1)->dtype
                                                            : x->dtype;
        ghost *y = copy_reshaped(x, to, x->nd, x->dim);
        if (y && y->i && x->f)
            for (int64_t k = 0; k < x->n; k++)
                y->i[k] = to == G_BOOL ? x->f[k] != 0 : sat_i64(x->f[k]);
        return set_out(g, n, 0, y, err);
    }
    if (n->nin == 2 && strcmp(op, "Not"))
        return eval_binary(g, n, err);
    if (!strcmp(op, "Min") || !strcmp(op, "Max")) {
        if (n->nin == 1)
            return set_out(g, n, 0, copy_reshaped(x, x->dtype, x->nd, x->dim), err);
        return pgd__graph_fail(err, PGD_ERR_UNSUPPORTED, g, n, "more than two inputs");
    }
    return eval_unary(g, n, err);
}
