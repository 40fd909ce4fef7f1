/* gemm_strided.c — pgd_gemm_strided: the GEMM over operands addressed inside tensors (offset,
 * leading dimension, batch stride), checked against each tensor's extent before it reaches the
 * kernels. */
#include <string.h>

#include "internal.h"

/* 0 when the rows x cols matrices of `batch` items lie inside m.t; else the error naming it. */
static int check_operand(const char *what, pgd_matrix m, int64_t rows, int64_t cols, int64_t batch,
                         pgd_error **err)
{
    if (!m.t)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "gemm_strided: %s has no tensor",
                              what);
    char s[96];
    pgd_tensor_shape_str(m.t, s, sizeof s);
    int64_t numel = pgd_tensor_get_numel(m.t);
    if (m.offset < 0 || m.batch_stride < 0 || m.ld < cols || m.ld > INT32_MAX ||
        m.batch_stride > INT32_MAX)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "gemm_strided: %s (%lldx%lld) in %s: offset %lld, ld %lld (at least "
                              "%lld, at most 2^31-1), batch stride %lld (0 to 2^31-1)",
                              what, (long long)rows, (long long)cols, s, (long long)m.offset,
                              (long long)m.ld, (long long)cols, (long long)m.batch_stride);
    if (rows == 0 || cols == 0 || batch == 0)
        return PGD_OK;
    /* The last element addressed; every term is bounded by numel after the checks above, so
     * the sum of three int64 terms cannot overflow for any tensor that exists. */
    double last = (double)m.offset + (double)(batch - 1) * (double)m.batch_stride +
                  (double)(rows - 1) * (double)m.ld + (double)(cols - 1);
    if (last >= (double)numel)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "gemm_strided: %s (%lld x %lldx%lld, offset %lld, ld %lld, batch "
                              "stride %lld) reaches element %.0f of %s, which has %lld",
                              what, (long long)batch, (long long)rows, (long long)cols,
                              (long long)m.offset, (long long)m.ld, (long long)m.batch_stride, last,
                              s, (long long)numel);
    return PGD_OK;
}

/* The first and one past the last element a rows x cols operand of `batch` items touches. */
static void span(pgd_matrix m, int64_t rows, int64_t cols, int64_t batch, int64_t *lo, int64_t *hi)
{
    *lo = m.offset;
    *hi = m.offset + (batch - 1) * m.batch_stride + (rows - 1) * m.ld + cols;
}

/* C's items must not overlap one another (stacked: each after the previous one's last row; or
 * side by side within each row), and C must not share elements with A or B. */
static int check_output(pgd_matrix a, pgd_matrix b, pgd_matrix c, int64_t ar, int64_t ac,
                        int64_t br, int64_t bc, int64_t M, int64_t N, int64_t batch,
                        pgd_error **err)
{
    int stacked = c.batch_stride >= (M - 1) * c.ld + N;
    int side = c.batch_stride >= N && (batch - 1) * c.batch_stride + N <= c.ld;
    if (batch > 1 && !stacked && !side)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "gemm_strided: C's batch stride %lld makes the %lld items of the "
                              "batch (%lldx%lld, ld %lld) overlap: every item must have elements "
                              "of its own",
                              (long long)c.batch_stride, (long long)batch, (long long)M,
                              (long long)N, (long long)c.ld);
    int64_t clo, chi, lo, hi;
    span(c, M, N, batch, &clo, &chi);
    const pgd_matrix in[2] = {a, b};
    const int64_t rows[2] = {ar, br}, cols[2] = {ac, bc};
    for (int i = 0; i < 2; i++) {
        if (in[i].t != c.t || rows[i] == 0 || cols[i] == 0)
            continue;
        span(in[i], rows[i], cols[i], batch, &lo, &hi);
        if (lo < chi && clo < hi)
            return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                                  "gemm_strided: C (elements %lld to %lld) overlaps %s (elements "
                                  "%lld to %lld) in the same tensor",
                                  (long long)clo, (long long)chi - 1, i ? "B" : "A", (long long)lo,
                                  (long long)hi - 1);
    }
    return PGD_OK;
}

pgd_status pgd_gemm_strided(pgd_ctx *ctx, const pgd_gemm_args *args, int64_t M, int64_t N,
                            int64_t K, int64_t batch, pgd_matrix a, pgd_matrix b, pgd_matrix c,
                            pgd_error **err)
{
    pgd_gemm_args def = {0, 0, 1.0f, 0.0f, NULL, PGD_ACT_NONE, NULL};
    if (!args)
        args = &def;
    if (M < 0 || N < 0 || K < 0 || batch < 1 || M > INT32_MAX || N > INT32_MAX || K > INT32_MAX)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "gemm_strided: sizes M=%lld N=%lld K=%lld batch=%lld (0 to 2^31-1, "
                              "batch at least 1)",
                              (long long)M, (long long)N, (long long)K, (long long)batch);
    int ta = args->trans_a != 0, tb = args->trans_b != 0;
    int rc = check_operand("A", a, ta ? K : M, ta ? M : K, batch, err);
    if (!rc)
        rc = check_operand("B", b, tb ? N : K, tb ? K : N, batch, err);
    if (!rc)
        rc = check_operand("C", c, M, N, batch, err);
    if (!rc && M > 0 && N > 0)
        rc =
            check_output(a, b, c, ta ? K : M, ta ? M : K, tb ? N : K, tb ? K : N, M, N, batch, err);
    pgd_matrix res = c;
    if (!rc && args->residual) {
        res.t = args->residual;
        rc = check_operand("residual", res, M, N, batch, err);
    }
    if (!rc && args->bias && (args->bias->ndim != 1 || args->bias->shape[0] != N)) {
        char s[96];
        rc = pgd__error_set(err, PGD_ERR_SHAPE, "gemm_strided: bias %s must be 1-D [N], N=%lld",
                            pgd_tensor_shape_str(args->bias, s, sizeof s), (long long)N);
    }
    if (rc)
        return rc;
    if (M == 0 || N == 0)
        return PGD_OK;
    pgd__gemm_call g;
    memset(&g, 0, sizeof g);
    g.trans_a = ta;
    g.trans_b = tb;
    g.M = M, g.N = N, g.K = K, g.batch = batch;
    g.alpha = args->alpha;
    g.beta = args->beta;
    g.act = args->act;
    g.a = (pgd__mat){a.t->buf, (size_t)a.offset, (int)a.ld, (long)a.batch_stride};
    g.b = (pgd__mat){b.t->buf, (size_t)b.offset, (int)b.ld, (long)b.batch_stride};
    g.c = (pgd__mat){c.t->buf, (size_t)c.offset, (int)c.ld, (long)c.batch_stride};
    pgd__mat bias, rmat;
    if (args->bias) {
        bias = (pgd__mat){args->bias->buf, 0, 0, 0};
        g.bias = &bias;
    }
    if (args->residual) {
        rmat = (pgd__mat){res.t->buf, (size_t)res.offset, (int)res.ld, (long)res.batch_stride};
        g.residual = &rmat;
    }
    return pgd__gemm(ctx, &g, err);
}
