/* util.c — error printing and JSON helpers shared by the subcommands. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app.h"
#include "labels.h"

int app_max_batch(const pgd_ctx *ctx) { return pgd_ctx_get_options(ctx)->max_batch > 0; }

int app_fail(pgd_error *err)
{
    fprintf(stderr, "pagoda: error: %s\n", err ? pgd_error_message(err) : "unknown failure");
    pgd_error_free(err);
    return EXIT_RUNTIME;
}

int app_ctx_open(const char *device, pgd_ctx **ctx)
{
    pgd_ctx_options opt;
    pgd_error *err = NULL;
    *ctx = NULL;
    pgd_ctx_options_init(&opt);
    if (pgd_ctx_options_from_env(&opt, &err)) {
        app_fail(err);
        return EXIT_USAGE;
    }
    if (device)
        opt.device = device;
    if (pgd_ctx_create_with_options(&opt, ctx, &err))
        return app_fail(err);
    return EXIT_OK;
}

int app_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("pagoda: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry 'pagoda %s--help'.\n", cmd ? cmd : "");
    return EXIT_USAGE;
}

json_t *app_device_json(const pgd_device_info *d)
{
    json_t *items = json_array();
    for (int i = 0; i < 3; i++)
        json_array_append_new(items, json_integer((json_int_t)d->max_work_item[i]));
    char sel[32];
    snprintf(sel, sizeof sel, "%d:%d", d->platform_index, d->device_index);
    return json_pack(
        "{s:s, s:i, s:i, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:b, s:i, s:i, s:I, s:I, s:I, "
        "s:s, s:I, s:o, s:b, s:b, s:b, s:b, s:b, s:i}",
        "selector", sel, "platform_index", d->platform_index, "device_index", d->device_index,
        "name", d->name, "vendor", d->vendor, "platform", d->platform, "platform_version",
        d->platform_version, "driver_version", d->driver_version, "version", d->version,
        "opencl_c_version", d->c_version, "type", pgd_device_type_name(d->type),
        "software_rasteriser", d->software_rasteriser, "compute_units", (int)d->compute_units,
        "clock_mhz", (int)d->clock_mhz, "global_mem_bytes", (json_int_t)d->global_mem,
        "max_alloc_bytes", (json_int_t)d->max_alloc, "local_mem_bytes", (json_int_t)d->local_mem,
        "local_mem_type", d->local_mem_dedicated ? "local" : "global", "max_work_group_size",
        (json_int_t)d->max_work_group, "max_work_item_sizes", items, "fp16", d->fp16, "fp64",
        d->fp64, "subgroups", d->subgroups, "images", d->images, "unified_memory",
        d->unified_memory, "preferred_vector_width_float", (int)d->pref_vector_float);
}

int app_write_json(json_t *value, const char *path)
{
    if (!path || !strcmp(path, "-")) {
        int rc = json_dumpf(value, stdout, JSON_INDENT(2) | JSON_ENSURE_ASCII);
        fputc('\n', stdout);
        return rc == 0 && fflush(stdout) == 0 ? 0 : EXIT_RUNTIME;
    }
    /* Written next to the destination and renamed: an interrupted run leaves no half file. */
    size_t n = strlen(path) + 32;
    char *tmp = malloc(n);
    if (!tmp)
        return EXIT_RUNTIME;
    snprintf(tmp, n, "%s.tmp.%ld", path, (long)getpid());
    int rc = json_dump_file(value, tmp, JSON_INDENT(2) | JSON_ENSURE_ASCII);
    if (rc != 0 || rename(tmp, path) != 0) {
        fprintf(stderr, "pagoda: error: cannot write '%s': %s\n", path, strerror(errno));
        unlink(tmp);
        free(tmp);
        return EXIT_RUNTIME;
    }
    free(tmp);
    return 0;
}

/* A labels file is a short text (ImageNet-1k's is 22 KB); anything past 64 MiB is a mistake. */
#define LABELS_MAX_BYTES ((long)64 << 20)

/* Reads a whole small file into a NUL-terminated buffer; -1 with errno set on failure. */
static int read_small_file(const char *path, unsigned char **data, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (n > LABELS_MAX_BYTES)
        errno = EFBIG;
    unsigned char *buf = n >= 0 && n <= LABELS_MAX_BYTES && fseek(f, 0, SEEK_SET) == 0
                             ? malloc((size_t)n + 1)
                             : NULL;
    size_t got = buf ? fread(buf, 1, (size_t)n, f) : 0;
    int bad = !buf || got != (size_t)n || ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        if (buf)
            errno = EIO;
        return -1;
    }
    buf[got] = 0;
    *data = buf;
    *size = got;
    return 0;
}

int app_labels_load(const char *path, app_labels *out)
{
    memset(out, 0, sizeof *out);
    size_t size = 0;
    if (read_small_file(path, &out->text, &size) != 0) {
        fprintf(stderr, "pagoda: error: cannot read labels '%s': %s\n", path, strerror(errno));
        return EXIT_RUNTIME;
    }
    for (size_t i = 0; i < size; i++)
        out->count += out->text[i] == '\n' || (i + 1 == size && out->text[i] != '\n');
    out->names = calloc((size_t)out->count + 1, sizeof *out->names);
    if (!out->names) {
        app_labels_free(out);
        return EXIT_RUNTIME;
    }
    char *p = (char *)out->text;
    for (int i = 0; i < out->count; i++) {
        out->names[i] = p;
        char *nl = strchr(p, '\n');
        if (!nl)
            break;
        *nl = 0;
        if (nl > p && nl[-1] == '\r')
            nl[-1] = 0;
        p = nl + 1;
    }
    return 0;
}

