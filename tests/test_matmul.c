/* test_matmul.c — pgd_matmul (numpy.matmul) against the double reference of reference.c on
 * every device: 110 random cases of operands of 1 to 6 dims whose batch dims broadcast both
 * ways (1s, missing leading dims), 1-D operands, K = 0, sizes that divide no tile; a canary
 * after y; and the exact errors. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "reference.h"

#define CANARY 16
#define TRIALS 110

static const int64_t mats[] = {1, 2, 3, 5, 7, 13, 17, 33};

static int64_t count(int nd, const int64_t *s)
{
    int64_t n = 1;
    for (int d = 0; d < nd; d++)
        n *= s[d];
    return n;
}

static float *values(pgd_rng *r, int64_t n)
{
    float *h = malloc((size_t)(n ? n : 1) * sizeof *h);
    for (int64_t i = 0; i < n; i++)
        h[i] = pgd_rng_float(r);
    return h;
}

/* One case: batch dims (up to 4) with each operand keeping some, 1s elsewhere. */
static void matmul_case(pgd_ctx *ctx, pgd_rng *r, int trial, const char *dev)
{
    int64_t batch[4], sa[6], sb[6], sy[6];
    int nbatch = (int)pgd_rng_int(r, 0, 4);
    for (int d = 0; d < nbatch; d++)
        batch[d] = pgd_rng_int(r, 1, 3);
    int64_t M = mats[pgd_rng_int(r, 0, 7)], N = mats[pgd_rng_int(r, 0, 7)];
    int64_t K = trial % 37 == 5 ? 0 : mats[pgd_rng_int(r, 0, 7)];
    int a1 = trial % 11 == 3, b1 = trial % 13 == 4; /* 1-D operands: no batch dims */
    int ka = a1 ? 0 : (int)pgd_rng_int(r, 0, nbatch), kb = b1 ? 0 : (int)pgd_rng_int(r, 0, nbatch);
    int na = 0, nb = 0, ny = 0;
    for (int d = nbatch - ka; d < nbatch; d++) /* a keeps its last ka batch dims */
        sa[na++] = pgd_rng_int(r, 0, 2) ? batch[d] : 1;
    if (a1)
        sa[na++] = K;
    else
        sa[na++] = M, sa[na++] = K;
    for (int d = nbatch - kb; d < nbatch; d++)
        sb[nb++] = pgd_rng_int(r, 0, 2) ? batch[d] : 1;
    sb[nb++] = K;
    if (!b1)
        sb[nb++] = N;
    /* y: the broadcast batch dims, then M and N unless promoted */
    int ra = na - (a1 ? 1 : 2), rb = nb - (b1 ? 1 : 2), rr = ra > rb ? ra : rb;
    for (int d = 0; d < rr; d++) {
        int ea = d - (rr - ra), eb = d - (rr - rb);
        int64_t da = ea >= 0 ? sa[ea] : 1, db = eb >= 0 ? sb[eb] : 1;
        sy[ny++] = da == 1 ? db : da;
    }
    if (!a1)
        sy[ny++] = M;
    if (!b1)
        sy[ny++] = N;
    int64_t nA = count(na, sa), nB = count(nb, sb), nY = count(ny, sy);
    float *ha = values(r, nA), *hb = values(r, nB);
    double *want = malloc((size_t)(nY ? nY : 1) * sizeof *want);
    pgd_ref_matmul(ha, na, sa, hb, nb, sb, want);
    pgd_tensor *a = pgd_test_upload(ctx, na, sa, ha), *b = pgd_test_upload(ctx, nb, sb, hb);
    int64_t flat[1] = {nY + CANARY};
    float *hy = malloc((size_t)(nY + CANARY) * sizeof *hy);
    for (int64_t i = 0; i < nY + CANARY; i++)
        hy[i] = pgd_test_canary();
    pgd_tensor *full = pgd_test_upload(ctx, 1, flat, hy), *y = pgd_test_prefix(full, ny, sy);
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_matmul(ctx, a, b, y, &err), &err);
    PGD_CHECK_OK(pgd_tensor_download(full, hy, &err), &err);
    char what[160];
    snprintf(what, sizeof what, "matmul on %s, case %d (a %d dims, b %d dims, K %lld)", dev, trial,
             na, nb, (long long)K);
    ck_assert_msg(pgd_test_allclose(hy, want, (size_t)nY, 1e-4, 1e-5 * (double)(K + 1), what), "%s",
                  what);
    for (int i = 0; i < CANARY; i++)
        ck_assert_msg(pgd_test_is_canary(hy[nY + i]), "%s: canary %d overwritten", what, i);
    free(y);
    pgd_tensor_destroy(full);
    pgd_tensor_destroy(a);
    pgd_tensor_destroy(b);
    free(ha), free(hb), free(hy), free(want);
}

