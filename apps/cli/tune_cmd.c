/* tune_cmd.c — `pagoda tune`: searches the device's kernel parameters by measurement and stores
 * them in the cache directory (pgd_tune), with a progress line per candidate. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "app.h"
#include "commands.h"

static const char usage[] =
    "usage: pagoda tune [--device SEL] [--budget S] [--json] [--quiet] [--export]\n"
    "\n"
    "Searches the GEMM kernel parameters of one OpenCL device by measurement and stores the\n"
    "fastest in the cache directory (tuning.json, under the device and driver), where every\n"
    "later run on that device finds it, over the shipped parameter database's entry for the\n"
    "device (runtime/tune/db.c: what an untuned device runs). Candidates: gemm_cpu's register\n"
    "tiles (rows x vector width x vectors per row, K unroll) for runtimes that vectorise the\n"
    "kernel's own vector code (PoCL), and gemm_gpu's local-memory tiles of scalar work-items\n"
    "for those that vectorise across work-items (Intel's CPU runtime, GPUs). Each candidate\n"
    "is first checked against a double-precision reference, then timed on ViT-B/16's and\n"
    "ResNet-50's GEMM shapes; the defaults (the database's entry) are measured first. The\n"
    "best three are then measured again in turns (5 rounds) and the lowest median wins.\n"
    "On CPU devices the last fifth of the budget picks the attention kernel: rows, or kt\n"
    "at key vector widths 16, 8, 4 with 4, 6 or 8 query rows a work-item (kt:kw=16,rows=6).\n"
    "PoCL compiles each candidate (a second or two each): a search takes about a minute.\n"
    "\n"
    "Options:\n"
    "  --device SEL   the device (see 'pagoda devices --help'); default $PAGODA_DEVICE or the\n"
    "                 best device\n"
    "  --budget S     stop trying new candidates after about S seconds (default 60)\n"
    "  --json         print the result as JSON on stdout\n"
    "  --quiet        no progress lines on stderr\n"
    "  --export       print the device's entry for the parameter database (runtime/tune/db.c)\n"
    "                 from its stored tuning; searches first when none is stored\n"
    "  -h, --help     show this help\n"
    "\n"
    "PAGODA_KERNEL_PARAMS=... overrides the stored parameters for one run (the format is\n"
    "what this command prints, e.g. cpu:rm=6,vw=16,nv=2,ku=4). With PAGODA_CACHE_DIR=off\n"
    "nothing is stored.\n";

typedef struct progress {
    int quiet;
} progress;

static void on_candidate(const pgd_tune_progress *p, void *user)
{
    const progress *pr = user;
    if (pr->quiet)
        return;
    char why[256];
    if (p->index < 0 && p->why)
        fprintf(stderr, "tune: runoff  %-38s %s\n", p->params,
                app_term_text(p->why, why, sizeof why));
    else if (p->index < 0)
        fprintf(stderr, "tune: runoff  %-38s %8.2f ms   (median of 5 passes in turns)\n", p->params,
                p->ms);
    else if (p->why)
        fprintf(stderr, "tune: [%2d/%2d] %-38s rejected: %s\n", p->index + 1, p->count, p->params,
                app_term_text(p->why, why, sizeof why));
    else
        fprintf(stderr, "tune: [%2d/%2d] %-38s %8.2f ms   best %8.2f ms   %5.1f s\n", p->index + 1,
                p->count, p->params, p->ms, p->best_ms, p->elapsed_s);
}

/* The result as text on stdout; name: the device's name made printable, or empty. */
static void print_text(const pgd_device_info *d, const pgd_tune_result *r, const char *dir,
                       char name[256])
{
    printf("device      %s\n", name[0] ? name : app_term_text(d->name, name, 256));
    printf("best        %s  %.2f ms per workload pass\n", r->params, r->best_ms);
    printf("defaults    %s  %.2f ms (%.2fx)\n", r->defaults, r->default_ms,
           r->best_ms > 0 ? r->default_ms / r->best_ms : 0.0);
    if (r->attention[0])
        printf("attention   %s  %.2f ms (untuned %.2f ms, %.2fx)\n", r->attention, r->attention_ms,
               r->attention_default_ms,
               r->attention_ms > 0 ? r->attention_default_ms / r->attention_ms : 0.0);
    printf("searched    %d GEMM candidates (%d rejected, %d left by the budget; the best %d\n"
           "            measured again in turns) and the attention kernels in %.1f s\n",
           r->tried, r->rejected, r->skipped, r->runoff, r->seconds);
    char where[512];
    if (r->stored)
        printf("stored in   %s/tuning.json\n", app_term_text(dir, where, sizeof where));
    else
        printf("not stored  (no cache directory: PAGODA_CACHE_DIR=off or not writable)\n");
}

