/* bench_items.c — the benchmark items: program builds and kernels. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "app.h"
#include "bench.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ---- build: cold vs warm build of every kernel file ---------------------------------------- */

static int run_build(pgd_ctx *ctx, const char *spec, const bench_opts *o, bench_result *res,
                     int *nres, int cap, pgd_error **err)
{
    (void)spec;
    /* Compiles are seconds each on PoCL: a few repetitions give a stable median. */
    int reps = o->repeat < 5 ? o->repeat : 5;
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
        return PGD_ERR_OUT_OF_HOST_MEMORY;
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
            double t0 = now_ms();
            int rc = pgd_program_prepare(ctx, names[i], opts, err);
            cold[r] = now_ms() - t0;
            if (rc) {
                free(cold);
                free(warm);
                return rc;
            }
            pgd_ctx_clear_programs(ctx);
            t0 = now_ms();
            rc = pgd_program_prepare(ctx, names[i], opts, err);
            warm[r] = now_ms() - t0;
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

/* ---- scale:N: y = a*x over N floats (memory bandwidth) ------------------------------------- */

static int parse_n(const char *spec, long *n)
{
    const char *colon = strchr(spec, ':');
    *n = 1 << 24;
    if (!colon)
        return 0;
    char *end = NULL;
    long v = strtol(colon + 1, &end, 10);
    if (!colon[1] || *end || v < 1 || v > (1L << 30))
        return -1;
    *n = v;
    return 0;
}

static int validate_scale(const char *spec)
{
    long n;
    return parse_n(spec, &n);
}

static int run_scale(pgd_ctx *ctx, const char *spec, const bench_opts *o, bench_result *res,
                     int *nres, int cap, pgd_error **err)
{
    (void)cap;
    long n;
    parse_n(spec, &n);
    int64_t shape[1] = {n};
    pgd_tensor *x = NULL, *y = NULL;
    int rc = pgd_tensor_create(ctx, 1, shape, &x, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 1, shape, &y, err);
    double *ms = calloc((size_t)o->repeat, sizeof *ms);
    if (!rc && !ms)
        rc = PGD_ERR_OUT_OF_HOST_MEMORY;
    pgd_build_stats before, after;
    pgd_ctx_build_stats(ctx, &before);
    double t0 = now_ms();
    if (!rc)
        rc = pgd_scale(ctx, x, 1.0f, y, err); /* the first call builds the program */
    if (!rc)
        rc = pgd_ctx_finish(ctx, err);
    double first = now_ms() - t0;
    pgd_ctx_build_stats(ctx, &after);
    for (int i = 0; !rc && i < o->warmup; i++)
        rc = pgd_scale(ctx, x, 1.0f, y, err);
    if (!rc)
        rc = pgd_ctx_finish(ctx, err);
    for (int i = 0; !rc && i < o->repeat; i++) {
        t0 = now_ms();
        rc = pgd_scale(ctx, x, 1.0f, y, err);
        if (!rc)
            rc = pgd_ctx_finish(ctx, err);
        ms[i] = now_ms() - t0;
    }
    if (!rc) {
        bench_result *b = &res[0];
        snprintf(b->name, sizeof b->name, "scale:%ld", n);
        bench_stats(ms, o->repeat, &b->median_ms, &b->p90_ms, &b->min_ms);
        b->compile_ms = after.build_ms - before.build_ms;
        if (b->compile_ms <= 0)
            b->compile_ms = first > b->median_ms ? first - b->median_ms : 0;
        b->bytes = 8.0 * (double)n;
        b->flops = (double)n;
        b->repeat = o->repeat;
        *nres = 1;
    }
    free(ms);
    pgd_tensor_destroy(x);
    pgd_tensor_destroy(y);
    return rc;
}

const bench_item bench_item_scale = {"scale", "scale[:N]",
                                     "y = a*x over N floats (default 2^24): memory bandwidth",
                                     validate_scale, run_scale};
