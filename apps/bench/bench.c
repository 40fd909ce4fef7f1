/* bench.c — `pagoda bench`: timed kernel runs and program builds, suites, the device's measured
 * peak, JSON output and comparisons.
 *
 * Each item is run once untimed (its program builds are timed apart as compile_ms, so compile
 * cost never pollutes the run times), warmed up, then timed with the queue drained around every
 * run; the report gives median, p90 and min. Counts come from --budget-ms (per item) unless
 * --repeat / --warmup give them. The `peak` item measures the device's FMA rate and bandwidth
 * first, and every later result with a FLOP or byte count is placed under that roofline. */
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "app.h"
#include "bench.h"
#include "bench_cmd.h"
#include "pgd_version.h"
#include "stream_mpi.h"

static const char usage[] =
    "usage: pagoda bench [--device SEL|all] [--budget-ms MS] [--repeat N] [--warmup N]\n"
    "                    [--precision f32|f16|int8] [--json] [--output FILE] ITEM|SUITE...\n"
    "       pagoda bench --compare A.json B.json...\n"
    "       pagoda bench --list\n"
    "\n"
    "Times kernels, models and program builds on one device (or every device with --device\n"
    "all). Each item runs once untimed (its compile time is reported apart), is warmed up,\n"
    "then timed; median, p90 and min are reported with GFLOP/s, GB/s and, after 'peak', the\n"
    "fraction of the device's measured FMA peak and the arithmetic intensity (FLOP/byte).\n"
    "\n"
    "Suites:\n"
    "%s"
    "\n"
    "Items:\n"
    "%s"
    "\n"
    "Options:\n"
    "  --device SEL     device selector (see 'pagoda devices --help'), or 'all'\n"
    "  --budget-ms MS   time per item for warm-ups (up to a tenth) and timed runs (at least 3);\n"
    "                   default 1000\n"
    "  --repeat N       timed runs per item (overrides the budget)\n"
    "  --mpi            under mpirun (MPI build): every rank runs the items (on device\n"
    "                   local-rank mod n of a --device P:D,P:D list); one document with a\n"
    "                   run per rank (\"rank\")\n"
    "  --warmup N       untimed runs before timing (overrides the budget; 3 with --repeat)\n"
    "  --precision P    f32 (default), f16 or int8 arithmetic for the model items' linear\n"
    "                   layers; a device without the capability is refused (recorded in the\n"
    "                   JSON as \"precision\")\n"
    "  --json           print the results as JSON on stdout instead of the table\n"
    "  --output FILE    write the results as JSON to FILE, a regular file or absent (a\n"
    "                   directory, symlink, FIFO or device such as /dev/null is refused);\n"
    "                   it appears complete or not at all; '-': stdout\n"
    "  --compare F...   print saved JSON files (pagoda's or tools/bench/bench-peers') side by "
    "side,\n"
    "                   matched by item spec, with the ratio first/other (above 1: the other\n"
    "                   is faster)\n"
    "  --list           list the suites and items\n"
    "  -h, --help       show this help\n";

/* ---- the items and suites ------------------------------------------------------------------ */

/* Every item the CLI knows: one line each. */
static const bench_item *const items[] = {
    &bench_item_build,
    &bench_item_peak,
    &bench_item_scale,
    &bench_item_launch,
    &bench_item_gemm_nn,
    &bench_item_gemm,
    &bench_item_attention_unfused,
    &bench_item_attention,
    &bench_item_layernorm,
    &bench_item_transpose,
    &bench_item_matmul,
    &bench_item_softmax_axis,
    &bench_item_maxpool_idx,
    &bench_item_patch_embed,
    &bench_item_vit_ti16,
    &bench_item_vit_s16,
    &bench_item_vit,
    &bench_item_conv,
    &bench_item_resnet,
    &bench_item_resnet_nl,
    &bench_item_mixer,
    &bench_item_dinov2_s14,
    &bench_item_swin_t,
    &bench_item_swin_s,
    &bench_item_detr,
    &bench_item_gpt2,
    &bench_item_nonlocal,
    &bench_item_nonlocal_unfused,
    &bench_item_gat,
    &bench_item_throughput,
    &bench_item_onnx,
#if PGD_HAVE_OPENBLAS
    &bench_item_blas,
#endif
    NULL,
};

/* The suites: one item spec a line. A spec whose item is not registered in this build is
 * skipped with a note, so a suite can name items that other work adds later. */
