/* test_gemm_strided.c — pgd_gemm_strided against a double-precision reference on every device:
 * random sizes, transposes, offsets, leading dimensions past the row, batch strides (shared,
 * interleaved, with gaps), epilogues; every element outside the operands is a NaN canary, so a
 * read of one shows up as NaN in C and a stray write as a changed canary. Then the checks. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "pgd_config.h"
#include "reference.h"

/* One operand's placement: `rows` x `cols` stored matrices, `batch` of them. */
typedef struct layout {
    int64_t rows, cols, off, ld, bs, numel;
} layout;

static int64_t end_of(const layout *l, int64_t batch)
{
    return l->off + (batch - 1) * l->bs + (l->rows - 1) * l->ld + l->cols;
}

/* shared: batch stride 0; out: must not let two items overlap (C). */
static layout place(pgd_rng *r, int64_t rows, int64_t cols, int64_t batch, int shared)
{
    layout l = {rows, cols, 0, cols, 0, 0};
    int mode = (int)pgd_rng_int(r, 0, 3);
    if (pgd_rng_int(r, 0, 2))
        l.off = pgd_rng_int(r, 1, 50);
    if (mode == 0 && batch > 1 && !shared) {
        /* Items side by side in each row (one head's columns of a fused projection). */
        l.ld = cols * batch + pgd_rng_int(r, 0, 5);
        l.bs = cols;
    } else {
        if (pgd_rng_int(r, 0, 2))
            l.ld = cols + pgd_rng_int(r, 1, 9);
        l.bs = shared ? 0 : rows * l.ld + (pgd_rng_int(r, 0, 1) ? 0 : pgd_rng_int(r, 1, 13));
    }
    l.numel = end_of(&l, batch) + (pgd_rng_int(r, 0, 3) ? pgd_rng_int(r, 1, 9) : 0);
    return l;
}

static float value(pgd_rng *r, int integers)
{
    return integers ? (float)pgd_rng_int(r, -3, 3) : pgd_rng_float(r);
}

/* Writes random values to the addressed elements of buf (the rest keeps what it has) and
 * marks them in mask when mask is non-NULL. */
static void fill_operand(pgd_rng *r, float *buf, const layout *l, int64_t batch, int integers,
                         char *mask)
{
    for (int64_t b = 0; b < batch; b++)
        for (int64_t i = 0; i < l->rows; i++)
            for (int64_t j = 0; j < l->cols; j++) {
                int64_t k = l->off + b * l->bs + i * l->ld + j;
                buf[k] = value(r, integers);
                if (mask)
                    mask[k] = 1;
            }
}

static float *canaries(int64_t n)
{
    float *p = malloc((size_t)(n ? n : 1) * sizeof *p);
    ck_assert_ptr_nonnull(p);
    for (int64_t i = 0; i < n; i++)
        p[i] = pgd_test_canary();
    return p;
}

static const int64_t awkward[] = {1, 2, 3, 5, 7, 11, 13, 17, 31, 37, 61, 64, 65, 97, 127, 129};

static int64_t pick_dim(pgd_rng *r)
{
    if (pgd_rng_int(r, 0, 1))
        return awkward[pgd_rng_int(r, 0, 15)];
    return pgd_rng_int(r, 1, 130);
}

