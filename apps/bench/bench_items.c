/* bench_items.c — the benchmark items: program builds and kernels. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "app.h"
#include "bench.h"
#include "model.h"

/* ---- build: cold vs warm build of every kernel file ---------------------------------------- */

static int run_build(pgd_ctx *ctx, const char *spec, const bench_opts *o, bench_result *res,
                     int *nres, int cap, pgd_error **err)
{
    (void)spec;
    /* Compiles are seconds each on PoCL: a few repetitions give a stable median. */
    int reps = o->repeat < 0 ? 3 : o->repeat < 5 ? o->repeat : 5;
    const char *const *names = pgd_program_names();
    int have_cache = pgd_ctx_cache_dir(ctx) != NULL;
    if (!have_cache)
        fprintf(stderr, "pagoda: note: the binary cache is off (PAGODA_CACHE_DIR); only cold "
                        "builds are timed\n");
    double *cold = calloc((size_t)reps, sizeof *cold), *warm = calloc((size_t)reps, sizeof *warm);
    double cold_total[64] = {0}, warm_total[64] = {0};
    if (!cold || !warm) {
        free(cold);
        free(warm);
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "build times");
    }
    srand((unsigned)time(NULL));
    int n = 0;
    for (size_t i = 0; names[i] && n + 2 <= cap; i++) {
        for (int r = 0; r < reps; r++) {
            /* A fresh -D value makes a program no cache (ours, or the driver's own) has seen,
             * so every cold build compiles from source. */
            char opts[64];
            snprintf(opts, sizeof opts, "-DPGD_BENCH_NONCE=%d%04d", rand(), r);
            pgd_ctx_clear_programs(ctx);
            double t0 = bench_now_ms();
            int rc = pgd_program_prepare(ctx, names[i], opts, err);
            cold[r] = bench_now_ms() - t0;
            if (rc) {
                free(cold);
                free(warm);
                return rc;
            }
            pgd_ctx_clear_programs(ctx);
            t0 = bench_now_ms();
            rc = pgd_program_prepare(ctx, names[i], opts, err);
            warm[r] = bench_now_ms() - t0;
            if (rc) {
                free(cold);
                free(warm);
                return rc;
            }
            cold_total[r] += cold[r];
            warm_total[r] += warm[r];
        }
        bench_result *c = &res[n++];
        snprintf(c->name, sizeof c->name, "build:%s:cold", names[i]);
        bench_stats(cold, reps, &c->median_ms, &c->p90_ms, &c->min_ms);
        c->repeat = reps;
        if (have_cache) {
            bench_result *w = &res[n++];
            snprintf(w->name, sizeof w->name, "build:%s:warm", names[i]);
            bench_stats(warm, reps, &w->median_ms, &w->p90_ms, &w->min_ms);
            w->repeat = reps;
        }
    }
    if (n + 2 <= cap) {
        bench_result *c = &res[n++];
        snprintf(c->name, sizeof c->name, "build:all:cold");
        bench_stats(cold_total, reps, &c->median_ms, &c->p90_ms, &c->min_ms);
        c->repeat = reps;
        if (have_cache) {
            bench_result *w = &res[n++];
            snprintf(w->name, sizeof w->name, "build:all:warm");
            bench_stats(warm_total, reps, &w->median_ms, &w->p90_ms, &w->min_ms);
            w->repeat = reps;
        }
    }
    pgd_ctx_clear_programs(ctx);
    free(cold);
    free(warm);
    *nres = n;
    return 0;
}

const bench_item bench_item_build = {
    "build", "build",
    "cold (compile) vs warm (binary cache) build of every kernel file", NULL, run_build};

typedef struct timed_fn {
    int (*fn)(void *state, pgd_error **err);
    void *state;
} timed_fn;

/* Warm-up then timed runs, each drained; the first run's program builds are the compile time
 * (bench.c's bench_time, which derives the counts from --budget-ms or takes them as given). */
static int time_runs(pgd_ctx *ctx, timed_fn f, const bench_opts *o, bench_result *b,
                     pgd_error **err)
{
    return bench_time(ctx, f.fn, f.state, o, b, err);
}

/* ---- sizes: checked before anything is allocated ------------------------------------------- */

/* a * b for sizes >= 0, saturating at INT64_MAX (which every limit refuses) instead of the
 * signed overflow an item spec's product of dimensions could otherwise reach. */
static int64_t mul_sat(int64_t a, int64_t b)
{
    return a && b > INT64_MAX / a ? INT64_MAX : a * b;
}

static int64_t add_sat(int64_t a, int64_t b) { return b > INT64_MAX - a ? INT64_MAX : a + b; }

/* The product of n sizes (saturating). */
static int64_t prod(int n, const int64_t *v)
{
    int64_t p = 1;
    for (int i = 0; i < n; i++)
        p = mul_sat(p, v[i]);
    return p;
}

/* The host memory an item may take: half the machine's physical memory (all of it, were the
 * size unknown, is no limit a benchmark should get near either). */
static uint64_t host_limit_bytes(void)
{
#if defined(_SC_PHYS_PAGES) && defined(_SC_PAGESIZE)
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0)
        return (uint64_t)pages / 2 * (uint64_t)page;
#endif
    return UINT64_MAX;
}

static double mib(uint64_t bytes) { return (double)bytes / (1024.0 * 1024.0); }

/* What an item will allocate, in floats: its largest device tensor, all of its device tensors
 * together, and its largest host buffer. Checked against the device's largest allocation and
 * global memory and against host_limit_bytes before any allocation, so that a spec too large
 * for the device is refused at once with the sizes, not after filling gigabytes of host memory.
 * PGD_ERR_TOO_LARGE with err set, or PGD_OK. */
static int check_fits(pgd_ctx *ctx, int64_t largest, int64_t total, int64_t host,
                      pgd_error **err)
{
    const pgd_device_info *d = pgd_ctx_device(ctx);
    uint64_t lb = (uint64_t)mul_sat(largest, 4), tb = (uint64_t)mul_sat(total, 4),
             hb = (uint64_t)mul_sat(host, 4), hl = host_limit_bytes();
    if (largest == INT64_MAX || total == INT64_MAX || host == INT64_MAX ||
        lb == (uint64_t)INT64_MAX || tb == (uint64_t)INT64_MAX || hb == (uint64_t)INT64_MAX)
        return pgd_error_set(err, PGD_ERR_TOO_LARGE, "its sizes overflow 64 bits");
    if (d && lb > d->max_alloc)
        return pgd_error_set(err, PGD_ERR_TOO_LARGE,
                              "a tensor of %.1f MiB exceeds the largest allocation of %s "
                              "(%.1f MiB)", mib(lb), d->name, mib(d->max_alloc));
    if (d && tb > d->global_mem)
        return pgd_error_set(err, PGD_ERR_TOO_LARGE,
                              "its tensors take %.1f MiB, more than the %.1f MiB of global "
                              "memory of %s", mib(tb), mib(d->global_mem), d->name);
    /* A CPU device's memory is the host's: its tensors count against the host limit too. */
    if (d && d->type == PGD_DEVICE_CPU)
        hb = hb + tb < hb ? UINT64_MAX : hb + tb;
    if (hb > hl)
        return pgd_error_set(err, PGD_ERR_TOO_LARGE,
                              "%.1f MiB of host memory is more than half this machine's (%.1f "
                              "MiB)", mib(hb), mib(hl));
    return PGD_OK;
}

/* A malloc whose failure is an error naming the item (never a bare status). */
static void *item_alloc(int64_t floats, pgd_error **err)
{
    void *p = floats > 0 && (uint64_t)floats <= SIZE_MAX / sizeof(float)
                  ? malloc((size_t)floats * sizeof(float))
                  : NULL;
    if (!p)
        pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "%.1f MiB of host memory",
                      mib((uint64_t)mul_sat(floats, 4)));
    return p;
}

/* ---- scale:N: y = a*x over N floats (memory bandwidth) ------------------------------------- */

static int parse_n(const char *spec, long *n)
{
    const char *colon = strchr(spec, ':');
    *n = 1 << 24;
    if (!colon)
        return 0;
    int64_t v;
    if (pgd_parse_int64(colon + 1, 1, (int64_t)1 << 30, &v))
        return -1;
    *n = (long)v;
    return 0;
}

static int validate_scale(const char *spec)
{
    long n;
    return parse_n(spec, &n);
}

typedef struct scale_state {
    pgd_ctx *ctx;
    pgd_tensor *x, *y;
} scale_state;

static int scale_once(void *p, pgd_error **err)
{
    scale_state *s = p;
    return pgd_scale(s->ctx, s->x, 1.0f, s->y, err);
}

static int run_scale(pgd_ctx *ctx, const char *spec, const bench_opts *o, bench_result *res,
                     int *nres, int cap, pgd_error **err)
{
    (void)cap;
    long n;
    parse_n(spec, &n);
    int64_t shape[1] = {n};
    pgd_tensor *x = NULL, *y = NULL;
    int rc = check_fits(ctx, n, 2 * (int64_t)n, 0, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 1, shape, &x, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 1, shape, &y, err);
    scale_state st = {ctx, x, y};
    bench_result *b = &res[0];
    if (!rc)
        rc = time_runs(ctx, (timed_fn){scale_once, &st}, o, b, err);
    if (!rc) {
        snprintf(b->name, sizeof b->name, "scale:%ld", n);
        snprintf(b->params, sizeof b->params, "{\"N\":%ld}", n);
        b->bytes = 8.0 * (double)n;
        b->flops = (double)n;
        *nres = 1;
    }
    pgd_tensor_destroy(x);
    pgd_tensor_destroy(y);
    return rc;
}

