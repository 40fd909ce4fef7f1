/* layout.c — launchers for cl/layout.cl: transpose, slice, concat, gather, pad, depth-to-space
 * and space-to-depth, with the semantics of ONNX's operators (which follow NumPy's).
 *
 * Everything but gather and pad is one strided copy: an output shape, and for the source and
 * the destination a start offset and a signed element stride per dim. The copies share one
 * geometry: dims of size 1 dropped and neighbouring dims merged where both operands walk
 * contiguously across them, so that a transpose of the two last dims reaches the kernel as
 * three dims whatever the rank, and a concat of contiguous blocks as two. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Offsets are ints in the kernels: every operand at most this many elements. */
#define MAX_ELEMS ((int64_t)INT32_MAX)

/* The copy's dims, innermost first, with the source's and destination's strides. */
typedef struct copy_geo {
    int rank;
    int64_t shape[PGD_MAX_DIMS];
    int64_t st[2][PGD_MAX_DIMS];
} copy_geo;

/* The geometry of a copy over `shape` (nd dims, outermost first) with the source's strides sx
 * and the destination's sy (element strides, outermost first). */
static void copy_geo_make(int nd, const int64_t *shape, const int64_t *sx, const int64_t *sy,
                          copy_geo *g)
{
    memset(g, 0, sizeof *g);
    for (int d = nd - 1; d >= 0; d--) {
        if (shape[d] == 1)
            continue;
        if (g->rank > 0) {
            int r = g->rank - 1;
            if (g->st[0][r] * g->shape[r] == sx[d] && g->st[1][r] * g->shape[r] == sy[d]) {
                g->shape[r] *= shape[d];
                continue;
            }
        }
        g->shape[g->rank] = shape[d];
        g->st[0][g->rank] = sx[d];
        g->st[1][g->rank] = sy[d];
        g->rank++;
    }
}

static int too_large(const pgd_tensor *t, const char *op, const char *what, pgd_error **err)
{
    if (pgd_tensor_get_numel(t) <= MAX_ELEMS)
        return PGD_OK;
    char s[128];
    return pgd__error_set(err, PGD_ERR_TOO_LARGE, "%s: %s %s has more than 2^31 - 1 elements", op,
                          what, pgd_tensor_shape_str(t, s, sizeof s));
}

/* PGD_ERR_INVALID_ARGUMENT when y is x's buffer (the copies read x while writing y). */
static int check_distinct(const char *op, const pgd_tensor *x, const char *name,
                          const pgd_tensor *y, pgd_error **err)
{
    if (x->buf != y->buf)
        return PGD_OK;
    return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                          "%s: y must not be %s's memory (the copy reads %s while it writes y)", op,
                          name, name);
}

/* An axis in [-nd, nd) as a dim index in *out; PGD_ERR_INVALID_ARGUMENT naming it otherwise. */
static int norm_axis(const char *op, const char *what, int64_t axis, int nd, int *out,
                     pgd_error **err)
{
    if (axis < -nd || axis >= nd)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "%s: %s %lld is outside [-%d, %d) for a tensor of %d dims", op, what,
                              (long long)axis, nd, nd, nd);
    *out = (int)(axis < 0 ? axis + nd : axis);
    return PGD_OK;
}

static cl_uint8 uvec8(const int64_t *v, int n, int64_t fill)
{
    cl_uint8 r;
    for (int i = 0; i < 8; i++)
        r.s[i] = (cl_uint)(i < n ? v[i] : fill);
    return r;
}

static cl_int8 ivec8(const int64_t *v, int n)
{
    cl_int8 r;
    for (int i = 0; i < 8; i++)
        r.s[i] = (cl_int)(i < n ? v[i] : 0);
    return r;
}

/* One flat launch of `kernel` over count elements, its arguments set. */
static int launch_flat(pgd_ctx *ctx, cl_kernel k, const char *kernel, int64_t count,
                       pgd_error **err)
{
    size_t wg = pgd__flat_wg(ctx, k), global = pgd__round_up((size_t)count, wg);
    return pgd__enqueue(ctx, k, kernel, 1, &global, &wg, err);
}

