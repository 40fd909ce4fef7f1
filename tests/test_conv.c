/* test_conv.c — convolution (every algorithm forced through options.conv_algo ($PAGODA_CONV), and
 * the automatic choice), pooling and the NCHW -> NHWC conversion against the double references of
 * reference.c, on every device: seeded random shapes (odd sizes, kernels 1 to 7, strides 1 to 3,
 * padding, dilation, groups and depthwise, batches, bias, batch norm, activations, residuals),
 * NaN-poisoned outputs with a NaN canary after each, and the shape errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "internal.h" /* white-box: reaches library internals */
#include "reference.h"
#include "tune.h" /* white-box: the context's parameters */

#define CANARY 19
#define CONV_TRIALS 110
#define POOL_TRIALS 110

static float *random_floats(pgd_rng *r, int64_t n, float lo, float hi)
{
    float *h = malloc((size_t)(n ? n : 1) * sizeof(float));
    ck_assert_ptr_nonnull(h);
    for (int64_t i = 0; i < n; i++)
        h[i] = lo + (hi - lo) * 0.5f * (pgd_rng_float(r) + 1.0f);
    return h;
}

/* A buffer of n + CANARY floats: data (or the canary NaN where data is NULL), then canaries. */
static pgd_tensor *upload_buf(pgd_ctx *ctx, const float *data, int64_t n)
{
    int64_t len = n + CANARY;
    float *h = malloc((size_t)len * sizeof(float));
    ck_assert_ptr_nonnull(h);
    for (int64_t i = 0; i < len; i++)
        h[i] = data && i < n ? data[i] : pgd_test_canary();
    pgd_tensor *t = pgd_test_upload(ctx, 1, &len, h);
    free(h);
    return t;
}

/* Downloads the n outputs of buf; returns them (caller frees) after checking the canaries. */
static float *download_checked(pgd_tensor *buf, int64_t n, const char *what, int *ok)
{
    pgd_error *err = NULL;
    float *got = malloc((size_t)(n + CANARY) * sizeof(float));
    ck_assert_ptr_nonnull(got);
    PGD_CHECK_OK(pgd_tensor_download(buf, got, &err), &err);
    for (int64_t i = n; i < n + CANARY; i++)
        if (!pgd_test_is_canary(got[i])) {
            fprintf(stderr, "%s: canary %lld overwritten\n", what, (long long)(i - n));
            *ok = 0;
            break;
        }
    return got;
}

/* |got - want| <= 1e-6 + rel · mag per element: float rounding is relative to the sum of the
 * terms' magnitudes, not to the result (which may cancel to near 0). */
static int close_to(const float *got, const double *want, const double *mag, int64_t n, double rel,
                    const char *what)
{
    int64_t bad = 0, first = 0;
    for (int64_t i = 0; i < n; i++) {
        double tol = 1e-6 + rel * mag[i];
        if (!isfinite(got[i]) || fabs(got[i] - want[i]) > tol) {
            if (bad++ == 0)
                first = i;
        }
    }
    if (bad)
        fprintf(stderr,
                "%s: %lld of %lld elements differ; first at %lld: got %.9g, want %.9g "
                "(magnitude %.3g)\n",
                what, (long long)bad, (long long)n, (long long)first, (double)got[first],
                want[first], mag[first]);
    return bad == 0;
}

static const int64_t chans[] = {1, 2, 3, 4, 5, 7, 8, 13, 16, 17, 24, 31, 33, 64};
#define N_CHANS (int)(sizeof chans / sizeof chans[0])

typedef struct conv_case {
    pgd_ref_conv g;
    int bias, bn, act, res, res_in_y;
} conv_case;

/* A random convolution for algorithm `alg` ("" for the automatic choice) within `cap`
 * multiply-adds. */
