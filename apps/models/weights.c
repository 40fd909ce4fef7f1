/* weights.c — a model_source over a safetensors file. */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "model.h"

static int st_shape(void *u, const char *name, int *ndim, int64_t shape[8])
{
    pgd_weight_info info;
    if (pgd_weights_find(u, name, &info) != PGD_OK)
        return -1;
    *ndim = info.ndim;
    for (int i = 0; i < info.ndim && i < 8; i++)
        shape[i] = info.shape[i];
    return 0;
}

static int st_read(void *u, const char *name, float *dst, pgd_error **err)
{
    return pgd_weights_to_float(u, name, dst, err);
}

static const char *st_meta(void *u, const char *key)
{
    return pgd_weights_get_metadata(u, key);
}

static const char *st_name_at(void *u, size_t i)
{
    return i < pgd_weights_get_count(u) ? pgd_weights_get_name(u, i) : NULL;
}

void model_shape_str(int ndim, const int64_t *s, char *buf, size_t size)
{
    size_t used = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < ndim && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%lld", i ? ", " : "", (long long)s[i]);
    if (used < size)
        snprintf(buf + used, size - used, "]");
}

/* ---- exact tensors ---- */

/* The names one load consumed, sorted once checked (model_check_consumed). */
struct model_used {
    char **names;
    size_t n, cap;
};

int model_track_begin(model_source *src, pgd_error **err)
{
    src->used = calloc(1, sizeof *src->used);
    if (!src->used)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "%s: the list of tensors used",
                             src->label);
    return PGD_OK;
}

void model_track_end(model_source *src)
{
    if (!src->used)
        return;
    for (size_t i = 0; i < src->used->n; i++)
        free(src->used->names[i]);
    free(src->used->names);
    free(src->used);
    src->used = NULL;
}

void model_mark(const model_source *src, const char *name)
{
    model_used *u = src->used;
    if (!u)
        return;
    if (u->n == u->cap) {
        size_t cap = u->cap ? 2 * u->cap : 256;
        char **names = realloc(u->names, cap * sizeof *names);
        if (!names)
            return; /* the name is then reported as unused: an error, never a silent pass */
        u->names = names;
        u->cap = cap;
    }
    size_t len = strlen(name) + 1;
    char *copy = malloc(len);
    if (copy)
        u->names[u->n++] = memcpy(copy, name, len);
}

static int64_t count(int ndim, const int64_t *s)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= s[i];
    return n;
}

static int same_shape(int nd, const int64_t *s, const model_shape *want)
{
    if (nd != want->ndim)
        return 0;
    for (int i = 0; i < nd; i++)
        if (s[i] != want->d[i])
            return 0;
    return 1;
}

/* "[a, b]", or "[a, b] or [c]" for several accepted layouts. */
static void shapes_str(const model_shape *ok, int nok, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int k = 0; k < nok && used + 8 < size; k++) {
        if (k)
            used += (size_t)snprintf(buf + used, size - used, " or ");
        model_shape_str(ok[k].ndim, ok[k].d, buf + used, size - used);
        used = strlen(buf);
    }
}

int model_need_shapes(const model_source *src, const char *name, const model_shape *ok, int nok,
                      pgd_error **err)
{
    int nd = 0;
    int64_t s[8];
    char ws[200], gs[96];
    shapes_str(ok, nok, ws, sizeof ws);
    if (src->shape(src->u, name, &nd, s) != 0)
        return pgd_error_set(err, PGD_ERR_NOT_FOUND, "%s: tensor '%s' %s is missing", src->label,
                             name, ws);
    for (int k = 0; k < nok; k++)
        if (same_shape(nd, s, &ok[k])) {
            model_mark(src, name);
            return PGD_OK;
        }
    model_shape_str(nd, s, gs, sizeof gs);
    return pgd_error_set(err, PGD_ERR_SHAPE, "%s: tensor '%s' has shape %s, expected %s",
                         src->label, name, gs, ws);
}

int model_need(const model_source *src, const char *name, int want_ndim, const int64_t *want,
               pgd_error **err)
{
    model_shape one = {want_ndim > 8 ? 8 : want_ndim, {0}};
    for (int i = 0; i < one.ndim; i++)
        one.d[i] = want[i];
    return model_need_shapes(src, name, &one, 1, err);
}

