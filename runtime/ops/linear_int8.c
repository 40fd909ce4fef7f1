/* linear_int8.c — linear layers in 8-bit integers (precision int8): weights quantised once per
 * output channel, activations per row at each forward, the products summed in int32 by
 * cl_khr_integer_dot_product's packed 4x8-bit dot products, a float epilogue (cl/gemm.cl,
 * q8_rows and gemm_q8; docs/precision.md has the accuracy). */
#include <stdint.h>
#include <string.h>

#include "internal.h"

/* The largest K whose int32 sums of 127·127 products cannot overflow. */
#define Q8_MAX_K 133000

/* Q8 kernels need OpenCL C 3.0 for the dot-product built-ins (pgd__lowp_open checked the
 * extension). */
static const char q8_opts[] = "-cl-std=CL3.0 -DQ8";

/* rows x k floats at x → *q (rows x k4 words) and *s (rows scales), new tensors. */
static int quantise_rows(pgd_ctx *ctx, cl_mem x, int64_t rows, int64_t k, int64_t k4,
                         pgd_tensor **q, pgd_tensor **s, pgd_error **err)
{
    int64_t qs[1] = {rows * k4}, ss[1] = {rows};
    *q = *s = NULL;
    cl_kernel kern;
    pgd__args a;
    int rc = pgd_tensor_create(ctx, 1, qs, q, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 1, ss, s, err);
    if (!rc)
        rc = pgd__args_kernel(&a, ctx, "gemm", q8_opts, "q8_rows", &kern, err);
    if (rc)
        return rc;
    pgd__arg_int(&a, (cl_int)k);
    pgd__arg_int(&a, (cl_int)k4);
    pgd__arg_mem(&a, x);
    pgd__arg_mem(&a, (*q)->buf);
    pgd__arg_mem(&a, (*s)->buf);
    if ((rc = pgd__args_end(&a, err)))
        return rc;
    size_t global[1] = {(size_t)rows};
    return pgd__enqueue(ctx, kern, "q8_rows", 1, global, NULL, err);
}

int pgd__linear_q8_create(pgd_ctx *ctx, const pgd_tensor *w, pgd__linear_q8 *q, pgd_error **err)
{
    memset(q, 0, sizeof *q);
    q->n = w->shape[0];
    q->k = w->shape[1];
    q->k4 = (q->k + 3) / 4;
    if (q->k > Q8_MAX_K || q->n > INT32_MAX)
        return pgd__error_set(err, PGD_ERR_UNSUPPORTED,
                              "linear %lldx%lld: precision int8 takes at most %d inputs (the int32 "
                              "sums would overflow) and 2^31 outputs",
                              (long long)q->n, (long long)q->k, Q8_MAX_K);
    if (q->n == 0 || q->k == 0)
        return PGD_OK;
    return quantise_rows(ctx, w->buf, q->n, q->k, q->k4, &q->wq, &q->wscale, err);
}

void pgd__linear_q8_destroy(pgd__linear_q8 *q)
{
    pgd_tensor_destroy(q->wq);
    pgd_tensor_destroy(q->wscale);
    q->wq = q->wscale = NULL;
}

/* gemm_q8 over M rows quantised in xq/xs, into y. */
static int run_q8(pgd_ctx *ctx, const pgd__linear_q8 *q, int64_t M, const pgd_tensor *xq,
                  const pgd_tensor *xs, const pgd_tensor *bias, pgd_act act,
                  const pgd_tensor *residual, pgd_tensor *y, pgd_error **err)
{
    pgd__gemm_call g; /* for the epilogue code only */
    memset(&g, 0, sizeof g);
    pgd__mat bm, rm;
    g.act = act;
    if (bias) {
        bm = (pgd__mat){bias->buf, 0, 0, 0};
        g.bias = &bm;
    }
    if (residual) {
        rm = (pgd__mat){residual->buf, 0, (int)q->n, 0};
        g.residual = &rm;
    }
    cl_kernel kern;
    pgd__args a;
    int rc = pgd__args_kernel(&a, ctx, "gemm", q8_opts, "gemm_q8", &kern, err);
    if (rc)
        return rc;
    pgd__arg_int(&a, (cl_int)M);
    pgd__arg_int(&a, (cl_int)q->n);
    pgd__arg_int(&a, (cl_int)q->k4);
    pgd__arg_mem(&a, xq->buf);
    pgd__arg_mem(&a, xs->buf);
    pgd__arg_mem(&a, q->wq->buf);
    pgd__arg_mem(&a, q->wscale->buf);
    pgd__arg_mem(&a, y->buf);
    pgd__arg_int(&a, (cl_int)q->n);
    pgd__arg_mem(&a, bias ? bias->buf : y->buf); /* unused ones are never read */
    pgd__arg_mem(&a, residual ? residual->buf : y->buf);
    pgd__arg_int(&a, (cl_int)q->n);
    pgd__arg_int(&a, pgd__gemm_epi_code(&g));
    if ((rc = pgd__args_end(&a, err)))
        return rc;
    size_t global[2] = {(size_t)((q->n + 3) / 4), (size_t)((M + 3) / 4)};
    return pgd__enqueue(ctx, kern, "gemm_q8", 2, global, NULL, err);
}

int pgd__linear_q8_forward(pgd_ctx *ctx, const pgd__linear_q8 *q, const pgd_tensor *x,
                           const pgd_tensor *bias, pgd_act act, const pgd_tensor *residual,
                           pgd_tensor *y, pgd_error **err)
{
    if (q->k == 0)
        return pgd__error_set(err, PGD_ERR_UNSUPPORTED,
                              "linear %lldx0 in int8: a layer without inputs (use precision f32)",
                              (long long)q->n);
    int64_t M = pgd_tensor_get_numel(x) / q->k;
    if (M == 0 || q->n == 0)
        return PGD_OK;
    if (M > INT32_MAX)
        return pgd__error_set(err, PGD_ERR_UNSUPPORTED,
                              "linear %lldx%lld in int8: %lld rows (at most 2^31) or no inputs",
                              (long long)q->n, (long long)q->k, (long long)M);
    pgd_tensor *xq = NULL, *xs = NULL;
    int rc = quantise_rows(ctx, x->buf, M, q->k, q->k4, &xq, &xs, err);
    if (!rc)
        rc = run_q8(ctx, q, M, xq, xs, bias, act, residual, y, err);
    pgd_tensor_destroy(xq); /* the pool keeps the buffers; the in-order queue orders reuse */
    pgd_tensor_destroy(xs);
    return rc;
}
