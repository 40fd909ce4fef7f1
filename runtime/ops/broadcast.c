/* broadcast.c — launchers for cl/broadcast.cl: elementwise ops with NumPy broadcasting and
 * reductions over any set of axes.
 *
 * Every launch goes through one geometry: the shapes are right-aligned, dims of size 1 dropped
 * and neighbouring dims merged where every operand is contiguous across them, so that the usual
 * cases (same shapes, a bias over the last dims, a reduction over the last axis) reach the
 * kernel as one or two dims and the kernel's index arithmetic stays small. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* cl/broadcast.cl's code for clip (not a pgd_unary_op: it takes bounds). */
#define U_CLIP 13
/* The most elements one work-item of broadcast_reduce reduces (see the kernel). */
#define CHUNK 256

static const char *const binary_names[] = {"add", "sub", "mul", "div", "pow", "max", "min"};
static const char *const unary_names[] = {"exp",  "log",       "sqrt", "rsqrt", "erf",
                                          "tanh", "sigmoid",   "abs",  "neg",   "relu",
                                          "gelu", "gelu_tanh", "silu"};
static const char *const reduce_names[] = {"sum", "mean", "max", "min", "prod", "argmax", "argmin"};

/* A launch's dims, innermost first, and each operand's element strides along them. */
typedef struct geo {
    int rank;
    cl_uint shape[PGD_MAX_DIMS];
    cl_uint st[3][PGD_MAX_DIMS];
} geo;

static cl_uint8 vec8(const cl_uint *v)
{
    cl_uint8 r;
    memcpy(r.s, v, sizeof r.s);
    return r;
}

static int too_large(const pgd_tensor *t, const char *op, const char *what, pgd_error **err)
{
    if (pgd_tensor_get_numel(t) <= (int64_t)UINT32_MAX)
        return PGD_OK;
    char s[128];
    return pgd__error_set(err, PGD_ERR_TOO_LARGE, "%s: %s %s has more than 2^32 elements", op, what,
                          pgd_tensor_shape_str(t, s, sizeof s));
}

/* The broadcast shape of the n operands t (named by names) into ndim, shape; PGD_ERR_SHAPE
 * naming the operand that does not fit, the operand whose size it meets, and the dim. */
static int broadcast_shape(const char *op, int n, const pgd_tensor *const *t,
                           const char *const *names, int *ndim, int64_t *shape, pgd_error **err)
{
    int from[PGD_MAX_DIMS]; /* the operand that set each dim's size (counted from the end) */
    *ndim = 0;
    for (int d = 0; d < PGD_MAX_DIMS; d++) {
        shape[d] = 1;
        from[d] = 0;
    }
    for (int k = 0; k < n; k++) {
        int rc = too_large(t[k], op, names[k], err);
        if (rc)
            return rc;
        int nd = pgd_tensor_get_ndim(t[k]);
        for (int e = 0; e < nd; e++) { /* e: dim counted from the end */
            int64_t s = pgd_tensor_get_dim(t[k], nd - 1 - e), *have = &shape[PGD_MAX_DIMS - 1 - e];
            if (s == *have || s == 1)
                continue;
            if (*have != 1) {
                char sa[128], sb[128];
                return pgd__error_set(err, PGD_ERR_SHAPE,
                                      "%s: %s %s does not broadcast with %s %s: dim %d is %lld "
                                      "vs %lld",
                                      op, names[k], pgd_tensor_shape_str(t[k], sa, sizeof sa),
                                      names[from[e]],
                                      pgd_tensor_shape_str(t[from[e]], sb, sizeof sb), -1 - e,
                                      (long long)s, (long long)*have);
            }
            *have = s;
            from[e] = k;
        }
        if (nd > *ndim)
            *ndim = nd;
    }
    memmove(shape, shape + PGD_MAX_DIMS - *ndim, (size_t)*ndim * sizeof *shape);
    return PGD_OK;
}

/* Adds a dim of size `size` outside the ones in g (innermost first) with the operands' strides
 * st[0..n): merged into g's outermost dim when every operand is contiguous across the two,
 * dropped when its size is 1. */
