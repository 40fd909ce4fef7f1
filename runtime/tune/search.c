/* search.c — per-device kernel tuning (pgd_tune): the GEMM parameters (pgd__gemm_params)
 * searched by measurement on the device, then the attention kernel, stored with the device's
 * entry of the one store (params.c: <cache dir>/tuning.json under the device and driver), where
 * the next context finds them over the database's.
 *
 * The search space holds both kinds of kernel the implementations want: gemm_cpu's explicit
 * vector code over packed panels (PoCL vectorises what it is given: register tile rows × vector
 * width × vectors per row, K unroll) and gemm_gpu's local-memory tiles with scalar work-items
 * (what Intel's CPU runtime and GPUs vectorise across work-items). Every candidate is checked
 * against a double-precision host GEMM on an awkward shape before it is timed, so a miscompiled
 * variant can never win. Budgeted: candidates are ordered most plausible first, and the search
 * stops when the time is spent (the defaults are always measured). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "tune.h"

#define TUNE_MAX_CANDIDATES 80

/* ---- the search ---- */

typedef struct work {
    int64_t m, n, k;
    pgd_tensor *a, *w, *c; /* A [m, k], W [n, k] (C = A·Wᵀ), C [m, n] */
} work;

/* ViT-B/16's linear layers (197 tokens, and 1576: a batch of 8) and ResNet-50's convolutions as
 * GEMMs, each of its widths: 64 (the stem and layer1's 3x3 and 1x1 reductions), 128, 256, 512,
 * 1024 and 2048 output channels, M from 12544 pixels down to 49. With ResNet-50's 64-channel
 * layers left out, a 48-column tile (rm=6,vw=16,nv=3: 64 columns run as 96) won on the AMD EPYC
 * by 2 % on the ViT shapes and made resnet50 13 % slower (PoCL 3.1: 42.2 -> 47.5 ms at batch 1,
 * 325 -> 381 ms at batch 8, against rm=4,vw=16,nv=4). */
static const int64_t work_shapes[][3] = {
    {197, 768, 768},  {197, 3072, 768}, {197, 768, 3072}, {1576, 768, 768},
    {12544, 64, 147}, {3136, 64, 576},  {3136, 256, 64},  {784, 128, 1152},
    {784, 512, 128},  {196, 1024, 256}, {49, 2048, 512},
};
#define N_WORK (sizeof work_shapes / sizeof work_shapes[0])

typedef struct search {
    pgd_ctx *ctx;
    work w[N_WORK];
    int64_t scale; /* rows divided by this on slow devices */
    /* the correctness probe: an awkward C = A·Wᵀ + bias, ReLU */
    pgd_tensor *pa, *pw, *pb, *pc;
    float *ha, *hw, *hb;
    double *want, *mag;
} search;

enum { PM = 37, PN = 45, PK = 29 };

static float rnd(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(*s >> 40) / (double)(1ull << 24)) - 0.5f;
}

static int random_tensor(pgd_ctx *ctx, int64_t rows, int64_t cols, uint64_t seed, float **host,
                         pgd_tensor **out, pgd_error **err)
{
    int64_t shape[2] = {rows, cols};
    float *h = malloc((size_t)(rows * cols) * sizeof *h);
    if (!h)
        return pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "tune: host operands");
    for (int64_t i = 0; i < rows * cols; i++)
        h[i] = rnd(&seed);
    int rc = pgd_tensor_create_from(ctx, 2, shape, h, out, err);
    if (host && !rc)
        *host = h;
    else
        free(h);
    return rc;
}

static void search_free(search *s)
{
    for (size_t i = 0; i < N_WORK; i++) {
        pgd_tensor_destroy(s->w[i].a);
        pgd_tensor_destroy(s->w[i].w);
        pgd_tensor_destroy(s->w[i].c);
    }
    pgd_tensor_destroy(s->pa);
    pgd_tensor_destroy(s->pw);
    pgd_tensor_destroy(s->pb);
    pgd_tensor_destroy(s->pc);
    free(s->ha);
    free(s->hw);
    free(s->hb);
    free(s->want);
    free(s->mag);
}

