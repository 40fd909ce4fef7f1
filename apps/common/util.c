/* util.c — error printing and JSON helpers shared by the subcommands. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "app.h"
#include "labels.h"
#include "model.h"
#include "vit.h"

int app_max_batch(const pgd_ctx *ctx)
{
    int64_t cap = 0;
    return pgd_ctx_get_knob(ctx, "max_batch", &cap) == PGD_OK && cap > 0;
}

/* ---- text from outside (argv, files, drivers) on the terminal and in JSON ---- */

/* The length of the well-formed UTF-8 sequence at p (1 to 4), or 0 when the byte at p does not
 * start one (a stray continuation byte, an overlong form, a surrogate, past U+10FFFF, or a
 * sequence cut short, also by the terminating NUL). */
static size_t utf8_seq(const unsigned char *p)
{
    unsigned c = p[0];
    if (c < 0x80)
        return 1;
    size_t n = c >= 0xC2 && c <= 0xDF   ? 2
               : c >= 0xE0 && c <= 0xEF ? 3
               : c >= 0xF0 && c <= 0xF4 ? 4
                                        : 0;
    if (!n)
        return 0;
    /* the second byte's range excludes overlongs (E0, F0), surrogates (ED), > U+10FFFF (F4) */
    unsigned lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80;
    unsigned hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
    if (p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xBF)
            return 0;
    return n;
}

/* A character a terminal would act on rather than show: C0 controls, DEL, C1 controls
 * (U+0080 .. U+009F, whose U+009B starts an escape sequence like ESC [). */
static int is_control(const unsigned char *p, size_t n)
{
    return (n == 1 && (p[0] < 0x20 || p[0] == 0x7F)) || (n == 2 && p[0] == 0xC2 && p[1] < 0xA0);
}

/* Where escaped text goes: a stream, or a buffer (cut short, always NUL-terminated). */
typedef struct text_sink {
    FILE *f;
    char *buf;
    size_t size, used;
} text_sink;

static void sink_put(text_sink *k, const char *p, size_t n)
{
    if (k->f) {
        fwrite(p, 1, n, k->f);
        return;
    }
    if (k->used + n >= k->size)
        return; /* whole pieces only: never half a UTF-8 sequence or half an escape */
    memcpy(k->buf + k->used, p, n);
    k->used += n;
    k->buf[k->used] = 0;
}

/* s for a terminal: well-formed UTF-8 as it is, every byte of an invalid sequence and of a
 * control character as \xNN (newlines and tabs kept when `keep_lines`). */
static void put_text(const char *s, text_sink *k, int keep_lines)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        size_t n = utf8_seq(p);
        if (n && !(is_control(p, n) && !(keep_lines && (*p == '\n' || *p == '\t')))) {
            sink_put(k, (const char *)p, n);
            p += n;
            continue;
        }
        for (size_t i = 0; i < (n ? n : 1); i++) {
            char esc[8];
            snprintf(esc, sizeof esc, "\\x%02X", p[i]);
            sink_put(k, esc, 4);
        }
        p += n ? n : 1;
    }
}

static void fput_text(const char *s, FILE *f, int keep_lines)
{
    text_sink k = {f, NULL, 0, 0};
    put_text(s, &k, keep_lines);
}

const char *app_term_text(const char *s, char *buf, size_t size)
{
    text_sink k = {NULL, buf, size, 0};
    if (size)
        buf[0] = 0;
    put_text(s, &k, 0);
    return buf;
}

json_t *app_json_text(const char *s)
{
    /* Replacement needs at most 3 bytes (U+FFFD) per byte replaced. */
    size_t len = strlen(s);
    char *out = malloc(3 * len + 1), *o = out;
    if (!out)
        return NULL;
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        size_t n = utf8_seq(p);
        if (n) {
            memcpy(o, p, n);
            o += n, p += n;
        } else {
            memcpy(o, "\xEF\xBF\xBD", 3);
            o += 3, p++;
        }
    }
    *o = 0;
    json_t *j = json_string(out);
    free(out);
    return j;
}

