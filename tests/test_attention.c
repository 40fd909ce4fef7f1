/* test_attention.c — fused attention against a double-precision reference on every device:
 * random sizes, head dims, layouts (BHND, BNHD, fused qkv), masks, causal, probabilities, and
 * every kernel variant; every element outside the output view must stay untouched. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "internal.h" /* white-box: reaches library internals */
#include "reference.h"

static int64_t at(const pgd_view *v, int64_t b, int64_t h, int64_t t)
{
    return v->offset + b * v->batch_stride + h * v->head_stride + t * v->token_stride;
}

static const int64_t awkward[] = {1, 2, 3, 7, 13, 31, 63, 64, 65, 127, 197, 257};
static const int64_t dims[] = {1, 3, 16, 32, 64, 80, 128};

/* Lays out [B, H, N, D] in one of three ways with optional padding; returns elements needed. */
static pgd_view layout(int kind, int64_t H, int64_t N, int64_t D, int64_t pad, int64_t off)
{
    pgd_view v = {NULL, off, 0, 0, 0};
    if (kind == 0) { /* BHND */
        v.token_stride = D + pad;
        v.head_stride = N * v.token_stride;
        v.batch_stride = H * v.head_stride;
    } else { /* BNHD */
        v.token_stride = H * D + pad;
        v.head_stride = D;
        v.batch_stride = N * v.token_stride;
    }
    return v;
}

static int64_t extent(const pgd_view *v, int64_t B, int64_t H, int64_t N, int64_t D)
{
    return at(v, B - 1, H - 1, N - 1) + D;
}

static const char *variants[] = {"rows", "tiled", "generic", "kt"};

/* Runs the case again with other launch options -- the launch split into chunks of
 * launch_rows (1: one work-group of query rows per launch), the kt kernel's keys in blocks of
 * key_block -- and the output and probabilities must be bitwise equal to the first run's. */
static int same_again(pgd_ctx *ctx, pgd_attention_args *a, const float *ho, int64_t no,
                      const float *hp, int64_t np, const char *what, int64_t launch_rows,
                      int64_t key_block, const char *how)
{
    pgd_error *err = NULL;
    float *o2 = malloc((size_t)no * sizeof *o2), *p2 = np ? malloc((size_t)np * sizeof *p2) : NULL;
    for (int64_t i = 0; i < no; i++)
        o2[i] = NAN;
    PGD_CHECK_OK(pgd_tensor_upload((pgd_tensor *)a->o.t, o2, &err), &err);
    for (int64_t i = 0; i < np; i++)
        p2[i] = NAN;
    if (np)
        PGD_CHECK_OK(pgd_tensor_upload(a->probs, p2, &err), &err);
    ctx->knobs.max_launch_rows = launch_rows;
    ctx->knobs.attn_key_block = key_block;
    PGD_CHECK_OK(pgd_attention(ctx, a, &err), &err);
    ctx->knobs.max_launch_rows = 0;
    ctx->knobs.attn_key_block = 0;
    PGD_CHECK_OK(pgd_tensor_download(a->o.t, o2, &err), &err);
    if (np)
        PGD_CHECK_OK(pgd_tensor_download(a->probs, p2, &err), &err);
    int ok = memcmp(o2, ho, (size_t)no * sizeof *o2) == 0 &&
             (!np || memcmp(p2, hp, (size_t)np * sizeof *p2) == 0);
    if (!ok)
        fprintf(stderr, "%s: %s differ from one launch\n", what, how);
    free(o2);
    free(p2);
    return ok;
}