const bench_item bench_item_scale = {"scale", "scale[:N]",
                                     "y = a*x over N floats (default 2^24): memory bandwidth",
                                     validate_scale, run_scale};

/* ---- launch: the cost of one kernel launch -------------------------------------------------- */

static int validate_launch(const char *spec) { return strcmp(spec, "launch") ? -1 : 0; }

/* LAUNCH_BURST launches of a 64-float pgd_scale, then one wait: what each of a forward pass's
 * launches costs (the in-order queue overlaps nothing, so this is enqueue + dispatch). */
#define LAUNCH_BURST 100

static int launch_sync_once(void *p, pgd_error **err) { return scale_once(p, err); }

static int launch_burst_once(void *p, pgd_error **err)
{
    int rc = PGD_OK;
    for (int i = 0; i < LAUNCH_BURST && !rc; i++)
        rc = scale_once(p, err);
    return rc;
}

static int run_launch(pgd_ctx *ctx, const char *spec, const bench_opts *o, bench_result *res,
                      int *nres, int cap, pgd_error **err)
{
    (void)spec;
    if (cap < 2)
        return pgd_error_set(err, PGD_ERR_INTERNAL, "launch: needs two result slots"),
               PGD_ERR_INTERNAL;
    int64_t shape[1] = {64};
    pgd_tensor *x = NULL, *y = NULL;
    int rc = pgd_tensor_create(ctx, 1, shape, &x, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 1, shape, &y, err);
    scale_state st = {ctx, x, y};
    if (!rc)
        rc = time_runs(ctx, (timed_fn){launch_sync_once, &st}, o, &res[0], err);
    if (!rc)
        rc = time_runs(ctx, (timed_fn){launch_burst_once, &st}, o, &res[1], err);
    if (!rc) {
        snprintf(res[0].name, sizeof res[0].name, "launch:wait-each");
        snprintf(res[0].params, sizeof res[0].params, "{\"launches\":1}");
        snprintf(res[1].name, sizeof res[1].name, "launch:burst-%d", LAUNCH_BURST);
        snprintf(res[1].params, sizeof res[1].params, "{\"launches\":%d}", LAUNCH_BURST);
        *nres = 2;
    }
    pgd_tensor_destroy(x);
    pgd_tensor_destroy(y);
    return rc;
}

const bench_item bench_item_launch = {
    "launch", "launch",
    "one tiny kernel launch waited for (launch:wait-each), and 100 launched back to back with "
    "one wait (launch:burst-100: 100x the cost each launch of a forward pass adds)",
    validate_launch, run_launch};

/* ---- gemm:M,N,K (linear layer, packed weights) and gemm-nn:M,N,K (plain, B repacked per
 * call); blas:M,N,K runs OpenBLAS cblas_sgemm on the host on the same shape ------------------ */

static int parse_mnk(const char *spec, long v[3])
{
    const char *colon = strchr(spec, ':');
    if (!colon)
        return -1;
    int64_t w[3];
    int n = 0;
    if (pgd_parse_int64_list(colon + 1, ',', 1, 65536, w, 3, 3, &n))
        return -1;
    for (int i = 0; i < 3; i++)
        v[i] = (long)w[i];
    return 0;
}

static int validate_mnk(const char *spec)
{
    long v[3];
    return parse_mnk(spec, v);
}

static void fill_rand(float *p, size_t n) { model_fill_seeded(p, (int64_t)n, 12345, 0.5f); }

typedef struct gemm_state {
    pgd_ctx *ctx;
    pgd_linear *lin;
    pgd_tensor *a, *b, *c;
} gemm_state;

static int gemm_linear_once(void *p, pgd_error **err)
{
    gemm_state *s = p;
    return pgd_linear_forward(s->ctx, s->lin, s->a, PGD_ACT_NONE, NULL, s->c, err);
}

static int gemm_plain_once(void *p, pgd_error **err)
{
    gemm_state *s = p;
    return pgd_gemm(s->ctx, NULL, s->a, s->b, s->c, err);
}

static int run_gemm_common(pgd_ctx *ctx, const char *spec, const bench_opts *o, bench_result *res,
                           int *nres, int linear, pgd_error **err)
{
    long v[3] = {1, 1, 1};
    parse_mnk(spec, v);
    long M = v[0], N = v[1], K = v[2];
    gemm_state s = {ctx, NULL, NULL, NULL, NULL};
    int64_t sa[2] = {M, K}, sb[2] = {linear ? N : K, linear ? K : N}, sc[2] = {M, N};
    int64_t mk = mul_sat(M, K), nk = mul_sat(N, K), mn = mul_sat(M, N);
    int64_t big = mk > nk ? mk : nk;
    float *host = NULL;
    int rc = check_fits(ctx, big > mn ? big : mn, add_sat(add_sat(mk, nk), mn), big, err);
    if (!rc && !(host = item_alloc(big, err)))
        rc = PGD_ERR_OUT_OF_HOST_MEMORY;
    if (!rc)
        rc = pgd_tensor_create(ctx, 2, sa, &s.a, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 2, sb, &s.b, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 2, sc, &s.c, err);
    if (!rc) {
        fill_rand(host, (size_t)(M * K));
        rc = pgd_tensor_upload(s.a, host, err);
    }
    if (!rc) {
        fill_rand(host, (size_t)(N * K));
        rc = pgd_tensor_upload(s.b, host, err);
    }
    if (!rc && linear)
        rc = pgd_linear_create(ctx, s.b, NULL, &s.lin, err);
    bench_result *b = &res[0];
    if (!rc)
        rc = time_runs(ctx, (timed_fn){linear ? gemm_linear_once : gemm_plain_once, &s}, o, b, err);
    if (!rc) {
        snprintf(b->name, sizeof b->name, "%s:%ld,%ld,%ld", linear ? "gemm" : "gemm-nn", M, N, K);
        snprintf(b->params, sizeof b->params, "{\"M\":%ld,\"N\":%ld,\"K\":%ld}", M, N, K);
        b->flops = 2.0 * (double)M * (double)N * (double)K;
        b->bytes = 4.0 * (double)(M * K + N * K + M * N);
        *nres = 1;
    }
    pgd_linear_destroy(s.lin);
    pgd_tensor_destroy(s.a);
    pgd_tensor_destroy(s.b);
    pgd_tensor_destroy(s.c);
    free(host);
    return rc;
}

static int run_gemm(pgd_ctx *ctx, const char *spec, const bench_opts *o, bench_result *res,
                    int *nres, int cap, pgd_error **err)
{
    (void)cap;
    return run_gemm_common(ctx, spec, o, res, nres, 1, err);
}

static int run_gemm_nn(pgd_ctx *ctx, const char *spec, const bench_opts *o, bench_result *res,
                       int *nres, int cap, pgd_error **err)
{
    (void)cap;
    return run_gemm_common(ctx, spec, o, res, nres, 0, err);
}

const bench_item bench_item_gemm = {
    "gemm", "gemm:M,N,K",
    "linear layer C[M,N] = A[M,K]·W[N,K]ᵀ with W prepared once (as in a model)", validate_mnk,
    run_gemm};
const bench_item bench_item_gemm_nn = {
    "gemm-nn", "gemm-nn:M,N,K", "plain C[M,N] = A[M,K]·B[K,N], B repacked on every call",
    validate_mnk, run_gemm_nn};

#if PGD_HAVE_OPENBLAS
#include <cblas.h>
extern void openblas_set_num_threads(int);

typedef struct blas_state {
    const float *a, *w;
    float *c;
    int M, N, K;
} blas_state;

static int blas_once(void *p, pgd_error **err)
{
    (void)err;
    blas_state *s = p;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s->M, s->N, s->K, 1.0f, s->a, s->K, s->w,
                s->K, 0.0f, s->c, s->N);
    return 0;
}

static int run_blas(pgd_ctx *ctx, const char *spec, const bench_opts *o, bench_result *res,
                    int *nres, int cap, pgd_error **err)
{
    (void)cap;
    long v[3] = {1, 1, 1};
    parse_mnk(spec, v);
    long M = v[0], N = v[1], K = v[2];
    int64_t mk = mul_sat(M, K), nk = mul_sat(N, K), mn = mul_sat(M, N);
    /* host only: the device limits do not apply, the host one does */
    uint64_t host = (uint64_t)mul_sat(add_sat(add_sat(mk, nk), mn), 4);
    if (host > host_limit_bytes())
        return pgd_error_set(err, PGD_ERR_TOO_LARGE, "%.1f MiB of host memory is more than "
                              "half this machine's", mib(host));
    float *a = item_alloc(mk, err), *w = a ? item_alloc(nk, err) : NULL,
          *c = w ? item_alloc(mn, err) : NULL;
    if (!a || !w || !c) {
        free(a);
        free(w);
        free(c);
        return PGD_ERR_OUT_OF_HOST_MEMORY;
    }
    fill_rand(a, (size_t)(M * K));
    fill_rand(w, (size_t)(N * K));
    blas_state st = {a, w, c, (int)M, (int)N, (int)K};
    bench_result *b = &res[0];
    int rc = time_runs(ctx, (timed_fn){blas_once, &st}, o, b, err);
    snprintf(b->name, sizeof b->name, "blas:%ld,%ld,%ld", M, N, K);
    snprintf(b->params, sizeof b->params, "{\"M\":%ld,\"N\":%ld,\"K\":%ld}", M, N, K);
    b->flops = 2.0 * (double)M * (double)N * (double)K;
    b->bytes = 4.0 * (double)(M * K + N * K + M * N);
    *nres = rc ? 0 : 1;
    free(a);
    free(w);
    free(c);
    /* OpenBLAS's threads spin for a while after a call and would slow the next item. */
    struct timespec pause = {0, 300000000};
    nanosleep(&pause, NULL);
    return rc;
}