static conv_case random_case(pgd_rng *r, const char *alg, int trial, int64_t cap, size_t kmax)
{
    static const int ks[] = {1, 1, 3, 3, 5, 7, 2};
    conv_case c;
    memset(&c, 0, sizeof c);
    pgd_ref_conv *g = &c.g;
    int gemm = !strcmp(alg, "gemm") && trial % 8 != 7;       /* 1 in 8: a shape gemm does not fit */
    int wino = !strcmp(alg, "winograd") && trial % 8 != 7;   /* likewise for winograd */
    int dwise = !strcmp(alg, "depthwise") && trial % 8 != 7; /* and for depthwise */
    g->kh = (size_t)ks[pgd_rng_int(r, 0, 6)];
    g->kw = pgd_rng_int(r, 0, 3) ? g->kh : (size_t)ks[pgd_rng_int(r, 0, 6)];
    g->sh = (size_t)pgd_rng_int(r, 1, 3);
    g->sw = pgd_rng_int(r, 0, 3) ? g->sh : (size_t)pgd_rng_int(r, 1, 3);
    g->dh = pgd_rng_int(r, 0, 4) ? 1 : 2;
    g->dw = pgd_rng_int(r, 0, 4) ? g->dh : (size_t)pgd_rng_int(r, 1, 2);
    g->ph = (size_t)pgd_rng_int(r, 0, (int64_t)g->kh / 2 + (pgd_rng_int(r, 0, 5) ? 0 : 1));
    g->pw = (size_t)pgd_rng_int(r, 0, (int64_t)g->kw / 2 + (pgd_rng_int(r, 0, 5) ? 0 : 1));
    int kind = (int)pgd_rng_int(r, 0, 9); /* 0-6 one group, 7 depthwise, 8-9 a few groups */
    if (dwise)
        kind = 7;
    g->groups = kind < 7 ? 1 : kind == 7 ? 0 : (size_t)pgd_rng_int(r, 2, 4);
    size_t cing = (size_t)chans[pgd_rng_int(r, 0, N_CHANS - 1)];
    size_t coutg = (size_t)chans[pgd_rng_int(r, 0, N_CHANS - 1)];
    if (gemm) {
        g->kh = g->kw = g->sh = g->sw = 1;
        g->ph = g->pw = 0;
        g->groups = 1;
        if (trial % 3 == 0) /* ResNet-like widths */
            cing = (size_t)pgd_rng_int(r, 32, 96), coutg = (size_t)pgd_rng_int(r, 16, 80);
    }
    if (wino) { /* 3x3, stride 1, one group; any padding (0 to 2), odd and even sizes */
        g->kh = g->kw = 3;
        g->sh = g->sw = g->dh = g->dw = 1;
        g->groups = 1;
        g->ph = (size_t)pgd_rng_int(r, 0, 4) / 2; /* 0, 0, 1, 1, 2 */
        g->pw = pgd_rng_int(r, 0, 3) ? g->ph : (size_t)pgd_rng_int(r, 0, 2);
        if (trial % 3 == 0) /* ResNet-like widths */
            cing = (size_t)pgd_rng_int(r, 48, 160), coutg = (size_t)pgd_rng_int(r, 16, 144);
        else if (trial % 7 == 3) /* K >= 256: the products as a grouped 1x1 convolution */
            cing = (size_t)pgd_rng_int(r, 256, 320), coutg = (size_t)pgd_rng_int(r, 8, 24);
    }
    if (g->groups == 0) { /* depthwise: groups = channels */
        g->groups = (size_t)chans[pgd_rng_int(r, 0, N_CHANS - 1)];
        cing = coutg = 1;
        if (!dwise && pgd_rng_int(r, 0, 2) == 0)
            coutg = 2; /* channel multiplier 2 */
    }
    while (cing > 1 && g->kh * g->kw * cing > kmax)
        cing = (cing + 1) / 2;
    g->cin = cing * g->groups;
    g->cout = coutg * g->groups;
    g->n = (size_t)(pgd_rng_int(r, 0, 3) ? 1 : pgd_rng_int(r, 2, 3));
    size_t eh = g->dh * (g->kh - 1) + 1, ew = g->dw * (g->kw - 1) + 1;
    size_t minh = eh > 2 * g->ph ? eh - 2 * g->ph : 1, minw = ew > 2 * g->pw ? ew - 2 * g->pw : 1;
    g->h = minh + (size_t)pgd_rng_int(r, 0, 14);
    g->w = minw + (size_t)pgd_rng_int(r, 0, 14);
    for (;;) {
        size_t oh, ow;
        pgd_ref_conv_out(g, &oh, &ow);
        int64_t macs = (int64_t)(g->n * oh * ow * g->cout * g->kh * g->kw * cing);
        if (macs <= cap)
            break;
        if (g->n > 1)
            g->n--;
        else if (g->h > minh && g->h >= g->w)
            g->h = minh + (g->h - minh) / 2;
        else if (g->w > minw)
            g->w = minw + (g->w - minw) / 2;
        else if (coutg > 1 && coutg >= cing)
            coutg = (coutg + 1) / 2, g->cout = coutg * g->groups;
        else if (cing > 1)
            cing = (cing + 1) / 2, g->cin = cing * g->groups;
        else if (g->groups > 1)
            g->groups--, g->cin = cing * g->groups, g->cout = coutg * g->groups;
        else
            break;
    }
    c.bias = trial % 3 != 2;
    c.bn = trial % 4 == 1 || trial % 4 == 2;
    c.act = trial % 5 == 4 ? 2 : trial % 5 >= 2 ? 1 : 0;
    c.res = trial % 3 == 0 || trial % 7 == 3;
    c.res_in_y = c.res && trial % 6 == 3; /* y = act(conv(x) + y) in place */
    return c;
}

/* Runs the convolution again with every launch split into the smallest chunks
 * (max_launch_rows = 1: one work-group, tile or work-item's rows per launch, the way a
 * slow GPU runs big layers under its watchdog) into a fresh output (y canaries, or the residual
 * again when it is read from y); the result must be bitwise the one launch's `got`. */
static int same_when_chunked(pgd_ctx *ctx, const pgd_conv2d *conv, pgd_tensor *vx, pgd_tensor *vr,
                             pgd_tensor *vy, const float *y_init, int act, const float *got,
                             int64_t ny, const char *what)
{
    pgd_error *err = NULL;
    float *h = malloc((size_t)(ny ? ny : 1) * sizeof *h);
    ck_assert_ptr_nonnull(h);
    for (int64_t i = 0; i < ny; i++)
        h[i] = y_init ? y_init[i] : pgd_test_canary();
    PGD_CHECK_OK(pgd_tensor_upload(vy, h, &err), &err); /* vy: the output's prefix view */
    free(h);
    ctx->knobs.max_launch_rows = 1;
    int rc = pgd_conv2d_forward(ctx, conv, vx, (pgd_act)act, y_init ? vy : vr, vy, &err);
    ctx->knobs.max_launch_rows = 0;
    PGD_CHECK_OK(rc, &err);
    float *again = malloc((size_t)ny * sizeof *again);
    ck_assert_ptr_nonnull(again);
    PGD_CHECK_OK(pgd_tensor_download(vy, again, &err), &err);
    int64_t bad = -1;
    for (int64_t i = 0; i < ny && bad < 0; i++)
        if (memcmp(&again[i], &got[i], sizeof *got))
            bad = i;
    if (bad >= 0)
        fprintf(stderr,
                "%s: launches split into chunks differ from one launch at %lld: %.9g vs "
                "%.9g\n",
                what, (long long)bad, again[bad], got[bad]);
    free(again);
    return bad < 0;
}