static int one_case(pgd_ctx *ctx, pgd_rng *r, int trial, int small, int chunked)
{
    ctx->opt.attention = (pgd_attention_variant)(PGD_ATTENTION_ROWS + trial % 4); /* variants[] */
    pgd_attention_args a;
    memset(&a, 0, sizeof a);
    int64_t cap = small ? 6 : 12;
    a.batch = pgd_rng_int(r, 1, 2);
    a.heads = pgd_rng_int(r, 1, small ? 2 : 4);
    a.nq = awkward[pgd_rng_int(r, 0, small ? 8 : cap - 1)];
    a.nk = pgd_rng_int(r, 0, 2) ? a.nq : awkward[pgd_rng_int(r, 0, small ? 8 : cap - 1)];
    a.head_dim = dims[pgd_rng_int(r, 0, small ? 4 : 6)];
    a.causal = pgd_rng_int(r, 0, 3) == 0 ? (int)pgd_rng_int(r, 1, 2) : 0; /* either alignment */
    int use_mask = pgd_rng_int(r, 0, 3) == 0;
    a.scale = pgd_rng_int(r, 0, 1) ? 0.0f : 0.3f;
    int64_t B = a.batch, H = a.heads, Nq = a.nq, Nk = a.nk, D = a.head_dim;
    int packed = Nq == Nk && pgd_rng_int(r, 0, 2) == 0;
    int64_t nqkv, no;
    pgd_view vq, vk, vv, vo;
    if (packed) { /* the ViT layout: one [B, N, 3, H, D] tensor */
        int64_t tok = 3 * H * D;
        vq = (pgd_view){NULL, 0, Nq * tok, D, tok};
        vk = (pgd_view){NULL, H * D, Nq * tok, D, tok};
        vv = (pgd_view){NULL, 2 * H * D, Nq * tok, D, tok};
        nqkv = B * Nq * tok;
    } else {
        int kind = (int)pgd_rng_int(r, 0, 1);
        int64_t pad = pgd_rng_int(r, 0, 3), off = pgd_rng_int(r, 0, 5);
        vq = layout(kind, H, Nq, D, pad, off);
        int64_t eq = extent(&vq, B, H, Nq, D);
        vk = layout(1 - kind, H, Nk, D, pad, eq);
        int64_t ek = extent(&vk, B, H, Nk, D);
        vv = layout(kind, H, Nk, D, 0, ek);
        nqkv = extent(&vv, B, H, Nk, D);
    }
    vo = layout((int)pgd_rng_int(r, 0, 1), H, Nq, D, pgd_rng_int(r, 0, 2), pgd_rng_int(r, 0, 3));
    no = extent(&vo, B, H, Nq, D) + 17; /* a canary tail */
    float *hqkv = malloc((size_t)nqkv * sizeof(float));
    for (int64_t i = 0; i < nqkv; i++)
        hqkv[i] = pgd_rng_float(r) * 2.0f;
    float *hm = NULL;
    pgd_view vm = {NULL, 0, 0, 0, 0};
    int64_t nm = 0;
    if (use_mask) {
        /* Broadcast over batch and head sometimes (stride 0); -inf entries block keys. */
        vm.token_stride = Nk + pgd_rng_int(r, 0, 2);
        vm.head_stride = pgd_rng_int(r, 0, 1) ? Nq * vm.token_stride : 0;
        vm.batch_stride = pgd_rng_int(r, 0, 1) ? H * Nq * vm.token_stride : 0;
        nm = vm.batch_stride * (B - 1) + vm.head_stride * (H - 1) + vm.token_stride * Nq;
        hm = malloc((size_t)nm * sizeof(float));
        for (int64_t i = 0; i < nm; i++)
            hm[i] = pgd_rng_int(r, 0, 9) == 0 ? -INFINITY : pgd_rng_float(r);
    }
    int want_probs = pgd_rng_int(r, 0, 2) == 0 && Nk > 0;
    if (want_probs) {
        a.probs_head = pgd_rng_int(r, 0, 1) ? -1 : (int)pgd_rng_int(r, 0, H - 1);
        a.probs_q0 = pgd_rng_int(r, 0, Nq - 1);
        a.probs_q1 = pgd_rng_int(r, a.probs_q0 + 1, Nq);
    }
    pgd_error *err = NULL;
    pgd_tensor *tqkv = NULL, *to = NULL, *tm = NULL, *tp = NULL;
    int64_t s1[1] = {nqkv}, s2[1] = {no};
    tqkv = pgd_test_upload(ctx, 1, s1, hqkv);
    PGD_CHECK_OK(pgd_tensor_create(ctx, 1, s2, &to, &err), &err);
    float *ho = malloc((size_t)no * sizeof(float));
    for (int64_t i = 0; i < no; i++)
        ho[i] = NAN;
    PGD_CHECK_OK(pgd_tensor_upload(to, ho, &err), &err);
    if (use_mask) {
        int64_t s3[1] = {nm};
        tm = pgd_test_upload(ctx, 1, s3, hm);
        vm.t = tm;
    }
    int64_t hsel = a.probs_head < 0 ? H : 1,
            np = want_probs ? B * hsel * (a.probs_q1 - a.probs_q0) * Nk : 0;
    float *hp = NULL;
    if (want_probs) {
        int64_t s4[1] = {np};
        PGD_CHECK_OK(pgd_tensor_create(ctx, 1, s4, &tp, &err), &err);
        hp = malloc((size_t)np * sizeof(float));
        for (int64_t i = 0; i < np; i++)
            hp[i] = NAN;
        PGD_CHECK_OK(pgd_tensor_upload(tp, hp, &err), &err);
        a.probs = tp;
    }
    vq.t = vk.t = vv.t = tqkv;
    vo.t = to;
    a.q = vq;
    a.k = vk;
    a.v = vv;
    a.o = vo;
    a.mask = vm;
    PGD_CHECK_OK(pgd_attention(ctx, &a, &err), &err);
    PGD_CHECK_OK(pgd_tensor_download(to, ho, &err), &err);
    double *want = malloc((size_t)no * sizeof(double));
    for (int64_t i = 0; i < no; i++)
        want[i] = NAN;
    double *wp = want_probs ? malloc((size_t)np * sizeof(double)) : NULL;
    pgd_ref_attention(&a, hqkv, hqkv, hqkv, hm, want, wp);
    char what[200];
    snprintf(what, sizeof what,
             "%s B=%lld H=%lld Nq=%lld Nk=%lld D=%lld causal=%d mask=%d packed=%d probs=%d",
             variants[trial % 4], (long long)B, (long long)H, (long long)Nq, (long long)Nk,
             (long long)D, a.causal, use_mask, packed, want_probs);
    int ok = 1;
    /* Elements of the view match the reference; every other element is still NaN. */
    int64_t bad = -1;
    for (int64_t i = 0; i < no && bad < 0; i++) {
        if (isnan(want[i]))
            bad = isnan(ho[i]) ? -1 : i;
        else if (!(fabs(ho[i] - want[i]) <= 1e-5 + 1e-4 * fabs(want[i])))
            bad = i;
    }
    if (bad >= 0) {
        fprintf(stderr, "%s: element %lld: got %.9g, want %.9g\n", what, (long long)bad,
                (double)ho[bad], want[bad]);
        ok = 0;
    }
    if (want_probs) {
        PGD_CHECK_OK(pgd_tensor_download(tp, hp, &err), &err);
        ok &= pgd_test_allclose(hp, wp, (size_t)np, 1e-4, 1e-6, what);
    }
    if (chunked)
        ok &= same_again(ctx, &a, ho, no, hp, np, what, 1, 0, "chunked launches");
    /* kt's keys in blocks of 64 or 128 (whole key tiles), each block serving several query tiles
     * of a work-item: the same sums in the same order as unblocked (these heads are small
     * enough to run unblocked by default) */
    if (trial % 4 == 3 && Nk > 0)
        ok &= same_again(ctx, &a, ho, no, hp, np, what, chunked, pgd_rng_int(r, 1, 128),
                         chunked ? "key blocks in chunked launches" : "key blocks");
    pgd_tensor_destroy(tqkv);
    pgd_tensor_destroy(to);
    pgd_tensor_destroy(tm);
    pgd_tensor_destroy(tp);
    free(hqkv);
    free(hm);
    free(ho);
    free(hp);
    free(want);
    free(wp);
    ctx->opt.attention = PGD_ATTENTION_AUTO;
    return ok;
}