void model_assume(model_assumptions *as, const char *key, const char *value, const char *how)
{
    int i = 0;
    while (i < as->n && strcmp(as->a[i].key, key))
        i++;
    if (i == MODEL_MAX_ASSUMED)
        return;
    model_assumed *a = &as->a[i];
    snprintf(a->key, sizeof a->key, "%s", key);
    snprintf(a->value, sizeof a->value, "%s", value);
    snprintf(a->how, sizeof a->how, "%s", how);
    as->n += i == as->n;
}

int64_t model_first_nonfinite(const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return i;
    return -1;
}

/* "[i, j, k]": the multi-index of flat index `flat` in shape s. */
static void index_str(int64_t flat, int nd, const int64_t *s, char *buf, size_t size)
{
    int64_t idx[8];
    for (int i = nd - 1; i >= 0; i--) {
        idx[i] = s[i] > 0 ? flat % s[i] : 0;
        flat = s[i] > 0 ? flat / s[i] : 0;
    }
    model_shape_str(nd, idx, buf, size);
}

int model_read(const model_source *src, const char *name, float *dst, int64_t n, pgd_error **err)
{
    int nd = 0;
    int64_t s[8];
    if (src->shape(src->u, name, &nd, s) != 0 || nd > 8)
        return pgd_error_set(err, PGD_ERR_NOT_FOUND, "%s: tensor '%s' is missing", src->label,
                             name);
    if (count(nd, s) != n) {
        char gs[96];
        model_shape_str(nd, s, gs, sizeof gs);
        return pgd_error_set(err, PGD_ERR_SHAPE,
                             "%s: tensor '%s' has shape %s, not the %lld "
                             "values expected",
                             src->label, name, gs, (long long)n);
    }
    int rc = src->read(src->u, name, dst, err);
    if (rc)
        return rc;
    model_mark(src, name);
    int64_t bad = model_first_nonfinite(dst, count(nd, s));
    if (bad < 0)
        return PGD_OK;
    char at[128];
    index_str(bad, nd, s, at, sizeof at);
    return pgd_error_set(err, PGD_ERR_FORMAT,
                         "%s: tensor '%s' holds a non-finite value (%g) at index %s (element "
                         "%lld): weights must be finite",
                         src->label, name, isnan(dst[bad]) ? (double)NAN : (double)dst[bad], at,
                         (long long)bad);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int was_used(const model_used *u, const char *name)
{
    return u->n && bsearch(&name, u->names, u->n, sizeof *u->names, by_name) != NULL;
}

/* On the ignore list: its last component is an entry's suffix and (where the entry names one)
 * its sibling `companion` was consumed. */
static int ignored(const model_used *u, const char *name, const model_ignore *ig, size_t nig)
{
    const char *dot = strrchr(name, '.');
    size_t plen = dot ? (size_t)(dot - name) + 1 : 0;
    for (size_t k = 0; k < nig; k++) {
        if (strcmp(name + plen, ig[k].suffix))
            continue;
        if (!ig[k].companion)
            return 1;
        char sib[512];
        snprintf(sib, sizeof sib, "%.*s%s", (int)plen, name, ig[k].companion);
        if (was_used(u, sib))
            return 1;
    }
    return 0;
}

int model_check_consumed(const model_source *src, const model_ignore *ignore, size_t n_ignore,
                         pgd_error **err)
{
    const model_used *u = src->used;
    if (!u || !src->name_at)
        return PGD_OK;
    if (u->n)
        qsort(u->names, u->n, sizeof *u->names, by_name);
    const char *first = NULL, *name;
    size_t others = 0;
    for (size_t i = 0; (name = src->name_at(src->u, i)) != NULL; i++) {
        if (was_used(u, name) || ignored(u, name, ignore, n_ignore))
            continue;
        if (!first)
            first = name;
        else
            others++;
    }
    if (!first)
        return PGD_OK;
    char more[64] = "";
    if (others)
        snprintf(more, sizeof more, " (and %zu other%s)", others, others == 1 ? "" : "s");
    return pgd_error_set(err, PGD_ERR_FORMAT,
                         "%s: tensor '%s'%s is not used by the model: a name it does not know, "
                         "a block it does not have, or a block index written another way",
                         src->label, first, more);
}

int model_parse_index(const char *s, int *out)
{
    if (s[0] == '0') {
        *out = 0;
        return (s[1] >= '0' && s[1] <= '9') ? 0 : 1;
    }
    int n = 0, v = 0;
    while (s[n] >= '0' && s[n] <= '9' && n < 6)
        v = v * 10 + (s[n++] - '0');
    if (n == 0 || (s[n] >= '0' && s[n] <= '9'))
        return 0;
    *out = v;
    return n;
}

int model_count_indexed(const model_source *src, const char *prefix, const char *follow)
{
    if (!src->name_at)
        return -1;
    size_t pl = strlen(prefix), fl = strlen(follow);
    int blocks = 0;
    const char *name;
    for (size_t i = 0; (name = src->name_at(src->u, i)) != NULL; i++) {
        int idx = 0, n;
        if (strncmp(name, prefix, pl) || !(n = model_parse_index(name + pl, &idx)) ||
            strncmp(name + pl + n, follow, fl))
            continue;
        if (idx + 1 > blocks)
            blocks = idx + 1;
    }
    return blocks;
}

int model_probe_tensor(model_probe *p, const pgd_tensor *t, pgd_error **err, const char *stage, ...)
{
    if (!p || p->stage[0])
        return PGD_OK;
    int64_t n = pgd_tensor_get_numel(t);
    float *h = malloc((size_t)(n > 0 ? n : 1) * sizeof *h);
    if (!h)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "checking a stage's output");
    int rc = pgd_tensor_download(t, h, err);
    int64_t bad = rc ? -1 : model_first_nonfinite(h, n);
    if (bad >= 0) {
        va_list ap;
        va_start(ap, stage);
        vsnprintf(p->stage, sizeof p->stage, stage, ap);
        va_end(ap);
        p->index = bad;
        p->value = h[bad];
    }
    free(h);
    return rc;
}