/* --export: the database line for the context's parameters on stdout; destroys ctx. */
static int export_entry(pgd_ctx *ctx)
{
    char line[2048];
    pgd_error *err = NULL;
    int rc = pgd_tune_export(ctx, line, sizeof line, &err);
    pgd_ctx_destroy(ctx);
    if (rc)
        return app_fail(err);
    fputs(line, stdout);
    return EXIT_OK;
}

int cmd_tune(int argc, char **argv)
{
    const char *device = NULL;
    double budget = 60;
    int json = 0, export = 0;
    progress pr = {0};
    static const struct option opts[] = {{"device", required_argument, 0, 'd'},
                                         {"budget", required_argument, 0, 'b'},
                                         {"json", no_argument, 0, 'j'},
                                         {"quiet", no_argument, 0, 'q'},
                                         {"export", no_argument, 0, 'e'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == 'd')
            device = optarg;
        else if (c == 'b') {
            if (pgd_parse_double(optarg, 1, 86400, &budget))
                return app_usage_error("tune ", "--budget '%s': seconds from 1 to 86400", optarg);
        } else if (c == 'j')
            json = 1;
        else if (c == 'q')
            pr.quiet = 1;
        else if (c == 'e')
            export = 1;
        else if (c == 'h') {
            fputs(usage, stdout);
            return EXIT_OK;
        } else
            return app_usage_error("tune ", "bad option");
    }
    if (optind < argc)
        return app_usage_error("tune ", "unexpected argument '%s'", argv[optind]);
    pgd_ctx *ctx = NULL;
    int rc = app_ctx_open(device, &ctx);
    if (rc)
        return rc;
    char entry[96];
    if (export && !strncmp(pgd_ctx_get_params_entry(ctx, entry, sizeof entry), "tuned:", 6))
        return export_entry(ctx);
    const pgd_device_info *d = pgd_ctx_get_device(ctx);
    char name[256] = "";
    if (!pr.quiet)
        fprintf(stderr, "tune: %s (driver %s), budget %.0f s\n",
                app_term_text(d->name, name, sizeof name), d->driver_version, budget);
    pgd_tune_result r;
    pgd_error *err = NULL;
    if (pgd_tune(ctx, budget, on_candidate, &pr, &r, &err)) {
        pgd_ctx_destroy(ctx);
        return app_fail(err);
    }
    if (export)
        return export_entry(ctx);
    const char *dir = pgd_ctx_get_cache_dir(ctx);
    if (json) {
        json_t *doc = json_pack(
            "{s:o, s:s, s:s, s:f, s:f, s:i, s:i, s:i, s:i, s:f, s:b, s:o, s:s, s:f, s:f}", "device",
            app_json_text(d->name), "params", r.params, "defaults", r.defaults, "workload_ms",
            r.best_ms, "default_ms", r.default_ms, "tried", r.tried, "rejected", r.rejected,
            "skipped", r.skipped, "runoff", r.runoff, "search_s", r.seconds, "stored", r.stored,
            "cache_dir", dir ? app_json_text(dir) : json_null(), "attention", r.attention,
            "attention_ms", r.attention_ms, "attention_default_ms", r.attention_default_ms);
        rc = app_print_json(doc);
    } else {
        print_text(d, &r, dir, name);
    }
    pgd_ctx_destroy(ctx);
    return rc;
}