/* The shortest innermost run that layout_copy_rows moves a work-item a row. */
#define ROWS_MIN 8

/* y[yoff + c·sy] = x[xoff + c·sx] over every coordinate c of shape (nd dims, outermost first).
 * The caller has checked that every offset lies inside its operand. */
static int strided_copy(pgd_ctx *ctx, const pgd_tensor *x, int64_t xoff, const int64_t *sx,
                        pgd_tensor *y, int64_t yoff, const int64_t *sy, int nd,
                        const int64_t *shape, pgd_error **err)
{
    int64_t count = 1;
    for (int d = 0; d < nd; d++)
        count *= shape[d];
    if (count == 0)
        return PGD_OK;
    copy_geo g;
    copy_geo_make(nd, shape, sx, sy, &g);
    /* Rows of at least ROWS_MIN contiguous elements on CPU-like devices: layout_copy_rows. */
    int by_rows = !ctx->dev.local_mem_dedicated && g.rank >= 2 && g.st[0][0] == 1 &&
                  g.st[1][0] == 1 && g.shape[0] >= ROWS_MIN;
    const char *name = by_rows ? "layout_copy_rows" : "layout_copy";
    cl_kernel k;
    pgd__args args;
    int rc = pgd__args_kernel(&args, ctx, "layout", NULL, name, &k, err);
    if (rc)
        return rc;
    pgd__arg_mem(&args, x->buf);
    pgd__arg_mem(&args, y->buf);
    cl_uint8 shp = uvec8(g.shape, g.rank, 1), dst = uvec8(g.st[1], g.rank, 0);
    cl_int8 src = ivec8(g.st[0], g.rank);
    pgd__arg(&args, sizeof shp, &shp);
    pgd__arg(&args, sizeof src, &src);
    pgd__arg(&args, sizeof dst, &dst);
    pgd__arg_int(&args, (cl_int)xoff);
    pgd__arg_uint(&args, (cl_uint)yoff);
    pgd__arg_uint(&args, (cl_uint)g.rank);
    int64_t items = by_rows ? count / g.shape[0] : count;
    pgd__arg_uint(&args, (cl_uint)items);
    if ((rc = pgd__args_end(&args, err)))
        return rc;
    return launch_flat(ctx, k, name, items, err);
}

/* The contiguous strides of a tensor's dims. */
static void strides_of(const pgd_tensor *t, int64_t *st)
{
    for (int d = 0; d < pgd_tensor_get_ndim(t); d++)
        st[d] = pgd_tensor_get_stride(t, d);
}

pgd_status pgd_transpose(pgd_ctx *ctx, const pgd_tensor *x, const int *perm, pgd_tensor *y,
                         pgd_error **err)
{
    int nd = pgd_tensor_get_ndim(x), seen[PGD_MAX_DIMS] = {0}, p[PGD_MAX_DIMS];
    for (int d = 0; d < nd; d++) {
        p[d] = perm ? perm[d] : nd - 1 - d;
        if (p[d] < 0 || p[d] >= nd || seen[p[d]]++)
            return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                                  "transpose: perm[%d] = %d: perm must name each of x's %d dims "
                                  "(0 to %d) once",
                                  d, p[d], nd, nd - 1);
    }
    int64_t shape[PGD_MAX_DIMS], sx[PGD_MAX_DIMS], sy[PGD_MAX_DIMS];
    for (int d = 0; d < nd; d++) {
        shape[d] = pgd_tensor_get_dim(x, p[d]);
        sx[d] = pgd_tensor_get_stride(x, p[d]);
    }
    int rc = too_large(x, "transpose", "x", err);
    if (!rc)
        rc = pgd__check_out_shape("transpose", y, nd, shape, "x permuted is", err);
    if (!rc)
        rc = check_distinct("transpose", x, "x", y, err);
    if (rc)
        return rc;
    strides_of(y, sy);
    return strided_copy(ctx, x, 0, sx, y, 0, sy, nd, shape, err);
}

