/* bench.c — `pagoda bench`: timed kernel runs and program builds, JSON output, comparisons.
 *
 * Each item is warmed up, then timed `repeat` times with the queue drained around every run;
 * the report gives median, p90 and min. The first build of an item's programs is timed apart
 * (compile_ms) so compile cost never pollutes the run times. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "app.h"
#include "bench.h"
#include "pgd_config.h"
#include "pgd_version.h"

static const char usage[] =
    "usage: pagoda bench [--device SEL|all] [--json FILE] [--repeat N] [--warmup N] ITEM...\n"
    "       pagoda bench --compare A.json B.json...\n"
    "       pagoda bench --list\n"
    "\n"
    "Times kernels and program builds on one device (or every device with --device all).\n"
    "Every item is warmed up, then run N times (default 20); median, p90 and min are\n"
    "reported with GFLOP/s and GB/s. The time to build the item's programs is shown apart.\n"
    "\n"
    "Items:\n"
    "%s"
    "\n"
    "Options:\n"
    "  --device SEL     device selector (see 'pagoda devices --help'), or 'all'\n"
    "  --json FILE      also write the results as JSON to FILE ('-' for stdout)\n"
    "  --repeat N       timed runs per item (default 20)\n"
    "  --warmup N       untimed runs before timing (default 3)\n"
    "  --compare F...   print the results of saved JSON files side by side, with ratios to\n"
    "                   the first file\n"
    "  --list           list the items\n"
    "  -h, --help       show this help\n";

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

static const bench_item *const items[] = {
    &bench_item_build,
    &bench_item_scale,
    &bench_item_gemm_nn,
    &bench_item_gemm,
    &bench_item_attention_unfused,
    &bench_item_attention,
    &bench_item_layernorm,
    &bench_item_conv,
    &bench_item_vit,
    &bench_item_resnet,
    &bench_item_resnet_nl,
    &bench_item_nonlocal,
    &bench_item_nonlocal_unfused,
#if PGD_HAVE_OPENBLAS
    &bench_item_blas,
#endif
    NULL,
};

static void items_help(char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = 0;
    for (size_t i = 0; items[i] && used < size; i++) {
        int w = snprintf(buf + used, size - used, "  %-22s %s\n", items[i]->syntax,
                         items[i]->help);
        if (w < 0)
            break;
        used += (size_t)w;
    }
}

static const bench_item *find_item(const char *spec)
{
    /* One item times every ViT size. */
    if (!strncmp(spec, "vit_ti16", 8) || !strncmp(spec, "vit_s16", 7))
        return &bench_item_vit;
    for (size_t i = 0; items[i]; i++) {
        size_t n = strlen(items[i]->prefix);
        if (!strncmp(spec, items[i]->prefix, n) && (spec[n] == 0 || spec[n] == ':'))
            return items[i];
    }
    return NULL;
}

static json_t *device_json_ctx(pgd_ctx *ctx) { return app_device_json(pgd_ctx_device(ctx)); }

