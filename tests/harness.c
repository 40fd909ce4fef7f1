/* harness.c — helpers shared by the Check suites. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "internal.h" /* pgd_test_prefix builds a view over a tensor's buffer */

static pgd_device_info *all_devices, *devices;
static size_t all_count, device_count;

const char *pgd_test_device_key(const pgd_device_info *d)
{
    if (strstr(d->platform, "Portable Computing Language") || strstr(d->platform_version, "PoCL"))
        return "pocl";
    if (strstr(d->platform, "rusticl"))
        return "rusticl";
    if (strstr(d->platform, "Intel") && d->type == PGD_DEVICE_CPU)
        return "intel";
    return d->type == PGD_DEVICE_GPU ? "gpu" : "other";
}

/* $PAGODA_TEST_DEVICE: a key of pgd_test_device_key, or a selector as for pgd_device_select
 * ("1:0", "llvmpipe", ...): the devices it names, in enumeration order. */
static int wanted(const pgd_device_info *d, const char *want)
{
    if (!strcmp(pgd_test_device_key(d), want))
        return 1;
    for (const char *k = "pocl\0rusticl\0intel\0gpu\0other\0"; *k; k += strlen(k) + 1)
        if (!strcmp(k, want))
            return 0; /* a key that is not d's */
    size_t at;
    return pgd_device_select(all_devices, all_count, want, &at, NULL) == PGD_OK &&
           &all_devices[at] == d;
}

const pgd_device_info *pgd_test_devices(size_t *count)
{
    if (!devices) {
        pgd_error *err = NULL;
        if (pgd_devices_list(&all_devices, &all_count, &err) != PGD_OK) {
            fprintf(stderr, "SKIP: %s\n", pgd_error_get_message(err));
            pgd_error_destroy(err);
            exit(77);
        }
        const char *want = getenv("PAGODA_TEST_DEVICE");
        devices = all_devices;
        device_count = all_count;
        if (want && *want) {
            devices = malloc(all_count * sizeof *devices);
            ck_assert_ptr_nonnull(devices);
            device_count = 0;
            for (size_t i = 0; i < all_count; i++)
                if (wanted(&all_devices[i], want))
                    devices[device_count++] = all_devices[i];
            if (!device_count) {
                fprintf(stderr,
                        "SKIP: PAGODA_TEST_DEVICE=%s: no such device here (keys pocl, "
                        "rusticl, intel, gpu, other, or a selector; `pagoda devices` lists "
                        "them)\n",
                        want);
                exit(77);
            }
            printf("devices: %zu of %zu (PAGODA_TEST_DEVICE=%s)\n", device_count, all_count, want);
        }
    }
    *count = device_count;
    return devices;
}

int pgd_test_primary(void)
{
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    if (d == all_devices)
        return 1; /* every device in this process */
    /* the first device whose key is one of those meson runs ($PAGODA_TEST_KEYS), else the first */
    const char *keys = getenv("PAGODA_TEST_KEYS");
    const pgd_device_info *primary = &all_devices[0];
    for (size_t i = 0; keys && i < all_count; i++) {
        const char *k = pgd_test_device_key(&all_devices[i]), *at = strstr(keys, k);
        size_t len = strlen(k);
        if (at && (at == keys || at[-1] == ' ') && (at[len] == ' ' || !at[len])) {
            primary = &all_devices[i];
            break;
        }
    }
    for (size_t i = 0; i < n; i++)
        if (pgd_test_device_ordinal(&d[i]) == (size_t)(primary - all_devices))
            return 1;
    printf("device-independent checks: run with %s (%s) only\n", primary->name,
           pgd_test_device_key(primary));
    return 0;
}

size_t pgd_test_device_ordinal(const pgd_device_info *d)
{
    for (size_t i = 0; i < all_count; i++)
        if (all_devices[i].platform_index == d->platform_index &&
            all_devices[i].device_index == d->device_index)
            return i;
    return 0;
}

const char *pgd_test_selector(const pgd_device_info *d)
{
    static char bufs[4][32];
    static int slot;
    char *b = bufs[slot++ & 3];
    snprintf(b, 32, "%d:%d", d->platform_index, d->device_index);
    return b;
}

pgd_ctx *pgd_test_ctx(const pgd_device_info *d)
{
    pgd_ctx *ctx = NULL;
    pgd_error *err = NULL;
    int rc = pgd_ctx_create(pgd_test_selector(d), &ctx, &err);
    ck_assert_msg(rc == PGD_OK, "context on %s: %s", d->name, pgd_error_get_message(err));
    return ctx;
}