int app_fail(pgd_error *err)
{
    return app_fail_in(NULL, err);
}

int app_fail_in(const char *what, pgd_error *err)
{
    fputs("pagoda: error: ", stderr);
    if (what) {
        fput_text(what, stderr, 0);
        fputs(": ", stderr);
    }
    /* Every failing path sets an error; a missing one is a bug, reported as such. */
    fput_text(err ? pgd_error_get_message(err) : "internal error: a failure without a message",
              stderr, 1);
    fputc('\n', stderr);
    pgd_error_destroy(err);
    return EXIT_RUNTIME;
}

static int weights_f16 = -1; /* --weights-dtype; -1: not given */

int app_set_weights_dtype(const char *cmd, const char *arg)
{
    if (!strcmp(arg, "f32") || !strcmp(arg, "f16")) {
        weights_f16 = arg[1] == '1';
        return EXIT_OK;
    }
    return app_usage_error(cmd, "--weights-dtype wants f32 or f16, got '%s'", arg);
}

int app_weights_f16(void)
{
    if (weights_f16 >= 0)
        return weights_f16;
    pgd_ctx_options opt;
    pgd_error *err = NULL;
    pgd_ctx_options_init(&opt);
    if (pgd_ctx_options_from_env(&opt, &err)) {
        pgd_error_destroy(err); /* app_ctx_open reports it */
        return 0;
    }
    return opt.weights_f16 != 0;
}

static const char *precision; /* --precision; NULL: not given (knob or $PAGODA_PRECISION) */

int app_set_precision(const char *cmd, const char *arg)
{
    if (!strcmp(arg, "f32") || !strcmp(arg, "f16") || !strcmp(arg, "int8")) {
        precision = arg;
        return EXIT_OK;
    }
    return app_usage_error(cmd, "--precision wants f32, f16 or int8, got '%s'", arg);
}

const char *app_precision(const pgd_ctx *ctx)
{
    int64_t v = 0;
    static const char *const names[] = {"f32", "f16", "int8"};
    if (ctx && pgd_ctx_get_knob(ctx, "precision", &v) == PGD_OK && v >= 1 && v <= 3)
        return names[v - 1];
    return precision ? precision : "f32";
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
    if (weights_f16 >= 0)
        opt.weights_f16 = weights_f16;
    if (precision && pgd_ctx_options_set_knob(&opt, "precision", precision, &err)) {
        app_fail(err);
        return EXIT_USAGE;
    }
    if (pgd_ctx_create_with_options(&opt, ctx, &err))
        return app_fail(err);
    return EXIT_OK;
}

int app_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    char msg[1024];
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* The message quotes arguments: shown escaped, not as the bytes a terminal would act on. */
    fputs("pagoda: error: ", stderr);
    fput_text(msg, stderr, 1);
    fprintf(stderr, "\nTry 'pagoda %s--help'.\n", cmd ? cmd : "");
    return EXIT_USAGE;
}

static const char *const dot_names[] = {"signed",     "unsigned",     "mixed",
                                        "sat_signed", "sat_unsigned", "sat_mixed"};

/* The PGD_DOT_* bits as words, "a, b" (text) or a JSON array. */
void app_dot_accel_text(unsigned bits, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = 0;
    for (int i = 0; i < 6; i++)
        if (bits & (1u << i) && used < size)
            used +=
                (size_t)snprintf(buf + used, size - used, "%s%s", used ? " " : "", dot_names[i]);
    if (!used)
        snprintf(buf, size, "none");
}

static json_t *dot_accel_json(unsigned bits)
{
    json_t *a = json_array();
    for (int i = 0; i < 6; i++)
        if (bits & (1u << i))
            json_array_append_new(a, json_string(dot_names[i]));
    return a;
}

