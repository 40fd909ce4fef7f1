/* test_attention_gqa.c — pgd_attention_gqa (grouped-query and multi-query attention) against
 * the double reference of reference.c run on K and V repeated per query head on the host
 * (repeat_interleave, PyTorch's enable_gqa), on every device: 110 random cases per device of
 * group sizes 1 to 4, MQA (one key/value head), BHND and BNHD layouts, causal masks and
 * per-head additive masks; every kernel variant; pgd_attention_ex with value heads larger than
 * the key heads (40 cases per device); the errors. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "internal.h" /* white-box: forces each kernel variant */
#include "reference.h"

#define TRIALS 110

static float *values(pgd_rng *r, int64_t n, float s)
{
    float *h = malloc((size_t)(n ? n : 1) * sizeof *h);
    for (int64_t i = 0; i < n; i++)
        h[i] = s * pgd_rng_float(r);
    return h;
}

/* The view of [B, heads, N, D] laid out BHND (bnhd 0) or BNHD (1), contiguous. */
static pgd_view view_of(const pgd_tensor *t, int bnhd, int64_t heads, int64_t n, int64_t d)
{
    pgd_view v = {t, 0, heads * n * d, bnhd ? d : n * d, bnhd ? heads * d : d};
    return v;
}

static const char *const variants[] = {"rows", "tiled", "generic", "kt"};

static void gqa_case(pgd_ctx *ctx, pgd_rng *r, int trial, const char *dev)
{
    static const int64_t dims[] = {8, 16, 32, 64, 3};
    ctx->opt.attention = (pgd_attention_variant)(PGD_ATTENTION_ROWS + trial % 4);
    int64_t B = pgd_rng_int(r, 1, 2), hk = pgd_rng_int(r, 1, 3), group = pgd_rng_int(r, 1, 4);
    int64_t H = hk * group, nq = pgd_rng_int(r, 1, 40), nk = pgd_rng_int(r, 1, 40);
    int64_t D = dims[pgd_rng_int(r, 0, 4)];
    int bnhd = trial % 2, with_mask = trial % 5 == 1;
    int64_t nqx = B * H * nq * D, nkv = B * hk * nk * D, nm = B * H * nq * nk;
    float *hq = values(r, nqx, 2.0f), *hk_ = values(r, nkv, 2.0f), *hv = values(r, nkv, 1.0f);
    float *hm = with_mask ? values(r, nm, 3.0f) : NULL;
    /* the reference: K and V repeated per query head, BHND, contiguous */
    int64_t nfull = B * H * nk * D;
    float *fk = malloc((size_t)nfull * sizeof *fk), *fv = malloc((size_t)nfull * sizeof *fv);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t t = 0; t < nk; t++)
                for (int64_t d = 0; d < D; d++) {
                    int64_t kvh = h / group;
                    int64_t src = bnhd ? ((b * nk + t) * hk + kvh) * D + d
                                       : ((b * hk + kvh) * nk + t) * D + d;
                    fk[((b * H + h) * nk + t) * D + d] = hk_[src];
                    fv[((b * H + h) * nk + t) * D + d] = hv[src];
                }
    float *rq = malloc((size_t)nqx * sizeof *rq); /* q as BHND for the reference */
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t t = 0; t < nq; t++)
                for (int64_t d = 0; d < D; d++)
                    rq[((b * H + h) * nq + t) * D + d] =
                        hq[bnhd ? ((b * nq + t) * H + h) * D + d : ((b * H + h) * nq + t) * D + d];
    pgd_attention_args ra;
    memset(&ra, 0, sizeof ra);
    ra.batch = B, ra.heads = H, ra.nq = nq, ra.nk = nk, ra.head_dim = D;
    ra.causal = trial % 3 == 0;
    ra.q = (pgd_view){NULL, 0, H * nq * D, nq * D, D};
    ra.k = ra.v = (pgd_view){NULL, 0, H * nk * D, nk * D, D};
    ra.o = ra.q;
    if (with_mask)
        ra.mask = (pgd_view){(const pgd_tensor *)1, 0, H * nq * nk, nq * nk, nk};
    double *want = malloc((size_t)nqx * sizeof *want);
    pgd_ref_attention(&ra, rq, fk, fv, hm, want, NULL);
    /* the device: K and V with hk heads only */
    int64_t sq[1] = {nqx}, skv[1] = {nkv}, sm[1] = {nm ? nm : 1};
    pgd_tensor *q = pgd_test_upload(ctx, 1, sq, hq), *k = pgd_test_upload(ctx, 1, skv, hk_);
    pgd_tensor *v = pgd_test_upload(ctx, 1, skv, hv), *m = NULL, *o;
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_tensor_create(ctx, 1, sq, &o, &err), &err);
    if (with_mask)
        m = pgd_test_upload(ctx, 1, sm, hm);
    pgd_attention_args a = ra;
    a.q = view_of(q, bnhd, H, nq, D);
    a.o = view_of(o, bnhd, H, nq, D);
    a.k = view_of(k, bnhd, hk, nk, D);
    a.v = view_of(v, bnhd, hk, nk, D);
    if (with_mask)
        a.mask.t = m;
    PGD_CHECK_OK(pgd_attention_gqa(ctx, &a, hk, &err), &err);
    float *got = malloc((size_t)nqx * sizeof *got), *ordered = malloc((size_t)nqx * sizeof *got);
    PGD_CHECK_OK(pgd_tensor_download(o, got, &err), &err);
    for (int64_t b = 0; b < B; b++) /* back to BHND */
        for (int64_t h = 0; h < H; h++)
            for (int64_t t = 0; t < nq; t++)
                for (int64_t d = 0; d < D; d++)
                    ordered[((b * H + h) * nq + t) * D + d] =
                        got[bnhd ? ((b * nq + t) * H + h) * D + d : ((b * H + h) * nq + t) * D + d];
    char what[200];
    snprintf(what, sizeof what,
             "gqa on %s, case %d (%s): B %lld, %lld heads over %lld, nq %lld, nk %lld, D %lld", dev,
             trial, variants[trial % 4], (long long)B, (long long)H, (long long)hk, (long long)nq,
             (long long)nk, (long long)D);
    ck_assert_msg(pgd_test_allclose(ordered, want, (size_t)nqx, 1e-4, 1e-5, what), "%s", what);
    ctx->opt.attention = PGD_ATTENTION_AUTO;
    pgd_tensor *all[] = {q, k, v, m, o};
    for (int i = 0; i < 5; i++)
        pgd_tensor_destroy(all[i]);
    free(hq), free(hk_), free(hv), free(hm), free(fk), free(fv), free(rq), free(want);
    free(got), free(ordered);
}

