/* bench_items.c — the benchmark items: program builds and kernels (the operator items), and the
 * helpers every item file uses (time_runs, item_alloc, fill_rand); bench_blocks.c has the
 * model blocks (non-local, patch embedding, GAT layer), bench_models.c the whole-model items. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "app.h"
#include "bench.h"
#include "bench_items.h"
#include "model.h"

/* ---- build: cold vs warm build of every kernel file ---------------------------------------- */

static int run_build(pgd_ctx *ctx, const char *spec, const bench_opts *o, bench_result *res,
                     int *nres, int cap, pgd_error **err)
{
    (void)spec;
    /* Compiles are seconds each on PoCL: a few repetitions give a stable median. */
    int reps = o->repeat < 0 ? 3 : o->repeat < 5 ? o->repeat : 5;
    const char *const *names = pgd_program_names();
    int have_cache = pgd_ctx_get_cache_dir(ctx) != NULL;
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
    "build", "build", "cold (compile) vs warm (binary cache) build of every kernel file", NULL,
    run_build};

/* Warm-up then timed runs, each drained; the first run's program builds are the compile time
 * (bench.c's bench_time, which derives the counts from --budget-ms or takes them as given). */
int time_runs(pgd_ctx *ctx, timed_fn f, const bench_opts *o, bench_result *b, pgd_error **err)
{
    return bench_time(ctx, f.fn, f.state, o, b, err);
}

/* ---- sizes: checked before anything is allocated ------------------------------------------- */

/* a * b for sizes >= 0, saturating at INT64_MAX (which every limit refuses) instead of the
 * signed overflow an item spec's product of dimensions could otherwise reach. */
int64_t mul_sat(int64_t a, int64_t b)
{
    return a && b > INT64_MAX / a ? INT64_MAX : a * b;
}

int64_t add_sat(int64_t a, int64_t b)
{
    return b > INT64_MAX - a ? INT64_MAX : a + b;
}

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

static double mib(uint64_t bytes)
{
    return (double)bytes / (1024.0 * 1024.0);
}

/* What an item will allocate, in floats: its largest device tensor, all of its device tensors
 * together, and its largest host buffer. Checked against the device's largest allocation and
 * global memory and against host_limit_bytes before any allocation, so that a spec too large
 * for the device is refused at once with the sizes, not after filling gigabytes of host memory.
 * PGD_ERR_TOO_LARGE with err set, or PGD_OK. */
int check_fits(pgd_ctx *ctx, int64_t largest, int64_t total, int64_t host, pgd_error **err)
{
    const pgd_device_info *d = pgd_ctx_get_device(ctx);
    uint64_t lb = (uint64_t)mul_sat(largest, 4), tb = (uint64_t)mul_sat(total, 4),
             hb = (uint64_t)mul_sat(host, 4), hl = host_limit_bytes();
    if (largest == INT64_MAX || total == INT64_MAX || host == INT64_MAX ||
        lb == (uint64_t)INT64_MAX || tb == (uint64_t)INT64_MAX || hb == (uint64_t)INT64_MAX)
        return pgd_error_set(err, PGD_ERR_TOO_LARGE, "its sizes overflow 64 bits");
    if (d && lb > d->max_alloc)
        return pgd_error_set(err, PGD_ERR_TOO_LARGE,
                             "a tensor of %.1f MiB exceeds the largest allocation of %s "
                             "(%.1f MiB)",
                             mib(lb), d->name, mib(d->max_alloc));
    if (d && tb > d->global_mem)
        return pgd_error_set(err, PGD_ERR_TOO_LARGE,
                             "its tensors take %.1f MiB, more than the %.1f MiB of global "
                             "memory of %s",
                             mib(tb), mib(d->global_mem), d->name);
    /* A CPU device's memory is the host's: its tensors count against the host limit too. */
    if (d && d->type == PGD_DEVICE_CPU)
        hb = hb + tb < hb ? UINT64_MAX : hb + tb;
    if (hb > hl)
        return pgd_error_set(err, PGD_ERR_TOO_LARGE,
                             "%.1f MiB of host memory is more than half this machine's (%.1f "
                             "MiB)",
                             mib(hb), mib(hl));
    return PGD_OK;
}

/* A malloc whose failure is an error naming the item (never a bare status). */
void *item_alloc(int64_t floats, pgd_error **err)
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

static int validate_launch(const char *spec)
{
    return strcmp(spec, "launch") ? -1 : 0;
}

