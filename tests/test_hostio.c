/* test_hostio.c — host-side robustness of the readers and writers:
 *
 *  - every allocation of pgd_weights_open, pgd_npy_read and pgd_image_load_memory is made to
 *    fail in turn (malloc, calloc and realloc are wrapped at link time, -Wl,--wrap; Jansson's
 *    allocator is pointed at the same wrappers); each call must then fail cleanly with an error
 *    message, or succeed, and leave no allocation of its own behind;
 *  - a failing write (the target is a directory, or its directory does not exist or is not
 *    writable) reports an error and leaves no partial or temporary file, for .npy and the PNG
 *    heat maps (the models' map_write_png, apps/models/maps.c). */
#include <dirent.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "internal.h" /* white-box: reaches library internals */
#include "maps.h"

/* ---- the counting allocator ---- */

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t m);
void *__wrap_realloc(void *p, size_t n);
void __wrap_free(void *p);

/* The live allocations made through the wrappers while armed (pointers only; frees of other
 * pointers, such as stb_image's buffers from its own shared library, are ignored). */
#define MAX_LIVE 65536
static void *live[MAX_LIVE];
static size_t n_live;
static int armed;
static long alloc_calls, fail_at; /* fail the fail_at-th allocation (1-based); 0: never */

static int should_fail(void)
{
    if (!armed)
        return 0;
    alloc_calls++;
    return alloc_calls == fail_at;
}

static void track(void *p)
{
    if (armed && p && n_live < MAX_LIVE)
        live[n_live++] = p;
}

static void untrack(void *p)
{
    for (size_t i = n_live; p && i-- > 0;)
        if (live[i] == p) {
            live[i] = live[--n_live];
            return;
        }
}

void *__wrap_malloc(size_t n)
{
    if (should_fail())
        return NULL;
    void *p = __real_malloc(n);
    track(p);
    return p;
}

void *__wrap_calloc(size_t n, size_t m)
{
    if (should_fail())
        return NULL;
    void *p = __real_calloc(n, m);
    track(p);
    return p;
}

void *__wrap_realloc(void *p, size_t n)
{
    if (should_fail())
        return NULL;
    void *q = __real_realloc(p, n);
    if (q) {
        untrack(p);
        track(q);
    }
    return q;
}

void __wrap_free(void *p)
{
    untrack(p);
    __real_free(p);
}

static void *json_alloc(size_t n)
{
    return __wrap_malloc(n);
}
static void json_dealloc(void *p)
{
    __wrap_free(p);
}

/* Runs fn with the 1st, 2nd, … allocation failing until a run makes no failing allocation;
 * every run must succeed or fail with a message, and leave nothing allocated. Returns the
 * number of allocation points walked. */
static long no_message;

static long walk_allocations(const char *what, int (*fn)(pgd_error **err))
{
    for (long n = 1;; n++) {
        n_live = 0;
        alloc_calls = 0;
        fail_at = n;
        armed = 1;
        pgd_error *err = NULL;
        int rc = fn(&err);
        int has_msg = err && pgd_error_get_message(err)[0];
        pgd_error_destroy(err);
        armed = 0;
        ck_assert_msg(n_live == 0, "%s: allocation %ld failing leaks %zu allocation(s)", what, n,
                      n_live);
        if (alloc_calls < n) { /* no allocation failed: the plain run */
            ck_assert_msg(rc == PGD_OK, "%s: fails without an injected failure", what);
            return n - 1;
        }
        /* A failure must come with a message, unless the allocation that failed was the error
         * object's own (then pgd__error_set leaves *err NULL). */
        if (rc != PGD_OK && !has_msg)
            no_message++;
    }
}

static char *data_path(const char *name)
{
    const char *dir = getenv("PAGODA_TEST_DATA");
    char *p = malloc(4096);
    snprintf(p, 4096, "%s/%s", dir ? dir : "tests/data", name);
    return p;
}

static char *st_path, *npy_path, *dir;
static unsigned char *png_bytes;
static size_t png_size;
/* More images, one per decoder (tests/data/decode): whichever decoder this build uses for the
 * format is walked (libjpeg's and libwebp's internal allocations have no hook and stay out;
 * libpng allocates through the library's own malloc and is walked). */
static const char *const extra_images[] = {"decode/jpeg_q90_420_progressive.jpg",
                                           "decode/jpeg_cmyk_q90.jpg",
                                           "decode/png_rgb16.png",
                                           "decode/png_palette4_trns.png",
                                           "decode/webp_lossy_alpha.webp",
                                           "decode/webp_lossless.webp"};
#define N_EXTRA (sizeof extra_images / sizeof extra_images[0])
static unsigned char *extra_bytes[N_EXTRA];
static size_t extra_size[N_EXTRA], extra_i;

static int open_weights(pgd_error **err)
{
    pgd_weights *w = NULL;
    int rc = pgd_weights_open(st_path, &w, err);
    if (!rc) {
        float x[8];
        pgd_weight_info info;
        if (pgd_weights_find(w, "cls_token", &info) == PGD_OK && info.numel <= 8)
            rc = pgd_weights_to_float(w, "cls_token", x, err);
    }
    pgd_weights_destroy(w);
    return rc;
}

static int read_npy(pgd_error **err)
{
    float *data = NULL;
    int ndim;
    int64_t shape[PGD_MAX_DIMS];
    int rc = pgd_npy_read(npy_path, &data, &ndim, shape, err);
    pgd_free(data);
    return rc;
}

