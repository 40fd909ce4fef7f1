/* test_attention_ext.c — pgd_attention_ex's extended fields against a double reference written
 * here from their definitions (ONNX Attention's reference semantics): grouped key/value heads,
 * value head sizes smaller and larger than the key's, soft-capping, additive and boolean masks
 * broadcast over batch, heads and queries through zero strides, sliding windows with either
 * alignment (after a cache's past tokens too), per-sequence key counts, a KV cache appended in
 * place, and the raw, masked and probability scores as an output, half-precision storage. 120
 * random cases per device; the errors. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "reference.h"

#define TRIALS 120

static float *values(pgd_rng *r, int64_t n, float s)
{
    float *h = malloc((size_t)(n ? n : 1) * sizeof *h);
    for (int64_t i = 0; i < n; i++)
        h[i] = s * pgd_rng_float(r);
    return h;
}

/* IEEE half bits of x, a value a half holds exactly (pgd_ref_round_half's results). */
static uint16_t half_bits(float x)
{
    uint16_t sign = signbit(x) ? 0x8000 : 0;
    float a = fabsf(x);
    if (isnan(x))
        return sign | 0x7e00;
    if (isinf(x))
        return sign | 0x7c00;
    if (a < 6.103515625e-05f) /* subnormal: a multiple of 2^-24 */
        return sign | (uint16_t)(a * 16777216.0f);
    int e;
    float m = frexpf(a, &e); /* a = m·2^e, m in [0.5, 1) */
    return sign | (uint16_t)((e + 14) << 10) | (uint16_t)((m * 2.0f - 1.0f) * 1024.0f);
}

static float half_value(uint16_t h)
{
    int e = (h >> 10) & 31, f = h & 1023;
    float v = e == 0    ? ldexpf((float)f, -24)
              : e == 31 ? (f ? NAN : INFINITY)
                        : ldexpf((float)(1024 + f), e - 25);
    return (h & 0x8000) ? -v : v;
}

/* n values as a tensor: floats, or (half) IEEE halves two a float, x rounded to them. */
static pgd_tensor *upload(pgd_ctx *ctx, int64_t n, float *x, int half)
{
    if (!half) {
        int64_t s[1] = {n};
        return pgd_test_upload(ctx, 1, s, x);
    }
    int64_t s[1] = {(n + 1) / 2};
    uint16_t *h = calloc((size_t)(2 * s[0] + 2), sizeof *h);
    for (int64_t i = 0; i < n; i++)
        h[i] = half_bits(x[i] = pgd_ref_round_half(x[i]));
    pgd_tensor *t = pgd_test_upload(ctx, 1, s, (const float *)(void *)h);
    free(h);
    return t;
}

/* A tensor's first n values, floats or halves. */
static void download(const pgd_tensor *t, int64_t n, int half, float *out)
{
    pgd_error *err = NULL;
    if (!half) {
        PGD_CHECK_OK(pgd_tensor_download(t, out, &err), &err);
        return;
    }
    uint16_t *h = malloc((size_t)(pgd_tensor_get_numel(t) * 2) * sizeof *h);
    PGD_CHECK_OK(pgd_tensor_download(t, (float *)(void *)h, &err), &err);
    for (int64_t i = 0; i < n; i++)
        out[i] = half_value(h[i]);
    free(h);
}

/* One case's sizes and fields; tensors are BHND and contiguous (the cache [B, kv, cap, d]). */
typedef struct {
    int64_t B, H, kv, nq, nk, past, dk, dv, cap;
    int causal, align, mask_kind, mask_bool, window, scores_kind;
    int64_t wl, wr, lens[4];
    int with_lens, half;
    float scale, softcap;
    int64_t mb, mh, mq; /* the mask's strides over batch, heads and queries (0: broadcast) */
} xcase;