void pgd_test_options(const pgd_device_info *d, const char *const *vars, pgd_ctx_options *o)
{
    pgd_error *err = NULL;
    pgd_ctx_options_init(o);
    int rc = pgd_ctx_options_from_env(o, &err);
    if (!rc && vars)
        rc = pgd_ctx_options_from_envp(o, vars, &err);
    ck_assert_msg(rc == PGD_OK, "test options: %s", pgd_error_get_message(err));
    if (d)
        o->device = pgd_test_selector(d);
}

pgd_ctx *pgd_test_ctx_opts(const pgd_ctx_options *o)
{
    pgd_ctx *ctx = NULL;
    pgd_error *err = NULL;
    int rc = pgd_ctx_create_with_options(o, &ctx, &err);
    ck_assert_msg(rc == PGD_OK, "context on %s: %s", o->device ? o->device : "the default device",
                  pgd_error_get_message(err));
    return ctx;
}

void pgd_test_knob(pgd_ctx_options *o, const char *key, int64_t value)
{
    char text[32] = "";
    if (value)
        snprintf(text, sizeof text, "%lld", (long long)value);
    pgd_error *err = NULL;
    int rc = pgd_ctx_options_set_knob(o, key, text, &err);
    ck_assert_msg(rc == PGD_OK, "knob %s=%s: %s", key, text, pgd_error_get_message(err));
}

pgd_ctx *pgd_test_ctx_with(const pgd_device_info *d, const char *const *vars)
{
    pgd_ctx_options o;
    pgd_test_options(d, vars, &o);
    return pgd_test_ctx_opts(&o);
}

long pgd_test_launches(pgd_ctx *ctx, const char *name)
{
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    ck_assert_ptr_nonnull(f);
    pgd_error *err = NULL;
    int rc = pgd_profile_print(ctx, f, &err);
    fclose(f);
    ck_assert_msg(rc == PGD_OK, "profile: %s", pgd_error_get_message(err));
    long n = 0;
    size_t len = strlen(name);
    /* the table's rows begin with the kernel's name, then its launches */
    for (const char *at = text; (at = strstr(at, name)) != NULL; at += len)
        if ((at == text || at[-1] == '\n') && at[len] == ' ')
            n = strtol(at + len, NULL, 10);
    free(text);
    return n;
}

int pgd_test_allclose(const float *got, const double *want, size_t n, double rtol, double atol,
                      const char *what)
{
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++) {
        double g = got[i];
        int ok = isfinite(g) && fabs(g - want[i]) <= atol + rtol * fabs(want[i]);
        if (!ok && bad++ == 0)
            first = i;
    }
    if (bad)
        fprintf(stderr, "%s: %zu of %zu elements differ; first at index %zu: got %.9g, want %.9g\n",
                what, bad, n, first, (double)got[first], want[first]);
    return bad == 0;
}

double pgd_test_diff_error(const float *got, const double *want, size_t rows, size_t width,
                           size_t stride, double *share)
{
    double err = 0, scale = 0, top = 0;
    for (size_t r = 0; r < rows; r++)
        for (size_t k = 0; k < width; k++) {
            double w = want[r * stride + k];
            top = fmax(top, fabs(w));
            if (r == 0)
                continue;
            double dw = w - want[k], dg = (double)got[r * stride + k] - got[k];
            scale = fmax(scale, fabs(dw));
            /* fmax drops a NaN: a non-finite difference is an infinite error */
            err = isfinite(dg) ? fmax(err, fabs(dg - dw)) : INFINITY;
        }
    if (share)
        *share = top > 0 ? scale / top : 0;
    return scale > 0 ? err / scale : INFINITY;
}

int pgd_test_diffclose(const float *got, const double *want, size_t rows, size_t width,
                       size_t stride, double rtol, const char *what)
{
    double share;
    double e = pgd_test_diff_error(got, want, rows, width, stride, &share);
    int ok = e <= rtol;
    printf("%s: input-dependent part (rows minus row 0, %.2g of the output) within %.3g "
           "relative%s\n",
           what, share, e, ok ? "" : " -- FAILS");
    if (!ok)
        fprintf(stderr,
                "%s: rows minus row 0 differ from PyTorch's by %.3g of their size "
                "(tolerance %.3g)\n",
                what, e, rtol);
    return ok;
}

void pgd_rng_seed(pgd_rng *r, uint64_t seed)
{
    r->s = seed * 0x9E3779B97F4A7C15ull + 1;
}

uint64_t pgd_rng_next(pgd_rng *r)
{
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 0x2545F4914F6CDD1Dull;
}

int64_t pgd_rng_int(pgd_rng *r, int64_t lo, int64_t hi)
{
    return lo + (int64_t)(pgd_rng_next(r) % (uint64_t)(hi - lo + 1));
}