static const struct {
    const char *suite, *spec;
} suites[] = {
    /* ViT-B/16 linear layers (M = 197 tokens): qkv, proj, fc1, fc2. */
    {"kernels", "gemm:197,2304,768"},
    {"kernels", "gemm:197,768,768"},
    {"kernels", "gemm:197,3072,768"},
    {"kernels", "gemm:197,768,3072"},
    /* ResNet-50 convolutions as GEMMs (M = output pixels, N = out channels, K = C·kh·kw). */
    {"kernels", "gemm:3136,256,64"},    /* layer1 1x1 expand, 56x56 */
    {"kernels", "gemm:784,128,1152"},   /* layer2 3x3, 28x28 */
    {"kernels", "gemm:196,256,2304"},   /* layer3 3x3, 14x14 */
    {"kernels", "gemm:49,2048,512"},    /* layer4 1x1 expand, 7x7 */
    {"kernels", "attention:197,12,64"}, /* ViT-B/16 at 224 */
    {"kernels", "attention:785,12,64"}, /* ViT-B/16 at 448 */
    {"kernels", "attention:3136,1,64"}, /* one head over 56x56 positions */
    {"kernels", "layernorm:197,768"},
    {"kernels", "patch_embed:1,768"},
    /* ResNet-50's convolutions as they run (N,H,W,Cin,Cout,K,stride) and the non-local block */
    {"kernels", "conv:1,224,224,3,64,7,2"},  /* stem 7x7 */
    {"kernels", "conv:1,56,56,64,64,1,1"},   /* layer1 1x1 */
    {"kernels", "conv:1,56,56,64,64,3,1"},   /* layer1 3x3 */
    {"kernels", "conv:1,28,28,128,128,3,1"}, /* layer2 3x3 */
    {"kernels", "conv:1,14,14,256,256,3,1"}, /* layer3 3x3 */
    {"kernels", "conv:1,7,7,512,512,3,1"},   /* layer4 3x3 */
    {"kernels", "nonlocal:56,56,256"},
    {"kernels", "nonlocal-unfused:56,56,256"},
    {"models", "vit_ti16:1"},
    {"models", "vit_ti16:8"},
    {"models", "vit_s16:1"},
    {"models", "vit_s16:8"},
    {"models", "vit_b16:1"},
    {"models", "vit_b16:8"},
    {"models", "resnet50:1"},
    {"models", "resnet50:8"},
    {"models", "resnet50-nl:1"},
    {"models", "resnet50-nl:8"},
    {"models", "swin_t:1"},
    {"models", "swin_t:8"},
    {"models", "swin_s:1"},
    {"models", "swin_s:8"},
    {"models", "dinov2_s14:8"},
    {"models", "mixer_b16:1"},
    {"models", "mixer_b16:8"},
    {"models", "detr_r50:1"},
};
#define NSUITE_LINES (sizeof suites / sizeof suites[0])

static const bench_item *find_item(const char *spec)
{
    if (bench_is_onnx(spec))
        return &bench_item_onnx;
    for (size_t i = 0; items[i]; i++) {
        size_t n = strlen(items[i]->prefix);
        if (!strncmp(spec, items[i]->prefix, n) && (spec[n] == 0 || spec[n] == ':'))
            return items[i];
    }
    return NULL;
}

static int is_suite(const char *name)
{
    if (!strcmp(name, "peak"))
        return 0; /* an item of its own */
    for (size_t i = 0; i < NSUITE_LINES; i++)
        if (!strcmp(suites[i].suite, name))
            return 1;
    return 0;
}

int bench_spec_check(const char *arg, const bench_item **item)
{
    *item = NULL;
    if (is_suite(arg))
        return BENCH_SPEC_SUITE;
    const bench_item *it = find_item(arg);
    if (!it)
        return BENCH_SPEC_UNKNOWN;
    *item = it;
    return it->validate && it->validate(arg) != 0 ? BENCH_SPEC_BAD : BENCH_SPEC_ITEM;
}

static void help_text(char *suite_buf, size_t ssize, char *item_buf, size_t isize)
{
    size_t used = 0;
    item_buf[0] = 0;
    for (size_t i = 0; items[i] && used < isize; i++) {
        int w = snprintf(item_buf + used, isize - used, "  %-24s %s\n", items[i]->syntax,
                         items[i]->help);
        if (w < 0)
            break;
        used += (size_t)w;
    }
    used = 0;
    suite_buf[0] = 0;
    for (size_t i = 0; i < NSUITE_LINES && used < ssize; i++) {
        if (i > 0 && !strcmp(suites[i].suite, suites[i - 1].suite))
            continue;
        int w = snprintf(suite_buf + used, ssize - used, "  %-8s", suites[i].suite);
        for (size_t j = i; w > 0 && j < NSUITE_LINES && !strcmp(suites[j].suite, suites[i].suite);
             j++) {
            used += (size_t)w;
            if (used >= ssize)
                break;
            w = snprintf(suite_buf + used, ssize - used, " %s%s", suites[j].spec,
                         find_item(suites[j].spec) ? "" : " (n/a)");
        }
        if (w < 0 || used + (size_t)w >= ssize)
            break;
        used += (size_t)w;
        w = snprintf(suite_buf + used, ssize - used, "\n");
        used += (size_t)(w > 0 ? w : 0);
    }
    if (used < ssize)
        snprintf(suite_buf + used, ssize - used, "  %-8s %s\n", "peak",
                 "(the item) FMA rate and bandwidth of the device");
}