/* Runs one case; returns 1 if it passed. */
static int run_case(pgd_ctx *ctx, const pgd_device_info *dev, pgd_rng *r, const conv_case *cc,
                    const char *alg, int trial)
{
    const pgd_ref_conv *g = &cc->g;
    size_t oh, ow;
    pgd_ref_conv_out(g, &oh, &ow);
    int64_t nx = (int64_t)(g->n * g->h * g->w * g->cin), ny = (int64_t)(g->n * oh * ow * g->cout);
    int64_t nw = (int64_t)(g->cout * (g->cin / g->groups) * g->kh * g->kw);
    float *hx = random_floats(r, nx, -1.0f, 1.0f), *hw = random_floats(r, nw, -1.0f, 1.0f);
    float *hb = random_floats(r, (int64_t)g->cout, -1.0f, 1.0f);
    float *hres = random_floats(r, ny, -1.0f, 1.0f);
    float *bnw = random_floats(r, (int64_t)g->cout, 0.5f, 1.5f);
    float *bnb = random_floats(r, (int64_t)g->cout, -0.5f, 0.5f);
    float *bnm = random_floats(r, (int64_t)g->cout, -0.5f, 0.5f);
    float *bnv = random_floats(r, (int64_t)g->cout, 0.2f, 2.0f);
    const float *bnarr[4] = {bnw, bnb, bnm, bnv};
    double *want = malloc((size_t)ny * sizeof(double)), *mag = malloc((size_t)ny * sizeof(double));
    ck_assert_ptr_nonnull(want);
    ck_assert_ptr_nonnull(mag);
    pgd_ref_conv2d(g, hx, hw, cc->bias ? hb : NULL, cc->bn ? bnarr : NULL, 1e-5,
                   cc->res ? hres : NULL, cc->act, want, mag);

    pgd_error *err = NULL;
    pgd_conv2d_desc d = {(int64_t)g->cin, (int64_t)g->cout, (int)g->kh,    (int)g->kw,
                         (int)g->sh,      (int)g->sw,       (int)g->ph,    (int)g->pw,
                         (int)g->dh,      (int)g->dw,       (int)g->groups};
    if (trial % 5 == 0 && g->sh == 1 && g->sw == 1 && g->dh == 1 && g->dw == 1 && g->groups == 1)
        d.stride_h = d.stride_w = d.dil_h = d.dil_w = d.groups = 0; /* 0 means 1 */
    pgd_batchnorm bn = {bnw, bnb, bnm, bnv, 1e-5f};
    pgd_conv2d *conv = NULL;
    PGD_CHECK_OK(
        pgd_conv2d_create(ctx, &d, hw, cc->bias ? hb : NULL, cc->bn ? &bn : NULL, &conv, &err),
        &err);
    int64_t oh2, ow2;
    pgd_conv2d_out_size(&d, (int64_t)g->h, (int64_t)g->w, &oh2, &ow2);
    ck_assert_int_eq(oh2, (int64_t)oh);
    ck_assert_int_eq(ow2, (int64_t)ow);

    pgd_tensor *xbuf = upload_buf(ctx, hx, nx);
    pgd_tensor *ybuf = upload_buf(ctx, cc->res_in_y ? hres : NULL, ny); /* else poisoned */
    pgd_tensor *rbuf = cc->res && !cc->res_in_y ? upload_buf(ctx, hres, ny) : NULL;
    int64_t sx[4] = {(int64_t)g->n, (int64_t)g->h, (int64_t)g->w, (int64_t)g->cin};
    int64_t sy[4] = {(int64_t)g->n, (int64_t)oh, (int64_t)ow, (int64_t)g->cout};
    pgd_tensor *vx = pgd_test_prefix(xbuf, 4, sx), *vy = pgd_test_prefix(ybuf, 4, sy);
    pgd_tensor *vr = rbuf ? pgd_test_prefix(rbuf, 4, sy) : NULL;
    const char *used =
        pgd_conv2d_algorithm_batch(ctx, conv, (int64_t)g->n, (int64_t)g->h, (int64_t)g->w);
    PGD_CHECK_OK(
        pgd_conv2d_forward(ctx, conv, vx, (pgd_act)cc->act, cc->res_in_y ? vy : vr, vy, &err),
        &err);
    char what[512];
    snprintf(what, sizeof what,
             "conv on %s (forced '%s', used %s, trial %d): x [%zu, %zu, %zu, %zu], cout %zu, "
             "kernel %zux%zu, stride %zux%zu, pad %zux%zu, dil %zux%zu, groups %zu, bias %d, "
             "bn %d, act %d, res %d%s",
             dev->name, alg, used, trial, g->n, g->h, g->w, g->cin, g->cout, g->kh, g->kw, g->sh,
             g->sw, g->ph, g->pw, g->dh, g->dw, g->groups, cc->bias, cc->bn, cc->act, cc->res,
             cc->res_in_y ? " (in y)" : "");
    int ok = 1;
    /* The algorithm asked for is used wherever it applies. */
    int gemm_fits = g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 &&
                    g->pw == 0 && g->groups == 1;
    int depthwise = g->groups == g->cin && g->cin == g->cout;
    int applies =
        !strcmp(alg, "im2col") || !strcmp(alg, "direct") ||
        (!strcmp(alg, "depthwise") && depthwise) || (!strcmp(alg, "gemm") && gemm_fits) ||
        (!strcmp(alg, "implicit") && pgd__gemm_uses_cpu_kernel(ctx)) ||
        (!strcmp(alg, "winograd") && pgd__gemm_uses_cpu_kernel(ctx) && g->kh == 3 && g->kw == 3 &&
         g->sh == 1 && g->sw == 1 && g->dh == 1 && g->dw == 1 && g->groups == 1);
    if (*alg && applies && strcmp(used, alg)) {
        fprintf(stderr, "%s: algorithm %s, not the forced one\n", what, used);
        ok = 0;
    }
    if (!*alg && depthwise && strcmp(used, "depthwise")) {
        fprintf(stderr, "%s: a depthwise convolution should use depthwise, not %s\n", what, used);
        ok = 0;
    }
    if (!*alg && gemm_fits && strcmp(used, "gemm")) {
        fprintf(stderr, "%s: a 1x1 convolution should use gemm\n", what);
        ok = 0;
    }
    /* The automatic choice takes winograd for wide 3x3 layers of at least 32 tiles in the batch
     * on CPU devices (conv.c's rule); for one image, pgd_conv2d_algorithm says the same as the
     * batch form. */
    int wide3 = g->kh == 3 && g->kw == 3 && g->sh == 1 && g->sw == 1 && g->dh == 1 && g->dw == 1 &&
                g->groups == 1 && g->cin >= 64 && g->cout >= 64 &&
                g->n * ((oh + 1) / 2) * ((ow + 1) / 2) >= 32;
    if (g->n == 1 && strcmp(used, pgd_conv2d_algorithm(ctx, conv, (int64_t)g->h, (int64_t)g->w))) {
        fprintf(stderr, "%s: pgd_conv2d_algorithm disagrees with its batch form\n", what);
        ok = 0;
    }
    if (!*alg && pgd__gemm_uses_cpu_kernel(ctx) && wide3 && strcmp(used, "winograd")) {
        fprintf(stderr, "%s: a wide 3x3 convolution should use winograd, not %s\n", what, used);
        ok = 0;
    }
    float *got = download_checked(ybuf, ny, what, &ok);
    ok &= close_to(got, want, mag, ny, 2e-5, what);
    if (trial % 3 == 0)
        ok &= same_when_chunked(ctx, conv, vx, vr, vy, cc->res_in_y ? hres : NULL, cc->act, got, ny,
                                what);
    free(got);
    free(vx);
    free(vy);
    free(vr);
    pgd_tensor_destroy(xbuf);
    pgd_tensor_destroy(ybuf);
    pgd_tensor_destroy(rbuf);
    pgd_conv2d_destroy(conv);
    float *hall[] = {hx, hw, hb, hres, bnw, bnb, bnm, bnv};
    for (size_t i = 0; i < sizeof hall / sizeof hall[0]; i++)
        free(hall[i]);
    free(want);
    free(mag);
    return ok;
}