/* The device's low-precision capabilities (pgd_device_get_lowp); all false when the query
 * fails: the object is still written, so a reader need not handle its absence. */
static json_t *lowp_json(const pgd_device_info *d)
{
    pgd_device_lowp l;
    memset(&l, 0, sizeof l);
    l.size = sizeof l;
    if (pgd_device_get_lowp(d, &l, NULL))
        memset(&l, 0, sizeof l);
    return json_pack("{s:b, s:b, s:b, s:o, s:o, s:b}", "fp16_arithmetic", l.fp16,
                     "integer_dot_product", l.int_dot, "integer_dot_product_packed",
                     (l.int_dot_caps & 1) != 0, "dot8_accelerated", dot_accel_json(l.dot8_accel),
                     "dot8_packed_accelerated", dot_accel_json(l.dot8_packed_accel),
                     "bf16_conversions", l.bf16_conversions);
}

json_t *app_device_json(const pgd_device_info *d)
{
    json_t *items = json_array();
    for (int i = 0; i < 3; i++)
        json_array_append_new(items, json_integer((json_int_t)d->max_work_item[i]));
    char sel[32];
    snprintf(sel, sizeof sel, "%d:%d", d->platform_index, d->device_index);
    /* The driver's strings are text from outside: app_json_text keeps one that is not UTF-8
     * (json_pack's "s" would refuse it and lose the whole object). */
    return json_pack(
        "{s:s, s:i, s:i, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:s, s:b, s:i, s:i, s:I, s:I, s:I, "
        "s:s, s:I, s:o, s:b, s:b, s:b, s:b, s:b, s:i, s:o}",
        "selector", sel, "platform_index", d->platform_index, "device_index", d->device_index,
        "name", app_json_text(d->name), "vendor", app_json_text(d->vendor), "platform",
        app_json_text(d->platform), "platform_version", app_json_text(d->platform_version),
        "driver_version", app_json_text(d->driver_version), "version", app_json_text(d->version),
        "opencl_c_version", app_json_text(d->c_version), "type", pgd_device_type_name(d->type),
        "software_rasteriser", d->software_rasteriser, "compute_units", (int)d->compute_units,
        "clock_mhz", (int)d->clock_mhz, "global_mem_bytes", (json_int_t)d->global_mem,
        "max_alloc_bytes", (json_int_t)d->max_alloc, "local_mem_bytes", (json_int_t)d->local_mem,
        "local_mem_type", d->local_mem_dedicated ? "local" : "global", "max_work_group_size",
        (json_int_t)d->max_work_group, "max_work_item_sizes", items, "fp16", d->fp16, "fp64",
        d->fp64, "subgroups", d->subgroups, "images", d->images, "unified_memory",
        d->unified_memory, "preferred_vector_width_float", (int)d->pref_vector_float,
        "low_precision", lowp_json(d));
}

int app_write_json_to(json_t *value, pgd_outfile *f)
{
    pgd_error *err = NULL;
    if (json_dumpf(value, pgd_outfile_get_stream(f), JSON_INDENT(2) | JSON_ENSURE_ASCII) != 0 ||
        fputc('\n', pgd_outfile_get_stream(f)) == EOF) {
        fprintf(stderr, "pagoda: error: %s: cannot write the JSON document\n",
                pgd_outfile_get_path(f));
        pgd_outfile_abort(f);
        return EXIT_RUNTIME;
    }
    return pgd_outfile_commit(f, &err) ? app_fail(err) : EXIT_OK;
}

int app_print_json(json_t *doc)
{
    int rc = app_write_json(doc, NULL);
    json_decref(doc);
    return rc;
}

