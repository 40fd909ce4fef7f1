/* test_nonlocal_op.c — the non-local block op (runtime/ops/nonlocal.c) against the double-
 * precision reference of reference.c, on every device: in each of the four modes 100 seeded
 * shapes per device (odd H, W and C, B up to 3, Ci above and below C/2, 1x1 inputs, one in
 * eight up to 23x23), with and without subsampling, fused and unfused for the softmax forms,
 * with and without biases and BN, in place (z = x) now and then, and the concatenation's key
 * sum cut into short ranges; the affinity row of a random query each time; and arguments that
 * must be refused, the error naming the shape or field at fault. The whole suite takes seconds
 * on PoCL and llvmpipe, so every device runs every case. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "internal.h" /* white-box: reaches library internals */
#include "reference.h"

/* Few distinct widths: the attention kernels are built per head width (Ci, or C for the
 * Gaussian form), and every build costs seconds on PoCL and llvmpipe. */
static const int64_t chans[] = {2, 3, 4, 5, 7, 8, 12, 16};
static const int64_t inners[] = {1, 2, 3, 4, 5, 8};

#define CASES_PER_MODE 100

typedef struct nl_case {
    pgd_nonlocal_desc d;
    int64_t B, H, W;
    float *x, *tw, *tb, *pw, *pb, *gw, *gb, *ww, *wb, *bn, *cw;
} nl_case;

static float *rand_array(pgd_rng *r, int64_t n, float amp, float offset)
{
    float *a = malloc((size_t)(n > 0 ? n : 1) * sizeof *a);
    for (int64_t i = 0; i < n; i++)
        a[i] = offset + amp * pgd_rng_float(r);
    return a;
}

static void case_free(nl_case *c)
{
    float *all[] = {c->x, c->tw, c->tb, c->pw, c->pb, c->gw, c->gb, c->ww, c->wb, c->bn, c->cw};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        free(all[i]);
    memset(c, 0, sizeof *c);
}

/* A random block and input in `mode`. Weights are scaled so that the softmax rows stay spread
 * out (a near one-hot row would test little) and the concatenation's ReLU is active for part
 * of each row. */
static void make_case(pgd_rng *r, pgd_nonlocal_mode mode, nl_case *c)
{
    memset(c, 0, sizeof *c);
    int64_t C = chans[pgd_rng_int(r, 0, sizeof chans / sizeof *chans - 1)];
    int64_t Ci = inners[pgd_rng_int(r, 0, sizeof inners / sizeof *inners - 1)];
    while (mode == PGD_NONLOCAL_GAUSSIAN && Ci > C) /* g travels in x's C columns */
        Ci = inners[pgd_rng_int(r, 0, sizeof inners / sizeof *inners - 1)];
    c->d.channels = C;
    c->d.inner = Ci;
    c->d.mode = mode;
    c->d.subsample = (int)pgd_rng_int(r, 0, 1);
    c->d.unfused = (mode == PGD_NONLOCAL_EMBEDDED_GAUSSIAN || mode == PGD_NONLOCAL_GAUSSIAN)
                       ? (int)pgd_rng_int(r, 0, 1)
                       : 0;
    /* One case in eight on a larger grid: key ranges over several tiles of the attention
     * kernels (32 or 64 keys). */
    int64_t lo = c->d.subsample ? 2 : 1, hi = pgd_rng_int(r, 0, 7) == 0 ? 23 : 9;
    c->B = pgd_rng_int(r, 1, 3);
    c->H = pgd_rng_int(r, lo, hi);
    c->W = pgd_rng_int(r, lo, hi);
    int biases = pgd_rng_int(r, 0, 3) != 0, with_bn = pgd_rng_int(r, 0, 5) != 0;
    float aq = (float)(1.0 / sqrt((double)C));
    /* Gaussian: f = softmax(x·x), so x itself is kept small enough for a spread-out row. */
    float ax = mode == PGD_NONLOCAL_GAUSSIAN ? (float)(1.5 / sqrt((double)C)) : 1.0f;
    c->x = rand_array(r, c->B * c->H * c->W * C, ax, 0);
    if (mode != PGD_NONLOCAL_GAUSSIAN) {
        c->tw = rand_array(r, Ci * C, 1.5f * aq, 0);
        c->pw = rand_array(r, Ci * C, 1.5f * aq, 0);
        if (biases) {
            c->tb = rand_array(r, Ci, 0.2f, 0);
            c->pb = rand_array(r, Ci, 0.2f, 0);
        }
    }
    c->gw = rand_array(r, Ci * C, aq, 0);
    if (biases) {
        c->gb = rand_array(r, Ci, 0.2f, 0);
        c->wb = rand_array(r, C, 0.2f, 0);
    }
    c->ww = rand_array(r, C * Ci, (float)(1.0 / sqrt((double)Ci)), 0);
    if (with_bn) {
        c->bn = malloc((size_t)(4 * C) * sizeof *c->bn);
        for (int64_t i = 0; i < C; i++) {
            c->bn[i] = 1.0f + 0.5f * pgd_rng_float(r);         /* γ */
            c->bn[C + i] = 0.2f * pgd_rng_float(r);            /* β */
            c->bn[2 * C + i] = 0.2f * pgd_rng_float(r);        /* mean */
            c->bn[3 * C + i] = 1.0f + 0.5f * pgd_rng_float(r); /* var */
        }
    }
    if (mode == PGD_NONLOCAL_CONCATENATION)
        c->cw = rand_array(r, 2 * Ci, (float)(1.0 / sqrt((double)Ci)), 0);
}