/* ---- statistics, timing, progress ---------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void bench_stats(double *ms, int n, double *median, double *p90, double *min)
{
    qsort(ms, (size_t)n, sizeof *ms, cmp_double);
    *min = ms[0];
    *median = n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
    int i90 = (int)ceil(0.9 * n) - 1;
    *p90 = ms[i90 < 0 ? 0 : i90];
}

double bench_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static struct {
    int on;
    char prefix[96];
    double last_ms;
    int shown;
} progress;

void bench_progress(const char *fmt, ...)
{
    if (!progress.on)
        return;
    double t = bench_now_ms();
    /* Ten updates a second are plenty, and keep a terminal over ssh responsive. */
    if (progress.shown && t - progress.last_ms < 100.0)
        return;
    progress.last_ms = t;
    char msg[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\r%s %.*s\033[K", progress.prefix, 70, msg);
    fflush(stderr);
    progress.shown = 1;
}

static void progress_clear(void)
{
    if (progress.on && progress.shown) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
        progress.shown = 0;
    }
}

/* The most timed runs one item may take, whatever the budget. */
#define BENCH_MAX_RUNS 100000

int bench_time(pgd_ctx *ctx, int (*fn)(void *state, pgd_error **err), void *state,
               const bench_opts *o, bench_result *b, pgd_error **err)
{
    pgd_build_stats s0, s1;
    pgd_ctx_get_build_stats(ctx, &s0);
    bench_progress("first run (builds)");
    int rc = fn(state, err);
    if (!rc)
        rc = pgd_ctx_finish(ctx, err);
    pgd_ctx_get_build_stats(ctx, &s1);
    if (rc)
        return rc;
    double budget = o->budget_ms > 0 ? o->budget_ms : 1000.0;
    double start = bench_now_ms();
    int warm = 0;
    /* Warm-ups: as many as asked, or from the budget up to a tenth of it (1 to 10). */
    while (!rc &&
           (o->warmup >= 0 ? warm < o->warmup
                           : warm < 1 || (warm < 10 && bench_now_ms() - start < budget * 0.1))) {
        bench_progress("warm-up %d", warm + 1);
        rc = fn(state, err);
        if (!rc)
            rc = pgd_ctx_finish(ctx, err);
        warm++;
    }
    int cap = o->repeat > 0 ? o->repeat : 64, n = 0;
    double *ms = malloc((size_t)cap * sizeof *ms);
    if (!ms)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "%d run times", cap);
    for (;;) {
        if (rc)
            break;
        if (o->repeat > 0 ? n >= o->repeat
                          : n >= 3 && (bench_now_ms() - start >= budget || n >= BENCH_MAX_RUNS))
            break;
        if (n == cap) {
            double *grown = realloc(ms, (size_t)cap * 2 * sizeof *ms);
            if (!grown) {
                rc = pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "%d run times", cap * 2);
                break;
            }
            ms = grown;
            cap *= 2;
        }
        if (o->repeat > 0)
            bench_progress("run %d/%d", n + 1, o->repeat);
        else
            bench_progress("run %d (%.0f of %.0f ms)", n + 1, bench_now_ms() - start, budget);
        double t0 = bench_now_ms();
        rc = fn(state, err);
        if (!rc)
            rc = pgd_ctx_finish(ctx, err);
        ms[n++] = bench_now_ms() - t0;
    }
    if (!rc) {
        bench_stats(ms, n, &b->median_ms, &b->p90_ms, &b->min_ms);
        b->compile_ms = s1.build_ms - s0.build_ms;
        b->repeat = n;
        b->warmup = warm;
    }
    free(ms);
    return rc;
}

/* ---- running ------------------------------------------------------------------------------- */

typedef struct spec_entry {
    const char *spec;
    const bench_item *item; /* NULL: skipped with `note` */
    const char *note;
} spec_entry;

typedef struct peak_numbers {
    double gflops, gbs;
    char gflops_from[64], gbs_from[64];
} peak_numbers;