static int search_init(search *s, pgd_ctx *ctx, pgd_error **err)
{
    memset(s, 0, sizeof *s);
    s->ctx = ctx;
    s->scale = 1;
    /* Software rasterisers run at well under 1 GFLOP/s: a sixteenth of the rows. */
    if (ctx->dev.software_rasteriser)
        s->scale = 16;
    int rc = PGD_OK;
    for (size_t i = 0; i < N_WORK && !rc; i++) {
        work *w = &s->w[i];
        w->m = (work_shapes[i][0] + s->scale - 1) / s->scale;
        w->n = work_shapes[i][1];
        w->k = work_shapes[i][2];
        int64_t cs[2] = {w->m, w->n};
        rc = random_tensor(ctx, w->m, w->k, 11 + i, NULL, &w->a, err);
        if (!rc)
            rc = random_tensor(ctx, w->n, w->k, 101 + i, NULL, &w->w, err);
        if (!rc)
            rc = pgd_tensor_create(ctx, 2, cs, &w->c, err);
    }
    if (!rc)
        rc = random_tensor(ctx, PM, PK, 7, &s->ha, &s->pa, err);
    if (!rc)
        rc = random_tensor(ctx, PN, PK, 8, &s->hw, &s->pw, err);
    if (!rc)
        rc = random_tensor(ctx, 1, PN, 9, &s->hb, &s->pb, err);
    if (!rc) {
        int64_t cs[2] = {PM, PN};
        rc = pgd_tensor_create(ctx, 2, cs, &s->pc, err);
    }
    if (!rc) {
        s->want = malloc(PM * PN * sizeof *s->want);
        s->mag = malloc(PM * PN * sizeof *s->mag);
        if (!s->want || !s->mag)
            rc = pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "tune: reference");
    }
    if (!rc)
        for (int i = 0; i < PM; i++)
            for (int j = 0; j < PN; j++) {
                double acc = s->hb[j], mag = fabs((double)s->hb[j]);
                for (int k = 0; k < PK; k++) {
                    double t = (double)s->ha[i * PK + k] * (double)s->hw[j * PK + k];
                    acc += t;
                    mag += fabs(t);
                }
                s->want[i * PN + j] = acc < 0 ? 0 : acc;
                s->mag[i * PN + j] = mag;
            }
    if (rc)
        search_free(s);
    return rc;
}

/* C = A·Wᵀ (+ bias, ReLU when `bias`) with parameters p; W packed into *packed first for
 * gemm_cpu (made once per candidate and operand, kept by the caller). */
static int run_one(search *s, const pgd__gemm_params *p, pgd_tensor *a, pgd_tensor *wt,
                   pgd_tensor *c, pgd_tensor *bias, pgd_tensor **packed, pgd_error **err)
{
    pgd_ctx *ctx = s->ctx;
    int64_t m = pgd_tensor_get_dim(a, 0), k = pgd_tensor_get_dim(a, 1),
            n = pgd_tensor_get_dim(wt, 0);
    pgd__gemm_call g;
    memset(&g, 0, sizeof g);
    g.params = p;
    g.trans_b = 1;
    g.M = m;
    g.N = n;
    g.K = k;
    g.batch = 1;
    g.alpha = 1.0f;
    g.a = (pgd__mat){a->buf, 0, (int)k, 0};
    g.b = (pgd__mat){wt->buf, 0, (int)k, 0};
    g.c = (pgd__mat){c->buf, 0, (int)n, 0};
    pgd__mat b;
    if (bias) {
        b = (pgd__mat){bias->buf, 0, 0, 0};
        g.bias = &b;
        g.act = PGD_ACT_RELU;
    }
    int rc;
    if (p->cpu) {
        if (!*packed) {
            int64_t shape[1] = {pgd__gemm_packed_size(p, n, k)};
            if ((rc = pgd_tensor_create(ctx, 1, shape, packed, err)))
                return rc;
            if ((rc = pgd__gemm_pack(ctx, p, 1, n, k, 1, &g.b, (*packed)->buf, 0, 0, err))) {
                pgd_tensor_destroy(*packed);
                *packed = NULL;
                return rc;
            }
        }
        g.b = (pgd__mat){(*packed)->buf, 0, 0, 0};
        g.b_packed = 1;
    }
    return pgd__gemm_run_own(ctx, &g, err);
}

/* NULL when the candidate computes the probe right, else why not. */
static const char *check(search *s, const pgd__gemm_params *p, char *why, size_t size)
{
    pgd_tensor *packed = NULL;
    pgd_error *e = NULL;
    float got[PM * PN];
    int rc = run_one(s, p, s->pa, s->pw, s->pc, s->pb, &packed, &e);
    if (!rc)
        rc = pgd_tensor_download(s->pc, got, &e);
    pgd_tensor_destroy(packed);
    if (rc) {
        snprintf(why, size, "failed: %s", pgd_error_get_message(e));
        pgd_error_destroy(e);
        return why;
    }
    for (int i = 0; i < PM * PN; i++) {
        double d = fabs((double)got[i] - s->want[i]);
        if (!(d <= 1e-5 * s->mag[i] + 1e-6)) {
            snprintf(why, size, "wrong result: C[%d,%d] = %.9g, want %.9g", i / PN, i % PN,
                     (double)got[i], s->want[i]);
            return why;
        }
    }
    return NULL;
}