/* One random case on ctx; returns 1 when it passed (failures are printed). */
static int one_case(pgd_ctx *ctx, pgd_rng *r, int trial, const char *dev)
{
    int ta = trial & 1, tb = (trial >> 1) & 1;
    int64_t M = pick_dim(r), N = pick_dim(r), K = pick_dim(r);
    int64_t batch = pgd_rng_int(r, 1, 4);
    int a_shared = batch > 1 && pgd_rng_int(r, 0, 3) == 0;
    int b_shared = batch > 1 && !a_shared && pgd_rng_int(r, 0, 2) == 0;
    int one_buffer = pgd_rng_int(r, 0, 5) == 0; /* A and B in one tensor */
    int has_bias = pgd_rng_int(r, 0, 1), has_res = pgd_rng_int(r, 0, 2) == 0;
    pgd_act act = (pgd_act)pgd_rng_int(r, 0, 2);
    int integers = act != PGD_ACT_GELU && pgd_rng_int(r, 0, 1);
    float alpha = integers ? (float)pgd_rng_int(r, 1, 2) : 0.5f + pgd_rng_float(r);
    float beta = 0.0f;
    if (pgd_rng_int(r, 0, 1))
        beta = integers ? (float)pgd_rng_int(r, -1, 2) : pgd_rng_float(r);

    layout la = place(r, ta ? K : M, ta ? M : K, batch, a_shared);
    layout lb = place(r, tb ? N : K, tb ? K : N, batch, b_shared);
    layout lc = place(r, M, N, batch, 0);
    if (one_buffer) {
        lb.off += la.numel;
        lb.numel += la.numel;
        la.numel = lb.numel;
    }
    float *ha = canaries(la.numel), *hb = one_buffer ? ha : canaries(lb.numel);
    float *hc = canaries(lc.numel), *hr = canaries(lc.numel), *bias = canaries(N);
    char *cmask = calloc((size_t)lc.numel, 1);
    fill_operand(r, ha, &la, a_shared ? 1 : batch, integers, NULL);
    fill_operand(r, hb, &lb, b_shared ? 1 : batch, integers, NULL);
    fill_operand(r, hr, &lc, batch, integers, NULL);
    /* With beta 0, C's own elements stay NaN canaries: the op must not read them. */
    if (beta != 0.0f)
        fill_operand(r, hc, &lc, batch, integers, NULL);
    for (int64_t b = 0; b < batch; b++)
        for (int64_t i = 0; i < M; i++)
            memset(cmask + lc.off + b * lc.bs + i * lc.ld, 1, (size_t)N);
    for (int64_t i = 0; i < N; i++)
        bias[i] = value(r, integers);

    double *want = malloc((size_t)lc.numel * sizeof *want);
    pgd_ref_mat ra = {ha, la.off, la.ld, la.bs}, rb = {hb, lb.off, lb.ld, lb.bs};
    pgd_ref_mat rc = {NULL, lc.off, lc.ld, lc.bs};
    pgd_ref_gemm_strided(ta, tb, M, N, K, batch, alpha, ra, rb, beta, hc, rc,
                         has_bias ? bias : NULL, (int)act, has_res ? hr : NULL, want);

    pgd_tensor *tA = pgd_test_upload(ctx, 1, &la.numel, ha);
    pgd_tensor *tB = one_buffer ? tA : pgd_test_upload(ctx, 1, &lb.numel, hb);
    /* C as a 2-D tensor, to show that the addressing ignores the tensor's shape. */
    int64_t cshape[2] = {1, lc.numel};
    pgd_tensor *tC = pgd_test_upload(ctx, 2, cshape, hc);
    int64_t nn = N;
    pgd_tensor *tbias = has_bias ? pgd_test_upload(ctx, 1, &nn, bias) : NULL;
    pgd_tensor *tR = has_res ? pgd_test_upload(ctx, 1, &lc.numel, hr) : NULL;
    pgd_gemm_args args = {ta, tb, alpha, beta, tbias, act, tR};
    pgd_matrix ma = {tA, la.off, la.ld, la.bs}, mb = {tB, lb.off, lb.ld, lb.bs},
               mc = {tC, lc.off, lc.ld, lc.bs};
    pgd_error *err = NULL;
    char what[256];
    snprintf(what, sizeof what,
             "%s: gemm_strided #%d ta=%d tb=%d M=%lld N=%lld K=%lld batch=%lld A(off %lld ld %lld "
             "bs %lld) B(off %lld ld %lld bs %lld) C(off %lld ld %lld bs %lld)%s alpha=%g "
             "beta=%g%s act=%d%s%s",
             dev, trial, ta, tb, (long long)M, (long long)N, (long long)K, (long long)batch,
             (long long)la.off, (long long)la.ld, (long long)la.bs, (long long)lb.off,
             (long long)lb.ld, (long long)lb.bs, (long long)lc.off, (long long)lc.ld,
             (long long)lc.bs, one_buffer ? " one-buffer" : "", alpha, beta,
             has_bias ? " bias" : "", (int)act, has_res ? " residual" : "",
             integers ? " integers" : "");
    int rcode = pgd_gemm_strided(ctx, &args, M, N, K, batch, ma, mb, mc, &err);
    int ok = rcode == PGD_OK;
    if (!ok)
        fprintf(stderr, "%s: %s\n", what, pgd_error_get_message(err));
    pgd_error_destroy(err);
    float *got = malloc((size_t)lc.numel * sizeof *got);
    float *g2 = malloc((size_t)lc.numel * sizeof *g2);
    double *w2 = malloc((size_t)lc.numel * sizeof *w2);
    if (ok) {
        err = NULL;
        PGD_CHECK_OK(pgd_tensor_download(tC, got, &err), &err);
        size_t n = 0;
        for (int64_t i = 0; i < lc.numel; i++) {
            if (cmask[i]) {
                g2[n] = got[i];
                w2[n++] = want[i];
            } else if (!pgd_test_is_canary(got[i])) {
                fprintf(stderr, "%s: element %lld of C's tensor is outside C and was written\n",
                        what, (long long)i);
                ok = 0;
                break;
            }
        }
        /* Integer inputs give exact sums in float: demand equality. Otherwise K·eps relative
         * to the magnitudes involved, as test_gemm. */
        double tol = integers ? 0.0 : 2e-6 * (double)K + 1e-5;
        ok = pgd_test_allclose(g2, w2, n, tol, tol, what) && ok;
        /* The inputs are untouched. */
        float *back = malloc((size_t)la.numel * sizeof *back);
        PGD_CHECK_OK(pgd_tensor_download(tA, back, &err), &err);
        if (memcmp(back, ha, (size_t)la.numel * sizeof *back) != 0) {
            fprintf(stderr, "%s: A's tensor changed\n", what);
            ok = 0;
        }
        free(back);
    }
    pgd_tensor_destroy(tA);
    if (!one_buffer)
        pgd_tensor_destroy(tB);
    pgd_tensor_destroy(tC);
    pgd_tensor_destroy(tbias);
    pgd_tensor_destroy(tR);
    free(ha);
    if (!one_buffer)
        free(hb);
    free(hc);
    free(hr);
    free(bias);
    free(cmask);
    free(want);
    free(got);
    free(g2);
    free(w2);
    return ok;
}