const bench_item bench_item_blas = {
    "blas", "blas:M,N,K",
    "OpenBLAS cblas_sgemm on the host, A·Wᵀ as gemm:M,N,K (the peer to beat)", validate_mnk,
    run_blas};
#endif

/* ---- attention:N,H,D — fused attention on a [N, 3, H, D] qkv tensor (batch 1), and
 * attention-unfused:N,H,D — Pagoda's GEMM + softmax + GEMM with the N×N scores in memory ----- */

static int parse_nhd(const char *spec, long v[3])
{
    return parse_mnk(spec, v);
}

static int validate_nhd(const char *spec)
{
    long v[3];
    return parse_nhd(spec, v);
}

typedef struct attn_state {
    pgd_ctx *ctx;
    long n, h, d;
    pgd_tensor *qkv, *out;          /* fused */
    pgd_tensor *q, *k, *v, *s, *o;  /* unfused: [H, N, D] each, scores [H, N, N] */
} attn_state;

static int attn_fused_once(void *p, pgd_error **err)
{
    attn_state *s = p;
    return pgd_attention_qkv(s->ctx, s->qkv, s->h, s->out, err);
}

static int attn_unfused_once(void *p, pgd_error **err)
{
    attn_state *s = p;
    pgd_gemm_args qk = {0, 1, 1.0f, 0.0f, NULL, PGD_ACT_NONE, NULL};
    int rc = pgd_gemm(s->ctx, &qk, s->q, s->k, s->s, err);
    if (!rc)
        rc = pgd_softmax(s->ctx, s->s, (float)(1.0 / sqrt((double)s->d)), s->s, err);
    if (!rc)
        rc = pgd_gemm(s->ctx, NULL, s->s, s->v, s->o, err);
    return rc;
}

static int run_attention_common(pgd_ctx *ctx, const char *spec, const bench_opts *o,
                                bench_result *res, int *nres, int fused, pgd_error **err)
{
    long v[3] = {1, 1, 1};
    parse_nhd(spec, v);
    attn_state s;
    memset(&s, 0, sizeof s);
    s.ctx = ctx;
    s.n = v[0];
    s.h = v[1];
    s.d = v[2];
    int64_t hnd = mul_sat(mul_sat(s.n, s.h), s.d), scores = mul_sat(mul_sat(s.h, s.n), s.n);
    int64_t big = mul_sat(3, hnd);
    int rc = fused ? check_fits(ctx, big, add_sat(big, hnd), big, err)
                   : check_fits(ctx, scores > hnd ? scores : hnd,
                                add_sat(mul_sat(4, hnd), scores), big, err);
    float *host = NULL;
    if (!rc && !(host = item_alloc(big, err)))
        rc = PGD_ERR_OUT_OF_HOST_MEMORY;
    size_t nqkv = (size_t)big;
    if (!rc)
        fill_rand(host, nqkv);
    if (!rc && fused) {
        int64_t sq[3] = {1, s.n, 3 * s.h * s.d}, so[3] = {1, s.n, s.h * s.d};
        rc = pgd_tensor_create(ctx, 3, sq, &s.qkv, err);
        if (!rc)
            rc = pgd_tensor_create(ctx, 3, so, &s.out, err);
        if (!rc)
            rc = pgd_tensor_upload(s.qkv, host, err);
    } else if (!rc) {
        int64_t shd[3] = {s.h, s.n, s.d}, ss[3] = {s.h, s.n, s.n};
        pgd_tensor **ts[4] = {&s.q, &s.k, &s.v, &s.o};
        for (int i = 0; i < 4 && !rc; i++)
            rc = pgd_tensor_create(ctx, 3, shd, ts[i], err);
        if (!rc)
            rc = pgd_tensor_create(ctx, 3, ss, &s.s, err);
        for (int i = 0; i < 3 && !rc; i++)
            rc = pgd_tensor_upload(*ts[i], host + (size_t)i * (nqkv / 3), err);
    }
    bench_result *b = &res[0];
    if (!rc)
        rc = time_runs(ctx, (timed_fn){fused ? attn_fused_once : attn_unfused_once, &s}, o, b, err);
    if (!rc) {
        snprintf(b->name, sizeof b->name, "%s:%ld,%ld,%ld", fused ? "attention" : "attention-unfused",
                 s.n, s.h, s.d);
        snprintf(b->params, sizeof b->params, "{\"N\":%ld,\"H\":%ld,\"D\":%ld}", s.n, s.h, s.d);
        b->flops = 4.0 * (double)s.n * (double)s.n * (double)s.h * (double)s.d;
        /* Device memory the op needs beyond its inputs and output: the unfused form holds
         * the H·N·N scores. */
        snprintf(b->extra_key, sizeof b->extra_key, "scratch_bytes");
        b->extra = fused ? 0.0 : 4.0 * (double)s.h * (double)s.n * (double)s.n;
        b->bytes = 4.0 * (double)(4 * s.n * s.h * s.d);
        *nres = 1;
    }
    pgd_tensor_destroy(s.qkv);
    pgd_tensor_destroy(s.out);
    pgd_tensor_destroy(s.q);
    pgd_tensor_destroy(s.k);
    pgd_tensor_destroy(s.v);
    pgd_tensor_destroy(s.s);
    pgd_tensor_destroy(s.o);
    free(host);
    return rc;
}

static int run_attention(pgd_ctx *ctx, const char *spec, const bench_opts *o, bench_result *res,
                         int *nres, int cap, pgd_error **err)
{
    (void)cap;
    return run_attention_common(ctx, spec, o, res, nres, 1, err);
}

static int run_attention_unfused(pgd_ctx *ctx, const char *spec, const bench_opts *o,
                                 bench_result *res, int *nres, int cap, pgd_error **err)
{
    (void)cap;
    return run_attention_common(ctx, spec, o, res, nres, 0, err);
}

const bench_item bench_item_attention = {
    "attention", "attention:N,H,D",
    "fused multi-head self-attention on a [N, 3·H·D] qkv tensor (no N×N scores)", validate_nhd,
    run_attention};
const bench_item bench_item_attention_unfused = {
    "attention-unfused", "attention-unfused:N,H,D",
    "the same as GEMM + softmax + GEMM with the H·N·N scores in memory (the baseline)",
    validate_nhd, run_attention_unfused};

/* ---- layernorm:N,D ------------------------------------------------------------------------ */

static int parse_nd(const char *spec, long v[2])
{
    const char *colon = strchr(spec, ':');
    int64_t w[2];
    int n = 0;
    if (!colon || pgd_parse_int64_list(colon + 1, ',', 1, (int64_t)1 << 24, w, 2, 2, &n))
        return -1;
    v[0] = (long)w[0], v[1] = (long)w[1];
    return 0;
}

static int validate_nd(const char *spec)
{
    long v[2];
    return parse_nd(spec, v);
}

typedef struct ln_state {
    pgd_ctx *ctx;
    pgd_tensor *x, *w, *b, *y;
} ln_state;

static int ln_once(void *p, pgd_error **err)
{
    ln_state *s = p;
    return pgd_layernorm(s->ctx, s->x, s->w, s->b, 1e-6f, s->y, err);
}

static int run_layernorm(pgd_ctx *ctx, const char *spec, const bench_opts *o, bench_result *res,
                         int *nres, int cap, pgd_error **err)
{
    (void)cap;
    long v[2] = {1, 1};
    parse_nd(spec, v);
    ln_state s = {ctx, NULL, NULL, NULL, NULL};
    int64_t sx[2] = {v[0], v[1]}, sw[1] = {v[1]};
    int64_t nd = mul_sat(v[0], v[1]);
    float *host = NULL;
    int rc = check_fits(ctx, nd, add_sat(mul_sat(2, nd), 2 * (int64_t)v[1]), nd, err);
    if (!rc && !(host = item_alloc(nd, err)))
        rc = PGD_ERR_OUT_OF_HOST_MEMORY;
    if (!rc)
        rc = pgd_tensor_create(ctx, 2, sx, &s.x, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 2, sx, &s.y, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 1, sw, &s.w, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 1, sw, &s.b, err);
    if (!rc) {
        fill_rand(host, (size_t)(v[0] * v[1]));
        rc = pgd_tensor_upload(s.x, host, err);
    }
    if (!rc)
        rc = pgd_tensor_upload(s.w, host, err);
    if (!rc)
        rc = pgd_tensor_upload(s.b, host, err);
    bench_result *b = &res[0];
    if (!rc)
        rc = time_runs(ctx, (timed_fn){ln_once, &s}, o, b, err);
    if (!rc) {
        snprintf(b->name, sizeof b->name, "layernorm:%ld,%ld", v[0], v[1]);
        snprintf(b->params, sizeof b->params, "{\"N\":%ld,\"D\":%ld}", v[0], v[1]);
        b->flops = 8.0 * (double)v[0] * (double)v[1];
        b->bytes = 8.0 * (double)v[0] * (double)v[1];
        *nres = 1;
    }
    pgd_tensor_destroy(s.x);
    pgd_tensor_destroy(s.y);
    pgd_tensor_destroy(s.w);
    pgd_tensor_destroy(s.b);
    free(host);
    return rc;
}

