/* test_attention_hard.c — hard attention (top-k and sampled) on every device against the
 * double-precision reference: random sizes with ties, k >= the visible keys, masked keys, fully
 * masked rows, the causal rule, NaN rows; the sampler's choices, determinism and distribution. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "reference.h"

static const int64_t awkward[] = {1, 2, 3, 5, 7, 13, 31, 49, 64, 65, 127, 197};
static const int64_t dims[] = {1, 2, 3, 8, 16, 32};

/* One case's tensors: q, k, v [B, H, N, D] and o [B, H, Nq, D] contiguous, an optional mask
 * [B, H, Nq, Nk], probabilities of every row. */
typedef struct {
    pgd_attention_args a;
    float *q, *k, *v, *m;
    int64_t nq_el, nk_el, nm_el, np_el;
    pgd_tensor *tq, *tk, *tv, *to, *tm, *tp;
} hard_case;

static pgd_view bhnd(const pgd_tensor *t, int64_t H, int64_t N, int64_t D)
{
    return (pgd_view){t, 0, H * N * D, N * D, D};
}

/* Values on a grid of 1/8 in [-1, 1]: dot products of up to 32 terms are exact in float, so the
 * device's scores order and tie exactly as the reference's do. */
static float grid(pgd_rng *r)
{
    return (float)pgd_rng_int(r, -8, 8) / 8.0f;
}

static void make_case(pgd_ctx *ctx, pgd_rng *r, hard_case *c, int small, int quantised)
{
    memset(c, 0, sizeof *c);
    pgd_attention_args *a = &c->a;
    a->batch = pgd_rng_int(r, 1, 2);
    a->heads = pgd_rng_int(r, 1, 3);
    int top = small ? 8 : 11;
    a->nq = awkward[pgd_rng_int(r, 0, top)];
    a->nk = pgd_rng_int(r, 0, 2) ? a->nq : awkward[pgd_rng_int(r, 0, top)];
    a->head_dim = dims[pgd_rng_int(r, 0, 5)];
    a->causal = pgd_rng_int(r, 0, 3) == 0 ? (int)pgd_rng_int(r, 1, 2) : 0; /* either alignment */
    a->scale = pgd_rng_int(r, 0, 1) ? 0.0f : 0.5f;
    int64_t B = a->batch, H = a->heads, Nq = a->nq, Nk = a->nk, D = a->head_dim;
    c->nq_el = B * H * Nq * D;
    c->nk_el = B * H * Nk * D;
    c->q = malloc((size_t)c->nq_el * sizeof(float));
    c->k = malloc((size_t)c->nk_el * sizeof(float));
    c->v = malloc((size_t)c->nk_el * sizeof(float));
    for (int64_t i = 0; i < c->nq_el; i++)
        c->q[i] = quantised ? grid(r) : pgd_rng_float(r) * 2.0f;
    for (int64_t i = 0; i < c->nk_el; i++) {
        c->k[i] = quantised ? grid(r) : pgd_rng_float(r) * 2.0f;
        c->v[i] = pgd_rng_float(r);
    }
    int64_t sq[4] = {B, H, Nq, D}, sk[4] = {B, H, Nk, D};
    c->tq = pgd_test_upload(ctx, 4, sq, c->q);
    c->tk = pgd_test_upload(ctx, 4, sk, c->k);
    c->tv = pgd_test_upload(ctx, 4, sk, c->v);
    c->to = pgd_test_upload(ctx, 4, sq, c->q); /* overwritten */
    a->q = bhnd(c->tq, H, Nq, D);
    a->k = bhnd(c->tk, H, Nk, D);
    a->v = bhnd(c->tv, H, Nk, D);
    a->o = bhnd(c->to, H, Nq, D);
    if (pgd_rng_int(r, 0, 2) == 0 && Nk > 0) {
        /* Blocked keys (-inf, a quarter), grid-valued biases, and some fully blocked rows. */
        c->nm_el = B * H * Nq * Nk;
        c->m = malloc((size_t)c->nm_el * sizeof(float));
        for (int64_t i = 0; i < c->nm_el; i++)
            c->m[i] = pgd_rng_int(r, 0, 3) == 0 ? -INFINITY : (float)pgd_rng_int(r, -4, 4) / 4.0f;
        for (int64_t row = 0; row < B * H * Nq; row++)
            if (pgd_rng_int(r, 0, 9) == 0)
                for (int64_t j = 0; j < Nk; j++)
                    c->m[row * Nk + j] = -INFINITY;
        int64_t sm[4] = {B, H, Nq, Nk};
        c->tm = pgd_test_upload(ctx, 4, sm, c->m);
        a->mask = (pgd_view){c->tm, 0, H * Nq * Nk, Nq * Nk, Nk};
    }
    c->np_el = B * H * Nq * (Nk ? Nk : 1);
    int64_t sp[1] = {c->np_el};
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_tensor_create(ctx, 1, sp, &c->tp, &err), &err);
    a->probs = c->tp;
    a->probs_head = -1;
    a->probs_q0 = 0;
    a->probs_q1 = Nq;
}

