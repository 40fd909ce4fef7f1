/* elementwise.c — launchers for cl/elementwise.cl. */
#include <stdio.h>

#include "internal.h"

static int check_same(const pgd_tensor *a, const pgd_tensor *b, const char *op, pgd_error **err)
{
    if (!pgd__shape_equal(a, b)) {
        char sa[128], sb[128];
        return pgd__error_set(err, PGD_ERR_SHAPE, "%s: shapes differ: %s vs %s", op,
                              pgd_tensor_shape_str(a, sa, sizeof sa),
                              pgd_tensor_shape_str(b, sb, sizeof sb));
    }
    if (pgd_tensor_get_numel(a) > (int64_t)UINT32_MAX)
        return pgd__error_set(err, PGD_ERR_TOO_LARGE, "%s: more than 2^32 elements", op);
    return PGD_OK;
}

/* Runs elementwise kernel `name` on n elements, one work-item each. Its arguments: the nmem
 * buffers in `mem` (inputs, then the output), *alpha when alpha is not NULL, then n. */
static int launch(pgd_ctx *ctx, const char *name, const cl_mem *mem, int nmem, const float *alpha,
                  cl_uint n, pgd_error **err)
{
    cl_kernel k;
    pgd__args args;
    int rc = pgd__args_kernel(&args, ctx, "elementwise", NULL, name, &k, err);
    if (rc)
        return rc;
    for (int i = 0; i < nmem; i++)
        pgd__arg_mem(&args, mem[i]);
    if (alpha)
        pgd__arg_float(&args, *alpha);
    pgd__arg_uint(&args, n);
    if ((rc = pgd__args_end(&args, err)))
        return rc;
    size_t wg = pgd__flat_wg(ctx, k), global = pgd__round_up(n, wg);
    return pgd__enqueue(ctx, k, name, 1, &global, &wg, err);
}

int pgd_scale(pgd_ctx *ctx, const pgd_tensor *x, float alpha, pgd_tensor *y, pgd_error **err)
{
    int rc = check_same(x, y, "scale", err);
    if (rc)
        return rc;
    cl_mem mem[2] = {x->buf, y->buf};
    return launch(ctx, "elementwise_scale", mem, 2, &alpha, (cl_uint)pgd_tensor_get_numel(x), err);
}

int pgd_add(pgd_ctx *ctx, const pgd_tensor *a, const pgd_tensor *b, pgd_tensor *y, pgd_error **err)
{
    int rc = check_same(a, b, "add", err);
    if (!rc)
        rc = check_same(a, y, "add", err);
    if (rc)
        return rc;
    cl_mem mem[3] = {a->buf, b->buf, y->buf};
    return launch(ctx, "elementwise_add", mem, 3, NULL, (cl_uint)pgd_tensor_get_numel(a), err);
}