/* Key j's visibility and score for row i of head h of batch b; all keys NK = past + nk. */
static double ref_score(const xcase *c, const float *q, const float *k, const float *m, int64_t b,
                        int64_t h, int64_t i, int64_t j, int *visible, double *raw)
{
    int64_t NK = c->past + c->nk, hk = h / (c->H / c->kv);
    int64_t nkb = c->with_lens ? c->lens[b] : NK;
    int64_t p = i + (c->align == PGD_CAUSAL_TOP_LEFT     ? 0
                     : c->align == PGD_CAUSAL_AFTER_PAST ? c->past
                                                         : nkb - c->nq);
    *visible = j < nkb && (!c->causal || j <= p) && (!c->window || c->wl < 0 || p - j <= c->wl) &&
               (!c->window || c->wr < 0 || j - p <= c->wr);
    double sc = 0.0;
    for (int64_t d = 0; d < c->dk; d++)
        sc += (double)q[((b * c->H + h) * c->nq + i) * c->dk + d] *
              k[((b * c->kv + hk) * c->cap + j) * c->dk + d];
    sc *= c->scale;
    if (c->softcap > 0)
        sc = c->softcap * tanh(sc / c->softcap);
    *raw = sc;
    if (c->mask_kind) {
        double mv = m[b * c->mb + h * c->mh + i * c->mq + j];
        sc = c->mask_bool ? (mv == 0.0 ? -INFINITY : sc) : sc + mv;
    }
    return *visible ? sc : -INFINITY;
}

/* The reference output [B, H, nq, dv] and scores [B, H, nq, NK] of the kind asked for. */
static void reference(const xcase *c, const float *q, const float *k, const float *v,
                      const float *m, double *out, double *scores)
{
    int64_t NK = c->past + c->nk;
    double *s = malloc((size_t)NK * sizeof *s), *raw = malloc((size_t)NK * sizeof *raw);
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t h = 0; h < c->H; h++)
            for (int64_t i = 0; i < c->nq; i++) {
                int64_t hk = h / (c->H / c->kv), row = (b * c->H + h) * c->nq + i;
                double mx = -INFINITY, sum = 0.0;
                int vis;
                for (int64_t j = 0; j < NK; j++) {
                    s[j] = ref_score(c, q, k, m, b, h, i, j, &vis, &raw[j]);
                    mx = s[j] > mx ? s[j] : mx;
                    if (scores && c->scores_kind != PGD_SCORES_PROBS)
                        scores[row * NK + j] = c->scores_kind == PGD_SCORES_RAW ? raw[j] : s[j];
                }
                for (int64_t j = 0; j < NK; j++)
                    sum += s[j] = mx == -INFINITY ? 0.0 : exp(s[j] - mx);
                for (int64_t j = 0; j < NK && scores && c->scores_kind == PGD_SCORES_PROBS; j++)
                    scores[row * NK + j] = sum > 0 ? s[j] / sum : 0.0;
                for (int64_t d = 0; d < c->dv; d++) {
                    double o = 0.0;
                    for (int64_t j = 0; j < NK && sum > 0; j++)
                        o += s[j] / sum * v[((b * c->kv + hk) * c->cap + j) * c->dv + d];
                    out[row * c->dv + d] = o;
                }
            }
    free(s), free(raw);
}

/* Scores with -inf where the reference has -inf, else within tolerance. */
static int scores_close(const float *got, const double *want, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++) {
        if (isinf(want[i]) ? got[i] != (float)want[i]
                           : !(fabs(got[i] - want[i]) <= 1e-5 + 1e-4 * fabs(want[i]))) {
            fprintf(stderr, "%s: score %zu is %.9g, want %.9g\n", what, i, got[i], want[i]);
            return 0;
        }
    }
    return 1;
}