static void free_case(hard_case *c)
{
    pgd_tensor *t[] = {c->tq, c->tk, c->tv, c->to, c->tm, c->tp};
    for (size_t i = 0; i < sizeof t / sizeof *t; i++)
        pgd_tensor_destroy(t[i]);
    free(c->q);
    free(c->k);
    free(c->v);
    free(c->m);
}

/* Runs the case and downloads O and the probabilities. */
static void run_case(pgd_ctx *ctx, hard_case *c, float *o, float *p)
{
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_attention(ctx, &c->a, &err), &err);
    PGD_CHECK_OK(pgd_tensor_download(c->to, o, &err), &err);
    PGD_CHECK_OK(pgd_tensor_download(c->tp, p, &err), &err);
}

static int topk_case(pgd_ctx *ctx, pgd_rng *r, int trial, int small)
{
    hard_case c;
    make_case(ctx, r, &c, small, 1);
    pgd_attention_args *a = &c.a;
    int64_t Nk = a->nk;
    int64_t ks[] = {
        1, 2, 3, Nk > 1 ? Nk - 1 : 1, Nk > 0 ? Nk : 1, Nk + 5, pgd_rng_int(r, 1, Nk > 1 ? Nk : 1)};
    a->mode = PGD_ATTENTION_TOPK;
    a->topk = ks[trial % 7];
    float *o = malloc((size_t)c.nq_el * sizeof *o), *p = malloc((size_t)c.np_el * sizeof *p);
    double *wo = calloc((size_t)c.nq_el, sizeof *wo), *wp = calloc((size_t)c.np_el, sizeof *wp);
    run_case(ctx, &c, o, p);
    pgd_ref_attention(a, c.q, c.k, c.v, c.m, wo, wp);
    char what[160];
    snprintf(what, sizeof what,
             "top-%lld case %d: B %lld H %lld Nq %lld Nk %lld D %lld causal %d mask %d",
             (long long)a->topk, trial, (long long)a->batch, (long long)a->heads, (long long)a->nq,
             (long long)Nk, (long long)a->head_dim, a->causal, c.m != NULL);
    int ok = pgd_test_allclose(o, wo, (size_t)c.nq_el, 1e-4, 1e-5, what) &&
             (Nk == 0 || pgd_test_allclose(p, wp, (size_t)c.np_el, 1e-4, 1e-6, what));
    free(o);
    free(p);
    free(wo);
    free(wp);
    free_case(&c);
    return ok;
}

