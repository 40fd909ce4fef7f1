/* matmul.c — pgd_matmul: numpy.matmul (ONNX MatMul) with batch dims that broadcast on both
 * operands, at any rank, on top of pgd_gemm_strided.
 *
 * The batch dims of a, b and y are merged where all three walk them contiguously (or, for an
 * operand broadcast along them, not at all), exactly as the layout copies merge dims. The
 * innermost merged batch dim becomes the batch of one strided GEMM (a broadcast operand gets
 * batch stride 0: one matrix shared, never copied); the dims outside it, if any are left, are
 * a loop of such GEMMs. [B, M, K]·[K, N] is one GEMM, and so is [B, H, M, K]·[B, H, K, N]. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* The broadcast batch dims of a and b (their dims but the last two, after the 1-D
 * promotions), innermost first, each operand's matrix strides along them. */
typedef struct mm_geo {
    int rank;
    int64_t shape[PGD_MAX_DIMS];
    int64_t st[3][PGD_MAX_DIMS]; /* a, b, y: in elements */
} mm_geo;

static void mm_push(mm_geo *g, int64_t size, const int64_t *st)
{
    if (size == 1)
        return;
    if (g->rank > 0) {
        int r = g->rank - 1, merge = 1;
        for (int k = 0; k < 3; k++)
            merge = merge && g->st[k][r] * g->shape[r] == st[k];
        if (merge) {
            g->shape[r] *= size;
            return;
        }
    }
    g->shape[g->rank] = size;
    for (int k = 0; k < 3; k++)
        g->st[k][g->rank] = st[k];
    g->rank++;
}

static char *shape_of(int nd, const int64_t *s, char *buf, size_t size)
{
    size_t len = (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < nd && len < size; d++)
        len += (size_t)snprintf(buf + len, size - len, "%s%lld", d ? ", " : "", (long long)s[d]);
    if (len < size)
        snprintf(buf + len, size - len, "]");
    return buf;
}

/* The shapes a and b take as matrices (1-D promoted: a [K] as [1, K], b [K] as [K, 1]) into
 * sa, sb (rank *na, *nb), and y's shape (the promoted dims dropped again) into sy, *ny. */
static int mm_shapes(const pgd_tensor *a, const pgd_tensor *b, const pgd_tensor *y, int *na,
                     int64_t *sa, int *nb, int64_t *sb, int *ny, int64_t *sy, int64_t *bshape,
                     int *nbatch, pgd_error **err)
{
    char s1[128], s2[128];
    if (a->ndim == 0 || b->ndim == 0)
        return pgd__error_set(err, PGD_ERR_SHAPE,
                              "matmul: %s %s is a scalar (numpy.matmul takes "
                              "1 dim or more)",
                              a->ndim == 0 ? "a" : "b",
                              pgd_tensor_shape_str(a->ndim == 0 ? a : b, s1, sizeof s1));
    *na = a->ndim < 2 ? 2 : a->ndim;
    *nb = b->ndim < 2 ? 2 : b->ndim;
    memcpy(sa + (*na - a->ndim), a->shape, (size_t)a->ndim * sizeof *sa);
    memcpy(sb, b->shape, (size_t)b->ndim * sizeof *sb);
    if (a->ndim == 1)
        sa[0] = 1;
    if (b->ndim == 1)
        sb[1] = 1;
    if (sa[*na - 1] != sb[*nb - 2])
        return pgd__error_set(err, PGD_ERR_SHAPE,
                              "matmul: a %s and b %s: a's last dim (%lld) must equal b's "
                              "second-to-last (%lld)",
                              pgd_tensor_shape_str(a, s1, sizeof s1),
                              pgd_tensor_shape_str(b, s2, sizeof s2), (long long)sa[*na - 1],
                              (long long)sb[*nb - 2]);
    int ra = *na - 2, rb = *nb - 2, r = ra > rb ? ra : rb;
    for (int e = 0; e < r; e++) { /* e: batch dim counted from the end */
        int64_t da = e < ra ? sa[ra - 1 - e] : 1, db = e < rb ? sb[rb - 1 - e] : 1;
        if (da != db && da != 1 && db != 1)
            return pgd__error_set(err, PGD_ERR_SHAPE,
                                  "matmul: the batch dims of a %s and b %s do not broadcast: "
                                  "%lld vs %lld",
                                  pgd_tensor_shape_str(a, s1, sizeof s1),
                                  pgd_tensor_shape_str(b, s2, sizeof s2), (long long)da,
                                  (long long)db);
        bshape[r - 1 - e] = da == 1 ? db : da;
    }
    *nbatch = r;
    *ny = 0;
    for (int d = 0; d < r; d++)
        sy[(*ny)++] = bshape[d];
    if (a->ndim > 1)
        sy[(*ny)++] = sa[*na - 2];
    if (b->ndim > 1)
        sy[(*ny)++] = sb[*nb - 1];
    int same = y->ndim == *ny;
    for (int d = 0; same && d < *ny; d++)
        same = y->shape[d] == sy[d];
    if (!same) {
        char s3[128], s4[128];
        return pgd__error_set(
            err, PGD_ERR_SHAPE, "matmul: y is %s but a %s times b %s is %s",
            pgd_tensor_shape_str(y, s1, sizeof s1), pgd_tensor_shape_str(a, s2, sizeof s2),
            pgd_tensor_shape_str(b, s3, sizeof s3), shape_of(*ny, sy, s4, sizeof s4));
    }
    return PGD_OK;
}