START_TEST(matmul_random_broadcasts)
{
    PGD_TEST_EACH_DEVICE(101, for (int i = 0; i < TRIALS; i++) matmul_case(ctx, &r, i, dev));
}
END_TEST

/* [2, 1, M, K]·[3, K, N] mixes a broadcast of each operand (a's dim 1 and b's missing dim 0):
 * two batch dims that cannot merge, so a loop of strided GEMMs. */
START_TEST(mixed_broadcast)
{
    if (!pgd_test_primary())
        return;
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    pgd_ctx *ctx = pgd_test_ctx(&d[0]);
    pgd_rng r;
    pgd_rng_seed(&r, 7);
    int64_t sa[4] = {2, 1, 5, 4}, sb[3] = {3, 4, 6}, sy[4] = {2, 3, 5, 6};
    float *ha = values(&r, 40), *hb = values(&r, 72);
    double want[180];
    pgd_ref_matmul(ha, 4, sa, hb, 3, sb, want);
    pgd_tensor *a = pgd_test_upload(ctx, 4, sa, ha), *b = pgd_test_upload(ctx, 3, sb, hb), *y;
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_tensor_create(ctx, 4, sy, &y, &err), &err);
    PGD_CHECK_OK(pgd_matmul(ctx, a, b, y, &err), &err);
    float got[180];
    PGD_CHECK_OK(pgd_tensor_download(y, got, &err), &err);
    ck_assert(pgd_test_allclose(got, want, 180, 1e-5, 1e-5, "mixed broadcast"));
    pgd_tensor_destroy(a), pgd_tensor_destroy(b), pgd_tensor_destroy(y);
    free(ha), free(hb);
    pgd_ctx_destroy(ctx);
}
END_TEST

START_TEST(errors)
{
    if (!pgd_test_primary())
        return;
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    pgd_ctx *ctx = pgd_test_ctx(&d[0]);
    int64_t s234[3] = {2, 3, 4}, s35[2] = {3, 5}, s45[2] = {4, 5}, s325[3] = {3, 4, 5};
    int64_t s235[3] = {2, 3, 5}, s0[1] = {1};
    pgd_tensor *a, *b, *c, *e, *y, *s;
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_tensor_create(ctx, 3, s234, &a, &err), &err);
    PGD_CHECK_OK(pgd_tensor_create(ctx, 2, s35, &b, &err), &err);
    PGD_CHECK_OK(pgd_tensor_create(ctx, 2, s45, &c, &err), &err);
    PGD_CHECK_OK(pgd_tensor_create(ctx, 3, s325, &e, &err), &err);
    PGD_CHECK_OK(pgd_tensor_create(ctx, 3, s235, &y, &err), &err);
    PGD_CHECK_OK(pgd_tensor_create(ctx, 0, s0, &s, &err), &err);
    int rc = pgd_matmul(ctx, a, b, y, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_SHAPE,
                          "a's last dim (4) must equal b's second-to-last (3)");
    err = NULL;
    rc = pgd_matmul(ctx, a, e, y, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_SHAPE,
                          "the batch dims of a [2, 3, 4] and b [3, 4, 5] do not "
                          "broadcast: 2 vs 3");
    err = NULL;
    rc = pgd_matmul(ctx, a, c, e, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_SHAPE,
                          "y is [3, 4, 5] but a [2, 3, 4] times b [4, 5] is "
                          "[2, 3, 5]");
    err = NULL;
    rc = pgd_matmul(ctx, s, c, y, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_SHAPE, "a [] is a scalar");
    pgd_tensor_destroy(a), pgd_tensor_destroy(b), pgd_tensor_destroy(c);
    pgd_tensor_destroy(e), pgd_tensor_destroy(y), pgd_tensor_destroy(s);
    pgd_ctx_destroy(ctx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("matmul");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, matmul_random_broadcasts);
    tcase_add_test(tc, mixed_broadcast);
    tcase_add_test(tc, errors);
    suite_add_tcase(s, tc);
    return pgd_test_run(s);
}