START_TEST(gqa_random)
{
    PGD_TEST_EACH_DEVICE(171, for (int i = 0; i < TRIALS; i++) gqa_case(ctx, &r, i, dev));
}
END_TEST

/* pgd_attention_ex with a value head size dv >= dk (and grouped heads): against a reference
 * written here, softmax(q·kᵀ·scale) over the visible keys times v in double, BHND. */
static void value_head_case(pgd_ctx *ctx, pgd_rng *r, int trial, const char *dev)
{
    int64_t hk = pgd_rng_int(r, 1, 2), group = pgd_rng_int(r, 1, 3), H = hk * group;
    int64_t nq = pgd_rng_int(r, 1, 20), nk = pgd_rng_int(r, 1, 20);
    int64_t dk = 4 * pgd_rng_int(r, 1, 4), extra[] = {1, 3, dk, dk + 5};
    int64_t dv = dk + extra[trial % 4];
    int causal = trial % 3 == 0 ? (int)pgd_rng_int(r, 1, 2) : 0;
    float *hq = values(r, H * nq * dk, 2.0f), *hk_ = values(r, hk * nk * dk, 2.0f);
    float *hv = values(r, hk * nk * dv, 1.0f);
    double *want = malloc((size_t)(H * nq * dv) * sizeof *want), *p = malloc((size_t)nk * 8);
    for (int64_t h = 0; h < H; h++)
        for (int64_t i = 0; i < nq; i++) {
            int64_t kvh = h / group, lim = causal == PGD_CAUSAL_TOP_LEFT ? i : i + nk - nq;
            double m = -INFINITY, sum = 0.0;
            for (int64_t j = 0; j < nk; j++) {
                double sc = 0.0;
                for (int64_t d = 0; d < dk; d++)
                    sc += (double)hq[(h * nq + i) * dk + d] * hk_[(kvh * nk + j) * dk + d];
                p[j] = causal && j > lim ? -INFINITY : sc / sqrt((double)dk);
                m = p[j] > m ? p[j] : m;
            }
            for (int64_t j = 0; j < nk; j++)
                sum += p[j] = m == -INFINITY ? 0.0 : exp(p[j] - m);
            for (int64_t d = 0; d < dv; d++) {
                double o = 0.0;
                for (int64_t j = 0; j < nk && sum > 0; j++)
                    o += p[j] / sum * hv[(kvh * nk + j) * dv + d];
                want[(h * nq + i) * dv + d] = o;
            }
        }
    int64_t sq[1] = {H * nq * dk}, sk[1] = {hk * nk * dk}, sv[1] = {hk * nk * dv};
    int64_t so[1] = {H * nq * dv};
    pgd_tensor *q = pgd_test_upload(ctx, 1, sq, hq), *k = pgd_test_upload(ctx, 1, sk, hk_);
    pgd_tensor *v = pgd_test_upload(ctx, 1, sv, hv), *o;
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_tensor_create(ctx, 1, so, &o, &err), &err);
    pgd_attention_args a;
    memset(&a, 0, sizeof a);
    a.batch = 1, a.heads = H, a.nq = nq, a.nk = nk, a.head_dim = dk, a.causal = causal;
    a.q = (pgd_view){q, 0, H * nq * dk, nq * dk, dk};
    a.k = (pgd_view){k, 0, hk * nk * dk, nk * dk, dk};
    a.v = (pgd_view){v, 0, hk * nk * dv, nk * dv, dv};
    a.o = (pgd_view){o, 0, H * nq * dv, nq * dv, dv};
    pgd_attention_ext e;
    memset(&e, 0, sizeof e);
    e.size = sizeof e, e.kv_heads = hk, e.v_head_dim = dv;
    PGD_CHECK_OK(pgd_attention_ex(ctx, &a, &e, &err), &err);
    float *got = malloc((size_t)so[0] * sizeof *got);
    PGD_CHECK_OK(pgd_tensor_download(o, got, &err), &err);
    char what[160];
    snprintf(what, sizeof what, "value head %lld, key head %lld on %s, case %d", (long long)dv,
             (long long)dk, dev, trial);
    ck_assert_msg(pgd_test_allclose(got, want, (size_t)so[0], 1e-4, 1e-5, what), "%s", what);
    pgd_tensor_destroy(q), pgd_tensor_destroy(k), pgd_tensor_destroy(v), pgd_tensor_destroy(o);
    free(hq), free(hk_), free(hv), free(want), free(p), free(got);
}