static int load_png(pgd_error **err)
{
    pgd_image *img = NULL;
    int rc = pgd_image_load_memory(png_bytes, png_size, "checker.png", &img, err);
    if (!rc) {
        static float out[3 * 224 * 224];
        rc = pgd_image_preprocess(img, PGD_PREPROCESS_TIMM, out, err);
    }
    pgd_image_destroy(img);
    return rc;
}

static int load_extra(pgd_error **err)
{
    pgd_image *img = NULL;
    int rc = pgd_image_load_memory(extra_bytes[extra_i], extra_size[extra_i], "extra", &img, err);
    pgd_image_destroy(img);
    return rc;
}

START_TEST(allocation_failures)
{
    json_set_alloc_funcs(json_alloc, json_dealloc);
    long n1 = walk_allocations("pgd_weights_open", open_weights);
    long n2 = walk_allocations("pgd_npy_read", read_npy);
    long n3 = walk_allocations("pgd_image_load_memory", load_png);
    fprintf(stderr,
            "allocation points walked: safetensors %ld, npy %ld, image %ld; "
            "failures without a message (the error object's allocation): %ld\n",
            n1, n2, n3, no_message);
    ck_assert(n1 > 10 && n2 >= 2 && n3 >= 2);
    for (extra_i = 0; extra_i < N_EXTRA; extra_i++) {
        const char *name = extra_images[extra_i];
        const char *fmt = strstr(name, ".jpg") ? "JPEG" : strstr(name, ".png") ? "PNG" : "WebP";
        if (!pgd_image_decoder(fmt))
            continue; /* WebP without libwebp */
        long k = walk_allocations(name, load_extra);
        fprintf(stderr, "allocation points walked: %s (%s) %ld\n", name, pgd_image_decoder(fmt), k);
        ck_assert(k >= 2);
    }
}
END_TEST

/* ---- failing writes leave nothing behind ---- */

static int count_entries(const char *path)
{
    DIR *d = opendir(path);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n;
}

typedef int (*writer)(const char *path, pgd_error **err);

static int write_npy(const char *path, pgd_error **err)
{
    static const float v[6] = {1, 2, 3, 4, 5, 6};
    int64_t shape[2] = {2, 3};
    return pgd_npy_write(path, v, 2, shape, err);
}

static int write_png(const char *path, pgd_error **err)
{
    pgd_image *img = NULL;
    int rc = pgd_image_load_memory(png_bytes, png_size, "checker.png", &img, err);
    if (rc)
        return rc;
    static const float map[4] = {0, 1, 2, 3};
    rc = map_write_png(path, img, map, 2, 2, err);
    pgd_image_destroy(img);
    return rc;
}

static void check_failed_write(const char *what, writer fn)
{
    char sub[2048], path[4096];
    snprintf(sub, sizeof sub, "%s/%s", dir, what);
    ck_assert_int_eq(mkdir(sub, 0755), 0);
    pgd_error *err = NULL;

    /* The target is a directory: the temporary file may be made, but must not remain. */
    snprintf(path, sizeof path, "%s/target", sub);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    ck_assert_int_eq(fn(path, &err), PGD_ERR_IO);
    ck_assert_ptr_nonnull(strstr(pgd_error_get_message(err), "target"));
    pgd_error_destroy(err);
    err = NULL;
    ck_assert_int_eq(count_entries(sub), 1);
    ck_assert_int_eq(count_entries(path), 0);

    /* The directory does not exist, or is a file. */
    snprintf(path, sizeof path, "%s/missing/out", sub);
    ck_assert_int_eq(fn(path, &err), PGD_ERR_IO);
    pgd_error_destroy(err);
    err = NULL;
    ck_assert_int_eq(count_entries(sub), 1);

    /* A read-only directory (root ignores permissions: skipped there). */
    if (geteuid() != 0) {
        ck_assert_int_eq(chmod(sub, 0555), 0);
        snprintf(path, sizeof path, "%s/out", sub);
        ck_assert_int_eq(fn(path, &err), PGD_ERR_IO);
        pgd_error_destroy(err);
        err = NULL;
        ck_assert_int_eq(chmod(sub, 0755), 0);
        ck_assert_int_eq(count_entries(sub), 1);
    }

    /* And a write that works leaves exactly the file. */
    snprintf(path, sizeof path, "%s/out", sub);
    PGD_CHECK_OK(fn(path, &err), &err);
    ck_assert_int_eq(count_entries(sub), 2);
}

START_TEST(failed_writes_leave_nothing)
{
    check_failed_write("npy", write_npy);
    check_failed_write("png", write_png);
}
END_TEST

int main(void)
{
    dir = pgd_test_tempdir("hostio");
    st_path = data_path("vit-timm.safetensors");
    npy_path = malloc(4096);
    snprintf(npy_path, 4096, "%s/in.npy", dir);
    {
        static const float v[12] = {0};
        int64_t shape[3] = {1, 3, 4};
        pgd_error *err = NULL;
        if (pgd_npy_write(npy_path, v, 3, shape, &err))
            return 1;
    }
    char *png = data_path("checker_13x7.png");
    if (pgd_test_read_file(png, &png_bytes, &png_size))
        return 1;
    free(png);
    for (size_t i = 0; i < N_EXTRA; i++) {
        char *path = data_path(extra_images[i]);
        if (pgd_test_read_file(path, &extra_bytes[i], &extra_size[i]))
            return 1;
        free(path);
    }

    Suite *s = suite_create("hostio");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, allocation_failures);
    tcase_add_test(tc, failed_writes_leave_nothing);
    suite_add_tcase(s, tc);
    int rc = pgd_test_run(s);
    pgd_test_rmtree(dir);
    return rc;
}