static void conv_shapes_few(const char *alg, uint64_t seed, int few);

static void conv_shapes(const char *alg, uint64_t seed)
{
    conv_shapes_few(alg, seed, 0);
}

/* few: conv_few_rows_cpu wherever it can run (pgd__params_of(ctx)->conv_few_rows = 1), and it must
 * have run on the devices with CPU kernels. */
static void conv_shapes_few(const char *alg, uint64_t seed, int few)
{
    /* "" is the automatic choice, whatever the environment forces */
    char conv[48];
    snprintf(conv, sizeof conv, "PAGODA_CONV=%s", *alg ? alg : "auto");
    const char *const vars[] = {conv, NULL};
    size_t ndev;
    const pgd_device_info *devs = pgd_test_devices(&ndev);
    for (size_t di = 0; di < ndev; di++) {
        const pgd_device_info *dev = &devs[di];
        pgd_ctx *ctx = pgd_test_ctx_with(dev, vars);
        pgd__params_of(ctx)->conv_few_rows = few;
        if (few)
            pgd_ctx_set_profiling(ctx, 1);
        pgd_rng r;
        pgd_rng_seed(&r, seed);
        /* Multiply-adds per case: the reference is plain C and llvmpipe is slow. */
        int64_t cap = dev->software_rasteriser ? 60000 : 400000;
        size_t kmax = (size_t)1 << 30; /* llvmpipe's loop limit is handled by K chunking */
        int failed = 0;
        for (int trial = 0; trial < CONV_TRIALS; trial++) {
            /* The GEMM back ends (and so both epilogue paths) alternate; the im2col matrix is
             * built in small chunks half of the time. */
            ctx->opt.gemm_backend = trial % 2 ? PGD_GEMM_BACKEND_CLBLAST : PGD_GEMM_BACKEND_PAGODA;
            ctx->knobs.conv_chunk_bytes = trial % 2 ? (trial % 4 == 1 ? 4096 : 300) : 0;
            conv_case c = random_case(&r, alg, trial, cap, kmax);
            failed += !run_case(ctx, dev, &r, &c, alg, trial);
        }
        ctx->opt.gemm_backend = PGD_GEMM_BACKEND_AUTO;
        ctx->knobs.conv_chunk_bytes = 0;
        ck_assert_msg(failed == 0, "%s: %d of %d convolutions failed (algorithm '%s')", dev->name,
                      failed, CONV_TRIALS, alg);
        if (few && pgd__gemm_uses_cpu_kernel(ctx)) {
            long n = pgd_test_launches(ctx, "conv_few_rows_cpu");
            ck_assert_msg(n >= CONV_TRIALS / 4, "%s: conv_few_rows_cpu ran %ld times in %d cases",
                          dev->name, n, CONV_TRIALS);
        }
        pgd_ctx_destroy(ctx);
    }
}