START_TEST(value_head_sizes)
{
    PGD_TEST_EACH_DEVICE(191, for (int i = 0; i < 40; i++) value_head_case(ctx, &r, i, dev));
}
END_TEST

START_TEST(errors)
{
    if (!pgd_test_primary())
        return;
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    pgd_ctx *ctx = pgd_test_ctx(&d[0]);
    int64_t s[1] = {4 * 5 * 8};
    pgd_tensor *t, *p;
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_tensor_create(ctx, 1, s, &t, &err), &err);
    PGD_CHECK_OK(pgd_tensor_create(ctx, 1, s, &p, &err), &err);
    pgd_attention_args a;
    memset(&a, 0, sizeof a);
    a.batch = 1, a.heads = 4, a.nq = 5, a.nk = 5, a.head_dim = 8;
    a.q = a.k = a.v = (pgd_view){t, 0, 160, 40, 8};
    a.o = (pgd_view){p, 0, 160, 40, 8};
    int rc = pgd_attention_gqa(ctx, &a, 3, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_INVALID_ARGUMENT,
                          "3 key/value heads do not divide the 4");
    err = NULL;
    a.probs = t;
    rc = pgd_attention_gqa(ctx, &a, 2, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_UNSUPPORTED,
                          "probabilities with grouped key/value heads");
    err = NULL;
    a.probs = NULL, a.mode = PGD_ATTENTION_TOPK, a.topk = 2;
    rc = pgd_attention_gqa(ctx, &a, 2, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_UNSUPPORTED, "hard attention");
    err = NULL;
    a.mode = PGD_ATTENTION_SOFT;
    pgd_attention_ext e;
    memset(&e, 0, sizeof e);
    e.size = 3;
    rc = pgd_attention_ex(ctx, &a, &e, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_INVALID_ARGUMENT, "ext->size is 3");
    pgd_tensor_destroy(t), pgd_tensor_destroy(p);
    pgd_ctx_destroy(ctx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("attention_gqa");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, gqa_random);
    tcase_add_test(tc, value_head_sizes);
    tcase_add_test(tc, errors);
    suite_add_tcase(s, tc);
    return pgd_test_run(s);
}