static void draw(pgd_rng *r, int trial, xcase *c)
{
    memset(c, 0, sizeof *c);
    c->B = pgd_rng_int(r, 1, 3), c->kv = pgd_rng_int(r, 1, 2);
    c->H = c->kv * pgd_rng_int(r, 1, 3);
    c->nq = pgd_rng_int(r, 1, 24), c->nk = pgd_rng_int(r, 1, 40);
    c->past = trial % 4 == 3 ? pgd_rng_int(r, 0, 20) : 0;
    c->dk = pgd_rng_int(r, 1, 40), c->dv = trial % 3 ? pgd_rng_int(r, 1, 40) : c->dk;
    c->cap = c->past + c->nk + (c->past ? pgd_rng_int(r, 0, 5) : 0);
    c->causal = trial % 5 == 0 ? 0 : (int)pgd_rng_int(r, 0, 3);
    c->align = c->causal ? c->causal : (int)pgd_rng_int(r, 0, 3);
    if (c->past && trial % 8 == 3) /* a decoder step: as many queries as new keys */
        c->nq = c->nk;
    c->mask_kind = (int)pgd_rng_int(r, 0, 4);
    c->mask_bool = c->mask_kind && trial % 2;
    c->window = trial % 3 == 1;
    c->wl = pgd_rng_int(r, -1, 12), c->wr = pgd_rng_int(r, -1, 12);
    c->with_lens = trial % 4 == 2;
    for (int64_t b = 0; b < c->B; b++)
        c->lens[b] = pgd_rng_int(r, 0, c->nk);
    c->scores_kind = trial % 7 < 3 ? (int)(trial % 7) + 1 : 0;
    c->scale = trial % 6 == 5 ? 0.37f : 0.0f;
    c->softcap = trial % 4 == 1 ? (float)pgd_rng_int(r, 1, 8) : 0.0f;
    c->half = trial % 5 == 2;
}