pgd_status pgd_copy_strided(pgd_ctx *ctx, const pgd_tensor *x, int64_t offset, int nd,
                            const int64_t *shape, const int64_t *strides, pgd_tensor *y,
                            pgd_error **err)
{
    if (nd < 0 || nd > PGD_MAX_DIMS || (nd > 0 && (!shape || !strides)))
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "copy_strided: %d dims (0 to %d, with shape and strides)", nd,
                              PGD_MAX_DIMS);
    int rc = too_large(x, "copy_strided", "x", err);
    if (!rc)
        rc = pgd__check_out_shape("copy_strided", y, nd, shape, "the view is", err);
    if (!rc)
        rc = check_distinct("copy_strided", x, "x", y, err);
    if (rc)
        return rc;
    /* Every element addressed lies inside x: the first at offset, the last at offset plus the
     * sum of (dim - 1) * stride (strides are not negative). */
    int64_t last = offset, n = 1;
    for (int d = 0; d < nd; d++) {
        if (shape[d] < 0 || strides[d] < 0)
            return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                                  "copy_strided: dim %d has size %lld and stride %lld (neither "
                                  "may be negative)",
                                  d, (long long)shape[d], (long long)strides[d]);
        n *= shape[d];
        if (shape[d] > 0)
            last += (shape[d] - 1) * strides[d];
    }
    if (n > 0 && (offset < 0 || last >= pgd_tensor_get_numel(x)))
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "copy_strided: the view reaches element %lld of x, which has %lld",
                              (long long)last, (long long)pgd_tensor_get_numel(x));
    int64_t sy[PGD_MAX_DIMS];
    strides_of(y, sy);
    return strided_copy(ctx, x, offset, strides, y, 0, sy, nd, shape, err);
}

/* The start and count of one sliced axis of size n, clamped as Python and NumPy do (ONNX's
 * reference evaluator slices with NumPy): negative start and end count from the end, then
 * both are clamped to [0, n] with a positive step, to [-1, n - 1] with a negative one. */
static void slice_range(int64_t n, int64_t start, int64_t end, int64_t step, int64_t *first,
                        int64_t *count)
{
    int64_t lo = step > 0 ? 0 : -1, hi = step > 0 ? n : n - 1;
    start = start < 0 ? start + n : start;
    end = end < 0 ? end + n : end;
    start = start < lo ? lo : start > hi ? hi : start;
    end = end < lo ? lo : end > hi ? hi : end;
    if (step > 0)
        *count = end > start ? 1 + (end - start - 1) / step : 0;
    else
        *count = start > end ? 1 + (start - end - 1) / -step : 0;
    *first = *count ? start : 0;
}

pgd_status pgd_slice(pgd_ctx *ctx, const pgd_tensor *x, int n, const int *axes,
                     const int64_t *starts, const int64_t *ends, const int64_t *steps,
                     pgd_tensor *y, pgd_error **err)
{
    int nd = pgd_tensor_get_ndim(x), rc = too_large(x, "slice", "x", err);
    if (rc)
        return rc;
    if (n < 0 || n > nd || (n > 0 && (!starts || !ends)))
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "slice: %d axes for a tensor of %d dims (with starts and ends for "
                              "each)",
                              n, nd);
    int64_t shape[PGD_MAX_DIMS], sx[PGD_MAX_DIMS], sy[PGD_MAX_DIMS], off = 0;
    int done[PGD_MAX_DIMS] = {0};
    for (int d = 0; d < nd; d++) {
        shape[d] = pgd_tensor_get_dim(x, d);
        sx[d] = pgd_tensor_get_stride(x, d);
    }
    for (int i = 0; i < n; i++) {
        int a = 0;
        if ((rc = norm_axis("slice", "axis", axes ? axes[i] : i, nd, &a, err)))
            return rc;
        if (done[a]++)
            return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "slice: axis %d is named twice",
                                  axes ? axes[i] : i);
        int64_t step = steps ? steps[i] : 1, first, count;
        if (step == 0 || step == INT64_MIN)
            return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                                  "slice: the step of axis %d is %lld (it must not be 0)", a,
                                  (long long)step);
        slice_range(shape[a], starts[i], ends[i], step, &first, &count);
        off += first * sx[a];
        sx[a] = count > 1 ? sx[a] * step : 0; /* then |step| < the axis: no overflow */
        shape[a] = count;
    }
    if ((rc = pgd__check_out_shape("slice", y, nd, shape, "the slice of x is", err)) ||
        (rc = check_distinct("slice", x, "x", y, err)))
        return rc;
    strides_of(y, sy);
    return strided_copy(ctx, x, off, sx, y, 0, sy, nd, shape, err);
}