static void host_json(json_t *doc)
{
    char host[256] = "unknown", cpu[256] = "unknown";
    gethostname(host, sizeof host);
    host[sizeof host - 1] = 0;
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, "model name", 10))
                continue;
            const char *v = strchr(line, ':');
            if (v) {
                v++;
                v += strspn(v, " \t");
                snprintf(cpu, sizeof cpu, "%.*s", (int)strcspn(v, "\n"), v);
            }
            break;
        }
        fclose(f);
    }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    /* On a shared machine the load explains a slow run: recorded, not corrected for. */
    double load = -1;
    f = fopen("/proc/loadavg", "r");
    if (f) {
        /* "0.42 0.37 0.30 1/345 6789": the first word */
        char line[128] = "";
        if (fgets(line, sizeof line, f)) {
            line[strcspn(line, " \n")] = 0;
            if (pgd_parse_double(line, 0, 1e9, &load))
                load = -1;
        }
        fclose(f);
    }
    json_t *h = json_pack("{s:o, s:o, s:i}", "hostname", app_json_text(host), "cpu_model",
                          app_json_text(cpu), "cores", (int)cores);
    if (load >= 0)
        json_object_set_new(h, "loadavg_1min", json_real(load));
    json_object_set_new(doc, "host", h);
}

static json_t *result_json(const char *item, const bench_result *b, const peak_numbers *pk,
                           double gflops, double gbs)
{
    json_t *params = NULL;
    if (b->params[0])
        params = json_loads(b->params, 0, NULL);
    json_t *r = json_pack("{s:o, s:o, s:o, s:o, s:f, s:f, s:f, s:i, s:i, s:f}", "item",
                          app_json_text(item), "spec", app_json_text(b->name), "name",
                          app_json_text(b->name), "params", params ? params : json_object(),
                          "median_ms", b->median_ms, "p90_ms", b->p90_ms, "min_ms", b->min_ms,
                          "repeat", b->repeat, "warmup", b->warmup, "compile_ms", b->compile_ms);
    if (b->flops > 0) {
        json_object_set_new(r, "flops", json_real(b->flops));
        json_object_set_new(r, "gflops", json_real(gflops));
    }
    if (b->bytes > 0) {
        json_object_set_new(r, "bytes", json_real(b->bytes));
        json_object_set_new(r, "gbs", json_real(gbs));
    }
    if (b->flops > 0 && b->bytes > 0)
        json_object_set_new(r, "intensity", json_real(b->flops / b->bytes));
    if (b->peak_kind != BENCH_PEAK_NONE)
        json_object_set_new(r, "peak_kind",
                            json_string(b->peak_kind == BENCH_PEAK_FLOPS  ? "flops"
                                        : b->peak_kind == BENCH_PEAK_LOWP ? "lowp_ops"
                                                                          : "bytes"));
    else if (b->flops > 0 && pk->gflops > 0)
        json_object_set_new(r, "peak_fraction", json_real(gflops / pk->gflops));
    if (b->peak_kind == BENCH_PEAK_NONE && b->bytes > 0 && pk->gbs > 0)
        json_object_set_new(r, "bandwidth_fraction", json_real(gbs / pk->gbs));
    if (b->peak_kind == BENCH_PEAK_NONE && b->flops > 0 && b->bytes > 0 && pk->gflops > 0 &&
        pk->gbs > 0) {
        /* The roofline's bound at this intensity: min(peak, intensity × bandwidth). */
        double roof = fmin(pk->gflops, b->flops / b->bytes * pk->gbs);
        json_object_set_new(r, "roofline_fraction", json_real(gflops / roof));
    }
    if (b->extra_key[0])
        json_object_set_new(r, b->extra_key, json_real(b->extra));
    if (b->note[0])
        json_object_set_new(r, "algorithm", json_string(b->note));
    return r;
}

/* What one device's run gathers while its items run. */
typedef struct device_run {
    pgd_ctx *ctx;
    const pgd_device_info *d;
    const bench_opts *o;
    int table;       /* print the table */
    peak_numbers pk; /* the best of the peak item so far */
    json_t *results, *skipped;
    int *failures;
} device_run;

static void print_table_header(pgd_ctx *ctx)
{
    const pgd_device_info *d = pgd_ctx_get_device(ctx);
    printf("device %d:%d %s (%s, driver %s)\n", d->platform_index, d->device_index, d->name,
           d->platform, d->driver_version);
    char kp[128], ap[64];
    const char *from = pgd_ctx_get_kernel_params(ctx, kp, sizeof kp);
    const char *afrom = pgd_ctx_get_attention_params(ctx, ap, sizeof ap);
    char entry[96];
    printf("kernels gemm %s (%s), attention %s (%s), params %s\n", kp, from, ap, afrom,
           pgd_ctx_get_params_entry(ctx, entry, sizeof entry));
    printf("%-30s %10s %10s %10s %9s %8s %6s %7s %10s\n", "item", "median ms", "p90 ms", "min ms",
           "GFLOP/s", "GB/s", "%peak", "FLOP/B", "compile ms");
}