static void case_params(const nl_case *c, pgd_batchnorm *bn, pgd_nonlocal_params *p)
{
    int64_t C = c->d.channels;
    memset(p, 0, sizeof *p);
    p->theta_weight = c->tw, p->theta_bias = c->tb;
    p->phi_weight = c->pw, p->phi_bias = c->pb;
    p->g_weight = c->gw, p->g_bias = c->gb;
    p->w_weight = c->ww, p->w_bias = c->wb;
    p->concat_weight = c->cw;
    if (c->bn) {
        *bn = (pgd_batchnorm){c->bn, c->bn + C, c->bn + 2 * C, c->bn + 3 * C, 1e-5f};
        p->bn = bn;
    }
}

static void case_ref(const nl_case *c, size_t q, double *z, double *aff, double *mag)
{
    int64_t C = c->d.channels;
    pgd_ref_nonlocal p = {(size_t)c->B,
                          (size_t)c->H,
                          (size_t)c->W,
                          (size_t)C,
                          (size_t)c->d.inner,
                          (int)c->d.mode,
                          c->d.subsample,
                          c->tw,
                          c->tb,
                          c->pw,
                          c->pb,
                          c->gw,
                          c->gb,
                          c->ww,
                          c->wb,
                          {NULL, NULL, NULL, NULL},
                          1e-5,
                          c->cw};
    if (c->bn) {
        p.bn[0] = c->bn, p.bn[1] = c->bn + C, p.bn[2] = c->bn + 2 * C, p.bn[3] = c->bn + 3 * C;
    }
    pgd_ref_nonlocal_block(&p, c->x, q, z, aff, mag);
}

/* |got - want| <= 1e-4·mag + 1e-6 everywhere, mag the size of the terms the value sums. */
static int close_to(const float *got, const double *want, const double *mag, size_t n,
                    const char *what)
{
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (!(fabs((double)got[i] - want[i]) <= 1e-4 * mag[i] + 1e-6)) {
            if (!bad)
                first = i;
            bad++;
        }
    if (bad)
        fprintf(stderr, "%s: %zu of %zu elements off; first at %zu: got %.9g, want %.9g (mag %g)\n",
                what, bad, n, first, (double)got[first], want[first], mag[first]);
    return bad == 0;
}