static void geo_push(geo *g, int n, int64_t size, const int64_t *st)
{
    if (size == 1)
        return;
    if (g->rank > 0) {
        int r = g->rank - 1, merge = 1;
        for (int k = 0; k < n; k++)
            merge = merge && (int64_t)g->st[k][r] * g->shape[r] == st[k];
        if (merge) {
            g->shape[r] *= (cl_uint)size;
            return;
        }
    }
    g->shape[g->rank] = (cl_uint)size;
    for (int k = 0; k < n; k++)
        g->st[k][g->rank] = (cl_uint)st[k];
    g->rank++;
}

/* The geometry of n operands t broadcast to y's shape. */
static void broadcast_geo(int n, const pgd_tensor *const *t, const pgd_tensor *y, geo *g)
{
    memset(g, 0, sizeof *g);
    int nd = pgd_tensor_get_ndim(y);
    for (int d = nd - 1; d >= 0; d--) {
        int64_t st[3];
        for (int k = 0; k < n; k++) {
            int dk = d - (nd - pgd_tensor_get_ndim(t[k]));
            st[k] = dk >= 0 && pgd_tensor_get_dim(t[k], dk) != 1 ? pgd_tensor_get_stride(t[k], dk) : 0;
        }
        geo_push(g, n, pgd_tensor_get_dim(y, d), st);
    }
    for (int d = g->rank; d < PGD_MAX_DIMS; d++)
        g->shape[d] = 1;
}

/* Checks the operands t[0..n) (named by names) against y, then launches `kernel` over y's
 * elements with the buffers (t..., y), the geometry (shape, then the operands' strides in the
 * order of `order`), rank, count and, when op >= 0, op. */
static int launch_broadcast(pgd_ctx *ctx, const char *op_name, const char *kernel, int op, int n,
                            const pgd_tensor *const *t, const char *const *names, const int *order,
                            pgd_tensor *y, pgd_error **err)
{
    int ndim;
    int64_t shape[PGD_MAX_DIMS];
    int rc = broadcast_shape(op_name, n, t, names, &ndim, shape, err);
    if (!rc)
        rc = pgd__check_out_shape(op_name, y, ndim, shape, "the operands broadcast to", err);
    if (!rc) /* operands within the limit may broadcast beyond it */
        rc = too_large(y, op_name, "y", err);
    if (rc)
        return rc;
    cl_uint count = (cl_uint)pgd_tensor_get_numel(y);
    if (count == 0)
        return PGD_OK;
    geo g;
    broadcast_geo(n, t, y, &g);
    if (g.rank <= 2 && strcmp(kernel, "broadcast_binary") == 0)
        kernel = "broadcast_binary2";
    cl_kernel k;
    pgd__args args;
    if ((rc = pgd__args_kernel(&args, ctx, "broadcast", NULL, kernel, &k, err)))
        return rc;
    for (int i = 0; i < n; i++)
        pgd__arg_mem(&args, t[i]->buf);
    pgd__arg_mem(&args, y->buf);
    cl_uint8 v = vec8(g.shape);
    pgd__arg(&args, sizeof v, &v);
    for (int i = 0; i < n; i++) {
        v = vec8(g.st[order[i]]);
        pgd__arg(&args, sizeof v, &v);
    }
    pgd__arg_uint(&args, (cl_uint)g.rank);
    pgd__arg_uint(&args, count);
    if (op >= 0)
        pgd__arg_int(&args, op);
    if ((rc = pgd__args_end(&args, err)))
        return rc;
    /* 2-D: the innermost dim along dimension 0, in work-groups of up to wg of its elements, the
     * rest of wg along dimension 1 (a short innermost dim leaves few items idle). */
    size_t wg = pgd__flat_wg(ctx, k), inner = g.shape[0], l0 = pgd__pow2_floor(inner);
    l0 = l0 < inner ? l0 * 2 : l0;
    l0 = l0 < wg ? l0 : wg;
    size_t local[2] = {l0, wg / l0};
    size_t global[2] = {pgd__round_up(inner, local[0]), pgd__round_up(count / inner, local[1])};
    return pgd__enqueue(ctx, k, kernel, 2, global, local, err);
}