void model_weights_source(model_source *src, pgd_weights *w, const char *label)
{
    *src = (model_source){.u = w,
                          .label = label,
                          .shape = st_shape,
                          .read = st_read,
                          .meta = st_meta,
                          .name_at = st_name_at};
}

static void st_release(void *u)
{
    pgd_weights_destroy(u);
}

/* An .onnx file is a source without tensors that names its format (onnx_family.c reads it). */
static const char *onnx_meta(void *u, const char *key)
{
    (void)u;
    return !strcmp(key, "pagoda.format") ? "onnx" : NULL;
}

static int onnx_shape(void *u, const char *name, int *ndim, int64_t shape[8])
{
    (void)u, (void)name, (void)ndim, (void)shape;
    return -1;
}

static int onnx_read(void *u, const char *name, float *dst, pgd_error **err)
{
    (void)dst;
    return pgd_error_set(err, PGD_ERR_NOT_FOUND, "%s: an ONNX file has no tensor '%s' to read",
                         (const char *)u, name);
}

int model_source_open(model_source *src, const char *path, pgd_error **err)
{
    memset(src, 0, sizeof *src);
    size_t n = strlen(path);
    if (n > 5 && !strcmp(path + n - 5, ".onnx")) {
        *src = (model_source){.u = (void *)path,
                              .label = path,
                              .shape = onnx_shape,
                              .read = onnx_read,
                              .meta = onnx_meta};
        return PGD_OK;
    }
    pgd_weights *w = NULL;
    int rc = pgd_weights_open(path, &w, err);
    if (rc)
        return rc;
    model_weights_source(src, w, path);
    src->release = st_release;
    return PGD_OK;
}

void model_source_free(model_source *src)
{
    if (src && src->release)
        src->release(src->u);
    if (src)
        memset(src, 0, sizeof *src);
}

/* ---- sizes read from a checkpoint ---- */

int model_size(const model_source *src, const char *tensor, const char *what, int64_t v,
               int64_t max, int *out, pgd_error **err)
{
    if (v >= 1 && v <= max && v <= INT32_MAX) {
        *out = (int)v;
        return PGD_OK;
    }
    if (v == 0)
        return pgd_error_set(err, PGD_ERR_SHAPE,
                             "%s: tensor '%s' has a zero dimension: 0 %s (it must be 1 .. %lld)",
                             src->label, tensor, what, (long long)max);
    return pgd_error_set(err, PGD_ERR_SHAPE, "%s: tensor '%s' gives %lld %s: it must be 1 .. %lld",
                         src->label, tensor, (long long)v, what, (long long)max);
}

int64_t model_mul(int64_t a, int64_t b)
{
    const int64_t limit = INT64_MAX / 16;
    if (a < 0 || b < 0 || (a && b > limit / a))
        return -1;
    return a * b;
}

