/* bench.h — the items `pagoda bench` can time.
 *
 * Adding an item: write its run function in bench_items.c (operators), bench_blocks.c (model
 * blocks) or bench_models.c (whole models), timing it with time_runs (bench_items.h) or
 * bench_time here, declare its bench_item below, and add one line to the items table in
 * bench.c; one more line in the suites table there puts it in a suite. */
#ifndef PAGODA_BENCH_H
#define PAGODA_BENCH_H

#include "pagoda.h"
#include "pagoda_util.h"

typedef struct bench_opts {
    /* Explicit counts; below 0: derived from budget_ms (warm-ups take up to a tenth of it,
     * timed runs the rest, at least 3). */
    int repeat, warmup;
    double budget_ms; /* per item */
} bench_opts;

/* What a result contributes to the device's measured peak (the `peak` item). */
/* BENCH_PEAK_LOWP: an fp16 or int8 peak, reported beside the fp32 one but not the roof that
 * float32 results are placed under. */
enum { BENCH_PEAK_NONE = 0, BENCH_PEAK_FLOPS = 1, BENCH_PEAK_BYTES = 2, BENCH_PEAK_LOWP = 3 };

typedef struct bench_result {
    char name[64]; /* the spec, e.g. "gemm:197,768,768": results are matched by it */
    double median_ms, p90_ms, min_ms;
    double compile_ms;
    double flops, bytes; /* per run; 0 when not meaningful */
    int repeat, warmup;
    char extra_key[32]; /* optional extra number for the JSON record */
    double extra;
    char note[24];    /* optional word printed after the numbers and recorded ("algorithm") */
    char params[160]; /* optional JSON object text, e.g. {"M":197,"N":768,"K":768} */
    int peak_kind;    /* BENCH_PEAK_* */
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

/* Monotonic wall-clock time in milliseconds. */
double bench_now_ms(void);

/* Sorts ms[0..n) and computes its median, 90th percentile and minimum. */
void bench_stats(double *ms, int n, double *median, double *p90, double *min);

/* Times fn(state): one untimed first run (its program builds are b->compile_ms), the warm-ups,
 * then the timed runs, each drained with pgd_ctx_finish; counts from `o`. Fills b's times,
 * compile_ms, repeat and warmup. */
int bench_time(pgd_ctx *ctx, int (*fn)(void *state, pgd_error **err), void *state,
               const bench_opts *o, bench_result *b, pgd_error **err);

/* Updates the one-line progress display (stderr on a terminal only; a no-op otherwise). */
void bench_progress(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* What one `pagoda bench` argument names (bench_spec_check). */
enum { BENCH_SPEC_ITEM = 0, BENCH_SPEC_SUITE = 1, BENCH_SPEC_UNKNOWN = -1, BENCH_SPEC_BAD = -2 };

/* Classifies `arg` as collect_specs does, without touching a device: a suite name, a known item
 * whose spec parses (*item set), an unknown item, or a known item whose spec does not parse
 * (*item set). *item is NULL for a suite or an unknown item. */
int bench_spec_check(const char *arg, const bench_item **item);

/* pagoda bench --compare FILE...: prints the saved bench files as one table (bench_compare.c).
 * Returns the exit status. */
int bench_compare(char **files, int nfiles);

extern const bench_item bench_item_build;
extern const bench_item bench_item_peak;
extern const bench_item bench_item_scale;
extern const bench_item bench_item_launch;
extern const bench_item bench_item_gemm;
extern const bench_item bench_item_gemm_nn;
extern const bench_item bench_item_transpose;
extern const bench_item bench_item_matmul;
extern const bench_item bench_item_softmax_axis;
extern const bench_item bench_item_maxpool_idx;
extern const bench_item bench_item_blas;
extern const bench_item bench_item_attention;
extern const bench_item bench_item_attention_unfused;
extern const bench_item bench_item_layernorm;
extern const bench_item bench_item_conv;
extern const bench_item bench_item_mixer;
extern const bench_item bench_item_dinov2_s14;
extern const bench_item bench_item_swin_t;
extern const bench_item bench_item_swin_s;
extern const bench_item bench_item_patch_embed;
extern const bench_item bench_item_vit;
extern const bench_item bench_item_vit_s16;
extern const bench_item bench_item_vit_ti16;
extern const bench_item bench_item_resnet;
extern const bench_item bench_item_nonlocal;
extern const bench_item bench_item_resnet_nl;
extern const bench_item bench_item_nonlocal_unfused;
extern const bench_item bench_item_gat;
extern const bench_item bench_item_detr;
extern const bench_item bench_item_gpt2;
extern const bench_item bench_item_throughput;
extern const bench_item bench_item_onnx;
/* 1 when spec names an ONNX file ("path.onnx" or "path.onnx:B"). */
int bench_is_onnx(const char *spec);

#endif