/* The order the specs run in: the peak first, so every other result can be placed under it.
 * Returns how many of order[0..256) it filled. */
static int peak_first_order(const spec_entry *specs, int nspecs, int order[256])
{
    int norder = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < nspecs && norder < 256; i++)
            if ((specs[i].item == &bench_item_peak) == (pass == 0))
                order[norder++] = i;
    return norder;
}

/* The peak is the best a device did: its fastest run, not its median (on a shared machine the
 * median of a microkernel drifts with the load; the fastest run drifts least). */
static void note_peak(peak_numbers *pk, const bench_result *b)
{
    double best_gflops = b->flops > 0 ? b->flops / (b->min_ms * 1e6) : 0;
    double best_gbs = b->bytes > 0 ? b->bytes / (b->min_ms * 1e6) : 0;
    if (b->peak_kind == BENCH_PEAK_FLOPS && best_gflops > pk->gflops) {
        pk->gflops = best_gflops;
        snprintf(pk->gflops_from, sizeof pk->gflops_from, "%s", b->name);
    }
    if (b->peak_kind == BENCH_PEAK_BYTES && best_gbs > pk->gbs) {
        pk->gbs = best_gbs;
        snprintf(pk->gbs_from, sizeof pk->gbs_from, "%s", b->name);
    }
}

static void print_result_row(const bench_result *b, const peak_numbers *pk, double gflops,
                             double gbs)
{
    char gf[16] = "-", bw[16] = "-", frac[16] = "-", ai[16] = "-";
    if (b->flops > 0)
        snprintf(gf, sizeof gf, "%.1f", gflops);
    if (b->bytes > 0)
        snprintf(bw, sizeof bw, "%.1f", gbs);
    if (b->peak_kind != BENCH_PEAK_NONE)
        ; /* the peak itself */
    else if (b->flops > 0 && pk->gflops > 0)
        snprintf(frac, sizeof frac, "%.0f%%", 100.0 * gflops / pk->gflops);
    else if (b->peak_kind == BENCH_PEAK_NONE && b->bytes > 0 && pk->gbs > 0)
        snprintf(frac, sizeof frac, "%.0f%%bw", 100.0 * gbs / pk->gbs);
    if (b->flops > 0 && b->bytes > 0)
        snprintf(ai, sizeof ai, "%.1f", b->flops / b->bytes);
    printf("%-30s %10.3f %10.3f %10.3f %9s %8s %6s %7s %10.1f%s%s\n", b->name, b->median_ms,
           b->p90_ms, b->min_ms, gf, bw, frac, ai, b->compile_ms, b->note[0] ? "  " : "", b->note);
}

/* Records (and prints) the results one item gave. */
static void record_results(device_run *dr, const bench_item *item, const bench_result *res,
                           int nres)
{
    for (int j = 0; j < nres; j++) {
        const bench_result *b = &res[j];
        double gflops = b->flops > 0 ? b->flops / (b->median_ms * 1e6) : 0;
        double gbs = b->bytes > 0 ? b->bytes / (b->median_ms * 1e6) : 0;
        note_peak(&dr->pk, b);
        if (dr->table)
            print_result_row(b, &dr->pk, gflops, gbs);
        json_array_append_new(dr->results, result_json(item->prefix, b, &dr->pk, gflops, gbs));
    }
    fflush(stdout);
}

/* Runs spec e, the index-th (from 1) of n. EXIT_USAGE stops the device's run; any other
 * failure is reported, recorded among the skipped and counted, and the run goes on. */