static double mib(uint64_t b)
{
    return (double)b / (1024.0 * 1024.0);
}

/* The machine's physical memory in bytes; UINT64_MAX where the system does not say. */
static uint64_t host_memory(void)
{
#if defined(_SC_PHYS_PAGES) && defined(_SC_PAGESIZE)
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0)
        return (uint64_t)pages * (uint64_t)page;
#endif
    return UINT64_MAX;
}

int model_check_alloc(pgd_ctx *ctx, int host, int64_t bytes, const char *what, pgd_error **err)
{
    if (bytes < 0)
        return pgd_error_set(err, PGD_ERR_TOO_LARGE,
                             "%s: the size overflows 64-bit arithmetic (a hostile or corrupt "
                             "shape)",
                             what);
    uint64_t have = host_memory();
    if (host && (uint64_t)bytes > have)
        return pgd_error_set(err, PGD_ERR_TOO_LARGE,
                             "%s needs %lld bytes (%.1f MiB) of host memory, more than the "
                             "%" PRIu64 " bytes (%.1f MiB) this machine has",
                             what, (long long)bytes, mib((uint64_t)bytes), have, mib(have));
    const pgd_device_info *d = ctx ? pgd_ctx_get_device(ctx) : NULL;
    if (d && (uint64_t)bytes > d->max_alloc)
        return pgd_error_set(err, PGD_ERR_TOO_LARGE,
                             "%s needs a buffer of %lld bytes (%.1f MiB), more than the %" PRIu64
                             " bytes (%.1f MiB) '%s' allows in one buffer "
                             "(CL_DEVICE_MAX_MEM_ALLOC_SIZE)",
                             what, (long long)bytes, mib((uint64_t)bytes), d->max_alloc,
                             mib(d->max_alloc), d->name);
    return PGD_OK;
}

/* ---- fitting a model on the device ---- */

uint64_t model_weight_bytes(const model_source *src)
{
    uint64_t total = 0;
    if (!src->name_at)
        return 0;
    for (size_t i = 0;; i++) {
        const char *name = src->name_at(src->u, i);
        int nd;
        int64_t s[8];
        if (!name)
            break;
        if (src->shape(src->u, name, &nd, s) == 0 && nd <= 8) {
            int64_t n = count(nd, s);
            if (n > 0)
                total += (uint64_t)n * sizeof(float);
        }
    }
    return total;
}

int model_check_fits(pgd_ctx *ctx, const model_source *src, const char *what, pgd_error **err)
{
    uint64_t need = model_weight_bytes(src);
    const pgd_device_info *d = pgd_ctx_get_device(ctx);
    if (need > d->global_mem)
        return pgd_error_set(err, PGD_ERR_TOO_LARGE,
                             "%s '%s' need %" PRIu64 " bytes (%.1f MiB) as float32 on "
                             "the device, more than the %" PRIu64 " bytes (%.1f MiB) of global "
                             "memory of '%s'",
                             what, src->label, need, mib(need), d->global_mem, mib(d->global_mem),
                             d->name);
    return PGD_OK;
}

/* Images per pass (model_forward_batched); 0 with *err set when one image does not fit. */
static int batch_plan(pgd_ctx *ctx, int B, uint64_t per_image, uint64_t largest, const char *what,
                      pgd_error **err)
{
    const pgd_device_info *d = pgd_ctx_get_device(ctx);
    /* Leave an eighth of the device for the driver, kernels' scratch and other programs. */
    pgd_memory_stats mem;
    pgd_ctx_get_memory_stats(ctx, &mem);
    uint64_t usable = d->global_mem - d->global_mem / 8, held = mem.live_bytes;
    uint64_t room = usable > held ? usable - held : 0;
    uint64_t fit = per_image ? room / per_image : (uint64_t)B;
    if (largest && d->max_alloc / largest < fit)
        fit = d->max_alloc / largest;
    if (fit < 1) {
        if (largest > d->max_alloc) {
            pgd_error_set(err, PGD_ERR_TOO_LARGE,
                          "%s: one image needs a %" PRIu64 "-byte buffer (%.1f MiB), more than "
                          "the %" PRIu64 " bytes '%s' allows in one buffer "
                          "(CL_DEVICE_MAX_MEM_ALLOC_SIZE)",
                          what, largest, mib(largest), d->max_alloc, d->name);
            return 0;
        }
        pgd_error_set(err, PGD_ERR_TOO_LARGE,
                      "%s: one image needs about %" PRIu64 " bytes (%.1f MiB) of activations; "
                      "'%s' has %" PRIu64 " bytes (%.1f MiB) of global memory and the model "
                      "holds %" PRIu64 " (%.1f MiB)",
                      what, per_image, mib(per_image), d->name, d->global_mem, mib(d->global_mem),
                      held, mib(held));
        return 0;
    }
    int b = fit < (uint64_t)B ? (int)fit : B;
    int64_t cap = 0; /* $PAGODA_MAX_BATCH */
    if (pgd_ctx_get_knob(ctx, "max_batch", &cap) == PGD_OK && cap > 0 && cap < b)
        b = (int)cap;
    return b;
}