START_TEST(conv_gemm)
{
    conv_shapes("gemm", 11);
}
END_TEST
START_TEST(conv_implicit)
{
    conv_shapes("implicit", 12);
}
END_TEST
START_TEST(conv_im2col)
{
    conv_shapes("im2col", 13);
}
END_TEST
START_TEST(conv_direct)
{
    conv_shapes("direct", 14);
}
END_TEST
/* Winograd F(2x2, 3x3) forced: every 3x3 stride-1 shape takes it on CPU devices (7 in 8 cases
 * here), against the double reference with the same tolerance as the direct sums. */
START_TEST(conv_winograd)
{
    conv_shapes("winograd", 17);
}
END_TEST
/* The depthwise kernel forced: 7 in 8 shapes depthwise (every kernel size, stride, dilation and
 * padding of the generator; widths that are no multiple of its 4 outputs a work-item). */
START_TEST(conv_depthwise)
{
    conv_shapes("depthwise", 18);
}
END_TEST
START_TEST(conv_auto)
{
    conv_shapes("", 15);
}
END_TEST
/* The few-rows form of the implicit convolution (a work-item a weight panel, K in blocks) on
 * every shape it can take (at most 40 row tiles), 1x1 ones included. */
START_TEST(conv_few_rows)
{
    conv_shapes_few("", 16, 1);
}
END_TEST

/* ResNet-50's own layers at a reduced image size, automatic choice: the stem, a bottleneck's
 * three convolutions with the residual, a strided downsample. */
