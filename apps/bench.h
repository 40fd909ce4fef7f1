/* bench.h — the items `pagoda bench` can time. */
#ifndef PAGODA_BENCH_H
#define PAGODA_BENCH_H

#include "pagoda.h"

typedef struct bench_opts {
    int repeat, warmup;
} bench_opts;

typedef struct bench_result {
    char name[64];
    double median_ms, p90_ms, min_ms;
    double compile_ms;
    double flops, bytes; /* per run; 0 when not meaningful */
    int repeat;
    char extra_key[32]; /* optional extra number for the JSON record */
    double extra;
    char note[24]; /* optional word printed after the numbers and recorded ("algorithm") */
} bench_result;

typedef struct bench_item {
    const char *prefix; /* "gemm" matches "gemm" and "gemm:..." */
    const char *syntax;
    const char *help;
    int (*validate)(const char *spec); /* 0 if the spec parses */
    /* Runs the item, filling up to `cap` results. Returns 0, EXIT_USAGE, or a pgd status with
     * *err set. */
    int (*run)(pgd_ctx *ctx, const char *spec, const bench_opts *o, bench_result *res, int *nres,
               int cap, pgd_error **err);
} bench_item;

/* Sorts ms[0..n) and computes its median, 90th percentile and minimum. */
void bench_stats(double *ms, int n, double *median, double *p90, double *min);

extern const bench_item bench_item_build;
extern const bench_item bench_item_scale;
extern const bench_item bench_item_gemm;
extern const bench_item bench_item_gemm_nn;
extern const bench_item bench_item_blas;
extern const bench_item bench_item_attention;
extern const bench_item bench_item_attention_unfused;
extern const bench_item bench_item_layernorm;
extern const bench_item bench_item_conv;
extern const bench_item bench_item_vit;
extern const bench_item bench_item_resnet;
extern const bench_item bench_item_nonlocal;
extern const bench_item bench_item_resnet_nl;
extern const bench_item bench_item_nonlocal_unfused;

#endif
