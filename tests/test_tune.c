/* test_tune.c — the per-device GEMM parameters: their text form, GEMMs and layers correct under
 * every kind of parameter set the tuner may choose (scalar and vector gemm_cpu, gemm_gpu tiles
 * that do not divide the sizes), pgd_tune storing its winner for the next context, and the ways
 * a stored or given parameter set is refused. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "harness.h"
#include "internal.h" /* white-box: forces ctx->gemm */
#include "reference.h"
#include "tune.h" /* white-box: the context's parameters */

static void ref(int ta, int tb, int64_t M, int64_t N, int64_t K, const float *A, const float *B,
                const float *bias, pgd_act act, const float *R, double *out)
{
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double s = bias ? bias[n] : 0.0;
            for (int64_t k = 0; k < K; k++)
                s += (double)(ta ? A[k * M + m] : A[m * K + k]) *
                     (double)(tb ? B[n * K + k] : B[k * N + n]);
            if (act == PGD_ACT_RELU)
                s = s > 0 ? s : 0;
            else if (act == PGD_ACT_GELU)
                s = 0.5 * s * (1.0 + erf(s / sqrt(2.0)));
            out[m * N + n] = s + (R ? R[m * N + n] : 0.0);
        }
}

static float *random_floats(pgd_rng *r, int64_t n)
{
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof *p);
    ck_assert_ptr_nonnull(p);
    for (int64_t i = 0; i < n; i++)
        p[i] = pgd_rng_float(r);
    return p;
}

static const int64_t awkward[] = {1, 2, 3, 5, 7, 13, 17, 31, 33, 63, 65, 97, 130};

static int64_t dim(pgd_rng *r)
{
    return awkward[pgd_rng_int(r, 0, sizeof awkward / sizeof awkward[0] - 1)];
}

/* One pgd_gemm with bias, activation and residual; trans_a/trans_b as given. */
static int gemm_case(pgd_ctx *ctx, pgd_rng *r, int ta, int tb, const char *params)
{
    int64_t M = dim(r), N = dim(r), K = dim(r);
    pgd_act act = (pgd_act)pgd_rng_int(r, 0, 2);
    int with_res = (int)pgd_rng_int(r, 0, 1);
    float *A = random_floats(r, M * K), *B = random_floats(r, K * N), *bias = random_floats(r, N);
    float *R = random_floats(r, M * N), *got = malloc((size_t)(M * N) * sizeof *got);
    double *want = malloc((size_t)(M * N) * sizeof *want);
    ref(ta, tb, M, N, K, A, B, bias, act, with_res ? R : NULL, want);
    int64_t sa[2] = {ta ? K : M, ta ? M : K}, sb[2] = {tb ? N : K, tb ? K : N}, sc[2] = {M, N};
    pgd_tensor *a = pgd_test_upload(ctx, 2, sa, A), *b = pgd_test_upload(ctx, 2, sb, B);
    pgd_tensor *tbias = pgd_test_upload(ctx, 1, &N, bias), *tr = pgd_test_upload(ctx, 2, sc, R);
    pgd_tensor *c = NULL;
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_tensor_create(ctx, 2, sc, &c, &err), &err);
    pgd_gemm_args args = {ta, tb, 1.0f, 0.0f, tbias, act, with_res ? tr : NULL};
    PGD_CHECK_OK(pgd_gemm(ctx, &args, a, b, c, &err), &err);
    PGD_CHECK_OK(pgd_tensor_download(c, got, &err), &err);
    char what[200];
    snprintf(what, sizeof what, "%s: gemm ta=%d tb=%d %lldx%lldx%lld act %d%s", params, ta, tb,
             (long long)M, (long long)N, (long long)K, (int)act, with_res ? " residual" : "");
    double tol = 2e-6 * (double)K + 1e-5;
    int ok = pgd_test_allclose(got, want, (size_t)(M * N), tol, tol, what);
    pgd_tensor_destroy(a);
    pgd_tensor_destroy(b);
    pgd_tensor_destroy(tbias);
    pgd_tensor_destroy(tr);
    pgd_tensor_destroy(c);
    free(A);
    free(B);
    free(bias);
    free(R);
    free(got);
    free(want);
    return ok;
}

static void force(pgd_ctx *ctx, const char *text)
{
    pgd_error *err = NULL;
    pgd__gemm_params p;
    PGD_CHECK_OK(pgd__gemm_params_parse(text, &p, &err), &err);
    pgd__params_of(ctx)->gemm = p;
}

static int fits(pgd_ctx *ctx, const char *text)
{
    pgd__gemm_params p;
    return !pgd__gemm_params_parse(text, &p, NULL) && !pgd__gemm_params_check(ctx, &p, NULL);
}

/* A linear layer packed under `params` stays correct after the context moves on to `other`. */
static int layer_keeps_params(pgd_ctx *ctx, pgd_rng *r, const char *params, const char *other)
{
    int64_t rows = dim(r), in = dim(r), out = dim(r);
    float *X = random_floats(r, rows * in), *W = random_floats(r, out * in);
    float *bias = random_floats(r, out), *got = malloc((size_t)(rows * out) * sizeof *got);
    double *want = malloc((size_t)(rows * out) * sizeof *want);
    ref(0, 1, rows, out, in, X, W, bias, PGD_ACT_GELU, NULL, want);
    int64_t sx[2] = {rows, in}, sw[2] = {out, in}, sy[2] = {rows, out};
    pgd_tensor *x = pgd_test_upload(ctx, 2, sx, X), *w = pgd_test_upload(ctx, 2, sw, W);
    pgd_tensor *tb = pgd_test_upload(ctx, 1, &out, bias), *y = NULL;
    pgd_linear *lin = NULL;
    pgd_error *err = NULL;
    force(ctx, params);
    PGD_CHECK_OK(pgd_linear_create(ctx, w, tb, &lin, &err), &err);
    force(ctx, other);
    PGD_CHECK_OK(pgd_tensor_create(ctx, 2, sy, &y, &err), &err);
    PGD_CHECK_OK(pgd_linear_forward(ctx, lin, x, PGD_ACT_GELU, NULL, y, &err), &err);
    PGD_CHECK_OK(pgd_tensor_download(y, got, &err), &err);
    char what[200];
    snprintf(what, sizeof what, "linear packed with %s, run after %s, %lld x %lld -> %lld", params,
             other, (long long)rows, (long long)in, (long long)out);
    double tol = 2e-6 * (double)in + 1e-5;
    int ok = pgd_test_allclose(got, want, (size_t)(rows * out), tol, tol, what);
    pgd_linear_destroy(lin);
    pgd_tensor_destroy(x);
    pgd_tensor_destroy(w);
    pgd_tensor_destroy(tb);
    pgd_tensor_destroy(y);
    free(X);
    free(W);
    free(bias);
    free(got);
    free(want);
    return ok;
}