/* One random case: forward and affinity against the reference. Returns 1 when both match. */
static int one_case(pgd_ctx *ctx, pgd_rng *r, pgd_nonlocal_mode mode, int trial, const char *dev)
{
    nl_case c;
    make_case(r, mode, &c);
    int64_t C = c.d.channels, N = c.H * c.W;
    int64_t gh = 0, gw = 0, Np = pgd_nonlocal_key_grid(&c.d, c.H, c.W, &gh, &gw);
    int in_place = trial % 10 == 3;
    int chunk =
        mode == PGD_NONLOCAL_CONCATENATION && trial % 4 == 1 ? (int)pgd_rng_int(r, 1, 5) : 0;
    int64_t qi = pgd_rng_int(r, 0, c.H - 1), qj = pgd_rng_int(r, 0, c.W - 1);
    size_t nz = (size_t)(c.B * N * C), na = (size_t)(c.B * Np);
    char what[256];
    snprintf(what, sizeof what,
             "%s on %s: B=%lld H=%lld W=%lld C=%lld Ci=%lld sub=%d unfused=%d bias=%d bn=%d "
             "in_place=%d chunk=%d query=(%lld,%lld)",
             pgd_nonlocal_mode_name(mode), dev, (long long)c.B, (long long)c.H, (long long)c.W,
             (long long)C, (long long)c.d.inner, c.d.subsample, c.d.unfused, c.gb != NULL,
             c.bn != NULL, in_place, chunk, (long long)qi, (long long)qj);

    pgd_error *err = NULL;
    pgd_batchnorm bn;
    pgd_nonlocal_params params;
    case_params(&c, &bn, &params);
    pgd_nonlocal *nl = NULL;
    PGD_CHECK_OK(pgd_nonlocal_create(ctx, &c.d, &params, &nl, &err), &err);
    ck_assert_int_eq(pgd_nonlocal_get_desc(nl)->mode, mode);
    int64_t xs[4] = {c.B, c.H, c.W, C};
    pgd_tensor *x = pgd_test_upload(ctx, 4, xs, c.x), *z = x;
    float *got = malloc(nz * sizeof *got), *aff = malloc((na + 1) * sizeof *aff);
    if (!in_place) {
        for (size_t i = 0; i < nz; i++)
            got[i] = NAN;
        z = pgd_test_upload(ctx, 4, xs, got);
    }
    /* affinity first: in place, the forward overwrites x */
    aff[na] = pgd_test_canary();
    int64_t agh = -1, agw = -1;
    PGD_CHECK_OK(pgd_nonlocal_affinity(ctx, nl, x, qi, qj, aff, &agh, &agw, &err), &err);
    ck_assert_msg(agh == gh && agw == gw, "%s: key grid %lldx%lld, expected %lldx%lld", what,
                  (long long)agh, (long long)agw, (long long)gh, (long long)gw);
    ck_assert_msg(pgd_test_is_canary(aff[na]), "%s: affinity wrote past its row", what);
    ctx->knobs.nl_key_chunk = chunk; /* 0: the default */
    PGD_CHECK_OK(pgd_nonlocal_forward(ctx, nl, x, z, &err), &err);
    ctx->knobs.nl_key_chunk = 0;
    PGD_CHECK_OK(pgd_tensor_download(z, got, &err), &err);

    double *want = malloc(nz * sizeof *want), *mag = malloc(nz * sizeof *mag);
    double *want_aff = malloc(na * sizeof *want_aff);
    case_ref(&c, (size_t)(qi * c.W + qj), want, want_aff, mag);
    int ok = close_to(got, want, mag, nz, what);
    /* probabilities to 1e-6; the other forms relative to the row's largest term */
    double amax = 0;
    for (size_t i = 0; i < na; i++)
        amax = fmax(amax, fabs(want_aff[i]));
    char wa[300];
    snprintf(wa, sizeof wa, "affinity of %s", what);
    ok &= pgd_test_allclose(aff, want_aff, na, 1e-4, 1e-6 + 1e-5 * amax, wa);

    pgd_nonlocal_destroy(nl);
    pgd_tensor_destroy(x);
    if (z != x)
        pgd_tensor_destroy(z);
    free(got);
    free(aff);
    free(want);
    free(mag);
    free(want_aff);
    case_free(&c);
    return ok;
}

