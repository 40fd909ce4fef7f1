/* norm.c — launchers for cl/norm.cl: LayerNorm, softmax, GELU, ReLU and bias add over the
 * last dim of a tensor. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static int64_t last_dim(const pgd_tensor *t)
{
    return t->ndim ? t->shape[t->ndim - 1] : 1;
}

/* Checks the rules every op here shares: y has x's shape and x fits the 32-bit indices of
 * the kernels. */
static int check_xy(const pgd_tensor *x, const pgd_tensor *y, const char *op, pgd_error **err)
{
    if (!x || !y)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "%s: x and y are required", op);
    if (!pgd__shape_equal(x, y))
        return pgd__shape_error(err, op, "output shape differs from input", x, y);
    if (pgd_tensor_get_numel(x) > (int64_t)UINT32_MAX)
        return pgd__error_set(err, PGD_ERR_TOO_LARGE, "%s: more than 2^32 elements", op);
    return PGD_OK;
}

/* A vector of the last dim's length (w, b, bias): 1-D [cols], nothing else. */
static int check_vec(const pgd_tensor *x, const pgd_tensor *v, const char *op, const char *name,
                     pgd_error **err)
{
    if (v->ndim != 1 || v->shape[0] != last_dim(x)) {
        char what[96];
        snprintf(what, sizeof what, "%s must be 1-D with one element per entry of the last dim",
                 name);
        return pgd__shape_error(err, op, what, x, v);
    }
    return PGD_OK;
}

/* Work-group size of a row kernel (one group per row, a power-of-two tree reduction over a
 * __local scratch of one float per item): the largest power of two that the compiled kernel,
 * the device's first work-item dimension and its local memory (after what the kernel itself
 * uses) accept, but no larger than the row needs. */
static size_t row_wg(pgd_ctx *ctx, cl_kernel k, int64_t cols)
{
    size_t limit = pgd__kernel_info(ctx, k, CL_KERNEL_WORK_GROUP_SIZE);
    if (limit == 0 || limit > ctx->dev.max_work_group)
        limit = ctx->dev.max_work_group;
    if (limit > ctx->dev.max_work_item[0])
        limit = ctx->dev.max_work_item[0];
    uint64_t used = pgd__kernel_info(ctx, k, CL_KERNEL_LOCAL_MEM_SIZE);
    uint64_t room = ctx->dev.local_mem > used ? ctx->dev.local_mem - used : 0;
    if (limit > room / sizeof(float))
        limit = (size_t)(room / sizeof(float));
    if (limit == 0)
        limit = 1;
    limit = pgd__pow2_floor(limit);
    /* Where local memory is emulated (CPUs, llvmpipe) a work-group is a loop on one core and
     * each barrier is a pass over all its items: two SIMD widths of items (at least 4) keep the
     * loops vectorised and the barriers cheap. On PoCL 3.1 a [1576, 768] LayerNorm took 28 ms
     * with 1024 items per row and 2.5 ms with 16. */
    long forced = ctx->knobs.row_wg;
    if (forced > 0) {
        /* A development and test knob: an upper bound on the work-group size of the row
         * kernels that replaces the cap below, so CPU runs can exercise the wide reductions a
         * GPU uses (still within the device's and the kernel's limits). */
        if (limit > (size_t)forced)
            limit = pgd__pow2_floor((size_t)forced);
    } else if (!ctx->dev.local_mem_dedicated) {
        size_t simd = ctx->dev.pref_vector_float ? ctx->dev.pref_vector_float : 1;
        size_t cap = pgd__pow2_floor(simd * 2 > 4 ? simd * 2 : 4);
        if (limit > cap)
            limit = cap;
    }
    size_t need = 1;
    while (need < (size_t)cols && need < limit)
        need *= 2;
    return need;
}

