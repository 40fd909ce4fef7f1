/* bench_peak.c — the `peak` item: the device's fp32 FMA rate and global memory bandwidth,
 * measured with Pagoda's own microkernels (cl/peak.cl), so that every other result can be
 * placed under this device's roofline. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "bench.h"
#include "bench_embed.h"

/* The FMA variants tried; the best one is the device's peak. A CPU driver that vectorises
 * across work-items wants narrow vectors and many chains, a GPU the opposite. */
static const struct {
    int vec, chains;
} fma_variants[] = {{4, 8}, {8, 8}, {8, 16}, {16, 4}, {16, 8}, {16, 16}},
  /* Mesa llvmpipe compiles each kernel for its work-group shape at the first launch and takes
   * minutes over the long bodies above; a short body still fills its SIMD lanes. */
    fma_variants_soft[] = {{4, 4}};

/* One launch of either microkernel should last about this long: long enough that launch
 * overhead is noise, short enough for a small budget. */
#define PEAK_TARGET_MS 20.0

typedef struct peak_state {
    pgd_kernel *k;
    size_t global, local;
} peak_state;

static int peak_once(void *p, pgd_error **err)
{
    peak_state *s = p;
    return pgd_kernel_launch(s->k, 1, &s->global, &s->local, err);
}

/* Kernel `function` of peak.cl built with `opts`; *build_ms: the compile time it took. */
static int peak_kernel(pgd_ctx *ctx, const char *opts, const char *function, pgd_kernel **k,
                       double *build_ms, pgd_error **err)
{
    pgd_build_stats s0, s1;
    pgd_ctx_get_build_stats(ctx, &s0);
    int rc = pgd_kernel_create(ctx, "peak", bench_peak_sources[0].text, opts, function, k, err);
    pgd_ctx_get_build_stats(ctx, &s1);
    *build_ms = s1.build_ms - s0.build_ms;
    return rc;
}

/* What a compute peak runs: float or half FMA chains, or 8-bit dot products. */
enum { PEAK_F32, PEAK_F16, PEAK_DOT_SS, PEAK_DOT_US };

/* Grows the loop count (argument 3) until one launch lasts about PEAK_TARGET_MS, then times
 * the launch into *b; *iters: the count it ran with. The first launch is left out: some
 * drivers (PoCL) finish compiling the kernel on it. */
static int calibrate_and_time(pgd_ctx *ctx, peak_state *s, int *iters, const bench_opts *o,
                              bench_result *b, pgd_error **err)
{
    int rc = pgd_kernel_set_value(s->k, 3, sizeof *iters, iters, err);
    if (!rc)
        rc = peak_once(s, err);
    if (!rc)
        rc = pgd_ctx_finish(ctx, err);
    for (int tries = 0; !rc && tries < 12; tries++) {
        rc = pgd_kernel_set_value(s->k, 3, sizeof *iters, iters, err);
        /* The faster of two launches: one slow sample on a busy machine must not stop the
         * growth early. */
        double t = 1e30;
        for (int k = 0; !rc && k < 2; k++) {
            double t0 = bench_now_ms();
            rc = peak_once(s, err);
            if (!rc)
                rc = pgd_ctx_finish(ctx, err);
            double tk = bench_now_ms() - t0;
            t = tk < t ? tk : t;
        }
        if (rc || t >= PEAK_TARGET_MS * 0.5)
            break;
        double grow = t > 0.05 ? PEAK_TARGET_MS / t : 64.0;
        if (grow > 64.0)
            grow = 64.0;
        if ((double)*iters * grow > 4e8)
            break;
        *iters = (int)((double)*iters * grow) + 1;
    }
    if (!rc)
        rc = pgd_kernel_set_value(s->k, 3, sizeof *iters, iters, err);
    if (!rc)
        rc = bench_time(ctx, peak_once, s, o, b, err);
    return rc;
}

/* The kernel's arguments 1 and 2: m, c of the FMA chains (half needs values that stay normal
 * in binary16: 0.999999 rounds to 1 there), or the dot product's packed operands. */
static int peak_args(pgd_kernel *k, int kind, pgd_error **err)
{
    float m = kind == PEAK_F16 ? 0.99f : 0.999999f, c = kind == PEAK_F16 ? 0.01f : 1e-6f;
    unsigned a = 0x01fe02fdu, bb = 0x7f80037cu;
    int dot = kind == PEAK_DOT_SS || kind == PEAK_DOT_US;
    int rc = pgd_kernel_set_value(k, 1, 4, dot ? (const void *)&a : (const void *)&m, err);
    if (!rc)
        rc = pgd_kernel_set_value(k, 2, 4, dot ? (const void *)&bb : (const void *)&c, err);
    return rc;
}

