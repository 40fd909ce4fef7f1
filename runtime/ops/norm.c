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
    if (pgd_tensor_numel(x) > (int64_t)UINT32_MAX)
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
    long forced = ctx->opt.row_wg;
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

int pgd_layernorm(pgd_ctx *ctx, const pgd_tensor *x, const pgd_tensor *w, const pgd_tensor *b,
                  float eps, pgd_tensor *y, pgd_error **err)
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
    int64_t numel = pgd_tensor_numel(x);
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
    if (lvw && !ctx->dev.local_mem_dedicated && ctx->opt.row_wg <= 0) {
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

int pgd_softmax(pgd_ctx *ctx, const pgd_tensor *x, float scale, pgd_tensor *y, pgd_error **err)
{
    int rc = check_xy(x, y, "softmax", err);
    if (rc)
        return rc;
    int64_t numel = pgd_tensor_numel(x);
    if (numel == 0)
        return PGD_OK;
    cl_kernel k;
    pgd__args args;
    if ((rc = pgd__args_kernel(&args, ctx, "norm", NULL, "softmax_rows", &k, err)))
        return rc;
    cl_uint cols = (cl_uint)last_dim(x);
    size_t rows = (size_t)(numel / cols), wg = row_wg(ctx, k, cols);
    pgd__arg_mem(&args, x->buf);
    pgd__arg_mem(&args, y->buf);
    pgd__arg_uint(&args, cols);
    pgd__arg_float(&args, scale);
    pgd__arg_local(&args, wg * sizeof(float));
    if ((rc = pgd__args_end(&args, err)))
        return rc;
    size_t global = rows * wg;
    return pgd__enqueue(ctx, k, "softmax_rows", 1, &global, &wg, err);
}

static int unary(pgd_ctx *ctx, const pgd_tensor *x, pgd_tensor *y, const char *op,
                 const char *kernel, pgd_error **err)
{
    int rc = check_xy(x, y, op, err);
    if (rc)
        return rc;
    cl_uint n = (cl_uint)pgd_tensor_numel(x);
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

int pgd_gelu(pgd_ctx *ctx, const pgd_tensor *x, pgd_tensor *y, int tanh_form, pgd_error **err)
{
    return unary(ctx, x, y, tanh_form ? "gelu (tanh form)" : "gelu",
                 tanh_form ? "gelu_tanh" : "gelu_erf", err);
}

int pgd_relu(pgd_ctx *ctx, const pgd_tensor *x, pgd_tensor *y, pgd_error **err)
{
    return unary(ctx, x, y, "relu", "relu", err);
}

int pgd_bias_add(pgd_ctx *ctx, const pgd_tensor *x, const pgd_tensor *bias, pgd_tensor *y,
                 pgd_error **err)
{
    int rc = check_xy(x, y, "bias_add", err);
    if (rc)
        return rc;
    if (!bias)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "bias_add: bias is required");
    if ((rc = check_vec(x, bias, "bias_add", "bias", err)))
        return rc;
    cl_uint n = (cl_uint)pgd_tensor_numel(x), cols = (cl_uint)last_dim(x);
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