START_TEST(random_cases)
{
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    for (size_t i = 0; i < n; i++) {
        pgd_ctx *ctx = pgd_test_ctx(&d[i]);
        pgd_rng r;
        pgd_rng_seed(&r, 2024);
        int failed = 0, cases = 160;
        for (int t = 0; t < cases; t++)
            failed += !one_case(ctx, &r, t, d[i].software_rasteriser, 0);
        ck_assert_msg(failed == 0, "%s: %d of %d attention cases failed", d[i].name, failed, cases);
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

/* Long launches split over query rows give bitwise the same results as one launch, for every
 * variant, with causal masks, additive masks and probabilities. */
START_TEST(chunked_launches)
{
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    for (size_t i = 0; i < n; i++) {
        pgd_ctx *ctx = pgd_test_ctx(&d[i]);
        pgd_rng r;
        pgd_rng_seed(&r, 77);
        int failed = 0, cases = 40;
        for (int t = 0; t < cases; t++)
            failed += !one_case(ctx, &r, t, 1, 1);
        ck_assert_msg(failed == 0, "%s: %d of %d chunked attention cases failed", d[i].name, failed,
                      cases);
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

/* The ViT entry point on a fused qkv tensor, N=197, 3 heads of 64. */
START_TEST(qkv_entry_point)
{
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    for (size_t i = 0; i < n; i++) {
        pgd_ctx *ctx = pgd_test_ctx(&d[i]);
        pgd_error *err = NULL;
        int64_t B = 2, N = d[i].software_rasteriser ? 65 : 197, H = 3, D = 64;
        int64_t sq[3] = {B, N, 3 * H * D}, so[3] = {B, N, H * D};
        pgd_tensor *qkv = NULL, *out = NULL;
        PGD_CHECK_OK(pgd_tensor_create(ctx, 3, sq, &qkv, &err), &err);
        PGD_CHECK_OK(pgd_tensor_create(ctx, 3, so, &out, &err), &err);
        size_t nq = (size_t)(B * N * 3 * H * D), no = (size_t)(B * N * H * D);
        float *h = malloc(nq * sizeof *h), *got = malloc(no * sizeof *got);
        double *want = malloc(no * sizeof *want);
        pgd_rng r;
        pgd_rng_seed(&r, 3);
        for (size_t j = 0; j < nq; j++)
            h[j] = pgd_rng_float(&r);
        PGD_CHECK_OK(pgd_tensor_upload(qkv, h, &err), &err);
        PGD_CHECK_OK(pgd_attention_qkv(ctx, qkv, H, out, &err), &err);
        PGD_CHECK_OK(pgd_tensor_download(out, got, &err), &err);
        pgd_attention_args a;
        memset(&a, 0, sizeof a);
        a.batch = B;
        a.heads = H;
        a.nq = a.nk = N;
        a.head_dim = D;
        int64_t tok = 3 * H * D;
        a.q = (pgd_view){qkv, 0, N * tok, D, tok};
        a.k = (pgd_view){qkv, H * D, N * tok, D, tok};
        a.v = (pgd_view){qkv, 2 * H * D, N * tok, D, tok};
        a.o = (pgd_view){out, 0, N * H * D, D, H * D};
        pgd_ref_attention(&a, h, h, h, NULL, want, NULL);
        ck_assert(pgd_test_allclose(got, want, no, 1e-4, 1e-5, "attention_qkv"));
        /* misshaped */
        int64_t bad[3] = {B, N, H * D + 1};
        pgd_tensor *wrong = NULL;
        PGD_CHECK_OK(pgd_tensor_create(ctx, 3, bad, &wrong, &err), &err);
        ck_assert_int_eq(pgd_attention_qkv(ctx, qkv, H, wrong, &err), PGD_ERR_SHAPE);
        ck_assert(strstr(pgd_error_get_message(err), "[2, ") != NULL);
        pgd_error_destroy(err);
        pgd_tensor_destroy(wrong);
        pgd_tensor_destroy(qkv);
        pgd_tensor_destroy(out);
        free(h);
        free(got);
        free(want);
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("attention");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 1200);
    tcase_add_test(tc, qkv_entry_point);
    tcase_add_test(tc, random_cases);
    tcase_add_test(tc, chunked_launches);
    suite_add_tcase(s, tc);
    return pgd_test_run(s);
}