static void ext_case(pgd_ctx *ctx, pgd_rng *r, int trial, const char *dev)
{
    xcase c;
    draw(r, trial, &c);
    int64_t NK = c.past + c.nk, nqx = c.B * c.H * c.nq * c.dk, no = c.B * c.H * c.nq * c.dv;
    int64_t nkc = c.B * c.kv * c.cap * c.dk, nvc = c.B * c.kv * c.cap * c.dv;
    int64_t nkn = c.B * c.kv * c.nk * c.dk, nvn = c.B * c.kv * c.nk * c.dv;
    /* the mask's shape: [B, H, nq, NK], [1, 1, nq, NK], [B, 1, 1, NK] or [1, H, nq, NK] */
    static const int bcast[5][3] = {{0, 0, 0}, {1, 1, 1}, {0, 0, 1}, {1, 0, 0}, {0, 1, 1}};
    const int *bc = bcast[c.mask_kind];
    c.mq = bc[2] ? 0 : NK;
    c.mh = bc[1] ? 0 : (bc[2] ? 1 : c.nq) * NK;
    c.mb = bc[0] ? 0 : (bc[1] ? 1 : c.H) * (bc[2] ? 1 : c.nq) * NK;
    int64_t nm = (bc[0] ? 1 : c.B) * (bc[1] ? 1 : c.H) * (bc[2] ? 1 : c.nq) * NK;
    float *hq = values(r, nqx, 2.0f), *hkc = values(r, nkc, 2.0f), *hvc = values(r, nvc, 1.0f);
    float *hkn = values(r, nkn, 2.0f), *hvn = values(r, nvn, 1.0f), *hm = values(r, nm, 3.0f);
    for (int64_t i = 0; c.mask_bool && i < nm; i++)
        hm[i] = hm[i] > 0.0f ? 1.0f : 0.0f;
    float *const inputs[5] = {hq, hkc, hvc, hkn, hvn};
    const int64_t counts[5] = {nqx, nkc, nvc, nkn, nvn};
    for (int t = 0; t < 5 && c.half; t++) /* the values halves hold, for the reference too */
        for (int64_t i = 0; i < counts[t]; i++)
            inputs[t][i] = pgd_ref_round_half(inputs[t][i]);
    /* the reference's K and V: the cache with the new tokens at [past, past + nk) */
    float *rk = malloc((size_t)nkc * sizeof *rk), *rv = malloc((size_t)nvc * sizeof *rv);
    memcpy(rk, hkc, (size_t)nkc * sizeof *rk), memcpy(rv, hvc, (size_t)nvc * sizeof *rv);
    for (int64_t bh = 0; bh < c.B * c.kv; bh++)
        for (int64_t t = 0; t < c.nk; t++) {
            memcpy(rk + (bh * c.cap + c.past + t) * c.dk, hkn + (bh * c.nk + t) * c.dk,
                   (size_t)c.dk * sizeof *rk);
            memcpy(rv + (bh * c.cap + c.past + t) * c.dv, hvn + (bh * c.nk + t) * c.dv,
                   (size_t)c.dv * sizeof *rv);
        }
    xcase rc_ = c;
    rc_.scale = c.scale != 0.0f ? c.scale : (float)(1.0 / sqrt((double)c.dk));
    double *want = malloc((size_t)no * sizeof *want);
    double *wsc = malloc((size_t)(c.B * c.H * c.nq * NK + 1) * sizeof *wsc);
    reference(&rc_, hq, rk, rv, hm, want, c.scores_kind ? wsc : NULL);

    int64_t s1[1];
    pgd_tensor *q = upload(ctx, nqx, hq, c.half);
    pgd_tensor *k = upload(ctx, c.past ? nkc : nkn, c.past ? hkc : hkn, c.half), *kn = NULL;
    pgd_tensor *v = upload(ctx, c.past ? nvc : nvn, c.past ? hvc : hvn, c.half), *vn = NULL;
    pgd_tensor *o, *sc = NULL;
    s1[0] = nm;
    pgd_tensor *m = c.mask_kind ? pgd_test_upload(ctx, 1, s1, hm) : NULL;
    pgd_error *err = NULL;
    s1[0] = c.half ? (no + 1) / 2 : no;
    PGD_CHECK_OK(pgd_tensor_create(ctx, 1, s1, &o, &err), &err);
    int64_t nsc = c.B * c.H * c.nq * NK;
    s1[0] = nsc;
    if (c.scores_kind)
        PGD_CHECK_OK(pgd_tensor_create(ctx, 1, s1, &sc, &err), &err);
    pgd_attention_args a;
    memset(&a, 0, sizeof a);
    a.batch = c.B, a.heads = c.H, a.nq = c.nq, a.nk = c.nk, a.head_dim = c.dk;
    a.causal = c.causal, a.scale = c.scale;
    a.q = (pgd_view){q, 0, c.H * c.nq * c.dk, c.nq * c.dk, c.dk};
    a.o = (pgd_view){o, 0, c.H * c.nq * c.dv, c.nq * c.dv, c.dv};
    a.mask = (pgd_view){m, 0, c.mb, c.mh, c.mq};
    pgd_attention_ext e;
    memset(&e, 0, sizeof e);
    e.size = sizeof e, e.kv_heads = c.kv, e.v_head_dim = c.dv, e.softcap = c.softcap;
    e.mask_bool = c.mask_bool, e.window = c.window, e.window_left = c.wl, e.window_right = c.wr;
    e.window_align = c.causal ? 0 : c.align;
    e.kv_lens = c.with_lens ? c.lens : NULL;
    e.scores = sc, e.scores_kind = c.scores_kind, e.half_io = c.half;
    if (c.past) { /* new tokens in tensors of their own, appended to the cache by the call */
        kn = upload(ctx, nkn, hkn, c.half);
        vn = upload(ctx, nvn, hvn, c.half);
        a.k = (pgd_view){kn, 0, c.kv * c.nk * c.dk, c.nk * c.dk, c.dk};
        a.v = (pgd_view){vn, 0, c.kv * c.nk * c.dv, c.nk * c.dv, c.dv};
        e.k_cache = (pgd_view){k, 0, c.kv * c.cap * c.dk, c.cap * c.dk, c.dk};
        e.v_cache = (pgd_view){v, 0, c.kv * c.cap * c.dv, c.cap * c.dv, c.dv};
        e.past = c.past;
    } else {
        a.k = (pgd_view){k, 0, c.kv * c.nk * c.dk, c.nk * c.dk, c.dk};
        a.v = (pgd_view){v, 0, c.kv * c.nk * c.dv, c.nk * c.dv, c.dv};
    }
    PGD_CHECK_OK(pgd_attention_ex(ctx, &a, &e, &err), &err);
    char what[300];
    snprintf(what, sizeof what,
             "ext on %s, case %d: B %lld, %lld heads over %lld, nq %lld, nk %lld + past %lld, "
             "dk %lld dv %lld, causal %d align %d, mask %d bool %d, window %d [%lld, %lld], "
             "lens %d, softcap %g, scores %d, half %d",
             dev, trial, (long long)c.B, (long long)c.H, (long long)c.kv, (long long)c.nq,
             (long long)c.nk, (long long)c.past, (long long)c.dk, (long long)c.dv, c.causal,
             c.align, c.mask_kind, c.mask_bool, c.window, (long long)c.wl, (long long)c.wr,
             c.with_lens, c.softcap, c.scores_kind, c.half);
    float *got = malloc((size_t)(nsc > no ? nsc : no) * sizeof *got);
    download(o, no, c.half, got);
    ck_assert_msg(
        pgd_test_allclose(got, want, (size_t)no, c.half ? 1e-3 : 1e-4, c.half ? 1e-4 : 1e-5, what),
        "%s", what);
    if (sc) {
        PGD_CHECK_OK(pgd_tensor_download(sc, got, &err), &err);
        ck_assert_msg(scores_close(got, wsc, (size_t)nsc, what), "%s", what);
    }
    if (c.past) { /* the cache holds the new tokens and nothing else changed */
        float *ck = malloc((size_t)nkc * sizeof *ck);
        download(k, nkc, c.half, ck);
        ck_assert_msg(!memcmp(ck, rk, (size_t)nkc * sizeof *ck), "%s: K cache", what);
        free(ck);
    }
    pgd_tensor *all[] = {q, k, v, m, o, sc, kn, vn};
    for (int i = 0; i < 8; i++)
        pgd_tensor_destroy(all[i]);
    free(hq), free(hkc), free(hvc), free(hkn), free(hvn), free(hm), free(rk), free(rv);
    free(want), free(wsc), free(got);
}