static int run_device(const char *selector, char **specs, int nspecs, const bench_opts *o,
                      json_t *runs)
{
    pgd_ctx *ctx = NULL;
    pgd_error *err = NULL;
    if (pgd_ctx_create(selector, &ctx, &err))
        return app_fail(err);
    const pgd_device_info *d = pgd_ctx_device(ctx);
    printf("device %d:%d %s (%s, driver %s)\n", d->platform_index, d->device_index, d->name,
           d->platform, d->driver_version);
    printf("%-28s %10s %10s %10s %9s %9s %11s\n", "item", "median ms", "p90 ms", "min ms",
           "GFLOP/s", "GB/s", "compile ms");
    json_t *results = json_array();
    int rc = EXIT_OK;
    for (int i = 0; i < nspecs && rc == EXIT_OK; i++) {
        const bench_item *it = find_item(specs[i]);
        bench_result res[64];
        int nres = 0;
        memset(res, 0, sizeof res);
        int r = it->run(ctx, specs[i], o, res, &nres, 64, &err);
        if (r) {
            rc = r == EXIT_USAGE ? EXIT_USAGE : app_fail(err);
            if (r == EXIT_USAGE)
                pgd_error_free(err);
            err = NULL;
            break;
        }
        for (int j = 0; j < nres; j++) {
            bench_result *b = &res[j];
            double gflops = b->flops > 0 ? b->flops / (b->median_ms * 1e6) : 0;
            double gbs = b->bytes > 0 ? b->bytes / (b->median_ms * 1e6) : 0;
            printf("%-28s %10.3f %10.3f %10.3f %9.1f %9.1f %11.1f%s%s\n", b->name, b->median_ms,
                   b->p90_ms, b->min_ms, gflops, gbs, b->compile_ms, b->note[0] ? "  " : "",
                   b->note);
            json_t *o2 = json_pack("{s:s, s:f, s:f, s:f, s:f, s:f, s:f, s:i}", "name", b->name,
                                   "median_ms", b->median_ms, "p90_ms", b->p90_ms, "min_ms",
                                   b->min_ms, "gflops", gflops, "gbs", gbs, "compile_ms",
                                   b->compile_ms, "repeat", b->repeat);
            if (b->extra_key[0])
                json_object_set_new(o2, b->extra_key, json_real(b->extra));
            if (b->note[0])
                json_object_set_new(o2, "algorithm", json_string(b->note));
            json_array_append_new(results, o2);
        }
        fflush(stdout);
    }
    json_array_append_new(runs, json_pack("{s:o, s:o}", "device", device_json_ctx(ctx),
                                          "results", results));
    pgd_ctx_destroy(ctx);
    return rc;
}

static json_t *load_json(const char *path)
{
    json_error_t je;
    json_t *v = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!v)
        fprintf(stderr, "pagoda: error: %s:%d: %s\n", path, je.line, je.text);
    return v;
}

/* Prints, for every (device, item) of the first file, the median of each file and the ratio
 * first/other (above 1: the other file is faster). */
static int compare(char **files, int nfiles)
{
    json_t **docs = calloc((size_t)nfiles, sizeof *docs);
    if (!docs)
        return EXIT_RUNTIME;
    int rc = EXIT_OK;
    for (int i = 0; i < nfiles; i++) {
        docs[i] = load_json(files[i]);
        if (!docs[i] || !json_is_array(json_object_get(docs[i], "runs"))) {
            if (docs[i])
                fprintf(stderr, "pagoda: error: %s: not a pagoda bench file (no \"runs\" array)\n",
                        files[i]);
            rc = EXIT_RUNTIME;
        }
    }
    if (rc)
        goto done;
    printf("%-28s", "item");
    for (int f = 0; f < nfiles; f++)
        printf(" %14.14s", files[f]);
    for (int f = 1; f < nfiles; f++)
        printf(" %9s", "ratio");
    printf("\n");
    for (int f = 0; f < nfiles; f++) {
        size_t ri;
        json_t *run;
        json_array_foreach(json_object_get(docs[f], "runs"), ri, run)
        {
            printf("[%d] %s: %s\n", f + 1, files[f],
                   json_string_value(json_object_get(json_object_get(run, "device"), "name")));
        }
    }
    /* Items are matched by name across files; a file may hold several devices' runs, which
     * are shown in order. */
    size_t ri;
    json_t *run;
    json_array_foreach(json_object_get(docs[0], "runs"), ri, run)
    {
        size_t k;
        json_t *res;
        json_array_foreach(json_object_get(run, "results"), k, res)
        {
            const char *name = json_string_value(json_object_get(res, "name"));
            if (!name)
                continue;
            double base = json_number_value(json_object_get(res, "median_ms"));
            double med[16] = {0};
            int nf = nfiles < 16 ? nfiles : 16;
            med[0] = base;
            for (int f = 1; f < nf; f++) {
                json_t *other = json_array_get(json_object_get(docs[f], "runs"),
                                               ri < json_array_size(json_object_get(docs[f], "runs"))
                                                   ? ri
                                                   : 0);
                size_t m;
                json_t *r2;
                json_array_foreach(json_object_get(other, "results"), m, r2)
                {
                    const char *n2 = json_string_value(json_object_get(r2, "name"));
                    if (n2 && !strcmp(n2, name))
                        med[f] = json_number_value(json_object_get(r2, "median_ms"));
                }
            }
            printf("%-28s", name);
            for (int f = 0; f < nf; f++)
                med[f] > 0 ? printf(" %11.3f ms", med[f]) : printf(" %14s", "-");
            for (int f = 1; f < nf; f++)
                med[f] > 0 ? printf(" %8.2fx", base / med[f]) : printf(" %9s", "-");
            printf("\n");
        }
    }
done:
    for (int i = 0; i < nfiles; i++)
        json_decref(docs[i]);
    free(docs);
    return rc;
}