pgd_status pgd_layernorm(pgd_ctx *ctx, const pgd_tensor *x, const pgd_tensor *w,
                         const pgd_tensor *b, float eps, pgd_tensor *y, pgd_error **err)
{
    int rc = check_xy(x, y, "layernorm", err);
    if (rc)
        return rc;
    if ((w == NULL) != (b == NULL))
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "layernorm: give both weight and bias, or neither");
    if (w && ((rc = check_vec(x, w, "layernorm", "weight", err)) ||
              (rc = check_vec(x, b, "layernorm", "bias", err))))
        return rc;
    if (!(eps >= 0.0f))
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "layernorm: eps must be non-negative, got %g", (double)eps);
    int64_t numel = pgd_tensor_get_numel(x);
    if (numel == 0)
        return PGD_OK;
    cl_kernel k;
    pgd__args args;
    cl_uint cols = (cl_uint)last_dim(x), affine = w != NULL;
    /* Devices without dedicated local memory (CPU runtimes, llvmpipe), where a work-group is
     * a loop on one core and a group a row costs more to schedule than the row takes, get a row
     * a work-item, LVW floats a step: a [1576, 768] LayerNorm 2.66 -> 0.21 ms on PoCL,
     * 1.9-7.4 -> 0.28 ms on Intel's runtime, 21 -> 16 ms on llvmpipe. */
    int lvw = cols % 16 == 0 ? 16 : cols % 8 == 0 ? 8 : cols % 4 == 0 ? 4 : 0;
    if (lvw && !ctx->dev.local_mem_dedicated && ctx->knobs.row_wg <= 0) {
        char opts[32];
        snprintf(opts, sizeof opts, "-DLVW=%d", lvw);
        if ((rc = pgd__args_kernel(&args, ctx, "norm", opts, "layernorm_vec", &k, err)))
            return rc;
        cl_mem wb = w ? w->buf : x->buf, bb = b ? b->buf : x->buf;
        cl_uint rows = (cl_uint)(numel / cols);
        pgd__arg_mem(&args, x->buf);
        pgd__arg_mem(&args, wb);
        pgd__arg_mem(&args, bb);
        pgd__arg_mem(&args, y->buf);
        pgd__arg_uint(&args, rows);
        pgd__arg_uint(&args, cols);
        pgd__arg_float(&args, eps);
        pgd__arg_uint(&args, affine);
        if ((rc = pgd__args_end(&args, err)))
            return rc;
        size_t lx = 8, global = pgd__round_up((size_t)rows, lx);
        return pgd__enqueue(ctx, k, "layernorm_vec", 1, &global, &lx, err);
    }
    if ((rc = pgd__args_kernel(&args, ctx, "norm", NULL, "layernorm_rows", &k, err)))
        return rc;
    size_t rows = (size_t)(numel / cols), wg = row_wg(ctx, k, cols);
    /* Unused weight and bias arguments still need a valid buffer: pass x's. */
    cl_mem wb = w ? w->buf : x->buf, bb = b ? b->buf : x->buf;
    pgd__arg_mem(&args, x->buf);
    pgd__arg_mem(&args, wb);
    pgd__arg_mem(&args, bb);
    pgd__arg_mem(&args, y->buf);
    pgd__arg_uint(&args, cols);
    pgd__arg_float(&args, eps);
    pgd__arg_uint(&args, affine);
    pgd__arg_local(&args, wg * sizeof(float));
    if ((rc = pgd__args_end(&args, err)))
        return rc;
    size_t global = rows * wg;
    return pgd__enqueue(ctx, k, "layernorm_rows", 1, &global, &wg, err);
}

static int softmax_like(pgd_ctx *ctx, const char *kernel, cl_mem x, cl_mem y, int64_t rows,
                        int64_t cols, float scale, pgd_error **err);

pgd_status pgd_softmax(pgd_ctx *ctx, const pgd_tensor *x, float scale, pgd_tensor *y,
                       pgd_error **err)
{
    int rc = check_xy(x, y, "softmax", err);
    if (rc)
        return rc;
    int64_t numel = pgd_tensor_get_numel(x);
    if (numel == 0)
        return PGD_OK;
    int64_t cols = last_dim(x);
    return softmax_like(ctx, "softmax_rows", x->buf, y->buf, numel / cols, cols, scale, err);
}