int app_write_json(json_t *value, const char *path)
{
    /* A document json_pack could not build is reported, never printed as nothing or half. */
    if (!value) {
        fprintf(stderr, "pagoda: error: the JSON document could not be built (out of host "
                        "memory)\n");
        return EXIT_RUNTIME;
    }
    if (!path || !strcmp(path, "-")) {
        int rc = json_dumpf(value, stdout, JSON_INDENT(2) | JSON_ENSURE_ASCII);
        fputc('\n', stdout);
        return rc == 0 && fflush(stdout) == 0 ? 0 : EXIT_RUNTIME;
    }
    /* Through pgd_outfile: a regular file only, appearing complete or not at all. */
    pgd_error *err = NULL;
    pgd_outfile *f = NULL;
    if (pgd_outfile_open(path, &f, &err))
        return app_fail(err);
    return app_write_json_to(value, f);
}

/* A labels file is a short text (ImageNet-1k's is 22 KB); anything past 64 MiB is a mistake. */
#define LABELS_MAX_BYTES ((uint64_t)64 << 20)

/* Why the n bytes of a label cannot be shown, or NULL when they can. */
static const char *label_defect(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        if (p[i] == 0)
            return "contains a NUL byte";
        size_t k = utf8_seq(p + i);
        if (!k || i + k > n)
            return "is not valid UTF-8";
        if (is_control(p + i, k) && p[i] != '\t')
            return "contains a control character";
        i += k;
    }
    return NULL;
}

int app_labels_load(const char *path, app_labels *out)
{
    memset(out, 0, sizeof *out);
    size_t size = 0;
    void *text = NULL;
    pgd_error *err = NULL;
    if (pgd_file_read(path, LABELS_MAX_BYTES, &text, &size, &err) != PGD_OK) {
        char shown[1024];
        fprintf(stderr, "pagoda: error: cannot read labels: %s\n",
                app_term_text(pgd_error_get_message(err), shown, sizeof shown));
        pgd_error_destroy(err);
        return EXIT_RUNTIME;
    }
    return app_labels_parse(text, size, path, out);
}