const bench_item bench_item_layernorm = {"layernorm", "layernorm:N,D",
                                         "LayerNorm over D of N rows (eps 1e-6, affine)",
                                         validate_nd, run_layernorm};

/* ---- conv[:N,H,W,Cin,Cout,K,stride[,groups]] — one NHWC convolution (padding K/2, bias,
 * ReLU), or without a shape ResNet-50's distinct convolutions at 224 x 224, batch 1, and their
 * total weighted by how often each occurs ------------------------------------------------- */

typedef struct conv_shape {
    long n, h, w, cin, cout, k, stride, groups;
} conv_shape;

/* ResNet-50 (torchvision, stride in the 3x3) at 224 x 224: input size, channels, kernel,
 * stride, and the number of layers of that shape. */
static const struct {
    int h, cin, cout, k, stride, count;
} resnet50_convs[] = {
    {224, 3, 64, 7, 2, 1},     {56, 64, 64, 1, 1, 1},      {56, 64, 64, 3, 1, 3},
    {56, 64, 256, 1, 1, 4},    {56, 256, 64, 1, 1, 2},     {56, 256, 128, 1, 1, 1},
    {56, 128, 128, 3, 2, 1},   {28, 128, 512, 1, 1, 4},    {56, 256, 512, 1, 2, 1},
    {28, 512, 128, 1, 1, 3},   {28, 128, 128, 3, 1, 3},    {28, 512, 256, 1, 1, 1},
    {28, 256, 256, 3, 2, 1},   {14, 256, 1024, 1, 1, 6},   {28, 512, 1024, 1, 2, 1},
    {14, 1024, 256, 1, 1, 5},  {14, 256, 256, 3, 1, 5},    {14, 1024, 512, 1, 1, 1},
    {14, 512, 512, 3, 2, 1},   {7, 512, 2048, 1, 1, 3},    {14, 1024, 2048, 1, 2, 1},
    {7, 2048, 512, 1, 1, 2},   {7, 512, 512, 3, 1, 2},
};

static int parse_conv(const char *spec, conv_shape *c)
{
    const char *colon = strchr(spec, ':');
    if (!colon)
        return 1; /* the ResNet-50 list */
    int64_t v[8] = {0, 0, 0, 0, 0, 0, 0, 1};
    int n = 0;
    if (pgd_parse_int64_list(colon + 1, ',', 1, (int64_t)1 << 20, v, 7, 8, &n))
        return -1;
    c->n = (long)v[0], c->h = (long)v[1], c->w = (long)v[2], c->cin = (long)v[3];
    c->cout = (long)v[4], c->k = (long)v[5], c->stride = (long)v[6], c->groups = (long)v[7];
    if (c->cin % c->groups || c->cout % c->groups || c->h + 2 * (c->k / 2) < c->k ||
        c->w + 2 * (c->k / 2) < c->k)
        return -1;
    return 0;
}

static int validate_conv(const char *spec)
{
    conv_shape c;
    return parse_conv(spec, &c) < 0 ? -1 : 0;
}

typedef struct conv_state {
    pgd_ctx *ctx;
    pgd_conv2d *conv;
    pgd_tensor *x, *y;
} conv_state;

static int conv_once(void *p, pgd_error **err)
{
    conv_state *s = p;
    return pgd_conv2d_forward(s->ctx, s->conv, s->x, PGD_ACT_RELU, NULL, s->y, err);
}

static int bench_one_conv(pgd_ctx *ctx, const conv_shape *c,
                          const bench_opts *o, bench_result *b, pgd_error **err)
{
    pgd_conv2d_desc d = {c->cin, c->cout, (int)c->k, (int)c->k, (int)c->stride, (int)c->stride,
                         (int)(c->k / 2), (int)(c->k / 2), 1, 1, (int)c->groups};
    int64_t oh, ow;
    pgd_conv2d_out_size(&d, c->h, c->w, &oh, &ow);
    int64_t wd[4] = {c->cout, c->cin / c->groups, c->k, c->k}, xd[4] = {c->n, c->h, c->w, c->cin},
            yd[4] = {c->n, oh, ow, c->cout};
    int64_t nw64 = prod(4, wd), nx64 = prod(4, xd), ny64 = prod(4, yd);
    int64_t big = nw64 > nx64 ? nw64 : nx64;
    float *host = NULL, *bias = NULL;
    conv_state s = {ctx, NULL, NULL, NULL};
    int rc = check_fits(ctx, big > ny64 ? big : ny64, add_sat(add_sat(nw64, nx64), ny64),
                        big, err);
    if (!rc && (!(host = item_alloc(big, err)) || !(bias = item_alloc(c->cout, err))))
        rc = PGD_ERR_OUT_OF_HOST_MEMORY;
    size_t nw = (size_t)nw64, nx = (size_t)nx64;
    if (!rc) {
        fill_rand(host, nw);
        fill_rand(bias, (size_t)c->cout);
        rc = pgd_conv2d_create(ctx, &d, host, bias, NULL, &s.conv, err);
    }
    int64_t sx[4] = {c->n, c->h, c->w, c->cin}, sy[4] = {c->n, oh, ow, c->cout};
    if (!rc)
        rc = pgd_tensor_create(ctx, 4, sx, &s.x, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 4, sy, &s.y, err);
    if (!rc) {
        fill_rand(host, nx);
        rc = pgd_tensor_upload(s.x, host, err);
    }
    if (!rc)
        rc = time_runs(ctx, (timed_fn){conv_once, &s}, o, b, err);
    if (!rc) {
        if (c->groups > 1)
            snprintf(b->name, sizeof b->name, "conv:%ld,%ld,%ld,%ld,%ld,%ld,%ld,%ld", c->n, c->h,
                     c->w, c->cin, c->cout, c->k, c->stride, c->groups);
        else
            snprintf(b->name, sizeof b->name, "conv:%ld,%ld,%ld,%ld,%ld,%ld,%ld", c->n, c->h,
                     c->w, c->cin, c->cout, c->k, c->stride);
        snprintf(b->note, sizeof b->note, "%s",
                 pgd_conv2d_algorithm_batch(ctx, s.conv, c->n, c->h, c->w));
        b->flops = 2.0 * (double)c->n * (double)oh * (double)ow * (double)c->cout *
                   (double)(c->cin / c->groups) * (double)c->k * (double)c->k;
        b->bytes = 4.0 * ((double)nx + (double)nw + (double)ny64);
    }
    pgd_conv2d_destroy(s.conv);
    pgd_tensor_destroy(s.x);
    pgd_tensor_destroy(s.y);
    free(host);
    free(bias);
    return rc;
}

static int run_conv(pgd_ctx *ctx, const char *spec, const bench_opts *o, bench_result *res,
                    int *nres, int cap, pgd_error **err)
{
    conv_shape c;
    if (parse_conv(spec, &c) == 0) {
        int rc = bench_one_conv(ctx, &c, o, &res[0], err);
        if (!rc)
            *nres = 1;
        return rc;
    }
    int n = 0, layers = sizeof resnet50_convs / sizeof resnet50_convs[0];
    double total_ms = 0, total_min = 0, total_flops = 0;
    for (int i = 0; i < layers && n + 1 < cap; i++) {
        conv_shape s = {1, resnet50_convs[i].h, resnet50_convs[i].h, resnet50_convs[i].cin,
                        resnet50_convs[i].cout, resnet50_convs[i].k, resnet50_convs[i].stride, 1};
        int rc = bench_one_conv(ctx, &s, o, &res[n], err);
        if (rc)
            return rc;
        int count = resnet50_convs[i].count;
        snprintf(res[n].extra_key, sizeof res[n].extra_key, "layers");
        res[n].extra = count;
        total_ms += count * res[n].median_ms;
        total_min += count * res[n].min_ms;
        total_flops += count * res[n].flops;
        n++;
    }
    bench_result *t = &res[n++];
    snprintf(t->name, sizeof t->name, "conv:resnet50-total");
    t->median_ms = t->p90_ms = total_ms;
    t->min_ms = total_min;
    t->flops = total_flops;
    t->repeat = o->repeat;
    snprintf(t->note, sizeof t->note, "53 layers");
    *nres = n;
    return 0;
}

const bench_item bench_item_conv = {
    "conv", "conv[:N,H,W,Ci,Co,K,S[,G]]",
    "NHWC convolution, padding K/2, bias + ReLU (no shape: ResNet-50's, with the total)",
    validate_conv, run_conv};