static int unary(pgd_ctx *ctx, const pgd_tensor *x, pgd_tensor *y, const char *op,
                 const char *kernel, pgd_error **err)
{
    int rc = check_xy(x, y, op, err);
    if (rc)
        return rc;
    cl_uint n = (cl_uint)pgd_tensor_get_numel(x);
    if (n == 0)
        return PGD_OK;
    cl_kernel k;
    pgd__args args;
    if ((rc = pgd__args_kernel(&args, ctx, "norm", NULL, kernel, &k, err)))
        return rc;
    pgd__arg_mem(&args, x->buf);
    pgd__arg_mem(&args, y->buf);
    pgd__arg_uint(&args, n);
    if ((rc = pgd__args_end(&args, err)))
        return rc;
    size_t wg = pgd__flat_wg(ctx, k), global = pgd__round_up(n, wg);
    return pgd__enqueue(ctx, k, kernel, 1, &global, &wg, err);
}

pgd_status pgd_gelu(pgd_ctx *ctx, const pgd_tensor *x, pgd_tensor *y, int tanh_form,
                    pgd_error **err)
{
    return unary(ctx, x, y, tanh_form ? "gelu (tanh form)" : "gelu",
                 tanh_form ? "gelu_tanh" : "gelu_erf", err);
}

pgd_status pgd_relu(pgd_ctx *ctx, const pgd_tensor *x, pgd_tensor *y, pgd_error **err)
{
    return unary(ctx, x, y, "relu", "relu", err);
}

pgd_status pgd_bias_add(pgd_ctx *ctx, const pgd_tensor *x, const pgd_tensor *bias, pgd_tensor *y,
                        pgd_error **err)
{
    int rc = check_xy(x, y, "bias_add", err);
    if (rc)
        return rc;
    if (!bias)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "bias_add: bias is required");
    if ((rc = check_vec(x, bias, "bias_add", "bias", err)))
        return rc;
    cl_uint n = (cl_uint)pgd_tensor_get_numel(x), cols = (cl_uint)last_dim(x);
    if (n == 0)
        return PGD_OK;
    cl_kernel k;
    pgd__args args;
    if ((rc = pgd__args_kernel(&args, ctx, "norm", NULL, "bias_add", &k, err)))
        return rc;
    pgd__arg_mem(&args, x->buf);
    pgd__arg_mem(&args, bias->buf);
    pgd__arg_mem(&args, y->buf);
    pgd__arg_uint(&args, cols);
    pgd__arg_uint(&args, n);
    if ((rc = pgd__args_end(&args, err)))
        return rc;
    size_t wg = pgd__flat_wg(ctx, k), global = pgd__round_up(n, wg);
    return pgd__enqueue(ctx, k, "bias_add", 1, &global, &wg, err);
}

/* ---- normalisation over any axis ---- */

/* A contiguous handle over t's buffer as [rows, cols] (a view for the row kernels; never
 * destroyed). */
static pgd_tensor view2(const pgd_tensor *t, int64_t rows, int64_t cols)
{
    pgd_tensor v = *t;
    v.ndim = 2;
    v.shape[0] = rows;
    v.shape[1] = cols;
    v.stride[0] = cols;
    v.stride[1] = 1;
    return v;
}

/* axis in [-ndim, ndim) of x as a dim index; the products of the dims before it (*outer), of
 * it and the dims after (*from: the trailing group), and of the dims after it (*inner). */
static int split_axis(const pgd_tensor *x, int axis, const char *op, int *a, int64_t *outer,
                      int64_t *from, int64_t *inner, pgd_error **err)
{
    int nd = x->ndim;
    if (axis < -nd || axis >= nd)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "%s: axis %d is outside [-%d, %d) for x of %d dims", op, axis, nd, nd,
                              nd);
    *a = axis < 0 ? axis + nd : axis;
    *outer = *inner = 1;
    for (int d = 0; d < nd; d++) {
        if (d < *a)
            *outer *= x->shape[d];
        if (d > *a)
            *inner *= x->shape[d];
    }
    *from = x->shape[*a] * *inner;
    return PGD_OK;
}