void app_labels_free(app_labels *l)
{
    free(l->names);
    free(l->text);
    memset(l, 0, sizeof *l);
}

int app_default_weights(const char *file, char *buf, size_t size)
{
    const char *d = getenv("PAGODA_WEIGHTS_DIR"), *x = getenv("XDG_DATA_HOME"),
               *h = getenv("HOME");
    if (d && *d)
        snprintf(buf, size, "%s/%s", d, file);
    else if (x && *x)
        snprintf(buf, size, "%s/pagoda/weights/%s", x, file);
    else if (h && *h)
        snprintf(buf, size, "%s/.local/share/pagoda/weights/%s", h, file);
    else
        return 0;
    FILE *f = fopen(buf, "rb");
    if (f)
        fclose(f);
    return f != NULL;
}

typedef struct ranked {
    int index;
    double p;
} ranked;

static int by_p(const void *a, const void *b)
{
    const ranked *x = a, *y = b;
    return (x->p < y->p) - (x->p > y->p);
}

json_t *app_report_topk(const float *logits, int B, int classes, int topk,
                        const app_labels *labels, char **sources, const char *fallback_source,
                        int json)
{
    json_t *jall = json ? json_array() : NULL;
    ranked *rk = malloc((size_t)classes * sizeof *rk);
    for (int b = 0; rk && b < B; b++) {
        const float *l = logits + (size_t)b * (size_t)classes;
        double mx = -INFINITY, sum = 0;
        for (int k = 0; k < classes; k++)
            mx = l[k] > mx ? l[k] : mx;
        for (int k = 0; k < classes; k++)
            sum += exp(l[k] - mx);
        for (int k = 0; k < classes; k++)
            rk[k] = (ranked){k, exp(l[k] - mx) / sum};
        qsort(rk, (size_t)classes, sizeof *rk, by_p);
        int kk = topk < classes ? topk : classes;
        json_t *jtop = json ? json_array() : NULL;
        const char *source = sources ? sources[b] : fallback_source;
        if (!json)
            printf("%s:\n", source);
        for (int k = 0; k < kk; k++) {
            char fallback[32];
            snprintf(fallback, sizeof fallback, "class %d", rk[k].index);
            const char *label = labels && labels->names ? labels->names[rk[k].index]
                                : classes == 1000       ? pgd_imagenet_labels[rk[k].index]
                                                        : fallback;
            if (json)
                /* JSON has no NaN: a probability from non-finite logits (--allow-nonfinite)
                 * is null. */
                json_array_append_new(jtop, json_pack("{s:i, s:s, s:o}", "index", rk[k].index,
                                                      "label", label, "probability",
                                                      isfinite(rk[k].p) ? json_real(rk[k].p)
                                                                        : json_null()));
            else
                printf("  %6.2f%%  %4d  %s\n", 100.0 * rk[k].p, rk[k].index, label);
        }
        if (json)
            json_array_append_new(jall, json_pack("{s:i, s:s, s:o}", "image", b, "source", source,
                                                  "top", jtop));
    }
    free(rk);
    return jall;
}

char *app_numbered_path(const char *path, const char *tag, int index, int count)
{
    const char *dot = strrchr(path, '.');
    const char *slash = strrchr(path, '/');
    if (!dot || dot == path || (slash && dot < slash))
        dot = path + strlen(path);
    size_t n = strlen(path) + strlen(tag) + 32;
    char *out = malloc(n);
    if (!out)
        return NULL;
    char num[24] = "";
    if (count > 1)
        snprintf(num, sizeof num, "-%d", index + 1);
    snprintf(out, n, "%.*s%s%s%s", (int)(dot - path), path, tag, num, *dot ? dot : ".png");
    return out;
}

static int readable(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f)
        fclose(f);
    return f != NULL;
}

int app_sample_image(char *buf, size_t size)
{
    const char *env = getenv("PAGODA_SAMPLE_IMAGE");
    if (env && *env) {
        snprintf(buf, size, "%s", env);
        return readable(buf);
    }
    snprintf(buf, size, "%s/chelsea.jpg", PGD_DATA_DIR);
    if (readable(buf))
        return 1;
    snprintf(buf, size, "%s/chelsea.jpg", PGD_SOURCE_DATA_DIR);
    return readable(buf);
}

int app_load_batch(char **paths, int n, pgd_preprocess preset, float **x, pgd_image ***loaded,
                   int64_t shape[4], pgd_error **err)
{
    const int64_t S = PGD_PREPROCESS_SIZE, per = 3 * S * S;
    *x = malloc((size_t)(n * per) * sizeof **x);
    *loaded = calloc((size_t)n, sizeof **loaded);
    int rc = (*x && *loaded) ? PGD_OK : PGD_ERR_OUT_OF_HOST_MEMORY;
    if (rc)
        pgd_error_set(err, rc, "%d images of %lld x %lld: out of host memory", n, (long long)S,
                       (long long)S);
    for (int i = 0; i < n && !rc; i++) {
        rc = pgd_image_load(paths[i], &(*loaded)[i], err);
        if (!rc)
            rc = pgd_image_preprocess((*loaded)[i], preset, *x + i * per, err);
    }
    if (rc) {
        for (int i = 0; *loaded && i < n; i++)
            pgd_image_free((*loaded)[i]);
        free(*loaded);
        free(*x);
        *loaded = NULL;
        *x = NULL;
        return rc;
    }
    shape[0] = n, shape[1] = 3, shape[2] = shape[3] = S;
    return PGD_OK;
}