static int run_fma(pgd_ctx *ctx, int kind, int vec, int chains, const bench_opts *o,
                   bench_result *b, pgd_error **err)
{
    char opts[96];
    /* llvmpipe has no fused multiply-add instruction path: fma() there is a slow exact
     * emulation, and its mad() is the fastest multiply-add it has. */
    const char *op = pgd_ctx_get_device(ctx)->software_rasteriser ? "mad" : "fma";
    int dot = kind == PEAK_DOT_SS || kind == PEAK_DOT_US;
    if (dot)
        snprintf(opts, sizeof opts, "-cl-std=CL3.0 -DPEAK_NOSAT -DPEAK_DOT=%s -DPEAK_CHAINS=%d",
                 kind == PEAK_DOT_SS ? "ss" : "us", chains);
    else
        snprintf(opts, sizeof opts, "-DPEAK_VEC=%d -DPEAK_CHAINS=%d -DPEAK_OP=%s%s", vec, chains,
                 op, kind == PEAK_F16 ? " -DPEAK_HALF" : "");
    peak_state s = {NULL, 0, 0};
    double build_ms = 0;
    int rc = peak_kernel(ctx, opts, dot ? "peak_dot" : "peak_fma", &s.k, &build_ms, err);
    if (rc)
        return rc;
    const pgd_device_info *d = pgd_ctx_get_device(ctx);
    s.local = pgd_kernel_get_preferred_work_group(s.k);
    /* Enough groups that every compute unit has several in flight. */
    size_t cus = d->compute_units ? d->compute_units : 1;
    s.global = s.local * cus * 8;
    int64_t outn = (int64_t)s.global;
    pgd_tensor *out = NULL;
    rc = pgd_tensor_create(ctx, 1, &outn, &out, err);
    int iters = 4;
    if (!rc)
        rc = pgd_kernel_set_tensor(s.k, 0, out, err);
    if (!rc)
        rc = peak_args(s.k, kind, err);
    if (!rc)
        rc = calibrate_and_time(ctx, &s, &iters, o, b, err);
    pgd_tensor_destroy(out);
    pgd_kernel_destroy(s.k);
    if (rc)
        return rc;
    if (dot)
        snprintf(b->name, sizeof b->name, "peak:dot8:%sx%d", kind == PEAK_DOT_SS ? "ss" : "us",
                 chains);
    else
        snprintf(b->name, sizeof b->name, "peak:fma:%s%dx%d", kind == PEAK_F16 ? "half" : "float",
                 vec, chains);
    snprintf(b->params, sizeof b->params,
             "{\"vec\":%d,\"chains\":%d,\"op\":\"%s\",\"precision\":\"%s\",\"iters\":%d,"
             "\"global\":%zu,\"local\":%zu}",
             vec, chains, dot ? "dot_acc_sat_4x8packed" : op,
             dot                ? "int8"
             : kind == PEAK_F16 ? "f16"
                                : "f32",
             iters, s.global, s.local);
    b->compile_ms += build_ms;
    /* Operations: 2 per lane and FMA; a 4x8-bit dot product is 4 multiply-adds, 8 operations
     * (as clpeak counts them). */
    b->flops = (dot ? 8.0 : 2.0) * 4.0 * (double)iters * chains * vec * (double)s.global;
    b->peak_kind = kind == PEAK_F32 ? BENCH_PEAK_FLOPS : BENCH_PEAK_LOWP;
    return 0;
}