/* Rows at most this long run softmax_short (a work-item a row) where local memory is emulated:
 * a work-group a row with its barriers cost a few microseconds a row there (PoCL 3.1, Xeon:
 * Swin-T's [64·3·49, 49] window scores took 24.6 ms a call; see softmax_short). */
#define SHORT_ROW_COLS 256

static int softmax_short(pgd_ctx *ctx, int log, cl_mem x, cl_mem y, int64_t rows, int64_t cols,
                         float scale, pgd_error **err)
{
    cl_kernel k;
    pgd__args args;
    int rc = pgd__args_kernel(&args, ctx, "norm", NULL, "softmax_short", &k, err);
    if (rc)
        return rc;
    pgd__arg_mem(&args, x);
    pgd__arg_mem(&args, y);
    pgd__arg_uint(&args, (cl_uint)cols);
    pgd__arg_float(&args, scale);
    pgd__arg_uint(&args, (cl_uint)rows);
    pgd__arg_uint(&args, (cl_uint)(log != 0));
    if ((rc = pgd__args_end(&args, err)))
        return rc;
    size_t wg = pgd__flat_wg(ctx, k), global = pgd__round_up((size_t)rows, wg);
    return pgd__enqueue(ctx, k, "softmax_short", 1, &global, &wg, err);
}

/* One row kernel over [rows, cols] with the arguments (x, y, cols, scale, scratch), or
 * softmax_short for short rows where local memory is emulated. */
static int softmax_like(pgd_ctx *ctx, const char *kernel, cl_mem x, cl_mem y, int64_t rows,
                        int64_t cols, float scale, pgd_error **err)
{
    if (!ctx->dev.local_mem_dedicated && cols <= SHORT_ROW_COLS && ctx->knobs.row_wg <= 0)
        return softmax_short(ctx, !strcmp(kernel, "log_softmax_rows"), x, y, rows, cols, scale,
                             err);
    cl_kernel k;
    pgd__args args;
    int rc = pgd__args_kernel(&args, ctx, "norm", NULL, kernel, &k, err);
    if (rc)
        return rc;
    size_t wg = row_wg(ctx, k, cols);
    pgd__arg_mem(&args, x);
    pgd__arg_mem(&args, y);
    pgd__arg_uint(&args, (cl_uint)cols);
    pgd__arg_float(&args, scale);
    pgd__arg_local(&args, wg * sizeof(float));
    if ((rc = pgd__args_end(&args, err)))
        return rc;
    size_t global = (size_t)rows * wg;
    return pgd__enqueue(ctx, k, kernel, 1, &global, &wg, err);
}

pgd_status pgd_softmax_axis(pgd_ctx *ctx, const pgd_tensor *x, int axis, float scale, int log,
                            pgd_tensor *y, pgd_error **err)
{
    const char *op = log ? "log_softmax" : "softmax";
    int a = 0, rc = check_xy(x, y, op, err);
    int64_t outer = 0, from = 0, inner = 0;
    if (rc || (rc = split_axis(x, axis, op, &a, &outer, &from, &inner, err)))
        return rc;
    const char *kernel = log ? "log_softmax_rows" : "softmax_rows";
    int64_t n = x->shape[a];
    if (pgd_tensor_get_numel(x) == 0)
        return PGD_OK;
    if (inner == 1)
        return softmax_like(ctx, kernel, x->buf, y->buf, outer, n, scale, err);
    /* The axis moved last, the rows done in place, and moved back: two copies, but the one
     * fused and tested row kernel (a strided row would walk memory inner floats apart). */
    int64_t ts[3] = {outer, inner, n}, xs[3] = {outer, n, inner};
    static const int swap[3] = {0, 2, 1};
    pgd_tensor *t = NULL, xv = *x, yv = *y;
    pgd_tensor_reshape(&xv, 3, xs, NULL);
    pgd_tensor_reshape(&yv, 3, xs, NULL);
    if ((rc = pgd_tensor_create(ctx, 3, ts, &t, err)))
        return rc;
    rc = pgd_transpose(ctx, &xv, swap, t, err);
    if (!rc)
        rc = softmax_like(ctx, kernel, t->buf, t->buf, outer * inner, n, scale, err);
    if (!rc)
        rc = pgd_transpose(ctx, t, swap, &yv, err);
    pgd_tensor_destroy(t);
    return rc;
}