START_TEST(topk_random_cases)
{
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    for (size_t i = 0; i < n; i++) {
        pgd_ctx *ctx = pgd_test_ctx(&d[i]);
        pgd_rng r;
        pgd_rng_seed(&r, 7);
        int failed = 0;
        for (int trial = 0; trial < 120; trial++)
            failed += !topk_case(ctx, &r, trial, d[i].software_rasteriser);
        ck_assert_msg(failed == 0, "%s: %d of 120 top-k cases failed", d[i].name, failed);
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

/* Sampled attention: each row's probabilities must be one-hot at an admissible key (the
 * reference's, or its neighbour when u falls within 1e-5 of the boundary between them), and the
 * output row must be exactly that key's V row. Rows with no visible key are zero. */
static int sample_case(pgd_ctx *ctx, pgd_rng *r, int trial, int small, int *ambiguous)
{
    hard_case c;
    make_case(ctx, r, &c, small, 0);
    pgd_attention_args *a = &c.a;
    a->mode = PGD_ATTENTION_SAMPLE;
    a->seed = pgd_rng_next(r);
    int64_t B = a->batch, H = a->heads, Nq = a->nq, Nk = a->nk, D = a->head_dim;
    float *o = malloc((size_t)c.nq_el * sizeof *o), *p = malloc((size_t)c.np_el * sizeof *p);
    double *wo = calloc((size_t)c.nq_el, sizeof *wo), *wp = calloc((size_t)c.np_el, sizeof *wp);
    run_case(ctx, &c, o, p);
    pgd_ref_attention(a, c.q, c.k, c.v, c.m, wo, wp);
    /* The reference's softmax probabilities, for the boundary check. */
    pgd_attention_args soft = *a;
    soft.mode = PGD_ATTENTION_SOFT;
    double *sp = calloc((size_t)c.np_el, sizeof *sp), *so = calloc((size_t)c.nq_el, sizeof *so);
    pgd_ref_attention(&soft, c.q, c.k, c.v, c.m, so, sp);
    int ok = 1;
    for (int64_t b = 0; b < B && ok; b++)
        for (int64_t h = 0; h < H && ok; h++)
            for (int64_t i = 0; i < Nq && ok; i++) {
                int64_t row = (b * H + h) * Nq + i;
                const float *pr = p + row * Nk;
                const double *wr = wp + row * Nk, *sr = sp + row * Nk;
                int64_t got = -1, want = -1, ones = 0;
                for (int64_t j = 0; j < Nk; j++) {
                    if (pr[j] == 1.0f) {
                        got = j;
                        ones++;
                    } else if (pr[j] != 0.0f) {
                        ones = 99;
                    }
                    if (wr[j] == 1.0)
                        want = j;
                }
                if (ones > 1 || (got < 0) != (want < 0)) {
                    fprintf(stderr,
                            "sample case %d row %lld: probabilities not one-hot or "
                            "visibility differs (got %lld, want %lld)\n",
                            trial, (long long)row, (long long)got, (long long)want);
                    ok = 0;
                    break;
                }
                if (got != want) {
                    int64_t lo = got < want ? got : want, hi = got < want ? want : got;
                    double cum = 0, u = pgd_attention_uniform(a->seed, b, h, i, H, Nq);
                    for (int64_t j = 0; j <= lo; j++)
                        cum += sr[j];
                    int between_zero = 1;
                    for (int64_t j = lo + 1; j < hi; j++)
                        between_zero &= sr[j] < 1e-7;
                    if (fabs(cum - u) > 1e-5 || !between_zero) {
                        fprintf(stderr,
                                "sample case %d row %lld: picked key %lld, reference %lld "
                                "(u %.8f, cdf %.8f)\n",
                                trial, (long long)row, (long long)got, (long long)want, u, cum);
                        ok = 0;
                        break;
                    }
                    (*ambiguous)++;
                }
                for (int64_t d = 0; d < D; d++) {
                    float want_o = got < 0 ? 0.0f : c.v[((b * H + h) * Nk + got) * D + d];
                    if (o[row * D + d] != want_o) {
                        fprintf(stderr, "sample case %d row %lld d %lld: O %g, V[%lld] %g\n", trial,
                                (long long)row, (long long)d, o[row * D + d], (long long)got,
                                want_o);
                        ok = 0;
                        break;
                    }
                }
            }
    free(o);
    free(p);
    free(wo);
    free(wp);
    free(sp);
    free(so);
    free_case(&c);
    return ok;
}

START_TEST(sample_random_cases)
{
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    for (size_t i = 0; i < n; i++) {
        pgd_ctx *ctx = pgd_test_ctx(&d[i]);
        pgd_rng r;
        pgd_rng_seed(&r, 11);
        int failed = 0, ambiguous = 0;
        for (int trial = 0; trial < 110; trial++)
            failed += !sample_case(ctx, &r, trial, d[i].software_rasteriser, &ambiguous);
        ck_assert_msg(failed == 0, "%s: %d of 110 sampled cases failed", d[i].name, failed);
        ck_assert_msg(ambiguous <= 3, "%s: %d picks at a rounding boundary", d[i].name, ambiguous);
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

/* 20,000 identical rows over 5 keys with known probabilities: the counts of each key must lie
 * within 5 standard deviations of n·p; the same seed repeats bitwise, another seed does not. */
START_TEST(sample_distribution)
{
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    const int64_t Nq = 20000, Nk = 5;
    const float logits[5] = {0.0f, 1.0f, -1.0f, 2.0f, 0.5f};
    double w[5], tot = 0;
    for (int j = 0; j < 5; j++)
        tot += w[j] = exp(logits[j]);
    float *q = malloc((size_t)Nq * sizeof *q), kk[5], vv[5];
    for (int64_t i = 0; i < Nq; i++)
        q[i] = 1.0f;
    for (int j = 0; j < 5; j++) {
        kk[j] = logits[j];
        vv[j] = (float)j;
    }
    for (size_t di = 0; di < n; di++) {
        pgd_ctx *ctx = pgd_test_ctx(&d[di]);
        int64_t sq[4] = {1, 1, Nq, 1}, sk[4] = {1, 1, Nk, 1};
        pgd_tensor *tq = pgd_test_upload(ctx, 4, sq, q), *tk = pgd_test_upload(ctx, 4, sk, kk);
        pgd_tensor *tv = pgd_test_upload(ctx, 4, sk, vv), *to = pgd_test_upload(ctx, 4, sq, q);
        pgd_attention_args a;
        memset(&a, 0, sizeof a);
        a.batch = a.heads = 1;
        a.nq = Nq;
        a.nk = Nk;
        a.head_dim = 1;
        a.scale = 1.0f;
        a.q = bhnd(tq, 1, Nq, 1);
        a.k = bhnd(tk, 1, Nk, 1);
        a.v = bhnd(tv, 1, Nk, 1);
        a.o = bhnd(to, 1, Nq, 1);
        a.mode = PGD_ATTENTION_SAMPLE;
        a.seed = 1234;
        float *o1 = malloc((size_t)Nq * sizeof *o1), *o2 = malloc((size_t)Nq * sizeof *o2);
        pgd_error *err = NULL;
        PGD_CHECK_OK(pgd_attention(ctx, &a, &err), &err);
        PGD_CHECK_OK(pgd_tensor_download(to, o1, &err), &err);
        int64_t count[5] = {0};
        for (int64_t i = 0; i < Nq; i++) {
            int j = (int)o1[i];
            ck_assert_msg(j >= 0 && j < 5 && o1[i] == (float)j, "row %lld: O %g is no key's V",
                          (long long)i, o1[i]);
            count[j]++;
        }
        for (int j = 0; j < 5; j++) {
            double p = w[j] / tot, mean = (double)Nq * p, sd = sqrt((double)Nq * p * (1 - p));
            ck_assert_msg(fabs((double)count[j] - mean) <= 5 * sd + 1,
                          "%s: key %d drawn %lld times, expected %.0f +- %.0f", d[di].name, j,
                          (long long)count[j], mean, 5 * sd);
        }
        PGD_CHECK_OK(pgd_attention(ctx, &a, &err), &err);
        PGD_CHECK_OK(pgd_tensor_download(to, o2, &err), &err);
        ck_assert_msg(memcmp(o1, o2, (size_t)Nq * sizeof *o1) == 0, "same seed, other draws");
        a.seed = 1235;
        PGD_CHECK_OK(pgd_attention(ctx, &a, &err), &err);
        PGD_CHECK_OK(pgd_tensor_download(to, o2, &err), &err);
        int64_t differ = 0;
        for (int64_t i = 0; i < Nq; i++)
            differ += o1[i] != o2[i];
        ck_assert_msg(differ > Nq / 2, "another seed changed only %lld of %lld draws",
                      (long long)differ, (long long)Nq);
        free(o1);
        free(o2);
        pgd_tensor *all[] = {tq, tk, tv, to};
        for (int i = 0; i < 4; i++)
            pgd_tensor_destroy(all[i]);
        pgd_ctx_destroy(ctx);
    }
    free(q);
}
END_TEST

/* A NaN in a query makes its row NaN in both hard modes; other rows stay finite. Bad arguments
 * are refused with a message. */
START_TEST(nan_rows_and_errors)
{
    if (!pgd_test_primary())
        return;
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    pgd_ctx *ctx = pgd_test_ctx(&d[0]);
    pgd_rng r;
    pgd_rng_seed(&r, 5);
    hard_case c;
    do {
        make_case(ctx, &r, &c, 1, 0);
        if (c.a.nq >= 2 && c.a.nk >= 2 && !c.m && !c.a.causal)
            break;
        free_case(&c);
    } while (1);
    c.q[0] = NAN; /* row 0 of head 0 */
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_tensor_upload(c.tq, c.q, &err), &err);
    float *o = malloc((size_t)c.nq_el * sizeof *o), *p = malloc((size_t)c.np_el * sizeof *p);
    for (int mode = PGD_ATTENTION_TOPK; mode <= PGD_ATTENTION_SAMPLE; mode++) {
        c.a.mode = (pgd_attention_mode)mode;
        c.a.topk = 1;
        run_case(ctx, &c, o, p);
        int64_t D = c.a.head_dim;
        for (int64_t e = 0; e < D; e++)
            ck_assert_msg(isnan(o[e]), "mode %d: NaN query gave O %g", mode, o[e]);
        for (int64_t e = D; e < 2 * D; e++)
            ck_assert_msg(isfinite(o[e]), "mode %d: row 1 became %g", mode, o[e]);
    }
    c.a.mode = PGD_ATTENTION_TOPK;
    c.a.topk = 0;
    ck_assert_int_eq(pgd_attention(ctx, &c.a, &err), PGD_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(pgd_error_get_message(err), "k >= 1"), "%s", pgd_error_get_message(err));
    pgd_error_destroy(err);
    err = NULL;
    c.a.mode = (pgd_attention_mode)7;
    ck_assert_int_eq(pgd_attention(ctx, &c.a, &err), PGD_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(pgd_error_get_message(err), "mode 7"), "%s", pgd_error_get_message(err));
    pgd_error_destroy(err);
    free(o);
    free(p);
    free_case(&c);
    pgd_ctx_destroy(ctx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("attention_hard");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, nan_rows_and_errors);
    tcase_add_test(tc, topk_random_cases);
    tcase_add_test(tc, sample_random_cases);
    tcase_add_test(tc, sample_distribution);
    suite_add_tcase(s, tc);
    return pgd_test_run(s);
}