/* One pass over the workload, in ms; < 0 on failure. */
static double workload_ms(search *s, const pgd__gemm_params *p, pgd_tensor **packed)
{
    double t0 = pgd__now_ms();
    for (size_t i = 0; i < N_WORK; i++)
        if (run_one(s, p, s->w[i].a, s->w[i].w, s->w[i].c, NULL, &packed[i], NULL))
            return -1;
    if (clFinish(s->ctx->queue) != CL_SUCCESS)
        return -1;
    return pgd__now_ms() - t0;
}

/* The median of 3 passes after a warm-up (builds and packing); a candidate whose first pass is
 * over 1.5× the best so far stops there (its one pass is its time). */
static double measure(search *s, const pgd__gemm_params *p, double best)
{
    pgd_tensor *packed[N_WORK] = {0};
    double t[3] = {-1, -1, -1}, r = -1;
    if (workload_ms(s, p, packed) >= 0) {
        int i = 0;
        for (; i < 3; i++) {
            if ((t[i] = workload_ms(s, p, packed)) < 0)
                break;
            if (i == 0 && best > 0 && t[0] > 1.5 * best) {
                r = t[0];
                break;
            }
        }
        if (i == 3) {
            double lo = t[0] < t[1] ? t[0] : t[1], hi = t[0] < t[1] ? t[1] : t[0];
            r = t[2] < lo ? lo : t[2] > hi ? hi : t[2];
        }
    }
    for (size_t i = 0; i < N_WORK; i++)
        pgd_tensor_destroy(packed[i]);
    return r;
}

static int same(const pgd__gemm_params *a, const pgd__gemm_params *b)
{
    return !memcmp(a, b, sizeof *a);
}

static void add(const pgd_ctx *ctx, pgd__gemm_params *list, int *n, pgd__gemm_params p)
{
    if (*n >= TUNE_MAX_CANDIDATES || pgd__gemm_params_check(ctx, &p, NULL))
        return;
    for (int i = 0; i < *n; i++)
        if (same(&list[i], &p))
            return;
    list[(*n)++] = p;
}

/* The candidates, most plausible first: the untuned parameters, gemm_cpu tiles at the device's
 * vector width, gemm_gpu tiles, then gemm_cpu at other widths. A CPU runtime that prefers scalar
 * code (preferred float vector width 1: it vectorises across work-items, as Intel's does) still ran
 * gemm_cpu's 16-wide vectors fastest (Xeon: rm=12,vw=16,nv=2; AMD EPYC: rm=5,vw=16,nv=4, 1.9x
 * the best 4-wide tile), so there the 16-wide tiles come first: Intel's runtime compiles a
 * candidate in 5-10 s, and a budget of 120 s used to end among the 4-wide ones. K unroll is
 * varied afterwards around the winner (see pgd_tune). GPUs and software rasterisers get
 * gemm_gpu tiles only. */