/* w (or b) for the trailing group x.shape[a:]: those dims exactly, or 1-D of their product. */
static int check_group(const pgd_tensor *x, int a, int64_t from, const pgd_tensor *v,
                       const char *op, const char *name, pgd_error **err)
{
    int same = v->ndim == x->ndim - a;
    for (int d = 0; same && d < v->ndim; d++)
        same = v->shape[d] == x->shape[a + d];
    if (same || (v->ndim == 1 && v->shape[0] == from))
        return PGD_OK;
    char what[128];
    snprintf(what, sizeof what, "%s must have x's dims from axis %d on", name, a);
    return pgd__shape_error(err, op, what, x, v);
}

/* A statistics output: outer elements, x's dims before axis a then any 1s, or NULL. */
static int check_stats(const pgd_tensor *x, int a, int64_t outer, const pgd_tensor *s,
                       const char *name, pgd_error **err)
{
    int ok = !s || pgd_tensor_get_numel(s) == outer;
    for (int d = 0; s && ok && d < s->ndim; d++)
        ok = d < a ? s->shape[d] == x->shape[d] : s->shape[d] == 1;
    if (ok && s && s->ndim < a)
        ok = 0;
    if (ok)
        return PGD_OK;
    char what[128];
    snprintf(what, sizeof what, "%s must have x's dims before axis %d (then any 1s)", name, a);
    return pgd__shape_error(err, "layernorm", what, x, s);
}

pgd_status pgd_layernorm_axis(pgd_ctx *ctx, const pgd_tensor *x, int axis, const pgd_tensor *w,
                              const pgd_tensor *b, float eps, pgd_tensor *y, pgd_tensor *mean,
                              pgd_tensor *rstd, pgd_error **err)
{
    int a = 0, rc = check_xy(x, y, "layernorm", err);
    int64_t outer = 0, from = 0, inner = 0;
    if (rc || (rc = split_axis(x, axis, "layernorm", &a, &outer, &from, &inner, err)))
        return rc;
    if ((w == NULL) != (b == NULL))
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "layernorm: give both weight and bias, or neither");
    if ((w && ((rc = check_group(x, a, from, w, "layernorm", "weight", err)) ||
               (rc = check_group(x, a, from, b, "layernorm", "bias", err)))) ||
        (rc = check_stats(x, a, outer, mean, "mean", err)) ||
        (rc = check_stats(x, a, outer, rstd, "rstd", err)))
        return rc;
    if ((mean == NULL) != (rstd == NULL))
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "layernorm: give both mean and rstd, or neither");
    if (!(eps >= 0.0f))
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "layernorm: eps must be non-negative, got %g", (double)eps);
    if (mean && from == 0 && outer > 0)
        return pgd__error_set(err, PGD_ERR_SHAPE,
                              "layernorm: x's dims from axis %d on hold no elements: no mean or "
                              "rstd to give",
                              a);
    if (pgd_tensor_get_numel(x) == 0)
        return PGD_OK;
    if (mean) { /* first: y may be x */
        cl_kernel k;
        pgd__args args;
        if ((rc = pgd__args_kernel(&args, ctx, "norm", NULL, "layernorm_stats", &k, err)))
            return rc;
        size_t wg = row_wg(ctx, k, from), global = (size_t)outer * wg;
        pgd__arg_mem(&args, x->buf);
        pgd__arg_mem(&args, mean->buf);
        pgd__arg_mem(&args, rstd->buf);
        pgd__arg_uint(&args, (cl_uint)from);
        pgd__arg_float(&args, eps);
        pgd__arg_local(&args, wg * sizeof(float));
        if ((rc = pgd__args_end(&args, err)) ||
            (rc = pgd__enqueue(ctx, k, "layernorm_stats", 1, &global, &wg, err)))
            return rc;
    }
    pgd_tensor xv = view2(x, outer, from), yv = view2(y, outer, from), wv, bv;
    if (w) {
        wv = view2(w, 1, from);
        bv = view2(b, 1, from);
        wv.ndim = bv.ndim = 1;
        wv.shape[0] = bv.shape[0] = from;
    }
    return pgd_layernorm(ctx, &xv, w ? &wv : NULL, b ? &bv : NULL, eps, &yv, err);
}