int pgd_binary(pgd_ctx *ctx, pgd_binary_op op, const pgd_tensor *a, const pgd_tensor *b,
               pgd_tensor *y, pgd_error **err)
{
    if ((int)op < 0 || (int)op >= (int)(sizeof binary_names / sizeof *binary_names))
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "binary: op %d is not a pgd_binary_op (0..6)", (int)op);
    const pgd_tensor *t[2] = {a, b};
    static const char *const names[2] = {"a", "b"};
    static const int order[2] = {0, 1};
    return launch_broadcast(ctx, binary_names[op], "broadcast_binary", (int)op, 2, t, names, order,
                            y, err);
}

int pgd_where(pgd_ctx *ctx, const pgd_tensor *cond, const pgd_tensor *a, const pgd_tensor *b,
              pgd_tensor *y, pgd_error **err)
{
    /* The kernel takes (cond, a, b) and the strides of a, b, then cond. */
    const pgd_tensor *t[3] = {cond, a, b};
    static const char *const names[3] = {"cond", "a", "b"};
    static const int order[3] = {1, 2, 0};
    return launch_broadcast(ctx, "where", "broadcast_where", -1, 3, t, names, order, y, err);
}

static int launch_unary(pgd_ctx *ctx, const char *name, int op, const pgd_tensor *x, float lo,
                        float hi, pgd_tensor *y, pgd_error **err)
{
    int rc = too_large(x, name, "x", err);
    if (rc)
        return rc;
    if (!pgd__shape_equal(x, y))
        return pgd__shape_error(err, name, "y must have x's shape", y, x);
    cl_uint count = (cl_uint)pgd_tensor_get_numel(x);
    if (count == 0)
        return PGD_OK;
    cl_kernel k;
    pgd__args args;
    if ((rc = pgd__args_kernel(&args, ctx, "broadcast", NULL, "broadcast_unary", &k, err)))
        return rc;
    pgd__arg_mem(&args, x->buf);
    pgd__arg_mem(&args, y->buf);
    pgd__arg_float(&args, lo);
    pgd__arg_float(&args, hi);
    pgd__arg_uint(&args, count);
    pgd__arg_int(&args, op);
    if ((rc = pgd__args_end(&args, err)))
        return rc;
    size_t wg = pgd__flat_wg(ctx, k), global = pgd__round_up(count, wg);
    return pgd__enqueue(ctx, k, "broadcast_unary", 1, &global, &wg, err);
}

int pgd_unary(pgd_ctx *ctx, pgd_unary_op op, const pgd_tensor *x, pgd_tensor *y, pgd_error **err)
{
    if ((int)op < 0 || (int)op >= (int)(sizeof unary_names / sizeof *unary_names))
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "unary: op %d is not a pgd_unary_op (0..12)", (int)op);
    return launch_unary(ctx, unary_names[op], (int)op, x, 0.0f, 0.0f, y, err);
}

int pgd_clip(pgd_ctx *ctx, const pgd_tensor *x, float lo, float hi, pgd_tensor *y, pgd_error **err)
{
    if (isnan(lo) || isnan(hi))
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "clip: the bounds must not be NaN (lo %g, hi %g); give -inf or "
                              "inf for no bound",
                              (double)lo, (double)hi);
    return launch_unary(ctx, "clip", U_CLIP, x, lo, hi, y, err);
}

/* ---- reductions ---- */

/* One pass of broadcast_reduce. */
typedef struct pass {
    cl_mem x, xi, y, yi; /* xi NULL: the indices are the positions; yi NULL: not written */
    geo kept, red;       /* operand 0's strides only */
    cl_uint nout, nred, parts;
    int last;
} pass;