/* LAUNCH_BURST launches of a 64-float pgd_scale, then one wait: what each of a forward pass's
 * launches costs (the in-order queue overlaps nothing, so this is enqueue + dispatch). */
#define LAUNCH_BURST 100

static int launch_sync_once(void *p, pgd_error **err)
{
    return scale_once(p, err);
}

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

void fill_rand(float *p, size_t n)
{
    model_fill_seeded(p, (int64_t)n, 12345, 0.5f);
}

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
const bench_item bench_item_gemm_nn = {"gemm-nn", "gemm-nn:M,N,K",
                                       "plain C[M,N] = A[M,K]·B[K,N], B repacked on every call",
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
        return pgd_error_set(err, PGD_ERR_TOO_LARGE,
                             "%.1f MiB of host memory is more than "
                             "half this machine's",
                             mib(host));
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
    "blas", "blas:M,N,K", "OpenBLAS cblas_sgemm on the host, A·Wᵀ as gemm:M,N,K (the peer to beat)",
    validate_mnk, run_blas};
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
    pgd_tensor *qkv, *out;         /* fused */
    pgd_tensor *q, *k, *v, *s, *o; /* unfused: [H, N, D] each, scores [H, N, N] */
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
                   : check_fits(ctx, scores > hnd ? scores : hnd, add_sat(mul_sat(4, hnd), scores),
                                big, err);
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
        snprintf(b->name, sizeof b->name, "%s:%ld,%ld,%ld",
                 fused ? "attention" : "attention-unfused", s.n, s.h, s.d);
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

int parse_nd(const char *spec, long v[2])
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
    {224, 3, 64, 7, 2, 1},    {56, 64, 64, 1, 1, 1},    {56, 64, 64, 3, 1, 3},
    {56, 64, 256, 1, 1, 4},   {56, 256, 64, 1, 1, 2},   {56, 256, 128, 1, 1, 1},
    {56, 128, 128, 3, 2, 1},  {28, 128, 512, 1, 1, 4},  {56, 256, 512, 1, 2, 1},
    {28, 512, 128, 1, 1, 3},  {28, 128, 128, 3, 1, 3},  {28, 512, 256, 1, 1, 1},
    {28, 256, 256, 3, 2, 1},  {14, 256, 1024, 1, 1, 6}, {28, 512, 1024, 1, 2, 1},
    {14, 1024, 256, 1, 1, 5}, {14, 256, 256, 3, 1, 5},  {14, 1024, 512, 1, 1, 1},
    {14, 512, 512, 3, 2, 1},  {7, 512, 2048, 1, 1, 3},  {14, 1024, 2048, 1, 2, 1},
    {7, 2048, 512, 1, 1, 2},  {7, 512, 512, 3, 1, 2},
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

static int bench_one_conv(pgd_ctx *ctx, const conv_shape *c, const bench_opts *o, bench_result *b,
                          pgd_error **err)
{
    pgd_conv2d_desc d = {
        c->cin,          c->cout,         (int)c->k, (int)c->k, (int)c->stride, (int)c->stride,
        (int)(c->k / 2), (int)(c->k / 2), 1,         1,         (int)c->groups};
    int64_t oh, ow;
    pgd_conv2d_out_size(&d, c->h, c->w, &oh, &ow);
    int64_t wd[4] = {c->cout, c->cin / c->groups, c->k, c->k}, xd[4] = {c->n, c->h, c->w, c->cin},
            yd[4] = {c->n, oh, ow, c->cout};
    int64_t nw64 = prod(4, wd), nx64 = prod(4, xd), ny64 = prod(4, yd);
    int64_t big = nw64 > nx64 ? nw64 : nx64;
    float *host = NULL, *bias = NULL;
    conv_state s = {ctx, NULL, NULL, NULL};
    int rc = check_fits(ctx, big > ny64 ? big : ny64, add_sat(add_sat(nw64, nx64), ny64), big, err);
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
            snprintf(b->name, sizeof b->name, "conv:%ld,%ld,%ld,%ld,%ld,%ld,%ld", c->n, c->h, c->w,
                     c->cin, c->cout, c->k, c->stride);
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
        conv_shape s = {1,
                        resnet50_convs[i].h,
                        resnet50_convs[i].h,
                        resnet50_convs[i].cin,
                        resnet50_convs[i].cout,
                        resnet50_convs[i].k,
                        resnet50_convs[i].stride,
                        1};
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