pgd_status pgd_rmsnorm(pgd_ctx *ctx, const pgd_tensor *x, int axis, const pgd_tensor *w, float eps,
                       pgd_tensor *y, pgd_error **err)
{
    int a = 0, rc = check_xy(x, y, "rmsnorm", err);
    int64_t outer = 0, from = 0, inner = 0;
    if (rc || (rc = split_axis(x, axis, "rmsnorm", &a, &outer, &from, &inner, err)) ||
        (w && (rc = check_group(x, a, from, w, "rmsnorm", "weight", err))))
        return rc;
    if (!(eps >= 0.0f))
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "rmsnorm: eps must be non-negative, got %g", (double)eps);
    if (pgd_tensor_get_numel(x) == 0)
        return PGD_OK;
    cl_kernel k;
    pgd__args args;
    if ((rc = pgd__args_kernel(&args, ctx, "norm", NULL, "rmsnorm_rows", &k, err)))
        return rc;
    size_t wg = row_wg(ctx, k, from), global = (size_t)outer * wg;
    pgd__arg_mem(&args, x->buf);
    pgd__arg_mem(&args, w ? w->buf : x->buf); /* not read without affine */
    pgd__arg_mem(&args, y->buf);
    pgd__arg_uint(&args, (cl_uint)from);
    pgd__arg_float(&args, eps);
    pgd__arg_uint(&args, w != NULL);
    pgd__arg_local(&args, wg * sizeof(float));
    if ((rc = pgd__args_end(&args, err)))
        return rc;
    return pgd__enqueue(ctx, k, "rmsnorm_rows", 1, &global, &wg, err);
}

/* x [N, C, ...]: *channels = C, *inner = the product of the dims after C. */
static int check_nc(const pgd_tensor *x, const char *op, int64_t *channels, int64_t *inner,
                    pgd_error **err)
{
    char s[128];
    if (x->ndim < 2)
        return pgd__error_set(err, PGD_ERR_SHAPE, "%s: x is %s, want [N, C, ...] (2 dims or more)",
                              op, pgd_tensor_shape_str(x, s, sizeof s));
    *channels = x->shape[1];
    *inner = 1;
    for (int d = 2; d < x->ndim; d++)
        *inner *= x->shape[d];
    return PGD_OK;
}

/* A per-channel vector: 1-D [C]. */
static int check_channel_vec(const pgd_tensor *x, const pgd_tensor *v, int64_t channels,
                             const char *op, const char *name, pgd_error **err)
{
    if (!v)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "%s: %s is required", op, name);
    if (v->ndim == 1 && v->shape[0] == channels)
        return PGD_OK;
    char what[96];
    snprintf(what, sizeof what, "%s must be 1-D [C], one per channel (x's dim 1)", name);
    return pgd__shape_error(err, op, what, x, v);
}

/* channel_norm over x [N, C, inner] into y: with mean and var the batch-norm form, without
 * them the affine step alone. */