/* ---- model items: a whole forward, image tensor to logits, with seeded random weights (the
 * work is that of trained weights). vit_ti16 / vit_s16 / vit_b16[:B] — a ViT; resnet50[:B],
 * resnet50-nl[:B] — ResNet-50 without and with one non-local block before layer3.5 (the
 * paper's setting). One runner, run_model, times every model; a family says how to load, run,
 * describe and free its own. --------------------------------------------------------------- */

#include "mixer.h"
#include "detr.h"
#include "resnet.h"
#include "swin.h"
#include "vit.h"

struct model_family;

typedef struct model_state {
    const struct model_family *f;
    void *model;
    float *x, *logits;
    int batch;
    double nl_ms, total_ms; /* ResNet: the non-local blocks' and the whole pass's time, last run */
    int nl;                 /* ResNet: has a non-local block (its share is measured) */
} model_state;

typedef struct model_family {
    /* Loads the model `spec` names into s->model and its batch into s->batch. */
    int (*load)(pgd_ctx *ctx, const char *spec, model_state *s, pgd_error **err);
    /* One forward of s->x (s->batch images of 224 x 224) to s->logits. */
    int (*forward)(model_state *s, pgd_error **err);
    /* Fills b's params, flops and extra (the name is already set). */
    void (*describe)(const char *spec, const model_state *s, bench_result *b);
    void (*free)(void *model);
} model_family;

/* A spec "<name>[:B]" where name is exactly `name_len` characters: the batch B (default 1, at
 * most 256). */
static int parse_batch(const char *spec, size_t name_len, long *batch)
{
    *batch = 1;
    if (spec[name_len] == '\0')
        return 0;
    if (spec[name_len] != ':')
        return -1;
    int64_t v;
    if (pgd_parse_int64(spec + name_len + 1, 1, 256, &v))
        return -1;
    *batch = (long)v;
    return 0;
}

static int model_once(void *p, pgd_error **err)
{
    model_state *s = p;
    return s->f->forward(s, err);
}

/* The one runner of every model item: loads the model, times forwards of a seeded random batch
 * of 224 x 224 images to 1000 logits each, names the result "<name>:<batch>" and lets the
 * family describe it. */
static int run_model(pgd_ctx *ctx, const model_family *f, const char *spec, const bench_opts *o,
                     bench_result *res, int *nres, pgd_error **err)
{
    model_state s = {.f = f, .batch = 1};
    int rc = f->load(ctx, spec, &s, err);
    size_t nx = (size_t)s.batch * 3 * 224 * 224;
    if (!rc) {
        s.x = item_alloc((int64_t)nx, err);
        s.logits = s.x ? item_alloc((int64_t)s.batch * 1000, err) : NULL;
        if (!s.x || !s.logits)
            rc = PGD_ERR_OUT_OF_HOST_MEMORY;
        else
            fill_rand(s.x, nx);
    }
    bench_result *b = &res[0];
    if (!rc)
        rc = time_runs(ctx, (timed_fn){model_once, &s}, o, b, err);
    if (!rc) {
        snprintf(b->name, sizeof b->name, "%.*s:%d", (int)strcspn(spec, ":"), spec, s.batch);
        f->describe(spec, &s, b);
        *nres = 1;
    }
    f->free(s.model);
    free(s.x);
    free(s.logits);
    return rc;
}

/* ViT: the size from the item's name. */
static int parse_vit(const char *spec, vit_config *c, long *batch)
{
    static const char *const sizes[][2] = {
        {"vit_ti16", "ti"}, {"vit_s16", "s"}, {"vit_b16", "b"}, {"dinov2_s14", "s"}};
    memset(c, 0, sizeof *c);
    *batch = 1;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = strlen(sizes[i][0]);
        if (!strncmp(spec, sizes[i][0], n) && (spec[n] == '\0' || spec[n] == ':')) {
            if (parse_batch(spec, n, batch) || vit_named_config(sizes[i][1], c))
                return -1;
            if (i == 3) { /* DINOv2-S/14 at 224: 16 x 16 patches, features, no classifier */
                c->patch = 14;
                c->grid_h = c->grid_w = 16;
                c->headless = 1;
                c->classes = c->dim;
            }
            return 0;
        }
    }
    return -1;
}

static int validate_vit(const char *spec)
{
    vit_config c;
    long b;
    return parse_vit(spec, &c, &b);
}

static int vit_item_load(pgd_ctx *ctx, const char *spec, model_state *s, pgd_error **err)
{
    vit_config c;
    long batch = 1;
    parse_vit(spec, &c, &batch);
    s->batch = (int)batch;
    model_source src;
    int rc = vit_random_source(&src, &c, 1, err);
    vit_model *m = NULL;
    if (!rc)
        rc = vit_load(ctx, &src, &c, &m, err);
    model_source_free(&src);
    s->model = m;
    return rc;
}

static int vit_item_forward(model_state *s, pgd_error **err)
{
    return vit_forward(s->model, s->x, s->batch, 224, 224, s->logits, NULL, NULL, NULL, err);
}

static void vit_item_describe(const char *spec, const model_state *s, bench_result *b)
{
    vit_config c;
    long batch = 1;
    parse_vit(spec, &c, &batch);
    snprintf(b->params, sizeof b->params,
             "{\"batch\":%ld,\"dim\":%d,\"heads\":%d,\"depth\":%d,\"image\":224}", batch,
             (int)c.dim, (int)c.heads, (int)c.depth);
    /* Multiply-adds of the linear layers, the attention products and the patch embedding. */
    double P = (double)c.grid_h * c.grid_w, T = c.extra + P, D = c.dim;
    double per_block = T * (3 * D * D + D * D + 2 * D * c.mlp) + 2 * T * T * D;
    b->flops = 2.0 * (double)s->batch * (12 * per_block + P * 3.0 * c.patch * c.patch * D);
}

static void vit_item_free(void *model) { vit_free(model); }

static const model_family vit_item_family = {vit_item_load, vit_item_forward, vit_item_describe,
                                             vit_item_free};

static int run_vit(pgd_ctx *ctx, const char *spec, const bench_opts *o, bench_result *res,
                   int *nres, int cap, pgd_error **err)
{
    (void)cap;
    return run_model(ctx, &vit_item_family, spec, o, res, nres, err);
}

const bench_item bench_item_vit = {
    "vit_b16", "vit_b16[:B]",
    "ViT-B/16 forward, 224x224 image tensor to logits, batch B (seeded random weights)",
    validate_vit, run_vit};

/* ResNet-50: 1 with the non-local block (resnet50-nl), 0 without, -1 for a bad spec. */
static int resnet_kind(const char *spec, long *batch)
{
    if (!strncmp(spec, "resnet50-nl", 11))
        return parse_batch(spec, 11, batch) ? -1 : 1;
    if (!strncmp(spec, "resnet50", 8))
        return parse_batch(spec, 8, batch) ? -1 : 0;
    return -1;
}

static int validate_resnet(const char *spec)
{
    long b;
    return resnet_kind(spec, &b) < 0 ? -1 : 0;
}

static int resnet_item_load(pgd_ctx *ctx, const char *spec, model_state *s, pgd_error **err)
{
    long batch = 1;
    int nl = resnet_kind(spec, &batch);
    s->batch = (int)batch;
    s->nl = nl;
    model_source src;
    int rc = resnet_random_source(&src, 50, 1000, nl ? "layer3.5" : NULL, NL_EMBEDDED_GAUSSIAN,
                                  1, err);
    if (rc)
        return rc;
    resnet_config cfg;
    resnet_options opt = {NULL, NULL, -1};
    resnet_model *m = NULL;
    rc = resnet_detect(&src, &opt, &cfg, err);
    if (!rc)
        rc = resnet_load(ctx, &src, &cfg, &m, err);
    model_source_free(&src);
    s->model = m;
    return rc;
}

static int resnet_item_forward(model_state *s, pgd_error **err)
{
    /* Stage times make resnet_forward drain the queue between stages (and around every
     * non-local block), which costs the launches that wait: only the non-local variant, whose
     * share is reported, asks for them (PoCL 3.1, AMD EPYC: 0.1-0.2 ms a pass at batch 1). */
    double t[5] = {0, 0, 0, 0, 0};
    int rc = resnet_forward(s->model, s->x, s->batch, 224, 224, s->logits, NULL,
                            s->nl ? t : NULL, err);
    s->nl_ms = t[2];
    s->total_ms = t[4];
    return rc;
}

static void resnet_item_describe(const char *spec, const model_state *s, bench_result *b)
{
    long batch = 1;
    int nl = resnet_kind(spec, &batch);
    /* torchvision's ResNet-50: 4.09 G multiply-adds at 224x224; the non-local block at
     * 14x14, C = 1024: θ/φ/g 3·196·1024·512, W 196·512·1024, attention 2·196²·512. */
    double block = 4.0 * 196 * 1024 * 512 + 2.0 * 196 * 196 * 512;
    b->flops = 2.0 * (double)s->batch * (4.089e9 + (nl ? block : 0));
    if (nl && s->total_ms > 0) {
        snprintf(b->extra_key, sizeof b->extra_key, "nonlocal_share");
        b->extra = s->nl_ms / s->total_ms;
    }
}

static void resnet_item_free(void *model) { resnet_free(model); }