static void run_mode(pgd_nonlocal_mode mode, uint64_t seed)
{
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    for (size_t i = 0; i < n; i++) {
        pgd_ctx *ctx = pgd_test_ctx(&d[i]);
        pgd_rng r;
        pgd_rng_seed(&r, seed);
        int failed = 0;
        for (int t = 0; t < CASES_PER_MODE; t++)
            failed += !one_case(ctx, &r, mode, t, d[i].name);
        fprintf(stderr, "%s: %d cases on %s, %d failed\n", pgd_nonlocal_mode_name(mode),
                CASES_PER_MODE, d[i].name, failed);
        ck_assert_msg(failed == 0, "%s: %d of %d %s cases failed", d[i].name, failed,
                      CASES_PER_MODE, pgd_nonlocal_mode_name(mode));
        pgd_ctx_destroy(ctx);
    }
}

START_TEST(embedded_gaussian)
{
    run_mode(PGD_NONLOCAL_EMBEDDED_GAUSSIAN, 101);
}
END_TEST
START_TEST(gaussian)
{
    run_mode(PGD_NONLOCAL_GAUSSIAN, 202);
}
END_TEST
START_TEST(dot_product)
{
    run_mode(PGD_NONLOCAL_DOT_PRODUCT, 303);
}
END_TEST
START_TEST(concatenation)
{
    run_mode(PGD_NONLOCAL_CONCATENATION, 404);
}
END_TEST

/* Expects rc and an error whose message contains every string of `named` (NULL-terminated). */
static void expect_error(int rc, int want, pgd_error **errp, const char *const *named,
                         const char *what)
{
    pgd_error *err = *errp; /* read after the call (argument order is unspecified) */
    *errp = NULL;
    ck_assert_msg(rc == want, "%s: got %s, expected %s", what, pgd_status_name(rc),
                  pgd_status_name(want));
    ck_assert_msg(err != NULL, "%s: no error object", what);
    for (const char *const *s = named; *s; s++)
        ck_assert_msg(strstr(pgd_error_get_message(err), *s) != NULL, "%s: '%s' not named in: %s",
                      what, *s, pgd_error_get_message(err));
    pgd_error_destroy(err);
}