/* B images as passes of at most b, halved on running out of device memory; *last_split: the
 * images per pass in the end; *peak_per_image: device bytes per image the last pass took. */
static int run_passes(pgd_ctx *ctx, int B, int b, int ntimes, model_pass_fn pass, void *u,
                      int *last_split, uint64_t *peak_per_image, double *times, pgd_error **err)
{
    double sum[8] = {0};
    int rc = PGD_OK;
    *last_split = b;
    for (int i = 0; i < B && !rc;) {
        int n = B - i < b ? B - i : b;
        double t[8] = {0};
        pgd_memory_stats mem;
        pgd_ctx_get_memory_stats(ctx, &mem);
        uint64_t base = mem.live_bytes;
        pgd_ctx_memory_reset_peak(ctx);
        /* No times asked for: none asked of the pass either, so that it does not drain the
         * queue between its stages to time them (ResNet-50 at batch 1: two waits a pass). */
        rc = pass(u, i, n, times ? t : NULL, err);
        if ((rc == PGD_ERR_ALLOCATION || rc == PGD_ERR_OUT_OF_RESOURCES ||
             rc == PGD_ERR_TOO_LARGE) &&
            n > 1) {
            /* Out of device memory after all: the same images in smaller passes. */
            if (err) {
                pgd_error_destroy(*err);
                *err = NULL;
            }
            b = n / 2;
            *last_split = b;
            rc = PGD_OK;
            continue;
        }
        if (!rc) {
            pgd_ctx_get_memory_stats(ctx, &mem);
            *peak_per_image = (mem.peak_bytes - base) / (uint64_t)n;
            for (int k = 0; k < ntimes && k < 8; k++)
                sum[k] += t[k];
            i += n;
        }
    }
    if (times && !rc)
        memcpy(times, sum, (size_t)ntimes * sizeof *times);
    return rc;
}

int model_forward_batched(pgd_ctx *ctx, model_batching *mb, int H, int W, int maps, int B,
                          uint64_t per_image, uint64_t largest, const char *what, int ntimes,
                          model_pass_fn pass, void *u, double *times, pgd_error **err)
{
    if (mb->h == H && mb->w == W && mb->maps == maps && mb->bytes > per_image)
        per_image = mb->bytes;
    int b = batch_plan(ctx, B, per_image, largest, what, err);
    if (b < 1)
        return PGD_ERR_TOO_LARGE;
    uint64_t peak = 0;
    int rc = run_passes(ctx, B, b, ntimes, pass, u, &mb->last_split, &peak, times, err);
    if (!rc) {
        mb->h = H;
        mb->w = W;
        mb->maps = maps;
        mb->bytes = peak;
    }
    return rc;
}

double model_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

double model_stage_end(pgd_ctx *ctx, int timed, int *rc, pgd_error **err)
{
    if (!*rc && timed)
        *rc = pgd_ctx_finish(ctx, err);
    return model_now_ms();
}

void model_fill_seeded(float *dst, int64_t n, uint64_t state, float amp)
{
    uint64_t h = state;
    for (int64_t i = 0; i < n; i++) {
        h ^= h >> 12;
        h ^= h << 25;
        h ^= h >> 27;
        double u = (double)((h * 0x2545F4914F6CDD1Dull) >> 11) / 9007199254740992.0;
        dst[i] = (float)(amp * (2 * u - 1));
    }
}

int model_upload(pgd_ctx *ctx, const float *data, int ndim, const int64_t *shape, pgd_tensor **out,
                 pgd_error **err)
{
    return pgd_tensor_create_from(ctx, ndim, shape, data, out, err);
}

