/* gemm_clblast.c — the CLBlast back end of pgd__gemm (C = alpha·op(A)·op(B) + beta·C), with
 * Pagoda's epilogue kernel for bias, activation and residual. */
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "pgd_config.h"

#if PGD_HAVE_CLBLAST
#include <clblast_c.h>
#endif

int pgd__gemm_epilogue(pgd_ctx *ctx, const pgd__gemm_call *g, pgd_error **err)
{
    if (!g->bias && !g->residual && g->act == PGD_ACT_NONE)
        return PGD_OK;
    cl_kernel k;
    pgd__args a;
    int rc = pgd__args_kernel(&a, ctx, "gemm", NULL, "gemm_epilogue", &k, err);
    if (rc)
        return rc;
    pgd__mat r = g->residual ? *g->residual : g->c;
    pgd__arg_int(&a, (cl_int)g->M);
    pgd__arg_int(&a, (cl_int)g->N);
    pgd__arg_mem(&a, g->c.buf);
    pgd__arg_int(&a, (cl_int)g->c.off);
    pgd__arg_int(&a, g->c.ld);
    pgd__arg_long(&a, g->c.stride);
    pgd__arg_mem(&a, g->bias ? g->bias->buf : g->c.buf);
    pgd__arg_int(&a, g->bias ? (cl_int)g->bias->off : 0);
    pgd__arg_mem(&a, r.buf);
    pgd__arg_int(&a, (cl_int)r.off);
    pgd__arg_int(&a, r.ld);
    pgd__arg_long(&a, r.stride);
    pgd__arg_int(&a, pgd__gemm_epi_code(g));
    if ((rc = pgd__args_end(&a, err)))
        return rc;
    size_t global[3] = {(size_t)g->N, (size_t)g->M, (size_t)g->batch};
    return pgd__enqueue(ctx, k, "gemm_epilogue", 3, global, NULL, err);
}

#if PGD_HAVE_CLBLAST
int pgd__gemm_clblast(pgd_ctx *ctx, const pgd__gemm_call *g, pgd_error **err)
{
    if (g->M == 0 || g->N == 0)
        return PGD_OK;
    if (g->K == 0) /* CLBlast rejects K = 0; the own kernels handle it */
        return PGD_ERR_UNSUPPORTED;
    /* CLBlast overwrites C before our epilogue adds the residual: a residual that lives in C
     * (x = x + f(x) in a transformer block) is first copied aside. */
    pgd__gemm_call local = *g;
    pgd__mat res_copy;
    pgd_tensor *tmp = NULL;
    if (g->residual && g->residual->buf == g->c.buf) {
        const pgd__mat *r = g->residual;
        int64_t extent = (int64_t)r->off + (g->batch - 1) * (int64_t)r->stride +
                         (g->M - 1) * (int64_t)r->ld + g->N;
        int64_t shape[1] = {extent};
        int rc = pgd_tensor_create(ctx, 1, shape, &tmp, err);
        if (rc)
            return rc;
        cl_int cl = clEnqueueCopyBuffer(ctx->queue, r->buf, tmp->buf, 0, 0,
                                        (size_t)extent * sizeof(float), 0, NULL, NULL);
        if (cl != CL_SUCCESS) {
            pgd_tensor_destroy(tmp);
            return pgd__cl_fail(err, cl, "clEnqueueCopyBuffer", "saving a residual for CLBlast");
        }
        res_copy = *r;
        res_copy.buf = tmp->buf;
        local.residual = &res_copy;
    }
    g = &local;
    CLBlastTranspose ta = g->trans_a ? CLBlastTransposeYes : CLBlastTransposeNo;
    CLBlastTranspose tb = g->trans_b ? CLBlastTransposeYes : CLBlastTransposeNo;
    CLBlastStatusCode st;
    if (g->batch == 1)
        st = CLBlastSgemm(CLBlastLayoutRowMajor, ta, tb, (size_t)g->M, (size_t)g->N, (size_t)g->K,
                          g->alpha, g->a.buf, g->a.off, (size_t)g->a.ld, g->b.buf, g->b.off,
                          (size_t)g->b.ld, g->beta, g->c.buf, g->c.off, (size_t)g->c.ld,
                          &ctx->queue, NULL);
    else
        st = CLBlastSgemmStridedBatched(
            CLBlastLayoutRowMajor, ta, tb, (size_t)g->M, (size_t)g->N, (size_t)g->K, g->alpha,
            g->a.buf, g->a.off, (size_t)g->a.ld, (size_t)g->a.stride, g->b.buf, g->b.off,
            (size_t)g->b.ld, (size_t)g->b.stride, g->beta, g->c.buf, g->c.off, (size_t)g->c.ld,
            (size_t)g->c.stride, (size_t)g->batch, &ctx->queue, NULL);
    if (st != CLBlastSuccess) {
        pgd_tensor_destroy(tmp);
        return pgd__error_set(err, st <= -1000 ? PGD_ERR_OPENCL : pgd__status_from_cl(st),
                              "CLBlast Sgemm failed with status %d (M=%lld N=%lld K=%lld batch "
                              "%lld) on '%s'",
                              (int)st, (long long)g->M, (long long)g->N, (long long)g->K,
                              (long long)g->batch, ctx->dev.name);
    }
    int rc = pgd__gemm_epilogue(ctx, g, err);
    pgd_tensor_destroy(tmp); /* the pool reuses it only after the queued work (in order) */
    return rc;
}
#else
int pgd__gemm_clblast(pgd_ctx *ctx, const pgd__gemm_call *g, pgd_error **err)
{
    (void)ctx;
    (void)g;
    (void)err;
    return PGD_ERR_UNSUPPORTED;
}
#endif
