/* test_nan.c — NaN and ±inf propagation, as PyTorch does it, in every op on every device: NaN
 * and ±inf are put at random positions of the inputs, and the output must be NaN exactly where
 * the double reference (which follows PyTorch's rules: ReLU keeps NaN, a NaN in a max window
 * wins, a softmax or LayerNorm row with NaN or +inf is NaN) says, the same infinity where it is
 * infinite, and close to it elsewhere. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "reference.h"

/* x with about one element in `every` replaced by NaN, +inf or -inf (only NaN when nan_only). */
static float *poisoned(pgd_rng *r, size_t n, int every, int nan_only)
{
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) {
        x[i] = pgd_rng_float(r);
        if (pgd_rng_int(r, 0, every - 1) == 0) {
            int k = nan_only ? 0 : (int)pgd_rng_int(r, 0, 2);
            x[i] = k == 0 ? NAN : k == 1 ? INFINITY : -INFINITY;
        }
    }
    return x;
}

/* got matches want: NaN exactly where want is NaN, the same infinity where want is infinite,
 * within atol + rtol·|want| elsewhere. dontcare (may be NULL) marks elements not checked. On
 * failure prints the first bad index and both values. Returns the number of NaN in want. */
static size_t check_nan(const float *got, const double *want, const unsigned char *dontcare,
                        size_t n, double rtol, double atol, const char *what)
{
    size_t nans = 0, bad = 0, first = 0;
    for (size_t i = 0; i < n; i++) {
        if (dontcare && dontcare[i])
            continue;
        int ok;
        if (isnan(want[i])) {
            nans++;
            ok = isnan(got[i]);
        } else if (isinf(want[i])) {
            ok = got[i] == (float)want[i];
        } else {
            ok = isfinite(got[i]) && fabs(got[i] - want[i]) <= atol + rtol * fabs(want[i]);
        }
        if (!ok && bad++ == 0)
            first = i;
    }
    ck_assert_msg(bad == 0, "%s: %zu of %zu elements wrong; first %zu: got %.9g, want %.9g", what,
                  bad, n, first, bad ? (double)got[first] : 0.0, bad ? want[first] : 0.0);
    return nans;
}

static float *download(const pgd_tensor *t, size_t n)
{
    float *h = malloc(n * sizeof *h);
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_tensor_download(t, h, &err), &err);
    return h;
}

static pgd_tensor *empty(pgd_ctx *ctx, int ndim, const int64_t *shape)
{
    pgd_tensor *t = NULL;
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_tensor_create(ctx, ndim, shape, &t, &err), &err);
    return t;
}