/* ---- seeded random weights ---- */

typedef struct rand_model {
    model_shape_fn shape;
    uint64_t seed;
    const char *unit;
    max_align_t cfg[]; /* the configuration's bytes */
} rand_model;

static int rand_shape(void *u, const char *name, int *ndim, int64_t s[8])
{
    const rand_model *r = u;
    return r->shape(r->cfg, name, ndim, s);
}

static int rand_read(void *u, const char *name, float *dst, pgd_error **err)
{
    const rand_model *r = u;
    int nd;
    int64_t s[8];
    if (r->shape(r->cfg, name, &nd, s) != 0)
        return pgd_error_set(err, PGD_ERR_NOT_FOUND, "random weights: no tensor '%s'", name);
    uint64_t h = r->seed * 0x9E3779B97F4A7C15ull;
    for (const char *p = name; *p; p++)
        h = (h ^ (unsigned char)*p) * 0x100000001B3ull;
    int64_t n = 1;
    for (int i = 0; i < nd; i++)
        n *= s[i];
    size_t len = strlen(name);
    int is_norm_w = len > 7 && !strcmp(name + len - 7, ".weight") &&
                    (strstr(name, "norm") || (r->unit && !strcmp(name, r->unit)));
    int is_bias = len > 5 && !strcmp(name + len - 5, ".bias");
    float amp = is_bias ? 0.01f : 0.035f;
    model_fill_seeded(dst, n, h ? h : 1, 1.0f);
    for (int64_t i = 0; i < n; i++)
        dst[i] = is_norm_w ? 1.0f + 0.1f * dst[i] : amp * dst[i];
    return PGD_OK;
}

static const char *rand_meta(void *u, const char *key)
{
    (void)u;
    (void)key;
    return NULL;
}

int model_random_source(model_source *src, const void *cfg, size_t cfg_size, model_shape_fn shape,
                        const char *unit, uint64_t seed, pgd_error **err)
{
    memset(src, 0, sizeof *src);
    rand_model *r = malloc(sizeof *r + cfg_size);
    if (!r)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "random weights");
    r->shape = shape;
    r->seed = seed;
    r->unit = unit;
    memcpy(r->cfg, cfg, cfg_size);
    *src = (model_source){.u = r,
                          .label = "random weights",
                          .shape = rand_shape,
                          .read = rand_read,
                          .meta = rand_meta,
                          .release = free};
    return PGD_OK;
}

int model_read_host(const model_source *src, const char *name, int ndim, const int64_t *shape,
                    float **host, pgd_error **err)
{
    *host = NULL;
    int rc = model_need(src, name, ndim, shape, err);
    if (rc)
        return rc;
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    if (!(*host = malloc((size_t)n * sizeof **host + 1)))
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "reading '%s'", name);
    if ((rc = model_read(src, name, *host, n, err))) {
        free(*host);
        *host = NULL;
    }
    return rc;
}

int model_load_tensor(pgd_ctx *ctx, const model_source *src, const char *name, int ndim,
                      const int64_t *shape, pgd_tensor **out, pgd_error **err)
{
    float *host;
    *out = NULL;
    int rc = model_read_host(src, name, ndim, shape, &host, err);
    if (!rc)
        rc = model_upload(ctx, host, ndim, shape, out, err);
    free(host);
    return rc;
}

int model_mean_row(pgd_ctx *ctx, int64_t n, pgd_tensor **row, pgd_error **err)
{
    if (*row && pgd_tensor_get_numel(*row) == n)
        return PGD_OK;
    pgd_tensor_destroy(*row);
    *row = NULL;
    float *host = malloc((size_t)(n > 0 ? n : 1) * sizeof *host);
    if (!host)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "token mean of %lld rows",
                             (long long)n);
    for (int64_t t = 0; t < n; t++)
        host[t] = 1.0f / (float)n;
    int64_t shape[2] = {1, n};
    int rc = model_upload(ctx, host, 2, shape, row, err);
    free(host);
    return rc;
}

int model_load_strict(const model_source *src, model_load_fn load, void *model,
                      const model_ignore *ignore, size_t n_ignore, pgd_error **err)
{
    model_source ts = *src;
    int rc = model_track_begin(&ts, err);
    if (!rc)
        rc = load(model, &ts, err);
    if (!rc)
        rc = model_check_consumed(&ts, ignore, n_ignore, err);
    model_track_end(&ts);
    return rc;
}