pgd_status pgd_matmul(pgd_ctx *ctx, const pgd_tensor *a, const pgd_tensor *b, pgd_tensor *y,
                      pgd_error **err)
{
    int na = 0, nb = 0, ny = 0, nbatch = 0;
    int64_t sa[PGD_MAX_DIMS + 1], sb[PGD_MAX_DIMS + 1], sy[PGD_MAX_DIMS], bs[PGD_MAX_DIMS];
    if (!a || !b || !y)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "matmul: a, b and y are required");
    int rc = mm_shapes(a, b, y, &na, sa, &nb, sb, &ny, sy, bs, &nbatch, err);
    if (rc)
        return rc;
    if (y->buf == a->buf || y->buf == b->buf)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "matmul: y must not be a's or b's memory");
    int64_t M = sa[na - 2], K = sa[na - 1], N = sb[nb - 1];
    if (pgd_tensor_get_numel(y) == 0)
        return PGD_OK;
    if (K == 0) /* sums of nothing */
        return pgd_tensor_fill(y, 0.0f, err);
    /* Each operand's matrix stride along each broadcast batch dim (0 where it broadcasts). */
    mm_geo g;
    memset(&g, 0, sizeof g);
    int64_t ma = M * K, mb = K * N, my = M * N;
    for (int d = nbatch - 1; d >= 0; d--) {
        int ea = d - (nbatch - (na - 2)), eb = d - (nbatch - (nb - 2));
        int64_t st[3] = {ea >= 0 && sa[ea] != 1 ? ma : 0, eb >= 0 && sb[eb] != 1 ? mb : 0, my};
        mm_push(&g, bs[d], st);
        ma *= ea >= 0 ? sa[ea] : 1;
        mb *= eb >= 0 ? sb[eb] : 1;
        my *= bs[d];
    }
    int64_t batch = g.rank ? g.shape[0] : 1, loops = 1;
    for (int d = 1; d < g.rank; d++)
        loops *= g.shape[d];
    for (int64_t i = 0; i < loops && !rc; i++) {
        int64_t off[3] = {0, 0, 0}, rest = i;
        for (int d = 1; d < g.rank; d++) {
            int64_t c = rest % g.shape[d];
            rest /= g.shape[d];
            for (int k = 0; k < 3; k++)
                off[k] += c * g.st[k][d];
        }
        pgd_matrix ma_ = {a, off[0], K, g.rank ? g.st[0][0] : 0};
        pgd_matrix mb_ = {b, off[1], N, g.rank ? g.st[1][0] : 0};
        pgd_matrix my_ = {y, off[2], N, g.rank ? g.st[2][0] : M * N};
        rc = pgd_gemm_strided(ctx, NULL, M, N, K, batch, ma_, mb_, my_, err);
    }
    return rc;
}