static int run_spec(device_run *dr, const spec_entry *e, int index, int n)
{
    if (!e->item) {
        fprintf(stderr, "pagoda: note: %s: %s (skipped)\n", e->spec, e->note);
        json_array_append_new(dr->skipped, json_pack("{s:o, s:o}", "spec", app_json_text(e->spec),
                                                     "reason", app_json_text(e->note)));
        return EXIT_OK;
    }
    snprintf(progress.prefix, sizeof progress.prefix, "[%d/%d] %s:", index, n, e->spec);
    progress.shown = 0;
    bench_progress("starting");
    bench_result res[64];
    int nres = 0;
    memset(res, 0, sizeof res);
    pgd_error *err = NULL;
    int r = e->item->run(dr->ctx, e->spec, dr->o, res, &nres, 64, &err);
    progress_clear();
    if (r == EXIT_USAGE) {
        pgd_error_destroy(err);
        return EXIT_USAGE;
    }
    if (r) {
        /* Every item sets an error with its status; one that did not still gets a message. */
        if (!err)
            pgd_error_set(&err, r, "%s failed: %s", e->spec, pgd_status_str(r));
        /* One failing item does not stop a suite: it is reported and recorded. */
        json_array_append_new(
            dr->skipped, json_pack("{s:o, s:o}", "spec", app_json_text(e->spec), "reason",
                                   app_json_text(err ? pgd_error_get_message(err) : "failed")));
        char what[512];
        snprintf(what, sizeof what, "%s on %s", e->spec, dr->d->name);
        app_fail_in(what, err);
        (*dr->failures)++;
        return EXIT_OK;
    }
    record_results(dr, e->item, res, nres);
    return EXIT_OK;
}

static void print_peak(const peak_numbers *pk)
{
    printf("peak:");
    if (pk->gflops > 0)
        printf(" %.1f GFLOP/s fp32 FMA (%s)%s", pk->gflops, pk->gflops_from,
               pk->gbs > 0 ? "," : "");
    if (pk->gbs > 0)
        printf(" %.1f GB/s global memory (%s)", pk->gbs, pk->gbs_from);
    printf("\n");
}

static json_t *peak_json(const peak_numbers *pk)
{
    json_t *p = json_object();
    if (pk->gflops > 0) {
        json_object_set_new(p, "gflops", json_real(pk->gflops));
        json_object_set_new(p, "gflops_from", json_string(pk->gflops_from));
    }
    if (pk->gbs > 0) {
        json_object_set_new(p, "gbs", json_real(pk->gbs));
        json_object_set_new(p, "gbs_from", json_string(pk->gbs_from));
    }
    return p;
}

/* The JSON record of one device's run; takes the results and skipped arrays. */
static json_t *device_run_json(device_run *dr)
{
    const pgd_device_info *d = dr->d;
    json_t *run =
        json_pack("{s:o, s:s, s:s, s:s}", "device", app_device_json(d), "driver", d->driver_version,
                  "platform_version", d->platform_version, "precision", app_precision(dr->ctx));
    if (dr->pk.gflops > 0 || dr->pk.gbs > 0)
        json_object_set_new(run, "peak", peak_json(&dr->pk));
    /* Which GEMM kernel parameters ran, and whether pgd_tune chose them. */
    char kp[128];
    const char *from = pgd_ctx_get_kernel_params(dr->ctx, kp, sizeof kp);
    char ap[64];
    const char *afrom = pgd_ctx_get_attention_params(dr->ctx, ap, sizeof ap);
    json_object_set_new(run, "kernel_params",
                        json_pack("{s:s, s:s, s:s, s:s}", "gemm", kp, "from", from, "attention", ap,
                                  "attention_from", afrom));
    /* which entry ran: "db:<name>" (the shipped database), "tuned:<store key>" or "options" */
    char entry[96];
    json_object_set_new(run, "params",
                        json_string(pgd_ctx_get_params_entry(dr->ctx, entry, sizeof entry)));
    json_object_set_new(run, "results", dr->results);
    json_object_set_new(run, "skipped", dr->skipped);
    return run;
}

static int run_device(const char *selector, const spec_entry *specs, int nspecs,
                      const bench_opts *o, int table, json_t *runs, int *failures)
{
    device_run dr = {.o = o, .table = table, .failures = failures};
    int open_rc = app_ctx_open(selector, &dr.ctx);
    if (open_rc)
        return open_rc;
    dr.d = pgd_ctx_get_device(dr.ctx);
    if (table)
        print_table_header(dr.ctx);
    dr.results = json_array();
    dr.skipped = json_array();
    int rc = EXIT_OK;
    int order[256], norder = peak_first_order(specs, nspecs, order);
    for (int oi = 0; oi < norder && rc == EXIT_OK; oi++)
        rc = run_spec(&dr, &specs[order[oi]], oi + 1, norder);
    if (table && (dr.pk.gflops > 0 || dr.pk.gbs > 0))
        print_peak(&dr.pk);
    json_array_append_new(runs, device_run_json(&dr));
    pgd_ctx_destroy(dr.ctx);
    return rc;
}

/* ---- the command --------------------------------------------------------------------------- */

static int parse_count(const char *arg, const char *name, long lo, long hi, long *out)
{
    int64_t v;
    if (pgd_parse_int64(arg, lo, hi, &v))
        return app_usage_error("bench ", "--%s wants a whole number from %ld to %ld, got '%s'",
                               name, lo, hi, arg);
    *out = (long)v;
    return 0;
}