static int reduce_pass(pgd_ctx *ctx, int op, const pass *p, float div, pgd_error **err)
{
    cl_kernel k;
    pgd__args args;
    int rc = pgd__args_kernel(&args, ctx, "broadcast", NULL, "broadcast_reduce", &k, err);
    if (rc)
        return rc;
    pgd__arg_mem(&args, p->x);
    pgd__arg_mem(&args, p->xi ? p->xi : p->x); /* not read without has_idx */
    pgd__arg_int(&args, p->xi != NULL);
    pgd__arg_mem(&args, p->y);
    pgd__arg_mem(&args, p->yi ? p->yi : p->y); /* not written on the last pass */
    pgd__arg_int(&args, p->last);
    const geo *gs[2] = {&p->kept, &p->red};
    for (int i = 0; i < 2; i++) {
        cl_uint8 v = vec8(gs[i]->shape);
        pgd__arg(&args, sizeof v, &v);
        v = vec8(gs[i]->st[0]);
        pgd__arg(&args, sizeof v, &v);
        pgd__arg_uint(&args, (cl_uint)gs[i]->rank);
    }
    pgd__arg_uint(&args, p->nout);
    pgd__arg_uint(&args, p->nred);
    pgd__arg_uint(&args, CHUNK);
    pgd__arg_uint(&args, p->parts);
    pgd__arg_int(&args, op);
    pgd__arg_float(&args, div);
    if ((rc = pgd__args_end(&args, err)))
        return rc;
    size_t wg = pgd__flat_wg(ctx, k);
    size_t global[2] = {pgd__round_up(p->nout, wg), p->parts}, local[2] = {wg, 1};
    return pgd__enqueue(ctx, k, "broadcast_reduce", 2, global, local, err);
}

/* The reduced-axes mask of x for (axes, naxes): PGD_ERR_INVALID_ARGUMENT naming a bad axis. */
static int reduce_mask(const char *op, const pgd_tensor *x, const int *axes, int naxes, int *mask,
                       pgd_error **err)
{
    int nd = pgd_tensor_get_ndim(x);
    for (int d = 0; d < nd; d++)
        mask[d] = axes == NULL;
    if (!axes)
        return PGD_OK;
    if (naxes < 0 || naxes > PGD_MAX_DIMS)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "%s: naxes %d is outside 0..%d", op,
                              naxes, PGD_MAX_DIMS);
    for (int i = 0; i < naxes; i++) {
        int a = axes[i] < 0 ? axes[i] + nd : axes[i];
        if (axes[i] < -nd || axes[i] >= nd)
            return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                                  "%s: axis %d is out of range for x of rank %d (-%d..%d)", op,
                                  axes[i], nd, nd, nd - 1);
        if (mask[a])
            return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                                  "%s: axis %d is given twice (axes[%d] = %d)", op, a, i, axes[i]);
        mask[a] = 1;
    }
    return PGD_OK;
}

/* Checks x, the axes and y; fills the kept and reduced geometries and their element counts. */
static int reduce_setup(const char *op, int opc, const pgd_tensor *x, const int *axes, int naxes,
                        int keepdims, const pgd_tensor *y, pass *p, pgd_error **err)
{
    int mask[PGD_MAX_DIMS], nd = pgd_tensor_get_ndim(x), ny = 0;
    int rc = too_large(x, op, "x", err);
    if (!rc)
        rc = reduce_mask(op, x, axes, naxes, mask, err);
    if (rc)
        return rc;
    int64_t yshape[PGD_MAX_DIMS], nout = 1, nred = 1;
    memset(p, 0, sizeof *p);
    for (int d = nd - 1; d >= 0; d--) {
        int64_t s = pgd_tensor_get_dim(x, d), st = pgd_tensor_get_stride(x, d);
        geo_push(mask[d] ? &p->red : &p->kept, 1, s, &st);
        *(mask[d] ? &nred : &nout) *= s;
    }
    for (int d = 0; d < nd; d++)
        if (!mask[d] || keepdims)
            yshape[ny++] = mask[d] ? 1 : pgd_tensor_get_dim(x, d);
    if ((rc = pgd__check_out_shape(op, y, ny, yshape, "reducing x gives", err)))
        return rc;
    int arg = opc == PGD_REDUCE_ARGMAX || opc == PGD_REDUCE_ARGMIN;
    if (arg && nred > (INT64_C(1) << 24))
        return pgd__error_set(err, PGD_ERR_TOO_LARGE,
                              "%s: %lld elements to reduce; the float index holds at most 2^24", op,
                              (long long)nred);
    int identity = opc == PGD_REDUCE_SUM || opc == PGD_REDUCE_MEAN || opc == PGD_REDUCE_PROD;
    if (nred == 0 && !identity) { /* even with nothing to write into, as NumPy */
        char sx[128];
        return pgd__error_set(err, PGD_ERR_SHAPE,
                              "%s: x %s has no elements along the reduced axes, and %s of "
                              "nothing is undefined",
                              op, pgd_tensor_shape_str(x, sx, sizeof sx), op);
    }
    p->nout = (cl_uint)nout;
    p->nred = (cl_uint)nred;
    for (int d = p->kept.rank; d < PGD_MAX_DIMS; d++)
        p->kept.shape[d] = 1;
    for (int d = p->red.rank; d < PGD_MAX_DIMS; d++)
        p->red.shape[d] = 1;
    return PGD_OK;
}