int cmd_bench(int argc, char **argv)
{
    const char *device = NULL, *json_path = NULL;
    bench_opts o = {.repeat = 20, .warmup = 3};
    int do_compare = 0;
    static const struct option opts[] = {{"device", required_argument, 0, 'd'},
                                         {"json", required_argument, 0, 'j'},
                                         {"repeat", required_argument, 0, 'r'},
                                         {"warmup", required_argument, 0, 'w'},
                                         {"compare", no_argument, 0, 'c'},
                                         {"list", no_argument, 0, 'l'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    char help[4096];
    items_help(help, sizeof help);
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        char *end = NULL;
        switch (c) {
        case 'd':
            device = optarg;
            break;
        case 'j':
            json_path = optarg;
            break;
        case 'r':
        case 'w': {
            long v = strtol(optarg, &end, 10);
            if (!*optarg || *end || v < (c == 'r' ? 1 : 0) || v > 100000)
                return app_usage_error("bench ", "--%s wants a whole number (%s1 to 100000), got '%s'",
                                       c == 'r' ? "repeat" : "warmup", c == 'r' ? "" : "0 or ",
                                       optarg);
            if (c == 'r')
                o.repeat = (int)v;
            else
                o.warmup = (int)v;
            break;
        }
        case 'c':
            do_compare = 1;
            break;
        case 'l':
            fputs(help, stdout);
            return EXIT_OK;
        case 'h':
            printf(usage, help);
            return EXIT_OK;
        default:
            return app_usage_error("bench ", "bad option");
        }
    }
    if (do_compare) {
        if (argc - optind < 1)
            return app_usage_error("bench ", "--compare wants one or more JSON files");
        return compare(argv + optind, argc - optind);
    }
    if (optind >= argc)
        return app_usage_error("bench ", "name at least one item (see 'pagoda bench --list')");
    for (int i = optind; i < argc; i++) {
        const bench_item *it = find_item(argv[i]);
        if (!it)
            return app_usage_error("bench ", "unknown item '%s' (see 'pagoda bench --list')",
                                   argv[i]);
        if (it->validate && it->validate(argv[i]) != 0)
            return app_usage_error("bench ", "bad item '%s': expected %s", argv[i], it->syntax);
    }
    json_t *runs = json_array();
    int rc = EXIT_OK;
    if (device && !strcmp(device, "all")) {
        pgd_error *err = NULL;
        pgd_device_info *list = NULL;
        size_t n = 0;
        if (pgd_devices_list(&list, &n, &err)) {
            json_decref(runs);
            return app_fail(err);
        }
        for (size_t i = 0; i < n && rc == EXIT_OK; i++) {
            char sel[32];
            snprintf(sel, sizeof sel, "%d:%d", list[i].platform_index, list[i].device_index);
            rc = run_device(sel, argv + optind, argc - optind, &o, runs);
        }
        pgd_devices_free(list);
    } else {
        rc = run_device(device, argv + optind, argc - optind, &o, runs);
    }
    if (rc == EXIT_OK && json_path) {
        char host[256] = "unknown", date[64];
        gethostname(host, sizeof host);
        host[sizeof host - 1] = 0;
        time_t now = time(NULL);
        strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
        json_t *doc = json_pack("{s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:o}", "schema",
                                "pagoda-bench-1", "pagoda_version", PGD_VERSION_STRING, "git",
                                PGD_GIT_DESCRIBE, "date", date, "host", host, "repeat", o.repeat,
                                "warmup", o.warmup, "runs", runs);
        rc = app_write_json(doc, json_path);
        json_decref(doc);
        return rc;
    }
    json_decref(runs);
    return rc;
}