static void run_cases(const char *backend, int count, uint64_t seed)
{
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    char gemm[32];
    snprintf(gemm, sizeof gemm, "PAGODA_GEMM=%s", backend);
    const char *const vars[] = {gemm, NULL};
    for (size_t i = 0; i < n; i++) {
        /* Some cases with K split into chunks accumulated through beta, and with the rows
         * launched in small chunks: both move the offsets the kernels see. A context keeps the
         * options it was made with, so each mix has a context of its own, made when first
         * needed: ctx[chunked K + 2 * chunked rows]. */
        pgd_ctx *ctx[4] = {NULL, NULL, NULL, NULL};
        pgd_rng r;
        pgd_rng_seed(&r, seed);
        int failed = 0;
        for (int trial = 0; trial < count; trial++) {
            int mix = (trial % 4 == 3) + 2 * (trial % 5 == 2);
            if (!ctx[mix]) {
                pgd_ctx_options o;
                pgd_test_options(&d[i], vars, &o);
                pgd_test_knob(&o, "gemm_k_chunk", mix & 1 ? 29 : 0);
                pgd_test_knob(&o, "max_launch_rows", mix & 2 ? 5 : 0);
                ctx[mix] = pgd_test_ctx_opts(&o);
            }
            failed += !one_case(ctx[mix], &r, trial, d[i].name);
        }
        ck_assert_msg(failed == 0, "%s: %d of %d strided GEMM cases (%s) failed", d[i].name, failed,
                      count, backend);
        for (int mix = 0; mix < 4; mix++)
            pgd_ctx_destroy(ctx[mix]);
    }
}

START_TEST(random_cases)
{
    run_cases("pagoda", 120, 1234);
}
END_TEST

/* CLBlast forced: fewer cases (it compiles for seconds at its first call in each process). */
#if PGD_HAVE_CLBLAST
START_TEST(random_cases_clblast)
{
    run_cases("clblast", 16, 4321);
}
END_TEST
#endif