static int candidates(const pgd_ctx *ctx, pgd__gemm_params *list)
{
    int n = 0;
    pgd__gemm_params def = pgd__params_of(ctx)->gemm_default; /* the database's (params.c) */
    add(ctx, list, &n, def);
    /* (rows, vectors per row): accumulators + one panel row + a broadcast within 16 registers
     * (AVX2, NEON) or 32 (AVX-512). */
    static const int tiles[][2] = {{6, 2}, {4, 3},  {8, 2}, {4, 2}, {6, 3}, {4, 4},  {6, 4},
                                   {5, 4}, {12, 2}, {8, 3}, {3, 4}, {2, 4}, {14, 2}, {8, 1}};
    static const int gpu[][5] = {{64, 64, 16, 4, 4}, {32, 32, 16, 4, 4}, {32, 32, 8, 8, 8},
                                 {64, 64, 8, 8, 8},  {32, 64, 16, 4, 8}, {16, 64, 16, 2, 8},
                                 {64, 32, 16, 8, 4}, {16, 16, 16, 2, 2}};
    int cpu_device = ctx->dev.type == PGD_DEVICE_CPU && !ctx->dev.software_rasteriser;
    int first = !def.cpu ? 8 : ctx->dev.pref_vector_float == 1 ? 16 : def.vw;
    int vws[4] = {first, 16, 8, 4};
    for (int v = 0; v < 4 && cpu_device; v++) {
        if (v > 0 && vws[v] == vws[0])
            continue;
        for (size_t t = 0; t < sizeof tiles / sizeof tiles[0]; t++)
            add(ctx, list, &n,
                (pgd__gemm_params){1, tiles[t][0], vws[v], tiles[t][1], 4, 0, 0, 0, 0, 0});
        if (v == 0)
            for (size_t t = 0; t < sizeof gpu / sizeof gpu[0]; t++)
                add(ctx, list, &n,
                    (pgd__gemm_params){0, 0, 0, 0, 0, gpu[t][0], gpu[t][1], gpu[t][2], gpu[t][3],
                                       gpu[t][4]});
    }
    if (!cpu_device)
        for (size_t t = 0; t < sizeof gpu / sizeof gpu[0]; t++)
            add(ctx, list, &n,
                (pgd__gemm_params){0, 0, 0, 0, 0, gpu[t][0], gpu[t][1], gpu[t][2], gpu[t][3],
                                   gpu[t][4]});
    return n;
}

static void store(pgd_ctx *ctx, pgd_tune_result *r)
{
    char date[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tm);
    r->stored = pgd__params_save(
        ctx, json_pack("{s:s, s:s, s:s, s:f, s:f, s:f, s:i, s:s, s:f, s:f}", "date", date, "gemm",
                       r->params, "defaults", r->defaults, "workload_ms", r->best_ms, "default_ms",
                       r->default_ms, "search_s", r->seconds, "tried", r->tried, "attention",
                       r->attention, "attention_ms", r->attention_ms, "attention_default_ms",
                       r->attention_default_ms));
}

static void report(pgd_tune_progress_fn fn, void *user, int i, int n, const pgd__gemm_params *p,
                   double ms, const char *why, double best, double t0)
{
    if (!fn)
        return;
    char text[128];
    pgd__gemm_params_format(p, text, sizeof text);
    pgd_tune_progress pr = {i, n, text, ms, why, best, (pgd__now_ms() - t0) / 1000.0};
    fn(&pr, user);
}

/* The runoff: one pass each over the workload differs by more than the candidates do on a
 * shared machine (PoCL 3.1, 2-core Xeon: the first-pass winner rm=8,nv=2 was 3-6 % slower in
 * ViT-B/16 and ResNet-50 than rm=4,nv=4 in paired runs). The best three of the r->tried first
 * candidates (tried_ms: their times, < 0 rejected) are measured again in turns, RUNOFF_ROUNDS
 * times, and the lowest median wins: into *best and *best_ms. */
static void runoff(search *s, const pgd__gemm_params *list, int n, const double *tried_ms,
                   pgd_tune_result *r, pgd_tune_progress_fn fn, void *user, double t0,
                   pgd__gemm_params *best, double *best_ms)
{
    enum { TOP = 3, RUNOFF_ROUNDS = 5 };
    int top[TOP], ntop = 0;
    double top_ms[TOP];
    for (int i = 0; i < r->tried && i < n; i++) {
        double ms = tried_ms[i];
        if (ms < 0)
            continue;
        int at = ntop < TOP ? ntop++ : TOP;
        while (at > 0 && top_ms[at - 1] > ms) {
            if (at < TOP) {
                top[at] = top[at - 1];
                top_ms[at] = top_ms[at - 1];
            }
            at--;
        }
        if (at < TOP) {
            top[at] = i;
            top_ms[at] = ms;
        }
    }
    double runs[TOP][RUNOFF_ROUNDS];
    for (int round = 0; round < RUNOFF_ROUNDS; round++)
        for (int c = 0; c < ntop; c++)
            runs[c][round] = measure(s, &list[top[c]], -1);
    int win = -1;
    double win_ms = -1;
    for (int c = 0; c < ntop; c++) {
        double *v = runs[c];
        for (int a = 0; a < RUNOFF_ROUNDS; a++) /* insertion sort; a failed run disqualifies */
            for (int b = a; b > 0 && v[b - 1] > v[b]; b--) {
                double t = v[b];
                v[b] = v[b - 1];
                v[b - 1] = t;
            }
        int bad = v[0] < 0;
        double med = v[RUNOFF_ROUNDS / 2];
        if (!bad && top[c] == 0)
            r->default_ms = med; /* the defaults made the runoff: the same measure */
        if (!bad && (win < 0 || med < win_ms)) {
            win = c;
            win_ms = med;
        }
        report(fn, user, -1, ntop, &list[top[c]], bad ? -1 : med,
               bad ? "failed in the runoff" : NULL, -1, t0);
    }
    if (win >= 0) {
        *best = list[top[win]];
        *best_ms = win_ms;
    }
    r->runoff = ntop;
}