static const model_family resnet_item_family = {resnet_item_load, resnet_item_forward,
                                                resnet_item_describe, resnet_item_free};

static int run_resnet(pgd_ctx *ctx, const char *spec, const bench_opts *o, bench_result *res,
                      int *nres, int cap, pgd_error **err)
{
    (void)cap;
    return run_model(ctx, &resnet_item_family, spec, o, res, nres, err);
}

const bench_item bench_item_resnet = {
    "resnet50", "resnet50[:B]",
    "ResNet-50 forward, 224x224 image tensor to logits, batch B (seeded random weights)",
    validate_resnet, run_resnet};

/* MLP-Mixer-B/16 (timm's mixer_b16_224 sizes). */
static int validate_mixer(const char *spec)
{
    long b;
    return strncmp(spec, "mixer_b16", 9) || parse_batch(spec, 9, &b) ? -1 : 0;
}

static int mixer_item_load(pgd_ctx *ctx, const char *spec, model_state *s, pgd_error **err)
{
    long batch = 1;
    parse_batch(spec, 9, &batch);
    s->batch = (int)batch;
    mixer_config c;
    mixer_named_config("b16", &c);
    model_source src;
    int rc = mixer_random_source(&src, &c, 1, err);
    mixer_model *m = NULL;
    if (!rc)
        rc = mixer_load(ctx, &src, &c, &m, err);
    model_source_free(&src);
    s->model = m;
    return rc;
}

static int mixer_item_forward(model_state *s, pgd_error **err)
{
    return mixer_forward(s->model, s->x, s->batch, 224, 224, s->logits, NULL, err);
}

static void mixer_item_describe(const char *spec, const model_state *s, bench_result *b)
{
    (void)spec;
    mixer_config c;
    mixer_named_config("b16", &c);
    snprintf(b->params, sizeof b->params,
             "{\"batch\":%d,\"dim\":%d,\"depth\":%d,\"tokens\":%d,\"image\":224}", s->batch,
             c.dim, c.depth, c.tokens);
    /* Multiply-adds: the token MLPs (2·S·Th per channel), the channel MLPs (2·D·Ch per token),
     * the stem and the head. */
    double S = c.tokens, D = c.dim;
    double per_block = 2.0 * S * c.tokens_hidden * D + 2.0 * D * c.channels_hidden * S;
    b->flops = 2.0 * (double)s->batch * (c.depth * per_block + S * 768 * D + D * c.classes);
}

static void mixer_item_free(void *model) { mixer_free(model); }

static const model_family mixer_item_family = {mixer_item_load, mixer_item_forward,
                                               mixer_item_describe, mixer_item_free};

static int run_mixer(pgd_ctx *ctx, const char *spec, const bench_opts *o, bench_result *res,
                     int *nres, int cap, pgd_error **err)
{
    (void)cap;
    return run_model(ctx, &mixer_item_family, spec, o, res, nres, err);
}

const bench_item bench_item_mixer = {
    "mixer_b16", "mixer_b16[:B]",
    "MLP-Mixer-B/16 forward, 224x224 image tensor to logits, batch B (seeded random weights)",
    validate_mixer, run_mixer};

/* Swin-T / Swin-S (torchvision's swin_t, swin_s sizes). */
static int parse_swin(const char *spec, swin_config *c, long *batch)
{
    static const char *const sizes[][2] = {{"swin_t", "t"}, {"swin_s", "s"}};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        size_t n = strlen(sizes[i][0]);
        if (!strncmp(spec, sizes[i][0], n) && (spec[n] == '\0' || spec[n] == ':'))
            return parse_batch(spec, n, batch) ? -1 : swin_named_config(sizes[i][1], c);
    }
    return -1;
}

static int validate_swin(const char *spec)
{
    swin_config c;
    long b;
    return parse_swin(spec, &c, &b);
}

typedef struct swin_item {
    swin_model *m;
    double attn_share;
} swin_item;

static int swin_item_load(pgd_ctx *ctx, const char *spec, model_state *s, pgd_error **err)
{
    swin_config c;
    long batch = 1;
    parse_swin(spec, &c, &batch);
    s->batch = (int)batch;
    swin_item *it = calloc(1, sizeof *it);
    if (!it)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "swin item");
    s->model = it;
    model_source src;
    int rc = swin_random_source(&src, &c, 1, err);
    if (!rc)
        rc = swin_load(ctx, &src, &c, &it->m, err);
    model_source_free(&src);
    return rc;
}

static int swin_item_forward(model_state *s, pgd_error **err)
{
    swin_item *it = s->model;
    double t[5];
    int rc = swin_forward(it->m, s->x, s->batch, 224, 224, s->logits, t, err);
    it->attn_share = t[4];
    return rc;
}

static void swin_item_describe(const char *spec, const model_state *s, bench_result *b)
{
    swin_config c;
    long batch = 1;
    parse_swin(spec, &c, &batch);
    const swin_item *it = s->model;
    snprintf(b->params, sizeof b->params,
             "{\"batch\":%ld,\"dim\":%d,\"depths\":[%d,%d,%d,%d],\"window\":7,\"image\":224}",
             batch, c.dim, c.depth[0], c.depth[1], c.depth[2], c.depth[3]);
    /* Multiply-adds per stage (grid 56, 28, 14, 7; C doubling): qkv, proj and the MLP
     * (12 N C²), window attention (2 N·49·C), merges (N/4 · 8C²), plus stem and head. */
    double mac = 3136.0 * 48 * c.dim;
    for (int st = 0; st < 4; st++) {
        double N = 3136.0 / (1 << (2 * st)), C = (double)c.dim * (1 << st);
        mac += c.depth[st] * (12 * N * C * C + 2 * N * 49 * C);
        if (st < 3)
            mac += N / 4 * 8 * C * C;
    }
    mac += 8.0 * c.dim * c.classes;
    b->flops = 2.0 * (double)s->batch * mac;
    snprintf(b->extra_key, sizeof b->extra_key, "window_attention_share");
    b->extra = it ? it->attn_share : 0;
}

static void swin_item_free(void *model)
{
    swin_item *it = model;
    if (it)
        swin_free(it->m);
    free(it);
}

static const model_family swin_item_family = {swin_item_load, swin_item_forward,
                                              swin_item_describe, swin_item_free};

static int run_swin(pgd_ctx *ctx, const char *spec, const bench_opts *o, bench_result *res,
                    int *nres, int cap, pgd_error **err)
{
    (void)cap;
    return run_model(ctx, &swin_item_family, spec, o, res, nres, err);
}

const bench_item bench_item_swin_t = {
    "swin_t", "swin_t[:B]",
    "Swin-T forward (torchvision's swin_t sizes), 224x224 image tensor to logits, batch B; the "
    "window attention's share of the blocks as window_attention_share",
    validate_swin, run_swin};
const bench_item bench_item_swin_s = {"swin_s", "swin_s[:B]", "the same, Swin-S (depths 2-2-18-2)",
                                      validate_swin, run_swin};

/* ---- detr_r50[:B]: DETR with a ResNet-50 backbone on 800 x 1066 images ----------------------- */

enum { DETR_H = 800, DETR_W = 1066 };

static int parse_detr(const char *spec, long *batch)
{
    return strncmp(spec, "detr_r50", 8) ? -1 : parse_batch(spec, 8, batch);
}

static int validate_detr(const char *spec)
{
    long b;
    return parse_detr(spec, &b);
}

typedef struct detr_state {
    detr_model *m;
    int batch;
    float *x, *logits, *boxes;
    double t[4]; /* the last run's backbone, encoder, decoder and total (ms) */
} detr_state;

static int detr_once(void *p, pgd_error **err)
{
    detr_state *s = p;
    detr_output out = {s->logits, s->boxes, NULL};
    return detr_forward(s->m, s->x, NULL, s->batch, DETR_H, DETR_W, &out, s->t, err);
}

/* Forwards of a seeded random batch (DetrForObjectDetection's sizes: 6 + 6 layers of width 256,
 * 100 queries, 92 classes) with the stage split of the last timed run in the parameters. */