static int channel_norm(pgd_ctx *ctx, const pgd_tensor *x, const pgd_tensor *mean,
                        const pgd_tensor *var, const pgd_tensor *w, const pgd_tensor *b, float eps,
                        int64_t channels, int64_t inner, pgd_tensor *y, pgd_error **err)
{
    cl_uint n = (cl_uint)pgd_tensor_get_numel(x);
    if (n == 0)
        return PGD_OK;
    cl_kernel k;
    pgd__args args;
    int rc = pgd__args_kernel(&args, ctx, "norm", NULL, "channel_norm", &k, err);
    if (rc)
        return rc;
    pgd__arg_mem(&args, x->buf);
    pgd__arg_mem(&args, y->buf);
    pgd__arg_mem(&args, mean ? mean->buf : w->buf); /* not read without the statistics */
    pgd__arg_mem(&args, var ? var->buf : w->buf);
    pgd__arg_mem(&args, w->buf);
    pgd__arg_mem(&args, b->buf);
    pgd__arg_float(&args, eps);
    pgd__arg_uint(&args, (cl_uint)channels);
    pgd__arg_uint(&args, (cl_uint)inner);
    pgd__arg_uint(&args, n);
    pgd__arg_uint(&args, mean != NULL);
    if ((rc = pgd__args_end(&args, err)))
        return rc;
    size_t wg = pgd__flat_wg(ctx, k), global = pgd__round_up(n, wg);
    return pgd__enqueue(ctx, k, "channel_norm", 1, &global, &wg, err);
}

pgd_status pgd_batch_norm(pgd_ctx *ctx, const pgd_tensor *x, const pgd_tensor *mean,
                          const pgd_tensor *var, const pgd_tensor *w, const pgd_tensor *b,
                          float eps, pgd_tensor *y, pgd_error **err)
{
    int64_t channels = 0, inner = 0;
    int rc = check_xy(x, y, "batch_norm", err);
    if (rc || (rc = check_nc(x, "batch_norm", &channels, &inner, err)) ||
        (rc = check_channel_vec(x, mean, channels, "batch_norm", "mean", err)) ||
        (rc = check_channel_vec(x, var, channels, "batch_norm", "var", err)) ||
        (rc = check_channel_vec(x, w, channels, "batch_norm", "weight", err)) ||
        (rc = check_channel_vec(x, b, channels, "batch_norm", "bias", err)))
        return rc;
    if (!(eps >= 0.0f))
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "batch_norm: eps must be non-negative, got %g", (double)eps);
    return channel_norm(ctx, x, mean, var, w, b, eps, channels, inner, y, err);
}

pgd_status pgd_group_norm(pgd_ctx *ctx, const pgd_tensor *x, int groups, const pgd_tensor *w,
                          const pgd_tensor *b, float eps, pgd_tensor *y, pgd_error **err)
{
    int64_t channels = 0, inner = 0;
    int rc = check_xy(x, y, "group_norm", err);
    if (rc || (rc = check_nc(x, "group_norm", &channels, &inner, err)))
        return rc;
    char s[128];
    if (groups < 1 || channels % groups)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "group_norm: %d groups do not divide the %lld channels of x %s",
                              groups, (long long)channels, pgd_tensor_shape_str(x, s, sizeof s));
    if ((w == NULL) != (b == NULL))
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "group_norm: give both weight and bias, or neither");
    if (w && ((rc = check_channel_vec(x, w, channels, "group_norm", "weight", err)) ||
              (rc = check_channel_vec(x, b, channels, "group_norm", "bias", err))))
        return rc;
    if (!(eps >= 0.0f))
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "group_norm: eps must be non-negative, got %g", (double)eps);
    int64_t rows = x->shape[0] * groups, cols = channels / groups * inner;
    if (rows * cols == 0)
        return PGD_OK;
    pgd_tensor xv = view2(x, rows, cols), yv = view2(y, rows, cols);
    if ((rc = pgd_layernorm(ctx, &xv, NULL, NULL, eps, &yv, err)) || !w)
        return rc;
    return channel_norm(ctx, y, NULL, NULL, w, b, 0.0f, channels, inner, y, err);
}