START_TEST(ext_random)
{
    PGD_TEST_EACH_DEVICE(233, for (int i = 0; i < TRIALS; i++) ext_case(ctx, &r, i, dev));
}
END_TEST

/* A row whose keys are all hidden gives zeros, its probabilities zeros and its masked scores
 * -inf; NaN in Q reaches its row's output. */
START_TEST(hidden_rows)
{
    PGD_TEST_EACH_DEVICE(7, {
        float hq[2 * 4], hk[3 * 4], hv[3 * 4];
        for (int i = 0; i < 12; i++)
            hk[i] = hv[i] = (float)i * 0.25f, hq[i % 8] = 1.0f - (float)(i % 8) * 0.1f;
        hq[4] = NAN;
        int64_t s8[1] = {8}, s12[1] = {12}, s6[1] = {6};
        pgd_tensor *q = pgd_test_upload(ctx, 1, s8, hq), *k = pgd_test_upload(ctx, 1, s12, hk);
        pgd_tensor *v = pgd_test_upload(ctx, 1, s12, hv), *o, *p;
        pgd_error *err = NULL;
        PGD_CHECK_OK(pgd_tensor_create(ctx, 1, s8, &o, &err), &err);
        PGD_CHECK_OK(pgd_tensor_create(ctx, 1, s6, &p, &err), &err);
        pgd_attention_args a;
        memset(&a, 0, sizeof a);
        a.batch = 1, a.heads = 1, a.nq = 2, a.nk = 3, a.head_dim = 4;
        a.q = (pgd_view){q, 0, 8, 8, 4}, a.o = (pgd_view){o, 0, 8, 8, 4};
        a.k = (pgd_view){k, 0, 12, 12, 4}, a.v = (pgd_view){v, 0, 12, 12, 4};
        int64_t lens[1] = {0};
        pgd_attention_ext e;
        memset(&e, 0, sizeof e);
        e.size = sizeof e, e.kv_lens = lens, e.scores = p, e.scores_kind = PGD_SCORES_PROBS;
        PGD_CHECK_OK(pgd_attention_ex(ctx, &a, &e, &err), &err);
        float got[8];
        PGD_CHECK_OK(pgd_tensor_download(o, got, &err), &err);
        for (int i = 0; i < 8; i++)
            ck_assert_msg(got[i] == 0.0f, "%s: no visible key: output %d is %g", dev, i, got[i]);
        PGD_CHECK_OK(pgd_tensor_download(p, got, &err), &err);
        for (int i = 0; i < 6; i++)
            ck_assert_msg(got[i] == 0.0f, "%s: no visible key: probability %d", dev, i);
        lens[0] = 3;
        PGD_CHECK_OK(pgd_attention_ex(ctx, &a, &e, &err), &err);
        PGD_CHECK_OK(pgd_tensor_download(o, got, &err), &err);
        for (int i = 0; i < 4; i++)
            ck_assert_msg(isfinite(got[i]) && isnan(got[4 + i]), "%s: NaN row %d", dev, i);
        pgd_tensor *all[] = {q, k, v, o, p};
        for (int i = 0; i < 5; i++)
            pgd_tensor_destroy(all[i]);
    });
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
    pgd_attention_ext e;
    memset(&e, 0, sizeof e);
    e.size = sizeof e, e.softcap = -1.0f;
    int rc = pgd_attention_ex(ctx, &a, &e, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_INVALID_ARGUMENT, "softcap must be 0");
    err = NULL, e.softcap = 0.0f, e.window = 1, e.window_left = -2;
    rc = pgd_attention_ex(ctx, &a, &e, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_INVALID_ARGUMENT, "window of -2 left");
    err = NULL, e.window_left = 1, a.causal = PGD_CAUSAL_TOP_LEFT,
    e.window_align = PGD_CAUSAL_BOTTOM_RIGHT;
    rc = pgd_attention_ex(ctx, &a, &e, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_INVALID_ARGUMENT, "agree with args->causal");
    err = NULL, e.window_align = 0;
    int64_t lens[1] = {6};
    e.kv_lens = lens;
    rc = pgd_attention_ex(ctx, &a, &e, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_INVALID_ARGUMENT, "kv_lens[0] is 6");
    err = NULL, e.kv_lens = NULL, e.scores = t, e.scores_kind = 4;
    rc = pgd_attention_ex(ctx, &a, &e, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_INVALID_ARGUMENT, "scores_kind");
    err = NULL, e.scores_kind = PGD_SCORES_RAW, e.scores = p;
    rc = pgd_attention_ex(ctx, &a, &e, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_INVALID_ARGUMENT, "must not share a tensor");
    err = NULL, e.scores = t, a.probs = p;
    rc = pgd_attention_ex(ctx, &a, &e, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_UNSUPPORTED, "ask for ext->scores");
    err = NULL, a.probs = NULL, e.scores = NULL, e.softcap = 2.0f, a.mode = PGD_ATTENTION_TOPK;
    a.topk = 2;
    rc = pgd_attention_ex(ctx, &a, &e, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_UNSUPPORTED, "hard attention");
    err = NULL, a.mode = PGD_ATTENTION_SOFT, e.k_cache = (pgd_view){t, 0, 160, 40, 8};
    rc = pgd_attention_ex(ctx, &a, &e, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_INVALID_ARGUMENT, "needs k_cache and v_cache");
    err = NULL, e.v_cache = e.k_cache, e.past = 1;
    rc = pgd_attention_ex(ctx, &a, &e, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_SHAPE, "K cache view");
    err = NULL, e.k_cache.t = e.v_cache.t = NULL, e.past = 0, e.v_head_dim = 5000;
    rc = pgd_attention_ex(ctx, &a, &e, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_SHAPE, "value head size of 5000");
    err = NULL, e.v_head_dim = 0, e.scores = t, e.scores_kind = PGD_SCORES_RAW;
    a.nq = 1, a.nk = 40; /* scores need 4 * 1 * 40 floats: fits; the K view does not */
    rc = pgd_attention_ex(ctx, &a, &e, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_SHAPE, "K view");
    pgd_tensor_destroy(t), pgd_tensor_destroy(p);
    pgd_ctx_destroy(ctx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("attention_ext");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, ext_random);
    tcase_add_test(tc, hidden_rows);
    tcase_add_test(tc, errors);
    suite_add_tcase(s, tc);
    return pgd_test_run(s);
}