/* After the GEMM search (its winner `best` in r): the attention stage, with the winning GEMM in
 * place, then the store; the context runs the winners from now (unless options.kernel_params
 * gave its GEMM parameters). */
static int finish(pgd_ctx *ctx, pgd_tune_result *r, const pgd__gemm_params *best, double budget_s,
                  double t0, pgd_error **err)
{
    pgd__params *P = pgd__params_of(ctx);
    pgd__gemm_params kept = P->gemm;
    if (!ctx->opt.kernel_params)
        P->gemm = *best;
    int rc = pgd__attention_tune(ctx, t0 + budget_s * 1000.0, r->attention, sizeof r->attention,
                                 &r->attention_ms, &r->attention_default_ms, err);
    P->gemm = kept;
    if (rc)
        return rc;
    r->seconds = (pgd__now_ms() - t0) / 1000.0;
    store(ctx, r);
    if (!ctx->opt.kernel_params) {
        P->gemm = *best;
        P->gemm_from = "tuned";
        snprintf(P->entry, sizeof P->entry, "tuned:%s", P->id);
    }
    return PGD_OK;
}

pgd_status pgd_tune(pgd_ctx *ctx, double budget_s, pgd_tune_progress_fn fn, void *user,
                    pgd_tune_result *out, pgd_error **err)
{
    pgd_tune_result r;
    memset(&r, 0, sizeof r);
    if (out)
        *out = r;
    if (!ctx)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "tune: no context");
    if (!(budget_s > 0))
        budget_s = 60;
    /* The GEMM search has 80 % of the budget, the attention stage the rest (its untuned
     * choice is always measured). */
    double t0 = pgd__now_ms(), limit = budget_s * 800.0;
    search s;
    int rc = search_init(&s, ctx, err);
    if (rc)
        return rc;
    pgd__gemm_params list[TUNE_MAX_CANDIDATES];
    double tried_ms[TUNE_MAX_CANDIDATES];
    int n = candidates(ctx, list), ku_added = 0;
    pgd__gemm_params best = list[0];
    double best_ms = -1;
    pgd__gemm_params_format(&list[0], r.defaults, sizeof r.defaults);
    for (int i = 0; i < n; i++) {
        if (i > 0 && pgd__now_ms() - t0 > limit) {
            r.skipped = n - i;
            break;
        }
        char whybuf[256];
        const char *why = check(&s, &list[i], whybuf, sizeof whybuf);
        double ms = why ? -1 : measure(&s, &list[i], best_ms);
        if (!why && ms < 0)
            why = "failed while timed";
        r.tried++;
        if (why)
            r.rejected++;
        else if (best_ms < 0 || ms < best_ms) {
            best_ms = ms;
            best = list[i];
        }
        if (i < TUNE_MAX_CANDIDATES)
            tried_ms[i] = why ? -1 : ms;
        if (i == 0)
            r.default_ms = ms;
        report(fn, user, i, n, &list[i], ms, why, best_ms, t0);
        /* After the tile shapes: the winner with other K unrolls. */
        if (i == n - 1 && !ku_added && best.cpu) {
            static const int kus[] = {1, 2, 8};
            ku_added = 1;
            for (int u = 0; u < 3; u++) {
                pgd__gemm_params q = best;
                q.ku = kus[u];
                add(ctx, list, &n, q);
            }
        }
    }
    if (best_ms >= 0 && r.tried > 1)
        runoff(&s, list, n, tried_ms, &r, fn, user, t0, &best, &best_ms);
    search_free(&s);
    if (best_ms < 0)
        return pgd__error_set(err, PGD_ERR_UNSUPPORTED,
                              "tune: no GEMM candidate ran correctly on device '%s' (%d tried)",
                              ctx->dev.name, r.tried);
    pgd__gemm_params_format(&best, r.params, sizeof r.params);
    r.best_ms = best_ms;
    if ((rc = finish(ctx, &r, &best, budget_s, t0, err)))
        return rc;
    if (out)
        *out = r;
    return PGD_OK;
}
