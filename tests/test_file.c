/* test_file.c — the one input-file reader (core/file.c, pgd_file_read) and every reader built on
 * it: a FIFO with no writer, /dev/zero and a directory are refused at once with an error naming
 * the file and what it is; a size cap is checked before reading; a weights file truncated while
 * open gives PGD_ERR_IO on the next read, never SIGBUS. Each case runs under alarm(): a reader
 * that blocks is killed by SIGALRM, which fails the test instead of hanging it. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

static char *dir;
static char fifo[4200], subdir[4200];

static void path_of(char *buf, size_t size, const char *name)
{
    snprintf(buf, size, "%s/%s", dir, name);
}

static void write_raw(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, n, f), n);
    fclose(f);
}

/* err's message names path and says `kind`; rc is want. */
static void expect(int rc, int want, pgd_error **errp, const char *path, const char *kind)
{
    pgd_error *err = *errp;
    *errp = NULL;
    ck_assert_msg(rc == want, "%s: got %s, want %s (%s)", path, pgd_status_name(rc),
                  pgd_status_name(want), pgd_error_get_message(err));
    ck_assert_msg(strstr(pgd_error_get_message(err), path) != NULL, "no '%s' in: %s", path,
                  pgd_error_get_message(err));
    if (kind)
        ck_assert_msg(strstr(pgd_error_get_message(err), kind) != NULL, "no '%s' in: %s", kind,
                      pgd_error_get_message(err));
    pgd_error_destroy(err);
}

static void setup(void)
{
    alarm(20);
}

static void teardown(void)
{
    alarm(0);
}

static const struct {
    const char *path_name; /* NULL: the FIFO, "dir": the directory, else a path */
    const char *kind;
} specials[] = {{NULL, "FIFO"}, {"/dev/zero", "character device"}, {"dir", "directory"}};

static const char *special_path(size_t i)
{
    if (!specials[i].path_name)
        return fifo;
    return !strcmp(specials[i].path_name, "dir") ? subdir : specials[i].path_name;
}

START_TEST(file_read_special)
{
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++) {
        const char *p = special_path(i);
        pgd_error *err = NULL;
        void *data = (void *)1;
        size_t size = 7;
        expect(pgd_file_read(p, 1 << 20, &data, &size, &err), PGD_ERR_IO, &err, p,
               specials[i].kind);
        ck_assert_ptr_null(data);
        ck_assert_uint_eq(size, 0);
    }
}
END_TEST

START_TEST(file_read_regular)
{
    char p[4200];
    path_of(p, sizeof p, "text.txt");
    write_raw(p, "cat\ndog\n", 8);
    void *data = NULL;
    size_t size = 0;
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_file_read(p, 8, &data, &size, &err), &err);
    ck_assert_uint_eq(size, 8);
    ck_assert_str_eq((char *)data, "cat\ndog\n"); /* NUL-terminated */
    free(data);
    /* one byte over the cap: refused before reading */
    expect(pgd_file_read(p, 7, &data, &size, &err), PGD_ERR_TOO_LARGE, &err, p, "limit");
    ck_assert_ptr_null(data);
    path_of(p, sizeof p, "absent.txt");
    expect(pgd_file_read(p, 8, &data, &size, &err), PGD_ERR_NOT_FOUND, &err, p, NULL);
    path_of(p, sizeof p, "empty.txt");
    write_raw(p, "", 0);
    PGD_CHECK_OK(pgd_file_read(p, 8, &data, &size, &err), &err);
    ck_assert_uint_eq(size, 0);
    ck_assert_int_eq(((char *)data)[0], 0);
    free(data);
}
END_TEST

START_TEST(readers_special)
{
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++) {
        const char *p = special_path(i);
        pgd_error *err = NULL;
        pgd_weights *w = NULL;
        expect(pgd_weights_open(p, &w, &err), PGD_ERR_IO, &err, p, specials[i].kind);
        ck_assert_ptr_null(w);
        float *x = NULL;
        int nd = 0;
        int64_t shape[PGD_MAX_DIMS];
        expect(pgd_npy_read(p, &x, &nd, shape, &err), PGD_ERR_IO, &err, p, specials[i].kind);
        ck_assert_ptr_null(x);
        pgd_image *img = NULL;
        expect(pgd_image_load(p, &img, &err), PGD_ERR_IO, &err, p, specials[i].kind);
        ck_assert_ptr_null(img);
    }
}
END_TEST

/* A safetensors file of one F32 tensor "t" of n elements with values 0, 1, 2, ... */
static size_t weights_file(const char *path, int n)
{
    char h[128];
    int hl =
        snprintf(h, sizeof h, "{\"t\":{\"dtype\":\"F32\",\"shape\":[%d],\"data_offsets\":[0,%d]}}",
                 n, 4 * n);
    size_t total = 8 + (size_t)hl + 4 * (size_t)n;
    unsigned char *buf = malloc(total);
    for (int i = 0; i < 8; i++)
        buf[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(buf + 8, h, (size_t)hl);
    for (int i = 0; i < n; i++) {
        float v = (float)i;
        memcpy(buf + 8 + hl + 4 * i, &v, 4);
    }
    write_raw(path, buf, total);
    free(buf);
    return total;
}

START_TEST(weights_truncated_while_open)
{
    /* Large enough to span many pages and several read chunks. */
    const int n = 3 << 20;
    char p[4200];
    path_of(p, sizeof p, "shrinks.safetensors");
    size_t total = weights_file(p, n);
    float *x = malloc((size_t)n * sizeof *x);
    for (int trial = 0; trial < 4; trial++) {
        weights_file(p, n);
        pgd_weights *w = NULL;
        pgd_error *err = NULL;
        PGD_CHECK_OK(pgd_weights_open(p, &w, &err), &err);
        /* cut to half, a page, or nothing of the data; once to just a few bytes */
        off_t keep = trial == 3 ? 5 : (off_t)(total - (size_t)(4 * n) / (size_t)(trial + 1)) + 1;
        ck_assert_int_eq(truncate(p, keep), 0);
        expect(pgd_weights_to_float(w, "t", x, &err), PGD_ERR_IO, &err, p, "tensor 't'");
        pgd_weights_destroy(w);
    }
    /* Untouched, the same file reads back exactly. */
    weights_file(p, n);
    pgd_weights *w = NULL;
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_weights_open(p, &w, &err), &err);
    PGD_CHECK_OK(pgd_weights_to_float(w, "t", x, &err), &err);
    for (int i = 0; i < n; i += 4099)
        ck_assert_float_eq(x[i], (float)i);
    ck_assert_float_eq(x[n - 1], (float)(n - 1));
    pgd_weights_destroy(w);
    free(x);
}
END_TEST

int main(void)
{
    dir = pgd_test_tempdir("file");
    path_of(fifo, sizeof fifo, "fifo");
    path_of(subdir, sizeof subdir, "dir");
    if (mkfifo(fifo, 0600) != 0 || mkdir(subdir, 0700) != 0) {
        perror("mkfifo/mkdir");
        return 1;
    }
    Suite *s = suite_create("file");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, file_read_special);
    tcase_add_test(tc, file_read_regular);
    tcase_add_test(tc, readers_special);
    tcase_add_test(tc, weights_truncated_while_open);
    suite_add_tcase(s, tc);
    int rc = pgd_test_run(s);
    pgd_test_rmtree(dir);
    free(dir);
    return rc;
}