int app_labels_parse(void *text, size_t size, const char *path, app_labels *out)
{
    memset(out, 0, sizeof *out);
    out->text = text;
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
        char *nl = memchr(p, '\n', size - (size_t)(p - (char *)out->text));
        char *end = nl ? nl : (char *)out->text + size;
        if (end > p && end[-1] == '\r')
            end--;
        /* Labels go to the terminal and into JSON: a NUL, a byte that is not UTF-8 or a control
         * character is refused, naming the line, rather than cut, dropped or printed raw. */
        const char *why = label_defect(p, (size_t)(end - p));
        if (why) {
            char shown[256];
            fprintf(stderr, "pagoda: error: labels '%s', line %d: %s\n",
                    app_term_text(path, shown, sizeof shown), i + 1, why);
            app_labels_free(out);
            return EXIT_RUNTIME;
        }
        *end = 0;
        if (!nl)
            break;
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

static int default_weights(const char *file, char *buf, size_t size)
{
    const char *d = getenv("PAGODA_WEIGHTS_DIR"), *x = getenv("XDG_DATA_HOME"), *h = getenv("HOME");
    struct stat st;
    int no_stat = d && *d && stat(d, &st) != 0;
    if (d && *d && (no_stat || !S_ISDIR(st.st_mode))) {
        char shown[1024];
        fprintf(stderr, "pagoda: error: PAGODA_WEIGHTS_DIR='%s': %s\n",
                app_term_text(d, shown, sizeof shown),
                no_stat ? strerror(errno) : "not a directory");
        return -1;
    }
    if (d && *d)
        snprintf(buf, size, "%s/%s", d, file);
    else if (x && *x)
        snprintf(buf, size, "%s/pagoda/weights/%s", x, file);
    else if (h && *h)
        snprintf(buf, size, "%s/.local/share/pagoda/weights/%s", h, file);
    else
        return 0;
    return access(buf, R_OK) == 0;
}

void app_note_real_weights(const char *cmd, const char *repo)
{
    fprintf(stderr,
            "pagoda: note: real weights in one command: pagoda %s --weights hf:%s IMAGE (pulled "
            "once into the Hugging Face cache; 'pagoda pull --list' shows more)\n",
            cmd, repo);
}

int app_weights_or_default(const char **weights, const char *file, char *buf, size_t size)
{
    if (*weights)
        return EXIT_OK;
    int found = default_weights(file, buf, size);
    if (found < 0)
        return EXIT_USAGE;
    if (found)
        *weights = buf;
    return EXIT_OK;
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

json_t *app_report_topk(const float *logits, int B, int classes, int topk, const app_labels *labels,
                        char **sources, const char *fallback_source, int json)
{
    json_t *jall = json ? json_array() : NULL;
    ranked *rk = malloc((size_t)classes * sizeof *rk);
    int broken =
        !rk || (json && !jall); /* a JSON piece not built: no document, not a partial one */
    for (int b = 0; !broken && b < B; b++) {
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
        char shown[1024];
        if (!json)
            printf("%s:\n", app_term_text(source, shown, sizeof shown));
        for (int k = 0; k < kk; k++) {
            char fallback[32];
            snprintf(fallback, sizeof fallback, "class %d", rk[k].index);
            const char *label = labels && labels->names ? labels->names[rk[k].index]
                                : classes == 1000       ? pgd_imagenet_labels[rk[k].index]
                                                        : fallback;
            if (json)
                /* JSON has no NaN: a probability from non-finite logits (--allow-nonfinite)
                 * is null. */
                broken |=
                    json_array_append_new(
                        jtop, json_pack("{s:i, s:o, s:o}", "index", rk[k].index, "label",
                                        app_json_text(label), "probability",
                                        isfinite(rk[k].p) ? json_real(rk[k].p) : json_null())) != 0;
            else
                printf("  %6.2f%%  %4d  %s\n", 100.0 * rk[k].p, rk[k].index, label);
        }
        /* A path from argv need not be UTF-8: in JSON its invalid bytes become U+FFFD. */
        if (json)
            broken |=
                json_array_append_new(jall, json_pack("{s:i, s:o, s:o}", "image", b, "source",
                                                      app_json_text(source), "top", jtop)) != 0;
    }
    free(rk);
    if (json && broken) {
        json_decref(jall);
        return NULL;
    }
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

/* Checked without opening: opening a FIFO would block. Whether it is a regular file is checked
 * when it is read (pgd_image_load), with a message saying what it is. */
static int readable(const char *path)
{
    return access(path, R_OK) == 0;
}

int app_sample_image(char *buf, size_t size)
{
    const char *env = getenv("PAGODA_SAMPLE_IMAGE");
    if (env && *env) {
        /* Named explicitly: a file that cannot be read is an error, not a quiet fallback. */
        errno = ENAMETOOLONG;
        if ((size_t)snprintf(buf, size, "%s", env) >= size || !readable(buf)) {
            char shown[1024];
            fprintf(stderr, "pagoda: error: PAGODA_SAMPLE_IMAGE='%s': cannot read it: %s\n",
                    app_term_text(env, shown, sizeof shown), strerror(errno));
            return -1;
        }
        return 1;
    }
    snprintf(buf, size, "%s/chelsea.jpg", PGD_DATA_DIR);
    if (readable(buf))
        return 1;
    snprintf(buf, size, "%s/chelsea.jpg", PGD_SOURCE_DATA_DIR);
    return readable(buf);
}

/* The long side of what is kept of each image for drawing maps over. */
#define APP_MAP_BASE_SIDE 1024

int app_load_image(const char *path, int min_side, int exif_rotate, pgd_image **out,
                   pgd_error **err)
{
    if (!exif_rotate)
        return min_side > 0 ? pgd_image_load_scaled(path, min_side, out, err)
                            : pgd_image_load(path, out, err);
    void *buf = NULL;
    size_t size = 0;
    int rc = pgd_file_read(path, (uint64_t)512 << 20, &buf, &size, err);
    if (rc)
        return rc;
    pgd_image *img = NULL;
    rc = min_side > 0 ? pgd_image_load_memory_scaled(buf, size, path, min_side, &img, err)
                      : pgd_image_load_memory(buf, size, path, &img, err);
    int orientation = pgd_image_exif_orientation(buf, size);
    pgd_free(buf);
    if (!rc && orientation != 1) {
        pgd_image *up = NULL;
        rc = pgd_image_apply_orientation(img, orientation, &up, err);
        pgd_image_destroy(img);
        img = up;
    }
    *out = rc ? NULL : img;
    if (rc)
        pgd_image_destroy(img);
    return rc;
}

int app_load_batch(char **paths, int n, pgd_preprocess preset, int min_side, int exif_rotate,
                   float **x, pgd_image ***loaded, int64_t shape[4], pgd_error **err)
{
    const int64_t S = PGD_PREPROCESS_SIZE, per = 3 * S * S;
    *x = malloc((size_t)(n * per) * sizeof **x);
    *loaded = calloc((size_t)n, sizeof **loaded);
    int rc = (*x && *loaded) ? PGD_OK : PGD_ERR_OUT_OF_HOST_MEMORY;
    if (rc)
        pgd_error_set(err, rc, "%d images of %lld x %lld: out of host memory", n, (long long)S,
                      (long long)S);
    /* One full-size image at a time: each is preprocessed as soon as it is decoded, and only a
     * thumbnail is kept for the maps (eight 8192 x 8192 images would otherwise hold 1.6 GB). */
    for (int i = 0; i < n && !rc; i++) {
        pgd_image *full = NULL;
        rc = app_load_image(paths[i], min_side, exif_rotate, &full, err);
        if (!rc)
            rc = pgd_image_preprocess(full, preset, *x + i * per, err);
        if (!rc)
            rc = pgd_image_thumbnail(full, APP_MAP_BASE_SIDE, &(*loaded)[i], err);
        pgd_image_destroy(full);
    }
    if (rc) {
        for (int i = 0; *loaded && i < n; i++)
            pgd_image_destroy((*loaded)[i]);
        free(*loaded);
        free(*x);
        *loaded = NULL;
        *x = NULL;
        return rc;
    }
    shape[0] = n, shape[1] = 3, shape[2] = shape[3] = S;
    return PGD_OK;
}

int app_preset_parse(const char *name)
{
    return !strcmp(name, "torchvision") ? PGD_PREPROCESS_TORCHVISION
           : !strcmp(name, "timm")      ? PGD_PREPROCESS_TIMM
           : !strcmp(name, "hf")        ? PGD_PREPROCESS_HF
                                        : -1;
}

const char *app_preset_name(pgd_preprocess p)
{
    return p == PGD_PREPROCESS_TIMM ? "timm" : p == PGD_PREPROCESS_HF ? "hf" : "torchvision";
}

int app_check_finite_batch(const float *x, int B, int H, int W, const char *const *names,
                           const char *name, const char *note, pgd_error **err)
{
    int64_t plane = (int64_t)H * W, per = 3 * plane;
    int64_t bad = model_first_nonfinite(x, B * per);
    if (bad < 0)
        return PGD_OK;
    int64_t b = bad / per;
    return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT,
                         "%s: the input holds a non-finite value (%g) at [%lld, %lld, %lld, "
                         "%lld]%s (--allow-nonfinite runs it anyway)",
                         names ? names[b] : name, isnan(x[bad]) ? (double)NAN : (double)x[bad],
                         (long long)b, (long long)(bad % per / plane), (long long)(bad % plane / W),
                         (long long)(bad % W), note ? note : "");
}

void app_note_assumed(const char *label, const model_assumptions *as)
{
    char shown[1024];
    for (int i = 0; as && i < as->n; i++)
        fprintf(stderr, "pagoda: note: %s: %s not given: assumed %s (%s)\n",
                app_term_text(label, shown, sizeof shown), as->a[i].key, as->a[i].value,
                as->a[i].how);
}

json_t *app_assumed_json(const model_assumptions *as)
{
    json_t *o = json_object();
    for (int i = 0; o && as && i < as->n; i++) {
        json_t *v = json_loads(as->a[i].value, JSON_DECODE_ANY, NULL);
        if (json_object_set_new(o, as->a[i].key, v ? v : json_string(as->a[i].value))) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

int app_side_json(const char *weights, const char *name, char *path, size_t size, json_t **out)
{
    *out = NULL;
    const char *slash = strrchr(weights, '/');
    int dir = slash ? (int)(slash - weights) : 0;
    if (snprintf(path, size, "%.*s%s%s", dir, weights, slash ? "/" : "", name) >= (int)size) {
        fprintf(stderr, "pagoda: error: the path of %s beside %s is too long\n", name, weights);
        return EXIT_USAGE;
    }
    void *text = NULL;
    size_t n = 0;
    pgd_error *err = NULL;
    if (pgd_file_read(path, UINT64_C(1) << 20, &text, &n, &err)) {
        if (pgd_error_get_code(err) == PGD_ERR_NOT_FOUND) {
            pgd_error_destroy(err);
            return EXIT_OK;
        }
        return app_fail(err);
    }
    json_error_t je;
    *out = json_loadb(text, n, JSON_REJECT_DUPLICATES, &je);
    pgd_free(text);
    char shown[1024];
    if (!*out)
        fprintf(stderr, "pagoda: error: %s: not valid JSON (line %d: %s)\n",
                app_term_text(path, shown, sizeof shown), je.line, je.text);
    else if (!json_is_object(*out))
        fprintf(stderr, "pagoda: error: %s: not a JSON object\n",
                app_term_text(path, shown, sizeof shown));
    else
        return EXIT_OK;
    json_decref(*out);
    *out = NULL;
    return EXIT_RUNTIME;
}

int app_hf_side_config(const char *weights, int *heads, float *eps, char *path, size_t size)
{
    json_t *cfg = NULL;
    int rc = app_side_json(weights, "config.json", path, size, &cfg);
    if (rc || !cfg)
        return rc;
    json_t *h = json_object_get(cfg, "num_attention_heads");
    json_t *e = json_object_get(cfg, "layer_norm_eps");
    const char *bad = NULL, *rule = NULL;
    if (heads && h &&
        (!json_is_integer(h) || json_integer_value(h) < 1 || json_integer_value(h) > 4096))
        bad = "num_attention_heads", rule = "a whole number from 1 to 4096";
    else if (e && (!json_is_number(e) || !(json_number_value(e) > 0 && json_number_value(e) < 1)))
        bad = "layer_norm_eps", rule = "a number between 0 and 1";
    if (!bad && heads && h && !*heads)
        *heads = (int)json_integer_value(h);
    if (!bad && e)
        *eps = (float)json_number_value(e);
    json_decref(cfg);
    if (!bad)
        return EXIT_OK;
    char shown[1024];
    fprintf(stderr, "pagoda: error: %s: '%s' must be %s\n",
            app_term_text(path, shown, sizeof shown), bad, rule);
    return EXIT_RUNTIME;
}

int app_vit_detect(model_source *src, const char *weights, int heads, vit_config *cfg)
{
    char path[4096];
    float eps = 0.0f;
    int rc = app_hf_side_config(weights, &heads, &eps, path, sizeof path);
    pgd_error *err = NULL;
    if (rc)
        return rc;
    if (vit_detect(src, heads, cfg, &err))
        return app_fail(err);
    if (eps > 0.0f)
        cfg->eps = eps;
    else if (cfg->family == VIT_HF) /* HF's ViTConfig default; its checkpoints may say another */
        model_assume(&cfg->assumed, "eps", "1e-12", "layer_norm_eps in config.json");
    app_note_assumed(weights, &cfg->assumed);
    return EXIT_OK;
}