START_TEST(elementwise_and_rows)
{
    size_t ndev;
    const pgd_device_info *devs = pgd_test_devices(&ndev);
    for (size_t di = 0; di < ndev; di++) {
        pgd_ctx *ctx = pgd_test_ctx(&devs[di]);
        pgd_rng r;
        pgd_rng_seed(&r, 11 + di);
        pgd_error *err = NULL;
        const size_t rows = 37, cols = 300, n = rows * cols;
        int64_t shape[2] = {(int64_t)rows, (int64_t)cols};
        /* One row in three poisoned, the others clean, so that both kinds of row are seen. */
        float *x = poisoned(&r, n, 40, 0);
        for (size_t row = 0; row < rows; row += 3)
            for (size_t c = 0; c < cols; c++)
                if (!isfinite(x[row * cols + c]))
                    x[row * cols + c] = 0.25f;
        /* A row of only -inf: softmax NaN (as PyTorch), LayerNorm NaN. */
        for (size_t c = 0; c < cols; c++)
            x[1 * cols + c] = -INFINITY;
        float *w = poisoned(&r, cols, 1 << 30, 1), *b = poisoned(&r, cols, 1 << 30, 1);
        pgd_tensor *tx = pgd_test_upload(ctx, 2, shape, x), *ty = empty(ctx, 2, shape);
        int64_t sc[1] = {(int64_t)cols};
        pgd_tensor *tw = pgd_test_upload(ctx, 1, sc, w), *tb = pgd_test_upload(ctx, 1, sc, b);
        double *want = malloc(n * sizeof *want);
        char what[160];
        const char *dn = devs[di].name;

        PGD_CHECK_OK(pgd_relu(ctx, tx, ty, &err), &err);
        float *got = download(ty, n);
        pgd_ref_relu(x, n, want);
        snprintf(what, sizeof what, "%s relu", dn);
        ck_assert(check_nan(got, want, NULL, n, 0, 0, what) > 0);
        free(got);

        for (int form = 0; form < 2; form++) {
            PGD_CHECK_OK(pgd_gelu(ctx, tx, ty, form, &err), &err);
            got = download(ty, n);
            (form ? pgd_ref_gelu_tanh : pgd_ref_gelu_erf)(x, n, want);
            snprintf(what, sizeof what, "%s gelu tanh_form=%d", dn, form);
            ck_assert(check_nan(got, want, NULL, n, 1e-5, 1e-6, what) > 0);
            free(got);
        }

        PGD_CHECK_OK(pgd_softmax(ctx, tx, 0.5f, ty, &err), &err);
        got = download(ty, n);
        pgd_ref_softmax(x, rows, cols, 0.5, want);
        snprintf(what, sizeof what, "%s softmax", dn);
        ck_assert(check_nan(got, want, NULL, n, 1e-4, 1e-7, what) > 0);
        free(got);

        PGD_CHECK_OK(pgd_layernorm(ctx, tx, tw, tb, 1e-5f, ty, &err), &err);
        got = download(ty, n);
        pgd_ref_layernorm(x, w, b, rows, cols, 1e-5, want);
        snprintf(what, sizeof what, "%s layernorm", dn);
        ck_assert(check_nan(got, want, NULL, n, 1e-4, 1e-4, what) > 0);
        free(got);

        free(x);
        free(w);
        free(b);
        free(want);
        pgd_tensor_destroy(tx);
        pgd_tensor_destroy(ty);
        pgd_tensor_destroy(tw);
        pgd_tensor_destroy(tb);
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

START_TEST(pools)
{
    size_t ndev;
    const pgd_device_info *devs = pgd_test_devices(&ndev);
    for (size_t di = 0; di < ndev; di++) {
        pgd_ctx *ctx = pgd_test_ctx(&devs[di]);
        pgd_rng r;
        pgd_rng_seed(&r, 23 + di);
        pgd_error *err = NULL;
        /* 5 channels: the scalar kernels; 8: the vector ones (C % 4 == 0) */
        for (size_t C = 5; C <= 8; C += 3) {
            const size_t N = 2, H = 13, W = 11;
            int64_t sx[4] = {N, H, W, (int64_t)C};
            float *x = poisoned(&r, N * H * W * C, 25, 0);
            pgd_tensor *tx = pgd_test_upload(ctx, 4, sx, x);
            /* ResNet's stem pool (3, 2, 1): -inf padding must not become NaN; and 2x2 unpadded. */
            const int cfg[2][3] = {{3, 2, 1}, {2, 2, 0}};
            for (int ci = 0; ci < 2; ci++) {
                int k = cfg[ci][0], s = cfg[ci][1], p = cfg[ci][2];
                size_t oh = (H + 2 * p - k) / s + 1, ow = (W + 2 * p - k) / s + 1,
                       n = N * oh * ow * C;
                int64_t sy[4] = {N, (int64_t)oh, (int64_t)ow, (int64_t)C};
                pgd_tensor *ty = empty(ctx, 4, sy);
                double *want = malloc(n * sizeof *want);
                char what[160];
                for (int avg = 0; avg < 2; avg++) {
                    if (avg)
                        PGD_CHECK_OK(pgd_avgpool2d(ctx, tx, k, s, p, ty, &err), &err);
                    else
                        PGD_CHECK_OK(pgd_maxpool2d(ctx, tx, k, s, p, ty, &err), &err);
                    float *got = download(ty, n);
                    (avg ? pgd_ref_avgpool2d : pgd_ref_maxpool2d)(x, N, H, W, C, (size_t)k,
                                                                  (size_t)s, (size_t)p, want);
                    snprintf(what, sizeof what, "%s %s k=%d s=%d p=%d C=%zu", devs[di].name,
                             avg ? "avgpool" : "maxpool", k, s, p, C);
                    ck_assert(check_nan(got, want, NULL, n, 1e-5, 1e-6, what) > 0);
                    free(got);
                }
                free(want);
                pgd_tensor_destroy(ty);
            }
            free(x);
            pgd_tensor_destroy(tx);
        }
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

/* A convolution with a ReLU epilogue (and a residual) through every algorithm that applies. */
START_TEST(conv_relu)
{
    static const char *algs[] = {"gemm", "implicit", "im2col", "direct"};
    static const char *conv_vars[] = {"PAGODA_CONV=gemm", "PAGODA_CONV=implicit",
                                      "PAGODA_CONV=im2col", "PAGODA_CONV=direct"};
    size_t ndev;
    const pgd_device_info *devs = pgd_test_devices(&ndev);
    for (size_t ai = 0; ai < sizeof algs / sizeof algs[0]; ai++) {
        for (size_t di = 0; di < ndev; di++) {
            pgd_ctx *ctx = pgd_test_ctx_with(&devs[di], (const char *const[]){conv_vars[ai], NULL});
            pgd_rng r;
            pgd_rng_seed(&r, 37 + di + 7 * ai);
            pgd_error *err = NULL;
            int one = ai == 0; /* the GEMM path takes 1x1 convolutions only */
            pgd_ref_conv c = {2, 9, 8,           6,           10, one ? 1 : 3, one ? 1 : 3,
                              1, 1, one ? 0 : 1, one ? 0 : 1, 1,  1,           1};
            size_t oh, ow;
            pgd_ref_conv_out(&c, &oh, &ow);
            size_t nx = c.n * c.h * c.w * c.cin, ny = c.n * oh * ow * c.cout;
            size_t nw = c.cout * c.cin * c.kh * c.kw;
            float *x = poisoned(&r, nx, 60, 0), *w = poisoned(&r, nw, 1 << 30, 1);
            float *bias = poisoned(&r, c.cout, 1 << 30, 1), *res = poisoned(&r, ny, 50, 1);
            pgd_conv2d_desc d = {(int64_t)c.cin, (int64_t)c.cout, (int)c.kh, (int)c.kw, 1, 1,
                                 (int)c.ph,      (int)c.pw,       1,         1,         1};
            pgd_conv2d *conv = NULL;
            PGD_CHECK_OK(pgd_conv2d_create(ctx, &d, w, bias, NULL, &conv, &err), &err);
            int64_t sx[4] = {(int64_t)c.n, (int64_t)c.h, (int64_t)c.w, (int64_t)c.cin};
            int64_t sy[4] = {(int64_t)c.n, (int64_t)oh, (int64_t)ow, (int64_t)c.cout};
            pgd_tensor *tx = pgd_test_upload(ctx, 4, sx, x), *ty = empty(ctx, 4, sy);
            pgd_tensor *tr = pgd_test_upload(ctx, 4, sy, res);
            double *want = malloc(ny * sizeof *want);
            char what[160];
            for (int with_res = 0; with_res < 2; with_res++) {
                PGD_CHECK_OK(
                    pgd_conv2d_forward(ctx, conv, tx, PGD_ACT_RELU, with_res ? tr : NULL, ty, &err),
                    &err);
                float *got = download(ty, ny);
                pgd_ref_conv2d(&c, x, w, bias, NULL, 0, with_res ? res : NULL, 1, want, NULL);
                snprintf(what, sizeof what, "%s conv %s relu residual=%d", devs[di].name, algs[ai],
                         with_res);
                ck_assert(check_nan(got, want, NULL, ny, 1e-4, 1e-4, what) > 0);
                free(got);
            }
            free(x);
            free(w);
            free(bias);
            free(res);
            free(want);
            pgd_tensor_destroy(tx);
            pgd_tensor_destroy(ty);
            pgd_tensor_destroy(tr);
            pgd_conv2d_destroy(conv);
            pgd_ctx_destroy(ctx);
        }
    }
}
END_TEST

/* pgd_linear_forward with the ReLU and GELU epilogues (GEMM kernels' vector and scalar paths:
 * N a multiple of the vector width and not). */
START_TEST(linear_epilogue)
{
    size_t ndev;
    const pgd_device_info *devs = pgd_test_devices(&ndev);
    for (size_t di = 0; di < ndev; di++) {
        pgd_ctx *ctx = pgd_test_ctx(&devs[di]);
        pgd_rng r;
        pgd_rng_seed(&r, 53 + di);
        pgd_error *err = NULL;
        const int64_t shapes[2][3] = {{45, 64, 40}, {19, 37, 23}}; /* M, N (out), K (in) */
        for (int si = 0; si < 2; si++) {
            int64_t M = shapes[si][0], N = shapes[si][1], K = shapes[si][2];
            float *x = poisoned(&r, (size_t)(M * K), 70, 0);
            float *w = poisoned(&r, (size_t)(N * K), 1 << 30, 1);
            float *bias = poisoned(&r, (size_t)N, 1 << 30, 1);
            int64_t sx[2] = {M, K}, sw[2] = {N, K}, sb[1] = {N}, sy[2] = {M, N};
            pgd_tensor *tx = pgd_test_upload(ctx, 2, sx, x), *tw = pgd_test_upload(ctx, 2, sw, w);
            pgd_tensor *tb = pgd_test_upload(ctx, 1, sb, bias), *ty = empty(ctx, 2, sy);
            pgd_linear *lin = NULL;
            PGD_CHECK_OK(pgd_linear_create(ctx, tw, tb, &lin, &err), &err);
            double *want = malloc((size_t)(M * N) * sizeof *want);
            char what[160];
            for (int act = 1; act <= 2; act++) {
                PGD_CHECK_OK(pgd_linear_forward(ctx, lin, tx, (pgd_act)act, NULL, ty, &err), &err);
                float *got = download(ty, (size_t)(M * N));
                pgd_ref_mat a = {x, 0, K, 0}, b = {w, 0, K, 0}, cm = {NULL, 0, N, 0};
                pgd_ref_gemm_strided(0, 1, M, N, K, 1, 1.0, a, b, 0.0, NULL, cm, bias, act, NULL,
                                     want);
                snprintf(what, sizeof what, "%s linear %lldx%lldx%lld act=%d", devs[di].name,
                         (long long)M, (long long)N, (long long)K, act);
                ck_assert(check_nan(got, want, NULL, (size_t)(M * N), 1e-4, 1e-4, what) > 0);
                free(got);
            }
            free(x);
            free(w);
            free(bias);
            free(want);
            pgd_linear_destroy(lin);
            pgd_tensor_destroy(tx);
            pgd_tensor_destroy(tw);
            pgd_tensor_destroy(tb);
            pgd_tensor_destroy(ty);
        }
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

/* Attention on every kernel variant: NaN in Q, K and V, ±inf in the mask, fully masked rows
 * (zeros, unchanged), causal; the probabilities of NaN rows are NaN. Under the causal mask a
 * NaN in V at a key a row cannot see is unspecified for that row (see attention.cl). */
START_TEST(attention)
{
    static const char *variants[] = {"rows", "tiled", "generic", "kt"};
    static const char *attn_vars[] = {"PAGODA_ATTENTION=rows", "PAGODA_ATTENTION=tiled",
                                      "PAGODA_ATTENTION=generic", "PAGODA_ATTENTION=kt"};
    size_t ndev;
    const pgd_device_info *devs = pgd_test_devices(&ndev);
    for (int vi = 0; vi < 4; vi++) {
        for (size_t di = 0; di < ndev; di++) {
            pgd_ctx *ctx = pgd_test_ctx_with(&devs[di], (const char *const[]){attn_vars[vi], NULL});
            for (int causal = 0; causal < 2; causal++) {
                pgd_rng r;
                pgd_rng_seed(&r, 71 + di + 5 * vi + 100 * causal);
                pgd_error *err = NULL;
                const int64_t B = 2, H = 2, Nq = 21, Nk = 27, D = 16;
                int64_t nq = B * H * Nq * D, nk = B * H * Nk * D, nm = B * H * Nq * Nk;
                float *q = poisoned(&r, (size_t)nq, 150, 1), *k = poisoned(&r, (size_t)nk, 150, 1);
                float *v = poisoned(&r, (size_t)nk, 150, 1), *m = malloc((size_t)nm * sizeof *m);
                for (int64_t i = 0; i < nm; i++) {
                    int64_t u = pgd_rng_int(&r, 0, 199);
                    m[i] = u < 30 ? -INFINITY : u == 30 ? INFINITY : pgd_rng_float(&r);
                }
                /* Row 3 of (0, 0) fully masked: zeros, or NaN where V's NaN reaches it. */
                for (int64_t j = 0; j < Nk; j++)
                    m[3 * Nk + j] = -INFINITY;
                int64_t sq[1] = {nq}, sk[1] = {nk}, sm[1] = {nm}, sp[1] = {nm};
                pgd_tensor *tq = pgd_test_upload(ctx, 1, sq, q),
                           *tk = pgd_test_upload(ctx, 1, sk, k);
                pgd_tensor *tv = pgd_test_upload(ctx, 1, sk, v),
                           *tm = pgd_test_upload(ctx, 1, sm, m);
                pgd_tensor *to = empty(ctx, 1, sq), *tp = empty(ctx, 1, sp);
                pgd_attention_args a = {0};
                a.batch = B;
                a.heads = H;
                a.nq = Nq;
                a.nk = Nk;
                a.head_dim = D;
                a.causal = causal;
                a.q = (pgd_view){tq, 0, H * Nq * D, Nq * D, D};
                a.k = (pgd_view){tk, 0, H * Nk * D, Nk * D, D};
                a.v = (pgd_view){tv, 0, H * Nk * D, Nk * D, D};
                a.o = (pgd_view){to, 0, H * Nq * D, Nq * D, D};
                a.mask = (pgd_view){tm, 0, H * Nq * Nk, Nq * Nk, Nk};
                a.probs = tp;
                a.probs_head = -1;
                a.probs_q0 = 0;
                a.probs_q1 = Nq;
                PGD_CHECK_OK(pgd_attention(ctx, &a, &err), &err);
                float *got = download(to, (size_t)nq), *gotp = download(tp, (size_t)nm);
                double *want = malloc((size_t)nq * sizeof *want);
                double *wantp = malloc((size_t)nm * sizeof *wantp);
                pgd_ref_attention(&a, q, k, v, m, want, wantp);
                /* Causal: V's NaN at a hidden key may reach a row or not. */
                unsigned char *dc = calloc((size_t)nq, 1);
                for (int64_t b = 0; causal && b < B; b++)
                    for (int64_t h = 0; h < H; h++)
                        for (int64_t j = 0; j < Nk; j++)
                            for (int64_t d = 0; d < D; d++) {
                                if (!isnan(v[((b * H + h) * Nk + j) * D + d]))
                                    continue;
                                for (int64_t i = 0; i < Nq; i++)
                                    if (j > i + (Nk - Nq))
                                        dc[((b * H + h) * Nq + i) * D + d] = 1;
                            }
                char what[160];
                snprintf(what, sizeof what, "%s attention %s causal=%d", devs[di].name,
                         variants[vi], causal);
                ck_assert(check_nan(got, want, dc, (size_t)nq, 1e-4, 1e-5, what) > 0);
                ck_assert_msg(got[3 * D] == 0.0f || isnan(want[3 * D]),
                              "%s: fully masked row not zero", what);
                snprintf(what, sizeof what, "%s attention probs %s causal=%d", devs[di].name,
                         variants[vi], causal);
                ck_assert(check_nan(gotp, wantp, NULL, (size_t)nm, 1e-4, 1e-6, what) > 0);
                free(q);
                free(k);
                free(v);
                free(m);
                free(got);
                free(gotp);
                free(want);
                free(wantp);
                free(dc);
                pgd_tensor *ts[] = {tq, tk, tv, tm, to, tp};
                for (size_t i = 0; i < 6; i++)
                    pgd_tensor_destroy(ts[i]);
            }
            pgd_ctx_destroy(ctx);
        }
    }
}
END_TEST

START_TEST(patch_embed)
{
    size_t ndev;
    const pgd_device_info *devs = pgd_test_devices(&ndev);
    for (size_t di = 0; di < ndev; di++) {
        pgd_ctx *ctx = pgd_test_ctx(&devs[di]);
        pgd_rng r;
        pgd_rng_seed(&r, 89 + di);
        pgd_error *err = NULL;
        const size_t B = 2, C = 3, Hh = 16, W = 12, P = 4, D = 24;
        const size_t T = 1 + (Hh / P) * (W / P);
        float *img = poisoned(&r, B * C * Hh * W, 80, 0);
        float *w = poisoned(&r, D * C * P * P, 1 << 30, 1), *bias = poisoned(&r, D, 1 << 30, 1);
        float *cls = poisoned(&r, D, 1 << 30, 1), *pos = poisoned(&r, T * D, 1 << 30, 1);
        int64_t si[4] = {B, C, Hh, W}, sw[4] = {D, C, P, P}, sd[1] = {D}, sp[2] = {T, D};
        int64_t so[3] = {B, T, D};
        pgd_tensor *ti = pgd_test_upload(ctx, 4, si, img), *tw = pgd_test_upload(ctx, 4, sw, w);
        pgd_tensor *tb = pgd_test_upload(ctx, 1, sd, bias), *tc = pgd_test_upload(ctx, 1, sd, cls);
        pgd_tensor *tp = pgd_test_upload(ctx, 2, sp, pos), *to = empty(ctx, 3, so);
        PGD_CHECK_OK(pgd_patch_embed(ctx, ti, tw, tb, tc, NULL, tp, to, &err), &err);
        float *got = download(to, B * T * D);
        double *want = malloc(B * T * D * sizeof *want);
        pgd_ref_patch_embed(img, B, C, Hh, W, w, D, P, bias, cls, NULL, pos, want);
        char what[160];
        snprintf(what, sizeof what, "%s patch_embed", devs[di].name);
        ck_assert(check_nan(got, want, NULL, B * T * D, 1e-4, 1e-4, what) > 0);
        float *hs[] = {img, w, bias, cls, pos, got};
        for (size_t i = 0; i < 6; i++)
            free(hs[i]);
        free(want);
        pgd_tensor *ts[] = {ti, tw, tb, tc, tp, to};
        for (size_t i = 0; i < 6; i++)
            pgd_tensor_destroy(ts[i]);
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

/* A non-local block in every mode, subsampled (max pool) and not; NaN in x reaches z where the
 * reference says (with the softmax forms: the whole batch item). */
START_TEST(nonlocal_block)
{
    size_t ndev;
    const pgd_device_info *devs = pgd_test_devices(&ndev);
    for (size_t di = 0; di < ndev; di++) {
        pgd_ctx *ctx = pgd_test_ctx(&devs[di]);
        for (int mode = 0; mode < 4; mode++)
            for (int sub = 0; sub < 2; sub++) {
                pgd_rng r;
                pgd_rng_seed(&r, 97 + di + 10 * (size_t)mode + (size_t)sub);
                pgd_error *err = NULL;
                const size_t B = 3, Hh = 6, W = 5, C = 8, Ci = 4, n = B * Hh * W * C;
                float *x = poisoned(&r, n, 1 << 30, 1);
                /* One NaN in batch item 1 only; item 0 and 2 stay finite. */
                x[(1 * Hh * W + 7) * C + 2] = NAN;
                float *tw = poisoned(&r, Ci * C, 1 << 30, 1),
                      *pw = poisoned(&r, Ci * C, 1 << 30, 1);
                float *gw = poisoned(&r, Ci * C, 1 << 30, 1),
                      *ww = poisoned(&r, C * Ci, 1 << 30, 1);
                float *cw = poisoned(&r, 2 * Ci, 1 << 30, 1);
                pgd_nonlocal_desc d = {(int64_t)C, (int64_t)Ci, (pgd_nonlocal_mode)mode, sub, 0};
                pgd_nonlocal_params p = {tw, NULL, pw, NULL, gw, NULL, ww, NULL, NULL, cw};
                pgd_nonlocal *nl = NULL;
                PGD_CHECK_OK(pgd_nonlocal_create(ctx, &d, &p, &nl, &err), &err);
                int64_t sx[4] = {B, Hh, W, C};
                pgd_tensor *tx = pgd_test_upload(ctx, 4, sx, x), *tz = empty(ctx, 4, sx);
                PGD_CHECK_OK(pgd_nonlocal_forward(ctx, nl, tx, tz, &err), &err);
                float *got = download(tz, n);
                double *want = malloc(n * sizeof *want);
                pgd_ref_nonlocal rp = {
                    B,    Hh, W,    C,  Ci,   mode, sub,  tw,
                    NULL, pw, NULL, gw, NULL, ww,   NULL, {NULL, NULL, NULL, NULL},
                    0,    cw};
                pgd_ref_nonlocal_block(&rp, x, 0, want, NULL, NULL);
                char what[160];
                snprintf(what, sizeof what, "%s nonlocal %s subsample=%d", devs[di].name,
                         pgd_nonlocal_mode_name((pgd_nonlocal_mode)mode), sub);
                ck_assert(check_nan(got, want, NULL, n, 1e-4, 1e-4, what) > 0);
                float *hs[] = {x, tw, pw, gw, ww, cw, got};
                for (size_t i = 0; i < 7; i++)
                    free(hs[i]);
                free(want);
                pgd_tensor_destroy(tx);
                pgd_tensor_destroy(tz);
                pgd_nonlocal_destroy(nl);
            }
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("nan");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, elementwise_and_rows);
    tcase_add_test(tc, pools);
    tcase_add_test(tc, conv_relu);
    tcase_add_test(tc, linear_epilogue);
    tcase_add_test(tc, attention);
    tcase_add_test(tc, patch_embed);
    tcase_add_test(tc, nonlocal_block);
    suite_add_tcase(s, tc);
    return pgd_test_run(s);
}