static int run_detr(pgd_ctx *ctx, const char *spec, const bench_opts *o, bench_result *res,
                    int *nres, int cap, pgd_error **err)
{
    (void)cap;
    long batch = 1;
    parse_detr(spec, &batch);
    detr_state s = {0};
    s.batch = (int)batch;
    model_source src;
    detr_config cfg;
    int rc = detr_random_source(&src, 50, 1, err);
    if (rc)
        return rc;
    rc = detr_detect(&src, NULL, &cfg, err);
    if (!rc)
        rc = detr_load(ctx, &src, &cfg, &s.m, err);
    model_source_free(&src);
    size_t nx = (size_t)batch * 3 * DETR_H * DETR_W;
    if (!rc) {
        s.x = item_alloc((int64_t)nx, err);
        s.logits = s.x ? item_alloc(batch * cfg.queries * cfg.classes, err) : NULL;
        s.boxes = s.logits ? item_alloc(batch * cfg.queries * 4, err) : NULL;
        if (!s.boxes)
            rc = PGD_ERR_OUT_OF_HOST_MEMORY;
        else
            fill_rand(s.x, nx);
    }
    bench_result *b = &res[0];
    if (!rc)
        rc = time_runs(ctx, (timed_fn){detr_once, &s}, o, b, err);
    if (!rc) {
        snprintf(b->name, sizeof b->name, "detr_r50:%ld", batch);
        snprintf(b->params, sizeof b->params,
                 "{\"batch\":%ld,\"image\":[%d,%d],\"backbone_ms\":%.1f,\"encoder_ms\":%.1f,"
                 "\"decoder_ms\":%.1f}",
                 batch, DETR_H, DETR_W, s.t[0], s.t[1], s.t[2]);
        /* Multiply-adds: ResNet-50's 4.1 G at 224 x 224 scaled by the pixels; the input
         * projection; per encoder layer 4TD² + 2T²D + 2TDF over T = 25 x 34 cells; per decoder
         * layer the same with Q = 100 queries (self), cross-attention's K and V over T and
         * its products 2QTD. */
        double T = 25.0 * 34, D = 256, F = 2048, Q = 100;
        double mac = 4.1e9 * DETR_H * DETR_W / (224.0 * 224) + T * 2048 * D;
        mac += 6 * (4 * T * D * D + 2 * T * T * D + 2 * T * D * F);
        mac += 6 * (4 * Q * D * D + 2 * Q * Q * D + 2 * Q * D * D + 2 * T * D * D +
                    2 * Q * T * D + 2 * Q * D * F);
        b->flops = 2.0 * (double)batch * mac;
        snprintf(b->extra_key, sizeof b->extra_key, "backbone_share");
        b->extra = s.t[3] > 0 ? s.t[0] / s.t[3] : 0;
        *nres = 1;
    }
    detr_free(s.m);
    free(s.x);
    free(s.logits);
    free(s.boxes);
    return rc;
}

const bench_item bench_item_detr = {
    "detr_r50", "detr_r50[:B]",
    "DETR-R50 forward (facebook/detr-resnet-50's sizes, seeded random weights), an 800x1066 "
    "batch of B to logits and boxes; backbone/encoder/decoder ms in the parameters and the "
    "backbone's share as backbone_share",
    validate_detr, run_detr};

/* ---- nonlocal[-unfused]:H,W,C — one embedded-Gaussian block on an H x W x C map, fused vs the
 * materialised softmax ---------------------------------------------------------------------- */

static int parse_nl(const char *spec, int *unfused, long v[3])
{
    v[0] = 56, v[1] = 56, v[2] = 256; /* the paper's res3-style map: N = 3136, C = 256 */
    if (strncmp(spec, "nonlocal", 8))
        return -1;
    *unfused = !strncmp(spec, "nonlocal-unfused", 16);
    const char *p = spec + (*unfused ? 16 : 8);
    if (*p == '\0')
        return 0;
    /* H and W each within 2^20 first, so that H * W cannot overflow */
    int64_t w[3];
    int n = 0;
    if (*p != ':' || pgd_parse_int64_list(p + 1, ',', 1, (int64_t)1 << 20, w, 3, 3, &n))
        return -1;
    if (w[0] * w[1] > (int64_t)1 << 20 || w[2] < 2 || w[2] > 8192)
        return -1;
    v[0] = (long)w[0], v[1] = (long)w[1], v[2] = (long)w[2];
    return 0;
}

static int validate_nl(const char *spec)
{
    int u = 0;
    long v[3];
    return parse_nl(spec, &u, v);
}

typedef struct nl_state {
    pgd_ctx *ctx;
    pgd_nonlocal *nl;
    pgd_tensor *x, *z;
} nl_state;

static int nl_once(void *p, pgd_error **err)
{
    nl_state *s = p;
    return pgd_nonlocal_forward(s->ctx, s->nl, s->x, s->z, err);
}

/* A block on C channels (Ci = C/2) with the seeded weights `pagoda nonlocal --nonlocal` inserts
 * (the work is that of a trained block). */
static int nl_block(pgd_ctx *ctx, int64_t C, int unfused, pgd_nonlocal **out, pgd_error **err)
{
    resnet_nl_weights h;
    pgd_nonlocal_params params;
    int rc = resnet_nl_seeded(C, C / 2, 0x6e6c0000u + 1000, &h, &params, err);
    if (rc)
        return rc;
    pgd_nonlocal_desc d = {C, C / 2, PGD_NONLOCAL_EMBEDDED_GAUSSIAN, 0, unfused};
    rc = pgd_nonlocal_create(ctx, &d, &params, out, err);
    resnet_nl_weights_free(&h);
    return rc;
}

static int run_nl(pgd_ctx *ctx, const char *spec, const bench_opts *o, bench_result *res,
                  int *nres, int cap, pgd_error **err)
{
    (void)cap;
    int unfused = 0;
    long v[3] = {56, 56, 256};
    parse_nl(spec, &unfused, v);
    nl_state s = {ctx, NULL, NULL, NULL};
    int64_t xs[4] = {1, v[0], v[1], v[2]};
    /* x and z [N, C]; the block's scratch P [N, 3Ci] and y [N, Ci], with the N x N affinity
     * when unfused; the weights (about 2 C^2) */
    int64_t npos = mul_sat(v[0], v[1]), nx64 = mul_sat(npos, v[2]), ci = v[2] / 2;
    int64_t aff = unfused ? mul_sat(npos, npos) : 0;
    int64_t total = add_sat(add_sat(mul_sat(2, nx64), mul_sat(mul_sat(4, npos), ci)),
                            add_sat(aff, mul_sat(mul_sat(2, v[2]), v[2])));
    int rc = check_fits(ctx, nx64 > aff ? nx64 : aff, total, nx64, err);
    float *host = rc ? NULL : item_alloc(nx64, err);
    if (!host)
        return rc ? rc : PGD_ERR_OUT_OF_HOST_MEMORY;
    size_t nx = (size_t)nx64;
    fill_rand(host, nx);
    rc = nl_block(ctx, v[2], unfused, &s.nl, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 4, xs, &s.x, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 4, xs, &s.z, err);
    if (!rc)
        rc = pgd_tensor_upload(s.x, host, err);
    free(host);
    bench_result *b = &res[0];
    if (!rc)
        rc = time_runs(ctx, (timed_fn){nl_once, &s}, o, b, err);
    if (!rc) {
        snprintf(b->name, sizeof b->name, "%s:%ld,%ld,%ld", unfused ? "nonlocal-unfused" : "nonlocal",
                 v[0], v[1], v[2]);
        double N = (double)(v[0] * v[1]), C = (double)v[2], Ci = C / 2;
        b->flops = 2.0 * (4 * N * C * Ci + 2 * N * N * Ci);
        /* device memory the block needs beyond x and z: P [N, 3Ci], y [N, Ci], and for the
         * unfused form the N x N affinity */
        snprintf(b->extra_key, sizeof b->extra_key, "scratch_mib");
        b->extra = 4.0 * (N * 3 * Ci + N * Ci + (unfused ? N * N : 0)) / (1024.0 * 1024.0);
        *nres = 1;
    }
    pgd_tensor_destroy(s.x);
    pgd_tensor_destroy(s.z);
    pgd_nonlocal_destroy(s.nl);
    return rc;
}

const bench_item bench_item_nonlocal = {
    "nonlocal", "nonlocal[:H,W,C]",
    "one embedded-Gaussian non-local block on an H x W x C map (default 56,56,256: N = 3136), "
    "fused attention: no N x N matrix",
    validate_nl, run_nl};

const bench_item bench_item_resnet_nl = {
    "resnet50-nl", "resnet50-nl[:B]",
    "ResNet-50 with a non-local block before layer3.5, batch B; the block's share of the time "
    "as nonlocal_share",
    validate_resnet, run_resnet};

const bench_item bench_item_nonlocal_unfused = {
    "nonlocal-unfused", "nonlocal-unfused[:H,W,C]",
    "the same non-local block with the N x N softmax materialised (GEMM, softmax, GEMM)",
    validate_nl, run_nl};
const bench_item bench_item_vit_s16 = {"vit_s16", "vit_s16[:B]", "the same, ViT-S/16 (384 wide)",
                                       validate_vit, run_vit};
const bench_item bench_item_vit_ti16 = {"vit_ti16", "vit_ti16[:B]",
                                        "the same, ViT-Ti/16 (192 wide)", validate_vit, run_vit};
const bench_item bench_item_dinov2_s14 = {
    "dinov2_s14", "dinov2_s14[:B]",
    "DINOv2-S/14 features (pagoda embed's work: 257 tokens, no classifier), 224x224, batch B; "
    "images/s = 1000 B / median",
    validate_vit, run_vit};

/* ---- patch_embed:B,D — the ViT patch embedding (16×16 stride-16 convolution of a 224×224
 * RGB image, class token, position embedding) into [B, 197, D] ------------------------------ */

static int parse_bd(const char *spec, long v[2])
{
    if (parse_nd(spec, v))
        return -1;
    return v[0] > 256 || v[1] > 4096 ? -1 : 0;
}

static int validate_bd(const char *spec)
{
    long v[2];
    return parse_bd(spec, v);
}

typedef struct patch_state {
    pgd_ctx *ctx;
    pgd_tensor *img, *w, *bias, *cls, *pos, *out;
} patch_state;

static int patch_once(void *p, pgd_error **err)
{
    patch_state *s = p;
    return pgd_patch_embed(s->ctx, s->img, s->w, s->bias, s->cls, NULL, s->pos, s->out, err);
}