static int run_stream(pgd_ctx *ctx, int copy, const bench_opts *o, bench_result *b, pgd_error **err)
{
    const pgd_device_info *d = pgd_ctx_get_device(ctx);
    /* Far larger than any cache (hundreds of MiB), within the device's allocation limit. */
    uint64_t bytes = (uint64_t)256 << 20;
    if (bytes > d->max_alloc)
        bytes = d->max_alloc & ~(uint64_t)15;
    if (bytes * (copy ? 2 : 1) > d->global_mem / 2)
        bytes = (d->global_mem / (copy ? 8 : 4)) & ~(uint64_t)15;
    uint32_t n4 = (uint32_t)(bytes / 16);
    const char *kname = copy ? "peak_copy" : "peak_read";
    peak_state s = {NULL, 0, 0};
    double build_ms = 0;
    int rc = peak_kernel(ctx, NULL, kname, &s.k, &build_ms, err);
    if (rc)
        return rc;
    s.local = pgd_kernel_get_preferred_work_group(s.k);
    /* PEAK_PER_ITEM (16) float4s per work-item: the buffer is a whole number of groups. */
    size_t per_group = s.local * 16;
    n4 = (uint32_t)(n4 / per_group * per_group);
    bytes = (uint64_t)n4 * 16;
    s.global = n4 / 16;
    int64_t src_n = (int64_t)(bytes / sizeof(float));
    int64_t dst_n = copy ? src_n : (int64_t)s.global;
    pgd_tensor *src = NULL, *dst = NULL;
    rc = pgd_tensor_create(ctx, 1, &src_n, &src, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 1, &dst_n, &dst, err);
    /* Touch the source once so the first timed pass does not pay for page faults. */
    if (!rc)
        rc = pgd_tensor_fill(src, 0.0f, err);
    if (!rc)
        rc = pgd_kernel_set_tensor(s.k, 0, src, err);
    if (!rc)
        rc = pgd_kernel_set_tensor(s.k, 1, dst, err);
    if (!rc)
        rc = bench_time(ctx, peak_once, &s, o, b, err);
    pgd_tensor_destroy(src);
    pgd_tensor_destroy(dst);
    pgd_kernel_destroy(s.k);
    if (rc)
        return rc;
    snprintf(b->name, sizeof b->name, "peak:%s", copy ? "copy" : "read");
    snprintf(b->params, sizeof b->params, "{\"buffer_bytes\":%llu,\"global\":%zu,\"local\":%zu}",
             (unsigned long long)bytes, s.global, s.local);
    b->compile_ms += build_ms;
    /* Bytes moved: read (and written, for the copy), plus the read kernel's one float per item. */
    b->bytes = (double)bytes * (copy ? 2.0 : 1.0) + (copy ? 0.0 : 4.0 * (double)s.global);
    b->peak_kind = BENCH_PEAK_BYTES;
    return 0;
}

static int validate_peak(const char *spec)
{
    return strcmp(spec, "peak") && strcmp(spec, "peak:fma") && strcmp(spec, "peak:bw") ? -1 : 0;
}

/* The fp16 FMA and int8 dot-product variants, run where the device has the extension. */
static const struct {
    int kind, vec, chains;
} lowp_variants[] = {{PEAK_F16, 8, 8},    {PEAK_F16, 16, 8},    {PEAK_F16, 16, 16},
                     {PEAK_DOT_SS, 1, 8}, {PEAK_DOT_SS, 1, 16}, {PEAK_DOT_US, 1, 8},
                     {PEAK_DOT_US, 1, 16}};

static int run_peak(pgd_ctx *ctx, const char *spec, const bench_opts *o, bench_result *res,
                    int *nres, int cap, pgd_error **err)
{
    int fma = strcmp(spec, "peak:bw") != 0, bw = strcmp(spec, "peak:fma") != 0;
    int n = 0, rc = 0;
    int soft = pgd_ctx_get_device(ctx)->software_rasteriser;
    size_t nv = soft ? sizeof fma_variants_soft / sizeof fma_variants_soft[0]
                     : sizeof fma_variants / sizeof fma_variants[0];
    for (size_t i = 0; fma && !rc && i < nv && n < cap; i++) {
        int vec = soft ? fma_variants_soft[i].vec : fma_variants[i].vec;
        int chains = soft ? fma_variants_soft[i].chains : fma_variants[i].chains;
        bench_progress("peak: fma float%dx%d", vec, chains);
        rc = run_fma(ctx, PEAK_F32, vec, chains, o, &res[n], err);
        if (!rc)
            n++;
    }
    pgd_device_lowp l;
    memset(&l, 0, sizeof l);
    l.size = sizeof l;
    if (pgd_device_get_lowp(pgd_ctx_get_device(ctx), &l, NULL))
        memset(&l, 0, sizeof l);
    for (size_t i = 0;
         fma && !soft && !rc && i < sizeof lowp_variants / sizeof lowp_variants[0] && n < cap;
         i++) {
        int kind = lowp_variants[i].kind;
        if (kind == PEAK_F16 ? !l.fp16 : !(l.int_dot && (l.int_dot_caps & 1)))
            continue;
        bench_progress("peak: %s", kind == PEAK_F16 ? "fma half" : "dot8");
        rc = run_fma(ctx, kind, lowp_variants[i].vec, lowp_variants[i].chains, o, &res[n], err);
        if (!rc)
            n++;
    }
    for (int copy = 0; bw && !rc && copy < 2 && n < cap; copy++) {
        bench_progress("peak: %s", copy ? "copy" : "read");
        rc = run_stream(ctx, copy, o, &res[n], err);
        if (!rc)
            n++;
    }
    *nres = n;
    return rc;
}

const bench_item bench_item_peak = {
    "peak", "peak[:fma|:bw]",
    "the device's fp32 FMA rate, its fp16 FMA and int8 dot-product rates where it has them, and "
    "global memory bandwidth (cl/peak.cl microkernels)",
    validate_peak, run_peak};