/* Whether `name` occurs in m as a word of its own (not inside another word). */
static int names(const char *m, const char *name)
{
    size_t len = strlen(name);
    for (const char *p = strstr(m, name); p; p = strstr(p + 1, name)) {
        int before = p == m || !(p[-1] == '_' || (p[-1] >= 'a' && p[-1] <= 'z') ||
                                 (p[-1] >= 'A' && p[-1] <= 'Z'));
        char c = p[len];
        int after = !(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'));
        if (before && after)
            return 1;
    }
    return 0;
}

static void expect(int rc, int code, pgd_error **err, const char *operand, const char *also,
                   const char *what)
{
    ck_assert_msg(rc == code, "%s: got %s, want %s (%s)", what, pgd_status_name(rc),
                  pgd_status_name(code), *err ? pgd_error_get_message(*err) : "no error object");
    ck_assert_ptr_nonnull(*err);
    const char *m = pgd_error_get_message(*err);
    ck_assert_msg(!operand || names(m, operand), "%s: message does not name %s: %s", what, operand,
                  m);
    ck_assert_msg(!also || strstr(m, also), "%s: message lacks '%s': %s", what, also, m);
    pgd_error_destroy(*err);
    *err = NULL;
}

START_TEST(errors)
{
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    for (size_t di = 0; di < n; di++) {
        pgd_ctx *ctx = pgd_test_ctx(&d[di]);
        /* A 2 x (3x4) in [30], B (4x5) shared in [20], C 2 x (3x5) in [40]. */
        int64_t na = 30, nb = 20, nc = 40, n5 = 5, n6 = 6;
        float *ones = malloc(40 * sizeof *ones), *cinit = canaries(40), got[40];
        for (int i = 0; i < 40; i++)
            ones[i] = 1.0f;
        pgd_tensor *A = pgd_test_upload(ctx, 1, &na, ones), *B = pgd_test_upload(ctx, 1, &nb, ones),
                   *C = pgd_test_upload(ctx, 1, &nc, cinit),
                   *R = pgd_test_upload(ctx, 1, &nc, ones),
                   *b5 = pgd_test_upload(ctx, 1, &n5, ones),
                   *b6 = pgd_test_upload(ctx, 1, &n6, ones);
        pgd_matrix a = {A, 0, 4, 12}, b = {B, 0, 5, 0}, c = {C, 0, 5, 15};
        pgd_gemm_args args = {0, 0, 1.0f, 0.0f, NULL, PGD_ACT_NONE, NULL};
        pgd_error *err = NULL;
        pgd_matrix x;
        /* Past the end: A's last element is at offset + 12 + 8 + 3, so offset 7 reaches element
         * 30 of 30. */
        x = a, x.offset = 7;
        expect(pgd_gemm_strided(ctx, NULL, 3, 5, 4, 2, x, b, c, &err), PGD_ERR_INVALID_ARGUMENT,
               &err, "A", "[30]", "A past its end");
        x = b, x.offset = 1;
        expect(pgd_gemm_strided(ctx, NULL, 3, 5, 4, 2, a, x, c, &err), PGD_ERR_INVALID_ARGUMENT,
               &err, "B", "[20]", "B past its end");
        x = b, x.batch_stride = 1; /* the second item reaches element 20 */
        expect(pgd_gemm_strided(ctx, NULL, 3, 5, 4, 2, a, x, c, &err), PGD_ERR_INVALID_ARGUMENT,
               &err, "B", NULL, "B's batch stride past its end");
        x = c, x.batch_stride = 26;
        expect(pgd_gemm_strided(ctx, NULL, 3, 5, 4, 2, a, b, x, &err), PGD_ERR_INVALID_ARGUMENT,
               &err, "C", "[40]", "C past its end");
        x = c, x.ld = 13; /* 2 rows of ld 13 + 5 = 31, + 15 = 46 */
        expect(pgd_gemm_strided(ctx, NULL, 3, 5, 4, 2, a, b, x, &err), PGD_ERR_INVALID_ARGUMENT,
               &err, "C", NULL, "C's ld past its end");
        /* Transposed A is stored K x M = 4 x 3: ld 4 is fine, but the extent is 4 rows. */
        args.trans_a = 1;
        x = a, x.ld = 3, x.batch_stride = 12, x.offset = 7; /* 7 + 12 + 9 + 2 = 30 */
        expect(pgd_gemm_strided(ctx, &args, 3, 5, 4, 2, x, b, c, &err), PGD_ERR_INVALID_ARGUMENT,
               &err, "A", NULL, "transposed A past its end");
        args.trans_a = 0;
        /* ld shorter than the stored row, either orientation. */
        x = a, x.ld = 3;
        expect(pgd_gemm_strided(ctx, NULL, 3, 5, 4, 2, x, b, c, &err), PGD_ERR_INVALID_ARGUMENT,
               &err, "A", NULL, "A's ld too small");
        args.trans_b = 1; /* stored B is N x K = 5 x 4: ld 4 is fine, 3 is not */
        x = b, x.ld = 3;
        expect(pgd_gemm_strided(ctx, &args, 3, 5, 4, 2, a, x, c, &err), PGD_ERR_INVALID_ARGUMENT,
               &err, "B", NULL, "transposed B's ld too small");
        args.trans_b = 0;
        x = c, x.ld = 4;
        expect(pgd_gemm_strided(ctx, NULL, 3, 5, 4, 2, a, b, x, &err), PGD_ERR_INVALID_ARGUMENT,
               &err, "C", NULL, "C's ld too small");
        /* Negative offsets and strides. */
        x = a, x.offset = -1;
        expect(pgd_gemm_strided(ctx, NULL, 3, 5, 4, 2, x, b, c, &err), PGD_ERR_INVALID_ARGUMENT,
               &err, "A", NULL, "negative offset of A");
        x = c, x.offset = -5;
        expect(pgd_gemm_strided(ctx, NULL, 3, 5, 4, 2, a, b, x, &err), PGD_ERR_INVALID_ARGUMENT,
               &err, "C", NULL, "negative offset of C");
        x = b, x.batch_stride = -20;
        expect(pgd_gemm_strided(ctx, NULL, 3, 5, 4, 2, a, x, c, &err), PGD_ERR_INVALID_ARGUMENT,
               &err, "B", NULL, "negative batch stride of B");
        /* C shared across a batch: every item would write the same matrix. */
        x = c, x.batch_stride = 0;
        expect(pgd_gemm_strided(ctx, NULL, 3, 5, 4, 2, a, b, x, &err), PGD_ERR_INVALID_ARGUMENT,
               &err, "C", NULL, "C's batch stride 0");
        /* Items that share elements: a stride of 1 puts item 1 one column after item 0. */
        x = c, x.batch_stride = 1;
        expect(pgd_gemm_strided(ctx, NULL, 3, 5, 4, 2, a, b, x, &err), PGD_ERR_INVALID_ARGUMENT,
               &err, "C", NULL, "C's items overlapping");
        /* A read from the elements C writes. */
        x = a, x.t = C;
        expect(pgd_gemm_strided(ctx, NULL, 3, 5, 4, 2, x, b, c, &err), PGD_ERR_INVALID_ARGUMENT,
               &err, "A", NULL, "A inside C");
        /* The residual is read with C's placement: in [20] it reaches past its end. */
        args.residual = B;
        expect(pgd_gemm_strided(ctx, &args, 3, 5, 4, 2, a, b, c, &err), PGD_ERR_INVALID_ARGUMENT,
               &err, "residual", "[20]", "residual past its end");
        args.residual = NULL;
        /* Bias of the wrong size. */
        args.bias = b6;
        expect(pgd_gemm_strided(ctx, &args, 3, 5, 4, 2, a, b, c, &err), PGD_ERR_SHAPE, &err, "bias",
               "[6]", "bias of 6 for N = 5");
        args.bias = NULL;
        /* No tensor, bad sizes. */
        x = a, x.t = NULL;
        expect(pgd_gemm_strided(ctx, NULL, 3, 5, 4, 2, x, b, c, &err), PGD_ERR_INVALID_ARGUMENT,
               &err, "A", NULL, "A without a tensor");
        expect(pgd_gemm_strided(ctx, NULL, -3, 5, 4, 2, a, b, c, &err), PGD_ERR_INVALID_ARGUMENT,
               &err, NULL, "-3", "negative M");
        expect(pgd_gemm_strided(ctx, NULL, 3, 5, 4, 0, a, b, c, &err), PGD_ERR_INVALID_ARGUMENT,
               &err, NULL, NULL, "batch 0");
        ck_assert_int_eq(pgd_gemm_strided(ctx, NULL, 3, 5, 4, 2, a, b, x, NULL),
                         PGD_ERR_INVALID_ARGUMENT);
        /* None of the refused calls wrote to C. */
        PGD_CHECK_OK(pgd_tensor_download(C, got, &err), &err);
        for (int i = 0; i < 40; i++)
            ck_assert_msg(pgd_test_is_canary(got[i]), "a refused call wrote C[%d]", i);

        /* The limits themselves are accepted: operands ending exactly at their tensor's end,
         * C's batch stride 0 with a batch of 1, a bias of N. A (one item): 18 + 8 + 3 = 29,
         * B: 15 + 4 = 19, C: 25 + 10 + 4 = 39. */
        x = a, x.offset = 18;
        pgd_matrix cb = {C, 25, 5, 0};
        args.bias = b5;
        PGD_CHECK_OK(pgd_gemm_strided(ctx, &args, 3, 5, 4, 1, x, b, cb, &err), &err);
        PGD_CHECK_OK(pgd_tensor_download(C, got, &err), &err);
        for (int i = 0; i < 40; i++)
            if (i >= 25)
                ck_assert_msg(got[i] == 5.0f, "C[%d] = %g, want 4 + 1", i, got[i]);
            else
                ck_assert_msg(pgd_test_is_canary(got[i]), "C[%d] outside C was written", i);
        args.bias = NULL;
        /* M = 0 or N = 0 is no work and no error. */
        PGD_CHECK_OK(pgd_gemm_strided(ctx, NULL, 0, 5, 4, 2, a, b, c, &err), &err);
        PGD_CHECK_OK(pgd_gemm_strided(ctx, NULL, 3, 0, 4, 2, a, b, c, &err), &err);
        pgd_tensor_destroy(A);
        pgd_tensor_destroy(B);
        pgd_tensor_destroy(C);
        pgd_tensor_destroy(R);
        pgd_tensor_destroy(b5);
        pgd_tensor_destroy(b6);
        free(ones);
        free(cinit);
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

/* K = 0: the product is empty, C = beta·C + bias (then act and residual). */
START_TEST(empty_k)
{
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    for (size_t di = 0; di < n; di++) {
        pgd_ctx *ctx = pgd_test_ctx_with(&d[di], (const char *const[]){"PAGODA_GEMM=pagoda", NULL});
        int64_t one = 1, nc = 12, n4 = 4;
        float c0[12], bias[4] = {1, -2, 3, -4}, got[12];
        for (int i = 0; i < 12; i++)
            c0[i] = (float)(i - 5);
        pgd_tensor *A = pgd_test_upload(ctx, 1, &one, c0), *C = pgd_test_upload(ctx, 1, &nc, c0),
                   *tb = pgd_test_upload(ctx, 1, &n4, bias);
        pgd_gemm_args args = {0, 0, 1.0f, 2.0f, tb, PGD_ACT_RELU, NULL};
        pgd_matrix a = {A, 0, 0, 0}, b = {A, 0, 4, 0}, c = {C, 0, 4, 4};
        pgd_error *err = NULL;
        PGD_CHECK_OK(pgd_gemm_strided(ctx, &args, 3, 4, 0, 1, a, b, c, &err), &err);
        PGD_CHECK_OK(pgd_tensor_download(C, got, &err), &err);
        for (int i = 0; i < 12; i++) {
            float x = 2.0f * c0[i] + bias[i % 4];
            ck_assert_msg(got[i] == (x > 0 ? x : 0.0f), "%s: K=0: C[%d] = %g, want %g", d[di].name,
                          i, got[i], x > 0 ? x : 0.0f);
        }
        pgd_tensor_destroy(A);
        pgd_tensor_destroy(C);
        pgd_tensor_destroy(tb);
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gemm_strided");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, errors);
    tcase_add_test(tc, empty_k);
    tcase_add_test(tc, random_cases);
    suite_add_tcase(s, tc);
    /* meson runs it as gemm_strided_clblast@DEVICE; skipped in a build without CLBlast */
#if PGD_HAVE_CLBLAST
    TCase *cb = tcase_create("clblast");
    tcase_set_tags(cb, "clblast");
    tcase_set_timeout(cb, 600);
    tcase_add_test(cb, random_cases_clblast);
    suite_add_tcase(s, cb);
#else
    pgd_test_case_unavailable("clblast", "built without CLBlast (meson option clblast)");
#endif
    return pgd_test_run(s);
}