START_TEST(params_text)
{
    static const char *const good[] = {"cpu:rm=6,vw=16,nv=2,ku=4", "cpu:rm=1,vw=1,nv=1,ku=1",
                                       "gpu:tsm=64,tsn=64,tsk=16,wptm=4,wptn=4",
                                       "gpu:tsm=24,tsn=40,tsk=8,wptm=3,wptn=5"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        pgd__gemm_params p;
        pgd_error *err = NULL;
        char back[128];
        PGD_CHECK_OK(pgd__gemm_params_parse(good[i], &p, &err), &err);
        pgd__gemm_params_format(&p, back, sizeof back);
        ck_assert_str_eq(back, good[i]);
    }
    static const char *const bad[] = {"",
                                      "cpu:",
                                      "cpu:rm=6",
                                      "cpu:rm=6,vw=16,nv=2",
                                      "cpu:rm=6,vw=16,nv=2,ku=4,",
                                      "cpu:rm=6,vw=16,nv=2,ku=4x",
                                      "cpu:vw=16,rm=6,nv=2,ku=4",
                                      "cpu:rm=-6,vw=16,nv=2,ku=4",
                                      "cpu:rm=99999,vw=16,nv=2,ku=4",
                                      "CPU:rm=6,vw=16,nv=2,ku=4",
                                      "gpu:tsm=64,tsn=64,tsk=16,wptm=4",
                                      "fast"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pgd__gemm_params p;
        pgd_error *err = NULL;
        ck_assert_int_eq(pgd__gemm_params_parse(bad[i], &p, &err), PGD_ERR_INVALID_ARGUMENT);
        ck_assert_msg(strstr(pgd_error_get_message(err), "expected cpu:rm=") != NULL, "%s",
                      pgd_error_get_message(err));
        pgd_error_destroy(err);
    }
    ck_assert_int_eq(pgd__gemm_params_parse(NULL, NULL, NULL), PGD_ERR_INVALID_ARGUMENT);
}
END_TEST

/* Values that parse but break a rule of the kernels, and tiles no device has room for. */
START_TEST(params_rules)
{
    if (!pgd_test_primary())
        return;
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    pgd_ctx *ctx = pgd_test_ctx(&d[0]);
    static const char *const invalid[] = {"cpu:rm=6,vw=3,nv=2,ku=4",
                                          "cpu:rm=0,vw=16,nv=2,ku=4",
                                          "cpu:rm=16,vw=16,nv=8,ku=4",
                                          "cpu:rm=6,vw=16,nv=2,ku=0",
                                          "gpu:tsm=64,tsn=64,tsk=16,wptm=3,wptn=4",
                                          "gpu:tsm=0,tsn=64,tsk=16,wptm=1,wptn=4"};
    for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++) {
        pgd__gemm_params p;
        pgd_error *err = NULL;
        PGD_CHECK_OK(pgd__gemm_params_parse(invalid[i], &p, &err), &err);
        ck_assert_int_eq(pgd__gemm_params_check(ctx, &p, &err), PGD_ERR_INVALID_ARGUMENT);
        ck_assert_msg(strstr(pgd_error_get_message(err), invalid[i]) != NULL, "%s",
                      pgd_error_get_message(err));
        pgd_error_destroy(err);
    }
    pgd__gemm_params p;
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd__gemm_params_parse("gpu:tsm=256,tsn=256,tsk=64,wptm=1,wptn=1", &p, &err),
                 &err);
    ck_assert_int_eq(pgd__gemm_params_check(ctx, &p, &err), PGD_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(pgd_error_get_message(err), d[0].name) != NULL, "%s",
                  pgd_error_get_message(err));
    pgd_error_destroy(err);
    pgd_ctx_destroy(ctx);
}
END_TEST

/* GEMMs and packed layers under forced parameter sets: both kernels, vector widths 1 to 16, tiles
 * and K unrolls that divide none of the awkward sizes. gemm_cpu only on real CPU devices. */