pgd_status pgd_concat(pgd_ctx *ctx, int n, const pgd_tensor *const *xs, int axis, pgd_tensor *y,
                      pgd_error **err)
{
    if (n < 1 || !xs)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "concat: no tensors to join (n %d)",
                              n);
    int nd = pgd_tensor_get_ndim(xs[0]), a = 0, rc;
    if (nd == 0)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "concat: the tensors are scalars (0 dims): nothing to join along");
    if ((rc = norm_axis("concat", "axis", axis, nd, &a, err)))
        return rc;
    int64_t shape[PGD_MAX_DIMS];
    for (int d = 0; d < nd; d++)
        shape[d] = pgd_tensor_get_dim(xs[0], d);
    shape[a] = 0;
    for (int i = 0; i < n; i++) {
        char what[32];
        snprintf(what, sizeof what, "xs[%d]", i);
        if ((rc = too_large(xs[i], "concat", what, err)) ||
            (rc = check_distinct("concat", xs[i], what, y, err)))
            return rc;
        int same = pgd_tensor_get_ndim(xs[i]) == nd;
        for (int d = 0; same && d < nd; d++)
            same = d == a || pgd_tensor_get_dim(xs[i], d) == pgd_tensor_get_dim(xs[0], d);
        if (!same)
            return pgd__shape_error(err, "concat",
                                    "every tensor must have xs[0]'s dims but along the axis", xs[i],
                                    xs[0]);
        shape[a] += pgd_tensor_get_dim(xs[i], a);
    }
    if ((rc = pgd__check_out_shape("concat", y, nd, shape, "the tensors joined are", err)) ||
        (rc = too_large(y, "concat", "y", err)))
        return rc;
    int64_t sy[PGD_MAX_DIMS], at = 0;
    strides_of(y, sy);
    for (int i = 0; i < n && !rc; i++) {
        int64_t sx[PGD_MAX_DIMS], part[PGD_MAX_DIMS];
        strides_of(xs[i], sx);
        for (int d = 0; d < nd; d++)
            part[d] = pgd_tensor_get_dim(xs[i], d);
        rc = strided_copy(ctx, xs[i], 0, sx, y, at * sy[a], sy, nd, part, err);
        at += part[a];
    }
    return rc;
}

/* The indices normalised into an int tensor of the context (its buffer holds int32s). */
static int gather_indices(pgd_ctx *ctx, const int64_t *indices, int64_t nidx, int64_t dim,
                          pgd_tensor **out, pgd_error **err)
{
    int32_t *h = malloc((size_t)nidx * sizeof *h);
    if (!h)
        return pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "gather: %lld indices",
                              (long long)nidx);
    for (int64_t j = 0; j < nidx; j++) {
        int64_t v = indices[j];
        if (v < -dim || v >= dim) {
            free(h);
            return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                                  "gather: indices[%lld] = %lld is outside [-%lld, %lld), the "
                                  "size of the gathered axis",
                                  (long long)j, (long long)v, (long long)dim, (long long)dim);
        }
        h[j] = (int32_t)(v < 0 ? v + dim : v);
    }
    int64_t shape[1] = {nidx};
    float *bits = malloc((size_t)nidx * sizeof *bits);
    int rc = PGD_ERR_OUT_OF_HOST_MEMORY;
    if (bits) {
        memcpy(bits, h, (size_t)nidx * sizeof *h); /* uploaded as 4-byte words, read as int */
        rc = pgd_tensor_create_from(ctx, 1, shape, bits, out, err);
    } else {
        pgd__error_set(err, rc, "gather: %lld indices", (long long)nidx);
    }
    free(bits);
    free(h);
    return rc;
}