static int run_patch_embed(pgd_ctx *ctx, const char *spec, const bench_opts *o,
                           bench_result *res, int *nres, int cap, pgd_error **err)
{
    (void)cap;
    long v[2] = {1, 768};
    parse_bd(spec, v);
    long B = v[0], D = v[1], T = 197, P = 16;
    patch_state s;
    memset(&s, 0, sizeof s);
    s.ctx = ctx;
    int64_t si[4] = {B, 3, 224, 224}, sw[4] = {D, 3, P, P}, sd[1] = {D}, sp[2] = {T, D},
            so[3] = {B, T, D};
    size_t nmax = (size_t)(B * 3 * 224 * 224);
    if ((size_t)(D * 3 * P * P) > nmax)
        nmax = (size_t)(D * 3 * P * P);
    if ((size_t)(T * D) > nmax)
        nmax = (size_t)(T * D);
    float *host = NULL;
    int rc = check_fits(ctx, (int64_t)nmax,
                        B * 3 * 224 * 224 + D * 3 * P * P + 2 * D + T * D + B * T * D,
                        (int64_t)nmax, err);
    if (!rc && !(host = item_alloc((int64_t)nmax, err)))
        rc = PGD_ERR_OUT_OF_HOST_MEMORY;
    if (!rc) {
        fill_rand(host, nmax);
        rc = pgd_tensor_create(ctx, 4, si, &s.img, err);
    }
    if (!rc)
        rc = pgd_tensor_create(ctx, 4, sw, &s.w, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 1, sd, &s.bias, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 1, sd, &s.cls, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 2, sp, &s.pos, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 3, so, &s.out, err);
    pgd_tensor *ups[5] = {s.img, s.w, s.bias, s.cls, s.pos};
    for (int i = 0; i < 5 && !rc; i++)
        rc = pgd_tensor_upload(ups[i], host, err);
    bench_result *b = &res[0];
    if (!rc)
        rc = time_runs(ctx, (timed_fn){patch_once, &s}, o, b, err);
    if (!rc) {
        snprintf(b->name, sizeof b->name, "patch_embed:%ld,%ld", B, D);
        snprintf(b->params, sizeof b->params,
                 "{\"B\":%ld,\"D\":%ld,\"image\":224,\"patch\":%ld}", B, D, P);
        b->flops = 2.0 * (double)B * 196.0 * (double)D * (double)(3 * P * P);
        b->bytes = 4.0 * ((double)B * 3 * 224 * 224 + (double)D * 3 * P * P + (double)T * D +
                          (double)B * T * D);
        *nres = 1;
    }
    pgd_tensor_destroy(s.img);
    pgd_tensor_destroy(s.w);
    pgd_tensor_destroy(s.bias);
    pgd_tensor_destroy(s.cls);
    pgd_tensor_destroy(s.pos);
    pgd_tensor_destroy(s.out);
    free(host);
    return rc;
}

const bench_item bench_item_patch_embed = {
    "patch_embed", "patch_embed:B,D",
    "ViT patch embedding: B 224x224 images, 16x16 patches, D channels, cls + position",
    validate_bd, run_patch_embed};

/* ---- gat[:N,E] — one GATConv layer (64 -> 8 heads x 8, concat, ELU) on a generated power-law
 * graph ------------------------------------------------------------------------------------ */

/* The graph of the item, the same one tools/bench-gat-peers builds for PyG: edge k has source
 * h(2k) mod N and destination 0 for every tenth edge (a hub: 10^5 in-edges at the default
 * size), else floor(N·u²) with u = h(2k+1) / 2^64 in 53 bits (more edges into low ids); h is
 * splitmix64's finaliser over k·golden + seed. */
static uint64_t gat_hash(uint64_t k)
{
    uint64_t z = 0x6761742062656e63ull + (k + 1) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void gat_edges(int64_t n, int64_t e, int64_t *ei)
{
    for (int64_t k = 0; k < e; k++) {
        ei[k] = (int64_t)(gat_hash(2 * (uint64_t)k) % (uint64_t)n);
        double u = (double)(gat_hash(2 * (uint64_t)k + 1) >> 11) * 0x1p-53;
        ei[e + k] = k % 10 == 0 ? 0 : (int64_t)floor((double)n * u * u);
    }
}

static int parse_gat(const char *spec, long v[2])
{
    v[0] = 100000, v[1] = 1000000;
    if (strncmp(spec, "gat", 3) || (spec[3] != '\0' && spec[3] != ':'))
        return -1;
    if (spec[3] == '\0')
        return 0;
    int64_t w[2];
    int n = 0;
    if (pgd_parse_int64_list(spec + 4, ',', 1, (int64_t)1 << 28, w, 2, 2, &n))
        return -1;
    v[0] = (long)w[0], v[1] = (long)w[1];
    return 0;
}

static int validate_gat(const char *spec)
{
    long v[2];
    return parse_gat(spec, v);
}

typedef struct gat_state {
    pgd_ctx *ctx;
    pgd_gat *gat;
    pgd_graph *g;
    pgd_tensor *x, *y;
} gat_state;

static int gat_once(void *p, pgd_error **err)
{
    gat_state *s = p;
    return pgd_gat_forward(s->ctx, s->gat, s->g, s->x, s->y, NULL, err);
}

static int run_gat(pgd_ctx *ctx, const char *spec, const bench_opts *o, bench_result *res,
                   int *nres, int cap, pgd_error **err)
{
    (void)cap;
    long v[2];
    parse_gat(spec, v);
    const int64_t F = 64, H = 8, C = 8, N = v[0], E = v[1];
    gat_state s = {ctx, NULL, NULL, NULL, NULL};
    /* device: x, h [N, 64] and y; the scores and merge scratch ~ (N + E/1024)·(64 + 2·8); the
     * int32 CSR ~ 4 (E + N) */
    int64_t nx = mul_sat(N, F), e2 = add_sat(E, N);
    int64_t total = add_sat(mul_sat(5, nx), mul_sat(4, e2));
    int rc = check_fits(ctx, nx > e2 ? nx : e2, total, add_sat(nx, mul_sat(4, e2)), err);
    if (rc)
        return rc;
    float *host = item_alloc(nx, err);
    int64_t *ei = host ? malloc((size_t)(2 * E + 1) * sizeof *ei) : NULL;
    float *w = host ? item_alloc(H * C * F + 3 * H * C, err) : NULL;
    if (!host || !ei || !w) {
        free(host), free(ei), free(w);
        return ei || !host || !w ? PGD_ERR_OUT_OF_HOST_MEMORY
                                 : pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "edge_index");
    }
    fill_rand(host, (size_t)nx);
    model_fill_seeded(w, H * C * F + 3 * H * C, 0x676174, 0.2f);
    gat_edges(N, E, ei);
    pgd_gat_desc d;
    pgd_gat_desc_init(&d, F, C, H);
    d.act = PGD_GAT_ACT_ELU;
    pgd_gat_params p = {w,   NULL, w + H * C * F, w + H * C * F + H * C, w + H * C * F + 2 * H * C,
                        NULL};
    int64_t xs[2] = {N, F}, ys[2] = {N, H * C};
    double t0 = bench_now_ms();
    rc = pgd_graph_create(ctx, N, ei, E, 1, &s.g, err);
    double graph_ms = bench_now_ms() - t0;
    free(ei);
    if (!rc)
        rc = pgd_gat_create(ctx, &d, &p, &s.gat, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 2, xs, &s.x, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 2, ys, &s.y, err);
    if (!rc)
        rc = pgd_tensor_upload(s.x, host, err);
    free(host);
    free(w);
    bench_result *b = &res[0];
    if (!rc)
        rc = time_runs(ctx, (timed_fn){gat_once, &s}, o, b, err);
    if (!rc) {
        int64_t ea = pgd_graph_num_edges(s.g);
        snprintf(b->name, sizeof b->name, "gat:%ld,%ld", v[0], v[1]);
        snprintf(b->params, sizeof b->params,
                 "{\"nodes\":%ld,\"edges\":%ld,\"edges_attended\":%lld,\"max_in_degree\":%lld,"
                 "\"in\":64,\"heads\":8,\"channels\":8}",
                 v[0], v[1], (long long)ea, (long long)pgd_graph_max_in_degree(s.g));
        /* h = x·Wᵀ, the scores, and per attended edge and channel one exp-weighted FMA */
        b->flops = 2.0 * (double)N * (double)(F * H * C) + 4.0 * (double)N * (double)(H * C) +
                   2.0 * (double)ea * (double)(H * C);
        snprintf(b->extra_key, sizeof b->extra_key, "graph_ms");
        b->extra = graph_ms;
        *nres = 1;
    }
    pgd_tensor_destroy(s.x);
    pgd_tensor_destroy(s.y);
    pgd_gat_destroy(s.gat);
    pgd_graph_destroy(s.g);
    return rc;
}

const bench_item bench_item_gat = {
    "gat", "gat[:N,E]",
    "one GATConv layer (64 -> 8 heads x 8, concat, ELU, self loops) on a generated graph of N "
    "nodes and E edges (default 100000,1000000; every tenth edge into node 0); the CSR build "
    "time as graph_ms",
    validate_gat, run_gat};