float pgd_rng_float(pgd_rng *r)
{
    return (float)((double)(pgd_rng_next(r) >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

char *pgd_test_tempdir(const char *tag)
{
    const char *base = getenv("PAGODA_TEST_TMP");
    char tmpl[4096];
    snprintf(tmpl, sizeof tmpl, "%s/pagoda-%s-XXXXXX", base && *base ? base : "/tmp", tag);
    if (!mkdtemp(tmpl))
        return NULL;
    return pgd__strdup(tmpl);
}

void pgd_test_rmtree(const char *path)
{
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            char sub[4096];
            snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
            struct stat st;
            if (lstat(sub, &st) == 0 && S_ISDIR(st.st_mode)) {
                chmod(sub, 0755);
                pgd_test_rmtree(sub);
            } else {
                unlink(sub);
            }
        }
        closedir(d);
    }
    rmdir(path);
}

static const char *unavailable_case, *unavailable_why;

void pgd_test_case_unavailable(const char *tcase, const char *why)
{
    unavailable_case = tcase;
    unavailable_why = why;
}

int pgd_test_run(Suite *s)
{
    /* Check's own selection (meson sets it to run a case as a test of its own): a case this
     * build left out is a skip, a name that is not a case at all a failure. */
    const char *only = getenv("CK_RUN_CASE");
    if (only && *only && !suite_tcase(s, only)) {
        if (unavailable_case && !strcmp(only, unavailable_case)) {
            printf("SKIP: test case %s: %s\n", only, unavailable_why);
            return 77;
        }
        fprintf(stderr, "CK_RUN_CASE=%s: no such test case\n", only);
        return 1;
    }
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr), ran = srunner_ntests_run(sr);
    srunner_free(sr);
    if (!ran) {
        printf("SKIP: no test ran\n");
        return 77;
    }
    return failed ? 1 : 0;
}

pgd_tensor *pgd_test_prefix(const pgd_tensor *t, int ndim, const int64_t *shape)
{
    pgd_tensor *v = malloc(sizeof *v);
    ck_assert_ptr_nonnull(v);
    *v = *t;
    v->ndim = ndim;
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        v->shape[i] = shape[i];
        v->stride[i] = s;
        s *= shape[i];
    }
    ck_assert_msg(s <= pgd_tensor_get_numel(t), "prefix larger than its tensor");
    return v;
}

float pgd_test_canary(void)
{
    uint32_t bits = 0x7fc0c0deu;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

int pgd_test_is_canary(float f)
{
    float c = pgd_test_canary();
    return memcmp(&f, &c, sizeof f) == 0;
}

pgd_tensor *pgd_test_upload(pgd_ctx *ctx, int ndim, const int64_t *shape, const float *data)
{
    pgd_tensor *t = NULL;
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_tensor_create(ctx, ndim, shape, &t, &err), &err);
    PGD_CHECK_OK(pgd_tensor_upload(t, data, &err), &err);
    return t;
}

int pgd_test_read_file(const char *path, unsigned char **data, size_t *size)
{
    void *d = NULL;
    *data = NULL;
    int rc = pgd_file_read(path, UINT64_MAX, &d, size, NULL);
    /* the tests release it with free(): a copy from this allocator, the library's released
     * by pgd_free */
    if (rc == PGD_OK && (*data = malloc(*size + 1)) != NULL)
        memcpy(*data, d, *size + 1);
    pgd_free(d);
    return rc == PGD_OK && *data ? 0 : -1;
}

const char *pgd_test_data_dir(void)
{
    const char *d = getenv("PAGODA_TEST_DATA");
    ck_assert_msg(d && *d, "PAGODA_TEST_DATA is not set (meson test sets it to tests/data)");
    return d;
}

float *pgd_test_read_floats(const char *name, size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", pgd_test_data_dir(), name);
    unsigned char *data = NULL;
    size_t size = 0;
    ck_assert_msg(pgd_test_read_file(path, &data, &size) == 0, "cannot read %s", path);
    ck_assert_msg(size == n * sizeof(float), "%s: %zu bytes, expected %zu", path, size,
                  n * sizeof(float));
    return (float *)data;
}

double *pgd_test_read_doubles(const char *name, size_t n)
{
    float *f = pgd_test_read_floats(name, n);
    double *d = malloc((n ? n : 1) * sizeof *d);
    ck_assert_ptr_nonnull(d);
    for (size_t i = 0; i < n; i++)
        d[i] = f[i];
    free(f);
    return d;
}

void pgd_test_expect_error(int rc, pgd_error *err, int code, const char *part)
{
    ck_assert_msg(rc == code, "status %s, want %s (%s)", pgd_status_name(rc), pgd_status_name(code),
                  err ? pgd_error_get_message(err) : "no error");
    ck_assert_msg(err && strstr(pgd_error_get_message(err), part), "'%s' lacks '%s'",
                  err ? pgd_error_get_message(err) : "no error", part);
    pgd_error_destroy(err);
}