START_TEST(conv_resnet_layers)
{
    static const int L[][6] = {
        /* cin, cout, k, stride, pad, h */
        {3, 64, 7, 2, 3, 33},
        {64, 64, 1, 1, 0, 14},
        {64, 64, 3, 1, 1, 14},
        {64, 256, 1, 1, 0, 14},
        {256, 64, 1, 1, 0, 14},
        {128, 128, 3, 2, 1, 14},
        {256, 512, 1, 2, 0, 14},
        {256, 256, 3, 1, 1, 7},
        /* layer4-like: 49 rows, K = 2304, five panels: the few-rows form on CPU devices */
        {256, 320, 3, 1, 1, 7},
        {512, 320, 1, 1, 0, 7},
        /* layer2- and layer3-like: winograd on CPU devices, its products as 16 GEMMs (K = 128)
         * and as the grouped 1x1 convolution's few-rows form (K = 256, 49 tiles) */
        {128, 128, 3, 1, 1, 16},
        {256, 256, 3, 1, 1, 14},
    };
    size_t ndev;
    const pgd_device_info *devs = pgd_test_devices(&ndev);
    for (size_t di = 0; di < ndev; di++) {
        pgd_ctx *ctx =
            pgd_test_ctx_with(&devs[di], (const char *const[]){"PAGODA_CONV=auto", NULL});
        pgd_rng r;
        pgd_rng_seed(&r, 50);
        int failed = 0;
        for (int i = 0; i < (int)(sizeof L / sizeof L[0]); i++) {
            conv_case c;
            memset(&c, 0, sizeof c);
            c.g = (pgd_ref_conv){1,
                                 (size_t)L[i][5],
                                 (size_t)L[i][5],
                                 (size_t)L[i][0],
                                 (size_t)L[i][1],
                                 (size_t)L[i][2],
                                 (size_t)L[i][2],
                                 (size_t)L[i][3],
                                 (size_t)L[i][3],
                                 (size_t)L[i][4],
                                 (size_t)L[i][4],
                                 1,
                                 1,
                                 1};
            if (devs[di].software_rasteriser && c.g.h > 9)
                c.g.h = c.g.w = 9;
            c.bn = 1;
            c.act = 1;
            c.res = i == 3;
            failed += !run_case(ctx, &devs[di], &r, &c, "", i);
        }
        ck_assert_msg(failed == 0, "%s: %d ResNet layers failed", devs[di].name, failed);
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

/* Batch norm folded at create against hand values: 1x1, one channel, w 2, bias 1, γ 3, β 0.5,
 * mean 0.25, var 3 with eps 1: y = ((2x + 1) − 0.25)·3/2 + 0.5. */
START_TEST(conv_bn_fold_known)
{
    size_t ndev;
    const pgd_device_info *devs = pgd_test_devices(&ndev);
    for (size_t di = 0; di < ndev; di++) {
        pgd_ctx *ctx = pgd_test_ctx(&devs[di]);
        pgd_error *err = NULL;
        float w = 2.0f, b = 1.0f, g = 3.0f, beta = 0.5f, mean = 0.25f, var = 3.0f;
        pgd_batchnorm bn = {&g, &beta, &mean, &var, 1.0f};
        pgd_conv2d_desc d = {1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0};
        pgd_conv2d *conv = NULL;
        PGD_CHECK_OK(pgd_conv2d_create(ctx, &d, &w, &b, &bn, &conv, &err), &err);
        float hx[3] = {0.0f, 1.0f, -2.0f};
        double want[3];
        for (int i = 0; i < 3; i++)
            want[i] = ((2.0 * hx[i] + 1.0) - 0.25) * 1.5 + 0.5;
        int64_t s[4] = {1, 1, 3, 1};
        pgd_tensor *x = pgd_test_upload(ctx, 4, s, hx), *y = NULL;
        PGD_CHECK_OK(pgd_tensor_create(ctx, 4, s, &y, &err), &err);
        PGD_CHECK_OK(pgd_conv2d_forward(ctx, conv, x, PGD_ACT_NONE, NULL, y, &err), &err);
        float got[3];
        PGD_CHECK_OK(pgd_tensor_download(y, got, &err), &err);
        ck_assert(pgd_test_allclose(got, want, 3, 1e-6, 1e-6, devs[di].name));
        pgd_tensor_destroy(x);
        pgd_tensor_destroy(y);
        pgd_conv2d_destroy(conv);
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

/* ---- pools and layout ---- */

static void pool_shapes(int kind, uint64_t seed)
{
    static const char *names[3] = {"maxpool2d", "avgpool2d", "global_avgpool"};
    size_t ndev;
    const pgd_device_info *devs = pgd_test_devices(&ndev);
    for (size_t di = 0; di < ndev; di++) {
        const pgd_device_info *dev = &devs[di];
        pgd_ctx *ctx = pgd_test_ctx(dev);
        pgd_rng r;
        pgd_rng_seed(&r, seed);
        int failed = 0;
        for (int trial = 0; trial < POOL_TRIALS; trial++) {
            size_t k = (size_t)pgd_rng_int(&r, 1, 5), s = (size_t)pgd_rng_int(&r, 1, 3);
            size_t p = (size_t)pgd_rng_int(&r, 0, (int64_t)k / 2);
            if (trial % 10 == 0) /* ResNet's: 3x3, stride 2, pad 1 */
                k = 3, s = 2, p = 1;
            size_t n = (size_t)pgd_rng_int(&r, 1, 3),
                   c = (size_t)chans[pgd_rng_int(&r, 0, N_CHANS - 1)];
            size_t minhw = k > 2 * p ? k - 2 * p : 1;
            size_t h = minhw + (size_t)pgd_rng_int(&r, 0, 20),
                   w = minhw + (size_t)pgd_rng_int(&r, 0, 20);
            if (kind == 2)
                h = (size_t)pgd_rng_int(&r, 1, 12), w = (size_t)pgd_rng_int(&r, 1, 12);
            size_t oh = kind == 2 ? 1 : (h + 2 * p - k) / s + 1;
            size_t ow = kind == 2 ? 1 : (w + 2 * p - k) / s + 1;
            int64_t nx = (int64_t)(n * h * w * c), ny = (int64_t)(n * oh * ow * c);
            float *hx =
                random_floats(&r, nx, -2.0f, 1.0f); /* mostly negative: -inf padding shows */
            double *want = malloc((size_t)ny * sizeof(double));
            ck_assert_ptr_nonnull(want);
            if (kind == 0)
                pgd_ref_maxpool2d(hx, n, h, w, c, k, s, p, want);
            else if (kind == 1)
                pgd_ref_avgpool2d(hx, n, h, w, c, k, s, p, want);
            else
                pgd_ref_global_avgpool(hx, n, h, w, c, want);
            pgd_tensor *xbuf = upload_buf(ctx, hx, nx), *ybuf = upload_buf(ctx, NULL, ny);
            int64_t sx[4] = {(int64_t)n, (int64_t)h, (int64_t)w, (int64_t)c};
            int64_t sy[4] = {(int64_t)n, (int64_t)oh, (int64_t)ow, (int64_t)c};
            int64_t sg[2] = {(int64_t)n, (int64_t)c};
            pgd_tensor *vx = pgd_test_prefix(xbuf, 4, sx);
            pgd_tensor *vy =
                kind == 2 ? pgd_test_prefix(ybuf, 2, sg) : pgd_test_prefix(ybuf, 4, sy);
            pgd_error *err = NULL;
            int rc = kind == 0   ? pgd_maxpool2d(ctx, vx, (int)k, (int)s, (int)p, vy, &err)
                     : kind == 1 ? pgd_avgpool2d(ctx, vx, (int)k, (int)s, (int)p, vy, &err)
                                 : pgd_global_avgpool(ctx, vx, vy, &err);
            PGD_CHECK_OK(rc, &err);
            char what[200];
            snprintf(what, sizeof what,
                     "%s on %s: x [%zu, %zu, %zu, %zu], k %zu, stride %zu, pad %zu", names[kind],
                     dev->name, n, h, w, c, k, s, p);
            int ok = 1;
            float *got = download_checked(ybuf, ny, what, &ok);
            ok &= pgd_test_allclose(got, want, (size_t)ny, 1e-5, 1e-6, what);
            failed += !ok;
            free(got);
            free(vx);
            free(vy);
            pgd_tensor_destroy(xbuf);
            pgd_tensor_destroy(ybuf);
            free(hx);
            free(want);
        }
        ck_assert_msg(failed == 0, "%s: %d of %d %s cases failed", dev->name, failed, POOL_TRIALS,
                      names[kind]);
        pgd_ctx_destroy(ctx);
    }
}

START_TEST(maxpool_shapes)
{
    pool_shapes(0, 21);
}
END_TEST
START_TEST(avgpool_shapes)
{
    pool_shapes(1, 22);
}
END_TEST
START_TEST(global_avgpool_shapes)
{
    pool_shapes(2, 23);
}
END_TEST

START_TEST(nchw_to_nhwc_shapes)
{
    size_t ndev;
    const pgd_device_info *devs = pgd_test_devices(&ndev);
    for (size_t di = 0; di < ndev; di++) {
        pgd_ctx *ctx = pgd_test_ctx(&devs[di]);
        pgd_rng r;
        pgd_rng_seed(&r, 31);
        for (int trial = 0; trial < 100; trial++) {
            int64_t n = pgd_rng_int(&r, 1, 3), c = chans[pgd_rng_int(&r, 0, N_CHANS - 1)];
            int64_t h = pgd_rng_int(&r, 1, 17), w = pgd_rng_int(&r, 1, 17), total = n * c * h * w;
            float *hx = random_floats(&r, total, -1.0f, 1.0f);
            double *want = malloc((size_t)total * sizeof(double));
            ck_assert_ptr_nonnull(want);
            for (int64_t b = 0; b < n; b++)
                for (int64_t ch = 0; ch < c; ch++)
                    for (int64_t y = 0; y < h; y++)
                        for (int64_t x = 0; x < w; x++)
                            want[((b * h + y) * w + x) * c + ch] =
                                hx[((b * c + ch) * h + y) * w + x];
            pgd_tensor *xbuf = upload_buf(ctx, hx, total), *ybuf = upload_buf(ctx, NULL, total);
            int64_t sx[4] = {n, c, h, w}, sy[4] = {n, h, w, c};
            pgd_tensor *vx = pgd_test_prefix(xbuf, 4, sx), *vy = pgd_test_prefix(ybuf, 4, sy);
            pgd_error *err = NULL;
            PGD_CHECK_OK(pgd_nchw_to_nhwc(ctx, vx, vy, &err), &err);
            char what[160];
            snprintf(what, sizeof what, "nchw_to_nhwc on %s: [%lld, %lld, %lld, %lld]",
                     devs[di].name, (long long)n, (long long)c, (long long)h, (long long)w);
            int ok = 1;
            float *got = download_checked(ybuf, total, what, &ok);
            ck_assert_msg(ok && pgd_test_allclose(got, want, (size_t)total, 0.0, 0.0, what), "%s",
                          what);
            free(got);
            free(vx);
            free(vy);
            pgd_tensor_destroy(xbuf);
            pgd_tensor_destroy(ybuf);
            free(hx);
            free(want);
        }
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

/* ---- errors ---- */

static void expect_error(int rc, int code, pgd_error **err, const char *a, const char *b)
{
    ck_assert_msg(rc == code, "want %s, got %s", pgd_status_name(code), pgd_status_name(rc));
    ck_assert_ptr_nonnull(*err);
    const char *m = pgd_error_get_message(*err);
    ck_assert_msg((!a || strstr(m, a)) && (!b || strstr(m, b)), "message lacks '%s' / '%s': %s",
                  a ? a : "", b ? b : "", m);
    pgd_error_destroy(*err);
    *err = NULL;
}

static pgd_tensor *shaped(pgd_ctx *ctx, int ndim, const int64_t *shape)
{
    pgd_tensor *t = NULL;
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_tensor_create(ctx, ndim, shape, &t, &err), &err);
    return t;
}

START_TEST(shape_errors)
{
    if (!pgd_test_primary())
        return;
    size_t ndev;
    const pgd_device_info *devs = pgd_test_devices(&ndev);
    pgd_ctx *ctx = pgd_test_ctx(&devs[0]);
    pgd_error *err = NULL;
    float w[6 * 4 * 9];
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++)
        w[i] = 0.01f * (float)i;
    pgd_conv2d *conv = NULL;
    /* cin 4 is not a multiple of groups 3. */
    pgd_conv2d_desc bad = {4, 6, 3, 3, 1, 1, 1, 1, 1, 1, 3};
    expect_error(pgd_conv2d_create(ctx, &bad, w, NULL, NULL, &conv, &err), PGD_ERR_SHAPE, &err,
                 "cin 4", "groups 3");
    ck_assert_ptr_null(conv);
    pgd_conv2d_desc neg = {4, 6, 3, 3, 1, 1, -1, 1, 1, 1, 1};
    expect_error(pgd_conv2d_create(ctx, &neg, w, NULL, NULL, &conv, &err), PGD_ERR_INVALID_ARGUMENT,
                 &err, "padding -1", NULL);
    pgd_conv2d_desc zero = {4, 6, 0, 3, 1, 1, 1, 1, 1, 1, 1};
    expect_error(pgd_conv2d_create(ctx, &zero, w, NULL, NULL, &conv, &err),
                 PGD_ERR_INVALID_ARGUMENT, &err, "kernel 0 x 3", NULL);

    pgd_conv2d_desc d = {4, 6, 3, 3, 2, 2, 1, 1, 1, 1, 2};
    PGD_CHECK_OK(pgd_conv2d_create(ctx, &d, w, NULL, NULL, &conv, &err), &err);
    int64_t oh, ow;
    pgd_conv2d_out_size(&d, 9, 8, &oh, &ow);
    ck_assert_int_eq(oh, 5);
    ck_assert_int_eq(ow, 4);
    pgd_conv2d_desc stem = {3, 64, 7, 7, 2, 2, 3, 3, 1, 1, 1};
    pgd_conv2d_out_size(&stem, 224, 224, &oh, &ow);
    ck_assert_int_eq(oh, 112);
    pgd_conv2d_desc big = {3, 64, 7, 7, 1, 1, 0, 0, 2, 2, 1}; /* 13 x 13 window */
    pgd_conv2d_out_size(&big, 12, 20, &oh, &ow);
    ck_assert_int_eq(oh, 0);
    ck_assert_int_eq(ow, 8);

    int64_t sx[4] = {2, 9, 8, 4}, sx3[4] = {2, 9, 8, 3}, sy[4] = {2, 5, 4, 6},
            sy2[4] = {2, 5, 5, 6};
    int64_t sx_small[4] = {1, 1, 1, 4}, sy1[4] = {1, 1, 1, 6}, sx_nchw[4] = {2, 4, 9, 8};
    pgd_tensor *x = shaped(ctx, 4, sx), *x3 = shaped(ctx, 4, sx3), *y = shaped(ctx, 4, sy);
    pgd_tensor *y2 = shaped(ctx, 4, sy2), *xs = shaped(ctx, 4, sx_small), *y1 = shaped(ctx, 4, sy1);
    pgd_tensor *xn = shaped(ctx, 4, sx_nchw);
    /* Channels of x do not match cin. */
    expect_error(pgd_conv2d_forward(ctx, conv, x3, PGD_ACT_NONE, NULL, y, &err), PGD_ERR_SHAPE,
                 &err, "[2, 9, 8, 3]", "[2, 5, 4, 6]");
    /* y has the wrong width. */
    expect_error(pgd_conv2d_forward(ctx, conv, x, PGD_ACT_NONE, NULL, y2, &err), PGD_ERR_SHAPE,
                 &err, "[2, 9, 8, 4]", "[2, 5, 5, 6]");
    /* The residual is shaped differently from y. */
    expect_error(pgd_conv2d_forward(ctx, conv, x, PGD_ACT_RELU, y2, y, &err), PGD_ERR_SHAPE, &err,
                 "[2, 5, 5, 6]", "[2, 5, 4, 6]");
    /* 1 x 1 input, 3 x 3 kernel, padding 1, stride 2: fits (one output). */
    PGD_CHECK_OK(pgd_conv2d_forward(ctx, conv, xs, PGD_ACT_NONE, NULL, y1, &err), &err);
    pgd_conv2d_destroy(conv);
    conv = NULL;
    pgd_conv2d_desc nopad = {4, 6, 3, 3, 1, 1, 0, 0, 1, 1, 1};
    PGD_CHECK_OK(pgd_conv2d_create(ctx, &nopad, w, NULL, NULL, &conv, &err), &err);
    expect_error(pgd_conv2d_forward(ctx, conv, xs, PGD_ACT_NONE, NULL, y1, &err), PGD_ERR_SHAPE,
                 &err, "does not fit", "[1, 1, 1, 4]");
    pgd_conv2d_destroy(conv);
    conv = NULL;
    /* Pools. */
    int64_t sp[4] = {2, 4, 3, 4}, sg[2] = {2, 4}, sg_bad[2] = {2, 5};
    pgd_tensor *yp = shaped(ctx, 4, sp), *yg = shaped(ctx, 2, sg), *yg_bad = shaped(ctx, 2, sg_bad);
    PGD_CHECK_OK(pgd_maxpool2d(ctx, x, 3, 2, 0, yp, &err), &err);
    expect_error(pgd_maxpool2d(ctx, x, 3, 2, 1, yp, &err), PGD_ERR_SHAPE, &err, "[2, 9, 8, 4]",
                 "[2, 4, 3, 4]");
    expect_error(pgd_avgpool2d(ctx, x, 3, 2, 2, yp, &err), PGD_ERR_INVALID_ARGUMENT, &err, "pad 2",
                 NULL);
    expect_error(pgd_avgpool2d(ctx, xs, 3, 1, 0, yp, &err), PGD_ERR_SHAPE, &err, "does not fit",
                 "[1, 1, 1, 4]");
    PGD_CHECK_OK(pgd_global_avgpool(ctx, x, yg, &err), &err);
    expect_error(pgd_global_avgpool(ctx, x, yg_bad, &err), PGD_ERR_SHAPE, &err, "[2, 9, 8, 4]",
                 "[2, 5]");
    expect_error(pgd_nchw_to_nhwc(ctx, xn, xn, &err), PGD_ERR_SHAPE, &err, "[2, 4, 9, 8]", NULL);
    PGD_CHECK_OK(pgd_nchw_to_nhwc(ctx, xn, x, &err), &err);
    pgd_tensor *all[] = {x, x3, y, y2, xs, y1, xn, yp, yg, yg_bad};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        pgd_tensor_destroy(all[i]);
    pgd_ctx_destroy(ctx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("conv");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 1200);
    tcase_add_test(tc, shape_errors);
    tcase_add_test(tc, conv_bn_fold_known);
    tcase_add_test(tc, conv_gemm);
    tcase_add_test(tc, conv_implicit);
    tcase_add_test(tc, conv_im2col);
    tcase_add_test(tc, conv_direct);
    tcase_add_test(tc, conv_winograd);
    tcase_add_test(tc, conv_depthwise);
    tcase_add_test(tc, conv_auto);
    tcase_add_test(tc, conv_few_rows);
    tcase_add_test(tc, conv_resnet_layers);
    tcase_add_test(tc, maxpool_shapes);
    tcase_add_test(tc, avgpool_shapes);
    tcase_add_test(tc, global_avgpool_shapes);
    tcase_add_test(tc, nchw_to_nhwc_shapes);
    suite_add_tcase(s, tc);
    return pgd_test_run(s);
}