pgd_status pgd_gather(pgd_ctx *ctx, const pgd_tensor *x, int axis, const int64_t *indices,
                      int idx_ndim, const int64_t *idx_shape, pgd_tensor *y, pgd_error **err)
{
    int nd = pgd_tensor_get_ndim(x), a = 0, rc;
    if (nd == 0)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "gather: x is a scalar (0 dims): no axis to gather along");
    if ((rc = norm_axis("gather", "axis", axis, nd, &a, err)) ||
        (rc = too_large(x, "gather", "x", err)))
        return rc;
    if (idx_ndim < 0 || nd - 1 + idx_ndim > PGD_MAX_DIMS || (idx_ndim > 0 && !idx_shape))
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "gather: indices of %d dims into x of %d dims give more than %d",
                              idx_ndim, nd, PGD_MAX_DIMS);
    int64_t shape[PGD_MAX_DIMS], nidx = 1, outer = 1, inner = 1, dim = pgd_tensor_get_dim(x, a);
    int k = 0;
    for (int d = 0; d < a; d++)
        outer *= shape[k++] = pgd_tensor_get_dim(x, d);
    for (int d = 0; d < idx_ndim; d++) {
        if (idx_shape[d] < 0 || (idx_shape[d] > 0 && nidx > MAX_ELEMS / idx_shape[d]))
            return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                                  "gather: index dim %d is %lld (at most 2^31 - 1 indices)", d,
                                  (long long)idx_shape[d]);
        nidx *= shape[k++] = idx_shape[d];
    }
    for (int d = a + 1; d < nd; d++)
        inner *= shape[k++] = pgd_tensor_get_dim(x, d);
    if (nidx > 0 && !indices)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "gather: indices is NULL");
    if ((rc = pgd__check_out_shape("gather", y, k, shape, "x gathered is", err)) ||
        (rc = check_distinct("gather", x, "x", y, err)) || (rc = too_large(y, "gather", "y", err)))
        return rc;
    pgd_tensor *idx = NULL;
    if (nidx > 0 && (rc = gather_indices(ctx, indices, nidx, dim, &idx, err)))
        return rc;
    int64_t count = outer * nidx * inner;
    if (count == 0) {
        pgd_tensor_destroy(idx);
        return PGD_OK;
    }
    cl_kernel kern;
    pgd__args args;
    if (!(rc = pgd__args_kernel(&args, ctx, "layout", NULL, "layout_gather", &kern, err))) {
        pgd__arg_mem(&args, x->buf);
        pgd__arg_mem(&args, idx->buf);
        pgd__arg_mem(&args, y->buf);
        pgd__arg_uint(&args, (cl_uint)dim);
        pgd__arg_uint(&args, (cl_uint)nidx);
        pgd__arg_uint(&args, (cl_uint)inner);
        pgd__arg_uint(&args, (cl_uint)count);
        if (!(rc = pgd__args_end(&args, err)))
            rc = launch_flat(ctx, kern, "layout_gather", count, err);
    }
    pgd_tensor_destroy(idx);
    return rc;
}

#define PAD_LIMIT ((int64_t)1 << 30)

static const char *const pad_modes[] = {"constant", "reflect", "edge", "wrap"};