/* What the command line asks for. */
typedef struct bench_args {
    const char *device, *out_path;
    bench_opts o;
    int do_compare, json, mpi;
} bench_args;

/* Parses the options into *a. Returns -1 to go on, else the exit status (after --help or
 * --list, or a usage error). */
static int parse_options(int argc, char **argv, bench_args *a)
{
    static const struct option opts[] = {{"device", required_argument, 0, 'd'},
                                         {"json", no_argument, 0, 'j'},
                                         {"output", required_argument, 0, 'o'},
                                         {"budget-ms", required_argument, 0, 'b'},
                                         {"repeat", required_argument, 0, 'r'},
                                         {"warmup", required_argument, 0, 'w'},
                                         {"compare", no_argument, 0, 'c'},
                                         {"list", no_argument, 0, 'l'},
                                         {"help", no_argument, 0, 'h'},
                                         {"mpi", no_argument, 0, 'M'},
                                         {"precision", required_argument, 0, 'P'},
                                         {0, 0, 0, 0}};
    static char suite_help[2048], item_help[4096];
    help_text(suite_help, sizeof suite_help, item_help, sizeof item_help);
    int c;
    long v = 0;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'd': a->device = optarg; break;
        case 'P':
            if (app_set_precision("bench ", optarg))
                return EXIT_USAGE;
            break;
        case 'j': a->json = 1; break;
        case 'o': a->out_path = optarg; break;
        case 'b':
            if (parse_count(optarg, "budget-ms", 1, 3600000, &v))
                return EXIT_USAGE;
            a->o.budget_ms = (double)v;
            break;
        case 'r':
            if (parse_count(optarg, "repeat", 1, 100000, &v))
                return EXIT_USAGE;
            a->o.repeat = (int)v;
            break;
        case 'w':
            if (parse_count(optarg, "warmup", 0, 100000, &v))
                return EXIT_USAGE;
            a->o.warmup = (int)v;
            break;
        case 'c': a->do_compare = 1; break;
        case 'M': a->mpi = 1; break;
        case 'l': printf("Suites:\n%s\nItems:\n%s", suite_help, item_help); return EXIT_OK;
        case 'h': printf(usage, suite_help, item_help); return EXIT_OK;
        default: return app_usage_error("bench ", "bad option '%s'", argv[optind - 1]);
        }
    }
    return -1;
}

/* The specs the arguments name (a suite stands for its lines) into specs[0..256). Returns
 * EXIT_OK, or a usage error for an unknown or malformed item or too many. */
static int collect_specs(int argc, char **argv, spec_entry *specs, int *nspecs)
{
    int n = 0;
    for (int i = optind; i < argc; i++) {
        if (is_suite(argv[i])) {
            for (size_t j = 0; j < NSUITE_LINES && n < 256; j++) {
                if (strcmp(suites[j].suite, argv[i]))
                    continue;
                const bench_item *it = find_item(suites[j].spec);
                if (it && it->validate && it->validate(suites[j].spec))
                    it = NULL;
                specs[n++] = (spec_entry){suites[j].spec, it, "not available in this build"};
            }
            continue;
        }
        const bench_item *it;
        int kind = bench_spec_check(argv[i], &it);
        if (kind == BENCH_SPEC_UNKNOWN)
            return app_usage_error("bench ", "unknown item '%s' (see 'pagoda bench --list')",
                                   argv[i]);
        if (kind == BENCH_SPEC_BAD)
            return app_usage_error("bench ", "bad item '%s': expected %s", argv[i], it->syntax);
        if (n == 256)
            return app_usage_error("bench ", "too many items (at most 256)");
        specs[n++] = (spec_entry){argv[i], it, NULL};
    }
    *nspecs = n;
    return EXIT_OK;
}

/* Runs the specs on the device `device` names, or on every device for "all". */
static int run_devices(const char *device, const spec_entry *specs, int nspecs, const bench_opts *o,
                       int table, json_t *runs, int *failures)
{
    if (!device || strcmp(device, "all"))
        return run_device(device, specs, nspecs, o, table, runs, failures);
    pgd_error *err = NULL;
    pgd_device_info *list = NULL;
    size_t n = 0;
    if (pgd_devices_list(&list, &n, &err))
        return app_fail(err);
    int rc = EXIT_OK;
    for (size_t i = 0; i < n && rc == EXIT_OK; i++) {
        char sel[32];
        snprintf(sel, sizeof sel, "%d:%d", list[i].platform_index, list[i].device_index);
        if (table && i > 0)
            printf("\n");
        rc = run_device(sel, specs, nspecs, o, table, runs, failures);
    }
    pgd_free(list);
    return rc;
}