START_TEST(forced_params)
{
    static const char *const sets[] = {"cpu:rm=1,vw=1,nv=1,ku=1",
                                       "cpu:rm=3,vw=2,nv=3,ku=3",
                                       "cpu:rm=8,vw=4,nv=4,ku=8",
                                       "cpu:rm=5,vw=16,nv=1,ku=2",
                                       "gpu:tsm=16,tsn=16,tsk=16,wptm=4,wptn=2",
                                       "gpu:tsm=24,tsn=40,tsk=8,wptm=6,wptn=5",
                                       "gpu:tsm=8,tsn=8,tsk=4,wptm=2,wptn=2"};
    const size_t nsets = sizeof sets / sizeof sets[0];
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    int primary = pgd_test_primary();
    for (size_t di = 0; di < n; di++) {
        pgd_ctx *ctx = pgd_test_ctx_with(&d[di], (const char *const[]){"PAGODA_GEMM=pagoda", NULL});
        int is_cpu = d[di].type == PGD_DEVICE_CPU && !d[di].software_rasteriser, ran = 0;
        pgd_rng r;
        pgd_rng_seed(&r, 31 + di);
        for (size_t s = 0; s < nsets; s++) {
            if ((!is_cpu && sets[s][0] == 'c') || !fits(ctx, sets[s]))
                continue;
            /* Beyond the primary device, the odd-sized sets only, and three or four of them (the
             * kernels' source is the same; each set is a build, and Intel's runtime takes tens of
             * seconds a build). */
            if (!primary && (s == 0 || s == 2 || (is_cpu && s == 4)))
                continue;
            force(ctx, sets[s]);
            int failed = 0;
            for (int trial = 0; trial < 6; trial++)
                failed += !gemm_case(ctx, &r, trial == 5, trial % 2 == 0 || trial == 5, sets[s]);
            ck_assert_msg(failed == 0, "%s %s: %d of 6 GEMMs wrong", d[di].name, sets[s], failed);
            size_t o = (s + 1) % nsets;
            while ((!is_cpu && sets[o][0] == 'c') || !fits(ctx, sets[o]))
                o = (o + 1) % nsets;
            ck_assert(layer_keeps_params(ctx, &r, sets[s], sets[o]));
            ran++;
        }
        ck_assert_msg(ran >= 3, "%s: only %d parameter sets fit", d[di].name, ran);
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

typedef struct seen {
    int calls, last_index;
    char first[128];
} seen;

static void on_progress(const pgd_tune_progress *p, void *user)
{
    seen *s = user;
    ck_assert_int_eq(p->index, s->calls);
    ck_assert(p->index < p->count && p->params != NULL && p->elapsed_s >= 0);
    ck_assert(p->why != NULL || p->ms > 0);
    if (!s->calls)
        snprintf(s->first, sizeof s->first, "%s", p->params);
    s->last_index = p->index;
    s->calls++;
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

static const char *from_of(pgd_ctx *ctx, char *buf, size_t size)
{
    return pgd_ctx_get_kernel_params(ctx, buf, size);
}

/* A temporary cache directory for one test, the options.cache_dir of its contexts (ctx_in):
 * cache_dir_begin makes it, cache_dir_end removes it. */
typedef struct cache_dir {
    char *dir;
} cache_dir;

static cache_dir cache_dir_begin(const char *name)
{
    cache_dir c;
    c.dir = pgd_test_tempdir(name);
    return c;
}

static void cache_dir_end(cache_dir *c)
{
    pgd_test_rmtree(c->dir);
    free(c->dir);
}

/* A context on d that keeps its tuning in c's directory, with `params` as the given kernel
 * parameters (NULL: none, whatever the environment gives, so the store decides). */
static pgd_ctx *ctx_in(const pgd_device_info *d, const cache_dir *c, const char *params)
{
    pgd_ctx_options o;
    pgd_test_options(d, NULL, &o);
    o.cache_dir = c->dir;
    o.kernel_params = params;
    return pgd_test_ctx_opts(&o);
}

/* pgd_tune (a budget that admits only the defaults) stores its winner,
 * the next context of the device loads it, a corrupt store means defaults again. */
START_TEST(tune_stores_winner)
{
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    cache_dir cd = cache_dir_begin("tune");
    char path[4200];
    snprintf(path, sizeof path, "%s/tuning.json", cd.dir);
    for (size_t di = 0; di < n; di++) {
        pgd_ctx *ctx = ctx_in(&d[di], &cd, NULL);
        char before[128], after[128];
        ck_assert_str_eq(from_of(ctx, before, sizeof before), "defaults");
        seen s = {0, -1, ""};
        pgd_tune_result res;
        pgd_error *err = NULL;
        PGD_CHECK_OK(pgd_tune(ctx, 0.01, on_progress, &s, &res, &err), &err);
        ck_assert_int_ge(res.tried, 1);
        ck_assert_int_eq(res.tried, s.calls);
        ck_assert_int_gt(res.skipped, 0);  /* the budget was spent: the rest was skipped */
        ck_assert_str_eq(s.first, before); /* the defaults are measured first */
        ck_assert_str_eq(res.defaults, before);
        ck_assert(res.best_ms > 0 && res.best_ms <= res.default_ms && res.seconds > 0);
        ck_assert_int_eq(res.stored, 1);
        ck_assert_str_eq(from_of(ctx, after, sizeof after), "tuned");
        ck_assert_str_eq(after, res.params);
        pgd_ctx_destroy(ctx);
        ctx = ctx_in(&d[di], &cd, NULL);
        ck_assert_str_eq(from_of(ctx, after, sizeof after), "tuned");
        ck_assert_str_eq(after, res.params);
        /* CPU devices: the attention stage measured the untuned choice (the budget allows no
         * more) and stored it; the new context runs it as "tuned" */
        char attn[64], attn_before[64];
        if (d[di].type == PGD_DEVICE_CPU) {
            ck_assert_msg(res.attention[0] && res.attention_ms > 0 &&
                              res.attention_ms == res.attention_default_ms,
                          "%s: attention '%s' %g ms, untuned %g ms", d[di].name, res.attention,
                          res.attention_ms, res.attention_default_ms);
            ck_assert_str_eq(pgd_ctx_get_attention_params(ctx, attn, sizeof attn), "tuned");
            ck_assert_str_eq(attn, res.attention);
            pgd_ctx *fresh = NULL;
            pgd_ctx_options o;
            pgd_ctx_options_init(&o);
            o.device = pgd_test_selector(&d[di]);
            o.cache_dir = "off";
            PGD_CHECK_OK(pgd_ctx_create_with_options(&o, &fresh, &err), &err);
            ck_assert_str_eq(pgd_ctx_get_attention_params(fresh, attn_before, sizeof attn_before),
                             "defaults");
            ck_assert_str_eq(attn_before, attn); /* the untuned choice won: nothing else ran */
            pgd_ctx_destroy(fresh);
        }
        pgd_rng r;
        pgd_rng_seed(&r, 77);
        ck_assert(gemm_case(ctx, &r, 0, 1, after));
        pgd_ctx_destroy(ctx);
    }
    unsigned char *text = NULL;
    size_t size = 0;
    ck_assert_int_eq(pgd_test_read_file(path, &text, &size), 0);
    ck_assert_msg(strstr((char *)text, "\"gemm\"") && strstr((char *)text, d[0].name), "%s", text);
    free(text);
    /* Corrupt or hostile stores: untuned, never an error or a crash. */
    static const char *const stores[] = {"{garbage", "[]", "{\"x\": 1}", ""};
    for (size_t i = 0; i < sizeof stores / sizeof stores[0]; i++) {
        write_text(path, stores[i]);
        pgd_ctx *ctx = ctx_in(&d[0], &cd, NULL);
        char now[128];
        ck_assert_str_eq(from_of(ctx, now, sizeof now), "defaults");
        pgd_ctx_destroy(ctx);
    }
    cache_dir_end(&cd);
}
END_TEST

/* A search that measures several candidates ends with the runoff: the best few measured again
 * in turns, each reported (index -1) with its median; the winner is one of them, with its
 * median as best_ms, and a stored winner is what the next context loads. */
typedef struct runoff_seen {
    int searched, finalists;
    char params[3][128];
    double ms[3];
} runoff_seen;

static void on_runoff(const pgd_tune_progress *p, void *user)
{
    runoff_seen *s = user;
    if (p->index >= 0) {
        ck_assert_int_eq(s->finalists, 0); /* the runoff comes last */
        s->searched++;
        return;
    }
    ck_assert_int_lt(s->finalists, 3);
    ck_assert_msg(p->why == NULL && p->ms > 0, "%s: %s", p->params, p->why ? p->why : "");
    snprintf(s->params[s->finalists], sizeof s->params[0], "%s", p->params);
    s->ms[s->finalists++] = p->ms;
}

/* A search of `budget_s` seconds on the first real CPU device, its runoff checked. With
 * `attempts` > 1 a search that measured fewer than two candidates (a slow or busy machine: the
 * first builds of a cold cache take seconds) is run again on the same cache, its store removed,
 * now with the first candidates built. */
static void check_runoff(double budget_s, int attempts)
{
    /* one device per machine, as before the tests ran per device: the first real CPU device of
     * the primary device's run (Intel's runtime builds a candidate in tens of seconds, and a
     * 15 s search there measured one) */
    if (!pgd_test_primary())
        return;
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    size_t di = 0;
    while (di < n && (d[di].type != PGD_DEVICE_CPU || d[di].software_rasteriser))
        di++;
    if (di == n) {
        printf("runoff: no CPU device (GPU and rasteriser searches are too slow for a test)\n");
        return;
    }
    cache_dir cd = cache_dir_begin("runoff");
    char store[4200];
    snprintf(store, sizeof store, "%s/tuning.json", cd.dir);
    runoff_seen s;
    pgd_tune_result res;
    pgd_error *err = NULL;
    for (int attempt = 0; attempt < attempts; attempt++) {
        remove(store);
        pgd_ctx *ctx = ctx_in(&d[di], &cd, NULL);
        memset(&s, 0, sizeof s);
        PGD_CHECK_OK(pgd_tune(ctx, budget_s, on_runoff, &s, &res, &err), &err);
        pgd_ctx_destroy(ctx);
        printf("runoff: %g s budget, %d candidates measured (%d rejected)\n", budget_s, res.tried,
               res.rejected);
        if (res.tried - res.rejected >= 2)
            break;
    }
    ck_assert_int_eq(s.searched, res.tried);
    ck_assert_int_ge(res.tried - res.rejected, 2);
    int want = res.tried - res.rejected < 3 ? res.tried - res.rejected : 3;
    ck_assert_int_eq(res.runoff, want);
    ck_assert_int_eq(s.finalists, want);
    int won = -1;
    for (int i = 0; i < s.finalists; i++)
        if (!strcmp(s.params[i], res.params))
            won = i;
    ck_assert_msg(won >= 0, "the winner %s was not a finalist", res.params);
    ck_assert(res.best_ms == s.ms[won]);
    for (int i = 0; i < s.finalists; i++)
        ck_assert_msg(s.ms[won] <= s.ms[i], "%s won with %g ms, %s had %g", res.params, s.ms[won],
                      s.params[i], s.ms[i]);
    pgd_ctx *ctx = ctx_in(&d[di], &cd, NULL);
    char now[128];
    ck_assert_str_eq(pgd_ctx_get_kernel_params(ctx, now, sizeof now), "tuned");
    ck_assert_str_eq(now, res.params);
    pgd_ctx_destroy(ctx);
    cache_dir_end(&cd);
}

/* The default suite's search: a 3-second budget, run again (up to 4 times in all) on a machine
 * too busy to build and measure two candidates in it. */
START_TEST(runoff)
{
    check_runoff(3.0, 4);
}
END_TEST

/* The full search (the suite "slow", tune_search@DEVICE): 15 seconds, once. Two or more
 * candidates: the second starts while under 80 % of the budget, and PoCL builds one in one to
 * three seconds from a cold cache (more under the sanitizers). */
START_TEST(runoff_full)
{
    check_runoff(15.0, 1);
}
END_TEST

/* Given parameters win over the store; bad ones stop context creation, naming the variable. */
START_TEST(given_params)
{
    if (!pgd_test_primary())
        return;
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    const char *mine = d[0].type == PGD_DEVICE_CPU && !d[0].software_rasteriser
                           ? "cpu:rm=4,vw=8,nv=3,ku=2"
                           : "gpu:tsm=16,tsn=16,tsk=16,wptm=4,wptn=2";
    pgd_ctx_options o;
    pgd_test_options(&d[0], NULL, &o);
    o.kernel_params = mine;
    pgd_ctx *ctx = pgd_test_ctx_opts(&o);
    char now[128];
    ck_assert_str_eq(from_of(ctx, now, sizeof now), "options");
    ck_assert_str_eq(now, mine);
    pgd_tune_result res;
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_tune(ctx, 0.01, NULL, NULL, &res, &err), &err);
    ck_assert_str_eq(from_of(ctx, now, sizeof now), "options"); /* not replaced by the search */
    ck_assert_str_eq(now, mine);
    pgd_ctx_destroy(ctx);
    static const char *const bad[] = {"cpu:rm=6", "gpu:tsm=256,tsn=256,tsk=64,wptm=1,wptn=1",
                                      "cpu:rm=6,vw=5,nv=2,ku=4"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        o.kernel_params = bad[i];
        ctx = NULL;
        int rc = pgd_ctx_create_with_options(&o, &ctx, &err);
        ck_assert_int_ne(rc, PGD_OK);
        ck_assert_ptr_null(ctx);
        ck_assert_msg(strstr(pgd_error_get_message(err), "PAGODA_KERNEL_PARAMS") != NULL, "%s",
                      pgd_error_get_message(err));
        pgd_error_destroy(err);
        err = NULL;
    }
}
END_TEST

/* The attention parameters' text form: what parses (rows absent = the rule) and what not. */
START_TEST(attention_params_text)
{
    static const struct {
        const char *text;
        int variant, kw, rows;
    } good[] = {{"rows", PGD_ATTENTION_ROWS, 0, 0},
                {"kt:kw=16", PGD_ATTENTION_KT, 16, 0},
                {"kt:kw=8,rows=6", PGD_ATTENTION_KT, 8, 6},
                {"kt:kw=4,rows=1", PGD_ATTENTION_KT, 4, 1},
                {"kt:kw=16,rows=8", PGD_ATTENTION_KT, 16, 8}};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        int v = -1, kw = -1, rows = -1;
        ck_assert_int_eq(pgd__attention_params_parse(good[i].text, &v, &kw, &rows), 0);
        ck_assert_msg(v == good[i].variant && kw == good[i].kw && rows == good[i].rows,
                      "%s: variant %d kw %d rows %d", good[i].text, v, kw, rows);
    }
    static const char *const bad[] = {"",
                                      "kt",
                                      "kt:kw=12",
                                      "kt:kw=16,",
                                      "kt:kw=16,rows=",
                                      "kt:kw=16,rows=0",
                                      "kt:kw=16,rows=9",
                                      "kt:kw=16,rows=-6",
                                      "kt:kw=16,rows=6x",
                                      "kt:kw=16,rows=6,rows=6",
                                      "kt:kw=16x",
                                      "KT:kw=16",
                                      "rows=6"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int v = -1, kw = -1, rows = -1;
        ck_assert_msg(pgd__attention_params_parse(bad[i], &v, &kw, &rows) != 0, "'%s' parsed",
                      bad[i]);
    }
    ck_assert_int_ne(pgd__attention_params_parse(NULL, NULL, NULL, NULL), 0);
}
END_TEST

/* Every query-row count the parameters may name, at each key width, gives the right attention
 * (against a double-precision reference) on token counts that are no multiple of the rows or
 * the key tile; the context then reports the parameters it runs. */
START_TEST(attention_rows)
{
    if (!pgd_test_primary()) /* on the first CPU device, as before the per-device split */
        return;
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    pgd_ctx *ctx = NULL;
    for (size_t i = 0; i < n && !ctx; i++)
        if (d[i].type == PGD_DEVICE_CPU)
            ctx = pgd_test_ctx(&d[i]);
    if (!ctx)
        return; /* the Kᵀ kernel runs on CPU devices only */
    pgd_rng r;
    pgd_rng_seed(&r, 0x5eed0a77);
    static const int64_t tokens[] = {1, 5, 37, 70};
    const int64_t H = 2, D = 64;
    int cases = 0;
    /* every row count once, the key widths in turn (each program is a PoCL build of a few
     * seconds: 8 of them, not all 24 pairs) */
    for (int rows = 1; rows <= KT_MAX_ROWS; rows++) {
        const int kw = 16 >> (rows % 3);
        const int64_t N = tokens[rows % 4];
        pgd__params_of(ctx)->attn_variant = PGD_ATTENTION_KT;
        pgd__params_of(ctx)->attn_kw = kw;
        pgd__params_of(ctx)->attn_rows = rows;
        pgd__params_of(ctx)->attn_tuned = 1;
        char text[64], want_text[64];
        ck_assert_str_eq(pgd_ctx_get_attention_params(ctx, text, sizeof text), "tuned");
        snprintf(want_text, sizeof want_text, "kt:kw=%d,rows=%d", kw, rows);
        ck_assert_str_eq(text, want_text);
        const int64_t tok = 3 * H * D;
        float *x = random_floats(&r, N * tok), *got = malloc((size_t)(N * H * D) * sizeof *got);
        ck_assert_ptr_nonnull(got);
        int64_t sq[3] = {1, N, tok}, so[3] = {1, N, H * D};
        pgd_tensor *qkv = pgd_test_upload(ctx, 3, sq, x), *out = NULL;
        pgd_error *err = NULL;
        PGD_CHECK_OK(pgd_tensor_create(ctx, 3, so, &out, &err), &err);
        PGD_CHECK_OK(pgd_attention_qkv(ctx, qkv, H, out, &err), &err);
        PGD_CHECK_OK(pgd_tensor_download(out, got, &err), &err);
        pgd_attention_args a;
        memset(&a, 0, sizeof a);
        a.batch = 1;
        a.heads = H;
        a.nq = a.nk = N;
        a.head_dim = D;
        a.q = (pgd_view){qkv, 0, N * tok, D, tok};
        a.k = (pgd_view){qkv, H * D, N * tok, D, tok};
        a.v = (pgd_view){qkv, 2 * H * D, N * tok, D, tok};
        a.o = (pgd_view){out, 0, N * H * D, D, H * D};
        double *want = malloc((size_t)(N * H * D) * sizeof *want);
        ck_assert_ptr_nonnull(want);
        pgd_ref_attention(&a, x, x, x, NULL, want, NULL);
        for (int64_t e = 0; e < N * H * D; e++) {
            const double o = want[e];
            const float g = got[e];
            ck_assert_msg(fabs(g - o) <= 2e-6 + 2e-6 * fabs(o),
                          "%s, N=%lld: head %lld row %lld [%lld] %.9g, want %.9g", text,
                          (long long)N, (long long)(e / D % H), (long long)(e / (H * D)),
                          (long long)(e % D), g, o);
        }
        free(want);
        free(x);
        free(got);
        pgd_tensor_destroy(qkv);
        pgd_tensor_destroy(out);
        cases++;
    }
    ck_assert_int_eq(cases, KT_MAX_ROWS);
    pgd_ctx_destroy(ctx);
}
END_TEST

/* ---- the parameter database and the store (runtime/tune) ---- */

static pgd_device_info fake(const char *name, const char *vendor, const char *platform,
                            const char *pversion, const char *version, pgd_device_type type,
                            unsigned width, int rasteriser)
{
    pgd_device_info i;
    memset(&i, 0, sizeof i);
    snprintf(i.name, sizeof i.name, "%s", name);
    snprintf(i.vendor, sizeof i.vendor, "%s", vendor);
    snprintf(i.platform, sizeof i.platform, "%s", platform);
    snprintf(i.platform_version, sizeof i.platform_version, "%s", pversion);
    snprintf(i.version, sizeof i.version, "%s", version);
    snprintf(i.driver_version, sizeof i.driver_version, "1.0");
    i.type = type;
    i.pref_vector_float = width;
    i.software_rasteriser = rasteriser;
    return i;
}

/* The shipped database: each kind of device finds its known entry, else its class, else the
 * generic entry; the values fall back along the chain (a PoCL device's prefetch fact comes
 * from the "pocl" class, a GPU's attention from the rule). */
START_TEST(db_lookup)
{
    static const char *const pocl = "OpenCL 3.0 PoCL 3.1+debian Linux";
    const struct {
        pgd_device_info d;
        const char *want;
        int prefetch;
    } cases[] = {
        {fake("pthread-skylake-avx512-Intel(R) Xeon(R)", "GenuineIntel",
              "Portable Computing Language", pocl,
              "OpenCL 3.0 PoCL HSTR: pthread-x86_64-pc-linux-gnu-skylake-avx512", PGD_DEVICE_CPU,
              16, 0),
         "pocl-avx512", 1},
        {fake("pthread-haswell", "GenuineIntel", "Portable Computing Language", pocl,
              "OpenCL 3.0 PoCL HSTR: pthread-x86_64-pc-linux-gnu-haswell", PGD_DEVICE_CPU, 8, 0),
         "pocl-avx2", 1},
        {fake("pthread-cortex-a72", "ARM", "Portable Computing Language", pocl,
              "OpenCL 3.0 PoCL HSTR: pthread-aarch64-unknown-linux-gnu-cortex-a72", PGD_DEVICE_CPU,
              4, 0),
         "pocl-neon", 1},
        /* x86 with SSE only: no known entry, the PoCL class (prefetch) */
        {fake("pthread-nehalem", "GenuineIntel", "Portable Computing Language", pocl,
              "OpenCL 3.0 PoCL HSTR: pthread-x86_64-pc-linux-gnu-nehalem", PGD_DEVICE_CPU, 4, 0),
         "pocl", 1},
        {fake("Intel(R) Xeon(R) Processor", "Intel(R) Corporation", "Intel(R) OpenCL",
              "OpenCL 3.1 LINUX", "OpenCL 3.1 (Build 0)", PGD_DEVICE_CPU, 1, 0),
         "intel-cpu", 0},
        {fake("llvmpipe (LLVM 15.0.6, 256 bits)", "Mesa/X.org", "rusticl", "OpenCL 3.0 ",
              "OpenCL 3.0 ", PGD_DEVICE_CPU, 4, 1),
         "llvmpipe", 0},
        {fake("softpipe", "Mesa", "Clover", "OpenCL 1.1 Mesa", "OpenCL 1.1", PGD_DEVICE_CPU, 4, 1),
         "software-rasteriser", 0},
        {fake("Some CPU", "Someone", "Some OpenCL", "OpenCL 3.0", "OpenCL 3.0", PGD_DEVICE_CPU, 8,
              0),
         "cpu", 0},
        {fake("NVIDIA H100", "NVIDIA Corporation", "NVIDIA CUDA", "OpenCL 3.0 CUDA 12",
              "OpenCL 3.0 CUDA", PGD_DEVICE_GPU, 1, 0),
         "nvidia-gpu", 0},
        {fake("gfx1100", "Advanced Micro Devices, Inc.", "AMD Accelerated Parallel Processing",
              "OpenCL 2.1 AMD-APP", "OpenCL 2.0", PGD_DEVICE_GPU, 1, 0),
         "amd-gpu", 0},
        {fake("Intel(R) Arc(TM) A770", "Intel(R) Corporation", "Intel(R) OpenCL Graphics",
              "OpenCL 3.0", "OpenCL 3.0 NEO", PGD_DEVICE_GPU, 1, 0),
         "intel-gpu", 0},
        {fake("Mali-G78", "ARM", "ARM Platform", "OpenCL 3.0 v1.r40", "OpenCL 3.0", PGD_DEVICE_GPU,
              4, 0),
         "arm-gpu", 0},
        {fake("Adreno 740", "QUALCOMM", "QUALCOMM Snapdragon", "OpenCL 3.0", "OpenCL 3.0 Adreno",
              PGD_DEVICE_GPU, 1, 0),
         "gpu", 0},
        {fake("An FPGA", "Someone", "FPGA SDK", "OpenCL 1.2", "OpenCL 1.2", PGD_DEVICE_ACCELERATOR,
              1, 0),
         "generic", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const pgd__db_entry *e = pgd__db_lookup_in(pgd__db, pgd__db_count, &cases[i].d);
        ck_assert_msg(e && !strcmp(e->name, cases[i].want), "%s: entry %s, want %s",
                      cases[i].d.name, e ? e->name : "(none)", cases[i].want);
        const char *gemm, *attn;
        int prefetch;
        pgd__db_resolve(pgd__db, pgd__db_count, e, &gemm, &attn, &prefetch);
        ck_assert_msg(prefetch == cases[i].prefetch, "%s: prefetch %d", e->name, prefetch);
        /* every value the database gives is well formed */
        pgd__gemm_params p;
        int v, kw, rows;
        ck_assert_msg(!gemm || !pgd__gemm_params_parse(gemm, &p, NULL), "%s: gemm '%s'", e->name,
                      gemm);
        ck_assert_msg(!attn || !pgd__attention_params_parse(attn, &v, &kw, &rows),
                      "%s: attention '%s'", e->name, attn);
        if (cases[i].d.type == PGD_DEVICE_GPU)
            ck_assert_msg(!attn, "%s: a GPU gets the tiled attention rule, not %s", e->name, attn);
    }
    /* every parent named exists, and every chain ends at the generic entry */
    for (size_t i = 0; i < pgd__db_count; i++) {
        const pgd__db_entry *e = &pgd__db[i];
        size_t steps = 0;
        while (e->kind != PGD__DB_GENERIC && steps++ < pgd__db_count) {
            const pgd__db_entry *up = pgd__db_find(pgd__db, pgd__db_count, e->parent);
            ck_assert_msg(up && up->kind <= e->kind, "%s: parent '%s'", e->name, e->parent);
            e = up;
        }
        ck_assert_str_eq(e->name, "generic");
    }
}
END_TEST

/* The fallback chain on a table of our own: a known device's NULL values are its class's, the
 * class's NULLs the generic entry's; the most specific match wins whatever the table order; a
 * parent loop ends. */
START_TEST(db_fallback_chain)
{
    static const pgd__db_entry db[] = {
        {"class-a", PGD__DB_CLASS, "base", PGD_DEVICE_CPU, -1, NULL, NULL, NULL, NULL, 0,
         "cpu:rm=4,vw=8,nv=2,ku=4", NULL, 1, NULL},
        {"base", PGD__DB_GENERIC, NULL, 0, -1, NULL, NULL, NULL, NULL, 0,
         "gpu:tsm=32,tsn=32,tsk=8,wptm=8,wptn=8", "rows", 0, NULL},
        {"dev-x", PGD__DB_DEVICE, "class-a", PGD_DEVICE_CPU, -1, "Plat", "Vend", "devx", "2.", 8,
         NULL, "kt:kw=8,rows=4", -1, NULL},
        {"loop-1", PGD__DB_DEVICE, "loop-2", PGD_DEVICE_GPU, -1, NULL, NULL, NULL, NULL, 0, NULL,
         NULL, -1, NULL},
        {"loop-2", PGD__DB_CLASS, "loop-1", PGD_DEVICE_GPU, -1, NULL, NULL, NULL, NULL, 0, NULL,
         NULL, -1, NULL},
    };
    const size_t n = sizeof db / sizeof db[0];
    pgd_device_info d =
        fake("the devx one", "Vend Inc", "Plat", "OpenCL 3.0", "OpenCL 3.0", PGD_DEVICE_CPU, 8, 0);
    snprintf(d.driver_version, sizeof d.driver_version, "2.5");
    const char *gemm, *attn;
    int prefetch;
    const pgd__db_entry *e = pgd__db_lookup_in(db, n, &d);
    ck_assert_str_eq(e->name, "dev-x");
    pgd__db_resolve(db, n, e, &gemm, &attn, &prefetch);
    ck_assert_str_eq(gemm, "cpu:rm=4,vw=8,nv=2,ku=4"); /* the class's */
    ck_assert_str_eq(attn, "kt:kw=8,rows=4");          /* its own */
    ck_assert_int_eq(prefetch, 1);                     /* the class's */
    /* each match field on its own keeps the device out */
    pgd_device_info other[5] = {d, d, d, d, d};
    snprintf(other[0].driver_version, sizeof other[0].driver_version, "3.0");
    snprintf(other[1].vendor, sizeof other[1].vendor, "Else");
    snprintf(other[2].name, sizeof other[2].name, "another");
    snprintf(other[3].platform, sizeof other[3].platform, "Other");
    other[4].pref_vector_float = 16;
    for (int i = 0; i < 5; i++) {
        e = pgd__db_lookup_in(db, n, &other[i]);
        ck_assert_msg(!strcmp(e->name, "class-a"), "case %d: %s", i, e->name);
        pgd__db_resolve(db, n, e, &gemm, &attn, &prefetch);
        ck_assert_str_eq(gemm, "cpu:rm=4,vw=8,nv=2,ku=4");
        ck_assert_str_eq(attn, "rows"); /* the generic entry's */
    }
    d.type = PGD_DEVICE_ACCELERATOR;
    e = pgd__db_lookup_in(db, n, &d);
    ck_assert_str_eq(e->name, "base");
    pgd__db_resolve(db, n, e, &gemm, &attn, &prefetch);
    ck_assert_str_eq(gemm, "gpu:tsm=32,tsn=32,tsk=8,wptm=8,wptn=8");
    ck_assert_int_eq(prefetch, 0);
    d.type = PGD_DEVICE_GPU;
    e = pgd__db_lookup_in(db, n, &d);
    ck_assert_str_eq(e->name, "loop-1");
    pgd__db_resolve(db, n, e, &gemm, &attn, &prefetch); /* ends: no generic on the way */
    ck_assert_ptr_null(gemm);
    ck_assert_ptr_null(attn);
    ck_assert_int_eq(prefetch, 0);
    ck_assert_ptr_null(pgd__db_lookup_in(db + 3, 2, &other[0])); /* no CPU entry there */
}
END_TEST

static void write_store(const char *dir, const char *file, const char *key, const char *body)
{
    char path[4200], text[1000];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    snprintf(text, sizeof text, "{\"%s\": %s}", key, body);
    write_text(path, text);
}

/* A context runs its database entry untuned ("db:<name>", its values as "defaults"); the store
 * overrides it ("tuned:<key>"); the old gemm-choices.json is read where the store has no
 * choices and moves into tuning.json at the next write; the export names the entry. */
START_TEST(store_overrides_db)
{
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    cache_dir cd = cache_dir_begin("dbstore");
    for (size_t di = 0; di < n; di++) {
        const pgd__db_entry *e = pgd__db_lookup_in(pgd__db, pgd__db_count, &d[di]);
        const char *gemm, *attn;
        int prefetch;
        pgd__db_resolve(pgd__db, pgd__db_count, e, &gemm, &attn, &prefetch);
        pgd_ctx *ctx = ctx_in(&d[di], &cd, NULL);
        char entry[96], want[96], now[128], line[2048];
        snprintf(want, sizeof want, "db:%s", e->name);
        ck_assert_str_eq(pgd_ctx_get_params_entry(ctx, entry, sizeof entry), want);
        ck_assert_str_eq(from_of(ctx, now, sizeof now), "defaults");
        if (gemm && fits(ctx, gemm))
            ck_assert_str_eq(now, gemm);
        ck_assert_int_eq(pgd__params_of(ctx)->prefetch, prefetch);
        pgd_error *err = NULL;
        PGD_CHECK_OK(pgd_tune_export(ctx, line, sizeof line, &err), &err);
        ck_assert_msg(strstr(line, now) && strstr(line, "PGD__DB_DEVICE"), "%s", line);
        ck_assert_int_eq(pgd_tune_export(ctx, line, 20, &err), PGD_ERR_INVALID_ARGUMENT);
        pgd_error_destroy(err);
        char key[65], old_key[65];
        snprintf(key, sizeof key, "%s", pgd__params_of(ctx)->id);
        pgd__cache_key(&d[di], "gemm-choices", "", old_key);
        const char *given = gemm && fits(ctx, gemm) ? gemm : NULL;
        pgd_ctx_destroy(ctx);

        /* the store's values win; the old file's choices are read */
        const char *mine = d[di].type == PGD_DEVICE_CPU && !d[di].software_rasteriser
                               ? "cpu:rm=3,vw=4,nv=2,ku=2"
                               : "gpu:tsm=16,tsn=16,tsk=8,wptm=2,wptn=2";
        char body[300];
        snprintf(body, sizeof body, "{\"gemm\": \"%s\", \"attention\": \"rows\"}", mine);
        write_store(cd.dir, "tuning.json", key, body);
        write_store(cd.dir, "gemm-choices.json", old_key,
                    "{\"choices\": {\"gemm:00:1:64,64,64\": \"clblast\"}}");
        ctx = ctx_in(&d[di], &cd, NULL);
        snprintf(want, sizeof want, "tuned:%s", key);
        ck_assert_str_eq(pgd_ctx_get_params_entry(ctx, entry, sizeof entry), want);
        ck_assert_str_eq(from_of(ctx, now, sizeof now), "tuned");
        ck_assert_str_eq(now, mine);
        char at[64];
        ck_assert_str_eq(pgd_ctx_get_attention_params(ctx, at, sizeof at), "tuned");
        ck_assert_str_eq(at, "rows");
        json_t *ch = pgd__params_of(ctx)->choices;
        ck_assert_str_eq(json_string_value(json_object_get(ch, "gemm:00:1:64,64,64")), "clblast");
        PGD_CHECK_OK(pgd_tune_export(ctx, line, sizeof line, &err), &err);
        ck_assert_msg(strstr(line, mine) && strstr(line, "\"rows\""), "%s", line);
        /* the next write moves them into tuning.json, which is read from then on */
        ck_assert_int_eq(pgd__params_save(ctx, NULL), 1);
        pgd_ctx_destroy(ctx);
        write_store(cd.dir, "gemm-choices.json", old_key, "{\"choices\": {}}");
        ctx = ctx_in(&d[di], &cd, NULL);
        ch = pgd__params_of(ctx)->choices;
        ck_assert_str_eq(json_string_value(json_object_get(ch, "gemm:00:1:64,64,64")), "clblast");
        ck_assert_str_eq(from_of(ctx, now, sizeof now), "tuned"); /* kept by the write */
        pgd_ctx_destroy(ctx);

        /* given parameters win over both */
        ctx = ctx_in(&d[di], &cd, given ? given : mine);
        ck_assert_str_eq(pgd_ctx_get_params_entry(ctx, entry, sizeof entry), "options");
        pgd_ctx_destroy(ctx);
        char path[4200];
        snprintf(path, sizeof path, "%s/tuning.json", cd.dir);
        remove(path);
    }
    cache_dir_end(&cd);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tune");
    TCase *tc = tcase_create("tune");
    tcase_set_timeout(tc, 1200);
    tcase_add_test(tc, params_text);
    tcase_add_test(tc, db_lookup);
    tcase_add_test(tc, db_fallback_chain);
    tcase_add_test(tc, store_overrides_db);
    tcase_add_test(tc, runoff);
    tcase_add_test(tc, params_rules);
    tcase_add_test(tc, forced_params);
    tcase_add_test(tc, tune_stores_winner);
    tcase_add_test(tc, given_params);
    tcase_add_test(tc, attention_params_text);
    tcase_add_test(tc, attention_rows);
    suite_add_tcase(s, tc);
    /* the full search: the suite "slow" (meson: tune_search@DEVICE) */
    TCase *search = tcase_create("search");
    tcase_set_tags(search, "slow");
    tcase_set_timeout(search, 1200);
    tcase_add_test(search, runoff_full);
    suite_add_tcase(s, search);
    return pgd_test_run(s);
}