/* The padded shape of x into shape; errors name the dim and pads that make no sense. */
static int pad_shape(const pgd_tensor *x, const int64_t *pads, pgd_pad_mode mode, int64_t *shape,
                     pgd_error **err)
{
    int nd = pgd_tensor_get_ndim(x);
    for (int d = 0; d < nd; d++) {
        int64_t n = pgd_tensor_get_dim(x, d), b = pads[d], e = pads[nd + d];
        /* The kernel's reflection period 2 (n - 1) and source coordinate c - before in int. */
        if (b < -PAD_LIMIT || b > PAD_LIMIT || e < -PAD_LIMIT || e > PAD_LIMIT ||
            n + (b < 0 ? -b : b) + (e < 0 ? -e : e) > PAD_LIMIT)
            return pgd__error_set(err, PGD_ERR_TOO_LARGE,
                                  "pad: dim %d of %lld padded by %lld before and %lld after: "
                                  "its size and pads add up beyond 2^30",
                                  d, (long long)n, (long long)b, (long long)e);
        shape[d] = n + b + e;
        if (shape[d] < 0)
            return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                                  "pad: dim %d of %lld with pads %lld before and %lld after would "
                                  "be %lld long",
                                  d, (long long)n, (long long)b, (long long)e, (long long)shape[d]);
        if (n == 0 && shape[d] > 0 && mode != PGD_PAD_CONSTANT)
            return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                                  "pad: dim %d of x is empty: %s padding has nothing to repeat "
                                  "(constant padding can)",
                                  d, pad_modes[mode]);
    }
    return PGD_OK;
}

pgd_status pgd_pad(pgd_ctx *ctx, const pgd_tensor *x, const int64_t *pads, pgd_pad_mode mode,
                   float value, pgd_tensor *y, pgd_error **err)
{
    int nd = pgd_tensor_get_ndim(x), rc;
    if ((int)mode < 0 || (int)mode > PGD_PAD_WRAP)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "pad: mode %d is not a pgd_pad_mode (0..3)", (int)mode);
    if (nd > 0 && !pads)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "pad: pads is NULL");
    int64_t shape[PGD_MAX_DIMS], count = 1;
    if ((rc = too_large(x, "pad", "x", err)) || (rc = pad_shape(x, pads, mode, shape, err)) ||
        (rc = pgd__check_out_shape("pad", y, nd, shape, "x padded is", err)) ||
        (rc = too_large(y, "pad", "y", err)) || (rc = check_distinct("pad", x, "x", y, err)))
        return rc;
    for (int d = 0; d < nd; d++)
        count *= shape[d];
    if (count == 0)
        return PGD_OK;
    /* The kernel's dims innermost first. */
    int64_t out[PGD_MAX_DIMS], before[PGD_MAX_DIMS], size[PGD_MAX_DIMS], st[PGD_MAX_DIMS];
    for (int d = 0; d < nd; d++) {
        out[nd - 1 - d] = shape[d];
        before[nd - 1 - d] = pads[d];
        size[nd - 1 - d] = pgd_tensor_get_dim(x, d);
        st[nd - 1 - d] = pgd_tensor_get_stride(x, d);
    }
    cl_kernel k;
    pgd__args args;
    if ((rc = pgd__args_kernel(&args, ctx, "layout", NULL, "layout_pad", &k, err)))
        return rc;
    cl_uint8 vo = uvec8(out, nd, 1), vn = uvec8(size, nd, 1), vs = uvec8(st, nd, 0);
    cl_int8 vb = ivec8(before, nd);
    pgd__arg_mem(&args, x->buf);
    pgd__arg_mem(&args, y->buf);
    pgd__arg(&args, sizeof vo, &vo);
    pgd__arg(&args, sizeof vb, &vb);
    pgd__arg(&args, sizeof vn, &vn);
    pgd__arg(&args, sizeof vs, &vs);
    pgd__arg_uint(&args, (cl_uint)nd);
    pgd__arg_int(&args, (cl_int)mode);
    pgd__arg_float(&args, value);
    pgd__arg_uint(&args, (cl_uint)count);
    if ((rc = pgd__args_end(&args, err)))
        return rc;
    return launch_flat(ctx, k, "layout_pad", count, err);
}