/* Writes the bench JSON document around `runs` (which it takes) to out (which it takes), or
 * stdout when out is NULL. */
static int write_bench_json(const bench_opts *o, json_t *runs, pgd_outfile *out)
{
    char date[64];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    json_t *doc =
        json_pack("{s:s, s:s, s:s, s:s, s:s}", "schema", "pagoda-bench-2", "tool", "pagoda",
                  "pagoda_version", PGD_VERSION_STRING, "git", PGD_GIT_DESCRIBE, "date", date);
    host_json(doc);
    json_object_set_new(doc, "budget_ms",
                        o->repeat > 0 && o->warmup >= 0
                            ? json_null()
                            : json_real(o->budget_ms > 0 ? o->budget_ms : 1000.0));
    json_object_set_new(doc, "repeat", o->repeat > 0 ? json_integer(o->repeat) : json_null());
    json_object_set_new(doc, "warmup", o->warmup >= 0 ? json_integer(o->warmup) : json_null());
    json_object_set_new(doc, "runs", runs);
    int rc = out ? app_write_json_to(doc, out) : app_write_json(doc, NULL);
    json_decref(doc);
    return rc;
}

int cmd_bench(int argc, char **argv)
{
    bench_args a = {.o = {.repeat = -1, .warmup = -1, .budget_ms = -1}};
    int rc = parse_options(argc, argv, &a);
    if (rc >= 0)
        return rc;
    if (a.do_compare) {
        if (argc - optind < 1)
            return app_usage_error("bench ", "--compare wants one or more JSON files");
        return bench_compare(argv + optind, argc - optind);
    }
    if (optind >= argc)
        return app_usage_error("bench ", "name at least one item or suite (see 'pagoda bench "
                                         "--list')");
    /* --repeat alone keeps the warm-up count it always had. */
    if (a.o.repeat > 0 && a.o.warmup < 0 && a.o.budget_ms < 0)
        a.o.warmup = 3;
    spec_entry specs[256];
    int nspecs = 0;
    rc = collect_specs(argc, argv, specs, &nspecs);
    if (rc)
        return rc;
    /* --mpi (the MPI build, under mpirun): every rank runs the items, on its device of a
     * --device list by local rank; rank 0 writes one document with every rank's runs. */
    int rank = 0, ranks = 1;
    if (a.mpi && !stream_mpi_launched())
        return app_usage_error("bench ", "--mpi wants a launch by mpirun and the MPI build "
                                         "(meson -Dmpi=enabled)");
    if (a.mpi && (rc = stream_mpi_begin(&rank, &ranks)))
        return rc;
    char pick[64];
    if (a.mpi && a.device && strchr(a.device, ',')) {
        const char *p = a.device;
        int count = 1;
        for (const char *q = a.device; *q; q++)
            count += *q == ',';
        for (int k = stream_mpi_local_rank() % count; k > 0; k--)
            p = strchr(p, ',') + 1;
        snprintf(pick, sizeof pick, "%.*s", (int)strcspn(p, ","), p);
        a.device = pick;
    }
    /* The table goes to stdout unless JSON does; the progress line only to a terminal. */
    int table = !(a.json && !a.out_path) && rank == 0;
    progress.on = isatty(STDERR_FILENO) && !(a.json && !a.out_path && isatty(STDOUT_FILENO));
    /* --output is opened before the runs, so that a target that cannot be written (not a
     * regular file, a missing directory) fails at once rather than after minutes of runs;
     * the document appears only when complete, and a failed run leaves no file. */
    pgd_outfile *out = NULL;
    if (a.out_path && strcmp(a.out_path, "-") && rank == 0) {
        pgd_error *err = NULL;
        if (pgd_outfile_open(a.out_path, &out, &err))
            return app_fail(err);
    }
    json_t *runs = json_array();
    int failures = 0;
    rc = run_devices(a.device, specs, nspecs, &a.o, table, runs, &failures);
    if (a.mpi && rc == EXIT_OK && stream_mpi_gather_runs(runs))
        rc = EXIT_RUNTIME;
    if (rank != 0) {
        json_decref(runs);
        return stream_mpi_end(rc ? rc : failures ? EXIT_RUNTIME : EXIT_OK);
    }
    if (rc == EXIT_OK && (a.json || a.out_path) && json_array_size(runs) > 0) {
        rc = write_bench_json(&a.o, runs, out);
        out = NULL;
    } else {
        json_decref(runs);
    }
    pgd_outfile_abort(out);
    rc = rc ? rc : failures ? EXIT_RUNTIME : EXIT_OK;
    return a.mpi ? stream_mpi_end(rc) : rc;
}