/* A scratch tensor of n floats (or indices) from the pool. */
static int scratch(pgd_ctx *ctx, cl_uint n, pgd_tensor **t, pgd_error **err)
{
    int64_t shape[1] = {n};
    return pgd_tensor_create(ctx, 1, shape, t, err);
}

/* The passes: x in parts of CHUNK elements, then the parts' results in parts again, until one
 * part is left per output element. */
static int reduce_run(pgd_ctx *ctx, int op, pass *p, pgd_tensor *y, pgd_error **err)
{
    int arg = op == PGD_REDUCE_ARGMAX || op == PGD_REDUCE_ARGMIN, rc = PGD_OK;
    float div = op == PGD_REDUCE_MEAN ? (float)p->nred : 1.0f;
    pgd_tensor *in_v = NULL, *in_i = NULL;
    for (;;) {
        p->parts = (p->nred + CHUNK - 1) / CHUNK;
        p->last = p->parts == 1;
        pgd_tensor *out_v = NULL, *out_i = NULL;
        if (!p->last) {
            rc = scratch(ctx, p->nout * p->parts, &out_v, err);
            if (!rc && arg)
                rc = scratch(ctx, p->nout * p->parts, &out_i, err);
        }
        p->y = p->last ? y->buf : out_v ? out_v->buf : NULL;
        p->yi = out_i ? out_i->buf : NULL;
        if (!rc)
            rc = reduce_pass(ctx, op, p, div, err);
        /* The queue runs in order: a scratch buffer back in the pool is reused only by later
         * launches. */
        pgd_tensor_destroy(in_v);
        pgd_tensor_destroy(in_i);
        in_v = out_v;
        in_i = out_i;
        if (rc || p->last)
            break;
        /* The next pass reduces the [nout, parts] results along their last axis. */
        p->x = in_v->buf;
        p->xi = in_i ? in_i->buf : NULL;
        memset(&p->kept, 0, sizeof p->kept);
        memset(&p->red, 0, sizeof p->red);
        int64_t st = p->parts, one = 1;
        geo_push(&p->red, 1, p->parts, &one);
        geo_push(&p->kept, 1, p->nout, &st);
        for (int d = 0; d < PGD_MAX_DIMS; d++) {
            p->kept.shape[d] = d < p->kept.rank ? p->kept.shape[d] : 1;
            p->red.shape[d] = d < p->red.rank ? p->red.shape[d] : 1;
        }
        p->nred = p->parts;
    }
    pgd_tensor_destroy(in_v);
    pgd_tensor_destroy(in_i);
    return rc;
}

int pgd_reduce(pgd_ctx *ctx, pgd_reduce_op op, const pgd_tensor *x, const int *axes, int naxes,
               int keepdims, pgd_tensor *y, pgd_error **err)
{
    if ((int)op < 0 || (int)op >= (int)(sizeof reduce_names / sizeof *reduce_names))
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "reduce: op %d is not a pgd_reduce_op (0..6)", (int)op);
    const char *name = reduce_names[op];
    if (x->buf == y->buf)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "%s: y must not alias x", name);
    pass p;
    int rc = reduce_setup(name, (int)op, x, axes, naxes, keepdims, y, &p, err);
    if (rc || p.nout == 0)
        return rc;
    if (p.nred == 0) /* only sum, mean and prod get here */
        return pgd_tensor_fill(y,
                               op == PGD_REDUCE_SUM    ? 0.0f
                               : op == PGD_REDUCE_PROD ? 1.0f
                                                       : NAN,
                               err);
    p.x = x->buf;
    return reduce_run(ctx, (int)op, &p, y, err);
}