/* Checks x [N, C, H, W] for a block size; the sizes in *s. */
static int nchw_block(const char *op, const pgd_tensor *x, int block, int64_t *s, pgd_error **err)
{
    char sx[128];
    if (pgd_tensor_get_ndim(x) != 4)
        return pgd__error_set(err, PGD_ERR_SHAPE, "%s: x is %s, want [N, C, H, W]", op,
                              pgd_tensor_shape_str(x, sx, sizeof sx));
    if (block < 1)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "%s: the block size is %d (it must be at least 1)", op, block);
    for (int d = 0; d < 4; d++)
        s[d] = pgd_tensor_get_dim(x, d);
    return too_large(x, op, "x", err);
}

pgd_status pgd_depth_to_space(pgd_ctx *ctx, const pgd_tensor *x, int block, pgd_depth_mode mode,
                              pgd_tensor *y, pgd_error **err)
{
    int64_t s[4], b = block;
    int rc = nchw_block("depth_to_space", x, block, s, err);
    if (rc)
        return rc;
    char sx[128];
    if ((int)mode != PGD_DEPTH_DCR && (int)mode != PGD_DEPTH_CRD)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "depth_to_space: mode %d is not a pgd_depth_mode (0 DCR, 1 CRD)",
                              (int)mode);
    if (s[1] % (b * b))
        return pgd__error_set(err, PGD_ERR_SHAPE,
                              "depth_to_space: x is %s: its %lld channels are not a multiple of "
                              "the block size squared (%lld)",
                              pgd_tensor_shape_str(x, sx, sizeof sx), (long long)s[1],
                              (long long)(b * b));
    int64_t c = s[1] / (b * b), hw = s[2] * s[3];
    int64_t want[4] = {s[0], c, s[2] * b, s[3] * b};
    if ((rc = pgd__check_out_shape("depth_to_space", y, 4, want, "x rearranged is", err)) ||
        (rc = check_distinct("depth_to_space", x, "x", y, err)))
        return rc;
    /* y viewed as [N, C', H, b1, W, b2] (contiguous); x's channel is (b1·b + b2)·C' + c'
     * (DCR) or c'·b² + b1·b + b2 (CRD). */
    int64_t shape[6] = {s[0], c, s[2], b, s[3], b};
    int64_t dcr[6] = {s[1] * hw, hw, s[3], b * c * hw, 1, c * hw};
    int64_t crd[6] = {s[1] * hw, b * b * hw, s[3], b * hw, 1, hw};
    int64_t sy[6] = {c * hw * b * b, hw * b * b, s[3] * b * b, s[3] * b, b, 1};
    return strided_copy(ctx, x, 0, mode == PGD_DEPTH_DCR ? dcr : crd, y, 0, sy, 6, shape, err);
}

pgd_status pgd_space_to_depth(pgd_ctx *ctx, const pgd_tensor *x, int block, pgd_tensor *y,
                              pgd_error **err)
{
    int64_t s[4], b = block;
    int rc = nchw_block("space_to_depth", x, block, s, err);
    if (rc)
        return rc;
    char sx[128];
    if (s[2] % b || s[3] % b)
        return pgd__error_set(err, PGD_ERR_SHAPE,
                              "space_to_depth: x is %s: its height and width must be multiples "
                              "of the block size %lld",
                              pgd_tensor_shape_str(x, sx, sizeof sx), (long long)b);
    int64_t h = s[2] / b, w = s[3] / b, hw = s[2] * s[3];
    int64_t want[4] = {s[0], s[1] * b * b, h, w};
    if ((rc = pgd__check_out_shape("space_to_depth", y, 4, want, "x rearranged is", err)) ||
        (rc = check_distinct("space_to_depth", x, "x", y, err)))
        return rc;
    /* y viewed as [N, b1, b2, C, H', W'] (contiguous): x[n, c, h'·b + b1, w'·b + b2]. */
    int64_t shape[6] = {s[0], b, b, s[1], h, w};
    int64_t sx6[6] = {s[1] * hw, s[3], 1, hw, b * s[3], b};
    int64_t sy[6] = {b * b * s[1] * h * w, b * s[1] * h * w, s[1] * h * w, h * w, w, 1};
    return strided_copy(ctx, x, 0, sx6, y, 0, sy, 6, shape, err);
}