START_TEST(bad_arguments)
{
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    pgd_ctx *ctx = pgd_test_ctx(&d[0]);
    pgd_rng r;
    pgd_rng_seed(&r, 9);
    nl_case c;
    make_case(&r, PGD_NONLOCAL_CONCATENATION, &c);
    if (!c.bn) { /* the BN case below drops one of its arrays */
        c.bn = malloc((size_t)(4 * c.d.channels) * sizeof *c.bn);
        for (int64_t i = 0; i < 4 * c.d.channels; i++)
            c.bn[i] = 1.0f;
    }
    c.d.subsample = 1;
    c.d.unfused = 0;
    int64_t C = c.d.channels;
    pgd_batchnorm bn;
    pgd_nonlocal_params p;
    case_params(&c, &bn, &p);
    pgd_error *err = NULL;
    pgd_nonlocal *nl = (pgd_nonlocal *)&c; /* must come back NULL */

    /* descriptions */
    struct {
        int64_t C, Ci;
        int mode, sub, unfused;
        const char *named;
    } descs[] = {
        {1, 1, 0, 0, 0, "channels"},
        {0, 1, 1, 0, 0, "got 0"},
        {C, 0, 2, 0, 0, "inner"},
        {C, -3, 3, 0, 0, "got -3"},
        {C, 1, 4, 0, 0, "mode 4"},
        {C, 1, -1, 0, 0, "mode -1"},
        {C, 1, 0, 2, 0, "subsample"},
        {C, 1, 0, 0, 7, "unfused"},
        {C, C + 1, 1, 0, 0, "inner <= channels"},
    };
    for (size_t i = 0; i < sizeof descs / sizeof *descs; i++) {
        pgd_nonlocal_desc dd = {descs[i].C, descs[i].Ci, (pgd_nonlocal_mode)descs[i].mode,
                                descs[i].sub, descs[i].unfused};
        const char *named[] = {descs[i].named, NULL};
        expect_error(pgd_nonlocal_create(ctx, &dd, &p, &nl, &err), PGD_ERR_INVALID_ARGUMENT, &err,
                     named, descs[i].named);
        ck_assert_ptr_null(nl);
    }
    /* arrays a mode needs */
    struct {
        pgd_nonlocal_mode mode;
        int drop; /* 0 g, 1 w, 2 theta, 3 phi, 4 concat, 5 a BN array */
        const char *named;
    } need[] = {
        {PGD_NONLOCAL_GAUSSIAN, 0, "g_weight"},
        {PGD_NONLOCAL_EMBEDDED_GAUSSIAN, 1, "w_weight"},
        {PGD_NONLOCAL_EMBEDDED_GAUSSIAN, 2, "theta_weight"},
        {PGD_NONLOCAL_DOT_PRODUCT, 3, "phi_weight"},
        {PGD_NONLOCAL_CONCATENATION, 4, "concat_weight"},
        {PGD_NONLOCAL_DOT_PRODUCT, 5, "bn"},
    };
    for (size_t i = 0; i < sizeof need / sizeof *need; i++) {
        pgd_nonlocal_params q = p;
        pgd_batchnorm b2 = {c.bn, c.bn + C, NULL, c.bn + 3 * C, 1e-5f};
        const float *none = NULL;
        switch (need[i].drop) {
        case 0: q.g_weight = none; break;
        case 1: q.w_weight = none; break;
        case 2: q.theta_weight = none; break;
        case 3: q.phi_weight = none; break;
        case 4: q.concat_weight = none; break;
        default: q.bn = &b2; break;
        }
        pgd_nonlocal_desc dd = c.d;
        dd.mode = need[i].mode;
        dd.inner = 1; /* valid in every mode: only the missing array is at fault */
        const char *named[] = {need[i].named, pgd_nonlocal_mode_name(need[i].mode), NULL};
        expect_error(pgd_nonlocal_create(ctx, &dd, &q, &nl, &err), PGD_ERR_INVALID_ARGUMENT, &err,
                     named, need[i].named);
        ck_assert_ptr_null(nl);
    }
    /* the Gaussian form needs no θ or φ, and no mode needs a bias or BN */
    {
        pgd_nonlocal_params q;
        memset(&q, 0, sizeof q);
        q.g_weight = c.gw;
        q.w_weight = c.ww;
        pgd_nonlocal_desc dd = c.d;
        dd.mode = PGD_NONLOCAL_GAUSSIAN;
        dd.inner = 1;
        PGD_CHECK_OK(pgd_nonlocal_create(ctx, &dd, &q, &nl, &err), &err);
        pgd_nonlocal_destroy(nl);
    }

    /* shapes */
    PGD_CHECK_OK(pgd_nonlocal_create(ctx, &c.d, &p, &nl, &err), &err);
    pgd_nonlocal_destroy(NULL);
    ck_assert_ptr_null(pgd_nonlocal_get_desc(NULL));
    char expect_c[64];
    snprintf(expect_c, sizeof expect_c, "expected [B, H, W, %lld]", (long long)C);
    int64_t s_ok[4] = {2, 5, 4, C}, s_3d[3] = {2, 5, 4}, s_c[4] = {2, 5, 4, C + 1};
    int64_t s_z[4] = {2, 5, 3, C}, s_thin[4] = {1, 1, 6, C};
    pgd_tensor *x = NULL, *x3 = NULL, *xc = NULL, *zb = NULL, *thin = NULL;
    PGD_CHECK_OK(pgd_tensor_create(ctx, 4, s_ok, &x, &err), &err);
    PGD_CHECK_OK(pgd_tensor_create(ctx, 3, s_3d, &x3, &err), &err);
    PGD_CHECK_OK(pgd_tensor_create(ctx, 4, s_c, &xc, &err), &err);
    PGD_CHECK_OK(pgd_tensor_create(ctx, 4, s_z, &zb, &err), &err);
    PGD_CHECK_OK(pgd_tensor_create(ctx, 4, s_thin, &thin, &err), &err);
    char sx[64], sxc[64], sz[64], sthin[64];
    pgd_tensor_shape_str(x, sx, sizeof sx);
    pgd_tensor_shape_str(xc, sxc, sizeof sxc);
    pgd_tensor_shape_str(zb, sz, sizeof sz);
    pgd_tensor_shape_str(thin, sthin, sizeof sthin);
    {
        const char *named[] = {"[2, 5, 4]", expect_c, NULL};
        expect_error(pgd_nonlocal_forward(ctx, nl, x3, x3, &err), PGD_ERR_SHAPE, &err, named,
                     "3-D x");
    }
    {
        const char *named[] = {sxc, expect_c, NULL};
        expect_error(pgd_nonlocal_forward(ctx, nl, xc, xc, &err), PGD_ERR_SHAPE, &err, named,
                     "wrong channels");
    }
    {
        const char *named[] = {sz, sx, "z is", NULL};
        expect_error(pgd_nonlocal_forward(ctx, nl, x, zb, &err), PGD_ERR_SHAPE, &err, named,
                     "z unlike x");
    }
    {
        const char *named[] = {sthin, "subsampling", NULL};
        expect_error(pgd_nonlocal_forward(ctx, nl, thin, thin, &err), PGD_ERR_SHAPE, &err, named,
                     "1-row input with subsampling");
    }
    float row[64];
    {
        const char *named[] = {sxc, expect_c, NULL};
        expect_error(pgd_nonlocal_affinity(ctx, nl, xc, 0, 0, row, NULL, NULL, &err), PGD_ERR_SHAPE,
                     &err, named, "affinity, wrong channels");
    }
    {
        const char *named[] = {"(5, 0)", "5x4", NULL};
        expect_error(pgd_nonlocal_affinity(ctx, nl, x, 5, 0, row, NULL, NULL, &err),
                     PGD_ERR_INVALID_ARGUMENT, &err, named, "query below the grid");
    }
    {
        const char *named[] = {"(0, -1)", NULL};
        expect_error(pgd_nonlocal_affinity(ctx, nl, x, 0, -1, row, NULL, NULL, &err),
                     PGD_ERR_INVALID_ARGUMENT, &err, named, "query left of the grid");
    }
    {
        const char *named[] = {"required", NULL};
        expect_error(pgd_nonlocal_affinity(ctx, nl, x, 0, 0, NULL, NULL, NULL, &err),
                     PGD_ERR_INVALID_ARGUMENT, &err, named, "no row");
        expect_error(pgd_nonlocal_forward(ctx, nl, x, NULL, &err), PGD_ERR_INVALID_ARGUMENT, &err,
                     named, "no z");
    }
    /* the key grid, floor rule */
    int64_t gh = 0, gw = 0;
    ck_assert_int_eq(pgd_nonlocal_key_grid(&c.d, 5, 7, &gh, &gw), 6);
    ck_assert_int_eq(gh, 2);
    ck_assert_int_eq(gw, 3);
    pgd_nonlocal_desc full = c.d;
    full.subsample = 0;
    ck_assert_int_eq(pgd_nonlocal_key_grid(&full, 5, 7, NULL, NULL), 35);
    ck_assert_str_eq(pgd_nonlocal_mode_name(PGD_NONLOCAL_DOT_PRODUCT), "dot_product");
    ck_assert_str_eq(pgd_nonlocal_mode_name((pgd_nonlocal_mode)9), "?");

    pgd_tensor_destroy(x);
    pgd_tensor_destroy(x3);
    pgd_tensor_destroy(xc);
    pgd_tensor_destroy(zb);
    pgd_tensor_destroy(thin);
    pgd_nonlocal_destroy(nl);
    case_free(&c);
    pgd_ctx_destroy(ctx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("nonlocal_op");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 1200);
    tcase_add_test(tc, bad_arguments);
    tcase_add_test(tc, embedded_gaussian);
    tcase_add_test(tc, gaussian);
    tcase_add_test(tc, dot_product);
    tcase_add_test(tc, concatenation);
    suite_add_tcase(s, tc);
    return pgd_test_run(s);
}
