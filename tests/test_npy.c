/* test_npy.c — .npy reading and writing: round trips, NumPy's header forms, and rejection of
 * malformed files at every truncation length. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static char *dir;

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

/* A file as NumPy 1.24 writes it: version 1.0, header padded to 64 bytes. */
static size_t numpy_file(unsigned char *buf, const char *descr, const char *shape, const void *data,
                         size_t bytes, int version)
{
    char h[256];
    int n = snprintf(h, sizeof h, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr,
                     shape);
    size_t pre = version == 1 ? 10 : 12, total = pre + (size_t)n + 1;
    size_t pad = (64 - total % 64) % 64, hl = (size_t)n + pad + 1;
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (unsigned char)version;
    buf[7] = 0;
    buf[8] = (unsigned char)(hl & 255);
    buf[9] = (unsigned char)(hl >> 8);
    if (version != 1)
        buf[10] = buf[11] = 0;
    memcpy(buf + pre, h, (size_t)n);
    memset(buf + pre + n, ' ', pad);
    buf[pre + n + pad] = '\n';
    memcpy(buf + pre + hl, data, bytes);
    return pre + hl + bytes;
}

START_TEST(round_trip)
{
    pgd_rng r;
    pgd_rng_seed(&r, 8);
    char p[4200];
    path_of(p, sizeof p, "rt.npy");
    for (int trial = 0; trial < 50; trial++) {
        int nd = (int)pgd_rng_int(&r, 0, 4);
        int64_t shape[8];
        size_t n = 1;
        for (int i = 0; i < nd; i++) {
            shape[i] = pgd_rng_int(&r, trial == 7 ? 0 : 1, 9);
            n *= (size_t)shape[i];
        }
        float *x = malloc((n + 1) * sizeof *x);
        for (size_t i = 0; i < n; i++)
            x[i] = pgd_rng_float(&r);
        pgd_error *err = NULL;
        PGD_CHECK_OK(pgd_npy_write(p, x, nd, shape, &err), &err);
        float *y = NULL;
        int nd2 = -1;
        int64_t s2[8];
        PGD_CHECK_OK(pgd_npy_read(p, &y, &nd2, s2, &err), &err);
        ck_assert_int_eq(nd2, nd);
        for (int i = 0; i < nd; i++)
            ck_assert_int_eq(s2[i], shape[i]);
        ck_assert(n == 0 || memcmp(x, y, n * sizeof *x) == 0);
        free(x);
        pgd_free(y);
    }
    /* No temp file is left behind. */
    char t[4300];
    snprintf(t, sizeof t, "%s.tmp.%ld", p, (long)getpid());
    ck_assert_int_ne(access(t, F_OK), 0);
}
END_TEST

START_TEST(numpy_forms)
{
    unsigned char buf[1024];
    double d[3] = {1.5, -2.25, 1e30};
    float f[6] = {1, 2, 3, 4, 5, 6};
    char p[4200];
    path_of(p, sizeof p, "np.npy");
    pgd_error *err = NULL;
    float *y = NULL;
    int nd;
    int64_t s[8];
    write_raw(p, buf, numpy_file(buf, "<f8", "(3,)", d, sizeof d, 1));
    PGD_CHECK_OK(pgd_npy_read(p, &y, &nd, s, &err), &err);
    ck_assert_int_eq(nd, 1);
    ck_assert_int_eq(s[0], 3);
    ck_assert_float_eq(y[0], 1.5f);
    ck_assert_float_eq(y[1], -2.25f);
    ck_assert_float_eq(y[2], 1e30f);
    pgd_free(y);
    write_raw(p, buf, numpy_file(buf, "<f4", "(2, 3)", f, sizeof f, 2));
    PGD_CHECK_OK(pgd_npy_read(p, &y, &nd, s, &err), &err);
    ck_assert_int_eq(nd, 2);
    ck_assert_int_eq(s[1], 3);
    ck_assert_float_eq(y[5], 6.0f);
    pgd_free(y);
    write_raw(p, buf, numpy_file(buf, "<f4", "()", f, 4, 1)); /* a 0-d scalar */
    PGD_CHECK_OK(pgd_npy_read(p, &y, &nd, s, &err), &err);
    ck_assert_int_eq(nd, 0);
    ck_assert_float_eq(y[0], 1.0f);
    pgd_free(y);
}
END_TEST

static void expect_reject(const unsigned char *buf, size_t n, const char *word)
{
    char p[4200];
    path_of(p, sizeof p, "bad.npy");
    write_raw(p, buf, n);
    pgd_error *err = NULL;
    float *y = (float *)1;
    int nd = 5;
    int64_t s[8];
    int rc = pgd_npy_read(p, &y, &nd, s, &err);
    ck_assert_msg(rc != PGD_OK, "accepted a bad file (%zu bytes, expected '%s')", n, word);
    ck_assert_ptr_null(y);
    ck_assert_int_eq(nd, 0);
    ck_assert_msg(strstr(pgd_error_get_message(err), "bad.npy") != NULL, "%s",
                  pgd_error_get_message(err));
    if (word)
        ck_assert_msg(strstr(pgd_error_get_message(err), word) != NULL, "'%s' not in: %s", word,
                      pgd_error_get_message(err));
    pgd_error_destroy(err);
}

START_TEST(rejections)
{
    unsigned char buf[1024];
    float f[6] = {1, 2, 3, 4, 5, 6};
    size_t n = numpy_file(buf, "<f4", "(2, 3)", f, sizeof f, 1);
    /* every truncation of a valid file is refused */
    for (size_t len = 0; len < n; len++)
        expect_reject(buf, len, NULL);
    unsigned char bad[1024];
    memcpy(bad, buf, n);
    bad[1] = 'X';
    expect_reject(bad, n, "magic");
    expect_reject(buf, numpy_file(buf, ">f4", "(2, 3)", f, sizeof f, 1), "dtype");
    expect_reject(buf, numpy_file(buf, "<i8", "(3,)", f, 24, 1), "dtype");
    expect_reject(buf, numpy_file(buf, "<f4", "(2, 4)", f, sizeof f, 1), "bytes");
    expect_reject(buf, numpy_file(buf, "<f4", "(1, 1, 1, 1, 1, 1, 1, 1, 6)", f, sizeof f, 1),
                  "dims");
    expect_reject(buf, numpy_file(buf, "<f4", "(99999999999999999999, 2)", f, sizeof f, 1), NULL);
    expect_reject(buf, numpy_file(buf, "<f4", "[2, 3]", f, sizeof f, 1), "tuple");
    memcpy(bad, buf, n);
    bad[6] = 9;
    expect_reject(bad, n, "version");
    /* header length beyond the file */
    n = numpy_file(buf, "<f4", "(2, 3)", f, sizeof f, 1);
    buf[8] = 0xff;
    buf[9] = 0x7f;
    expect_reject(buf, n, "header");
    char p[4200];
    path_of(p, sizeof p, "missing.npy");
    pgd_error *err = NULL;
    float *y;
    int nd;
    int64_t s[8];
    ck_assert_int_eq(pgd_npy_read(p, &y, &nd, s, &err), PGD_ERR_NOT_FOUND);
    ck_assert(strstr(pgd_error_get_message(err), "missing.npy") != NULL);
    pgd_error_destroy(err);
    err = NULL;
    /* writing into a directory that does not exist fails cleanly */
    path_of(p, sizeof p, "no/such/dir/out.npy");
    int64_t sh[1] = {6};
    ck_assert_int_eq(pgd_npy_write(p, f, 1, sh, &err), PGD_ERR_IO);
    ck_assert(strstr(pgd_error_get_message(err), "out.npy") != NULL);
    pgd_error_destroy(err);
}
END_TEST

/* A version-1.0 file with exactly this header text (newline-terminated) and 6 floats. */
static size_t header_file(unsigned char *buf, const char *header)
{
    float f[6] = {0, 1, 2, 3, 4, 5};
    size_t n = strlen(header), hl = n + 1;
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (unsigned char)(hl & 255);
    buf[9] = (unsigned char)(hl >> 8);
    memcpy(buf + 10, header, n);
    buf[10 + n] = '\n';
    memcpy(buf + 10 + hl, f, sizeof f);
    return 10 + hl + sizeof f;
}

/* Headers and what numpy.load (NumPy 2.4) does with each, checked with NumPy itself: the header
 * is a Python dict literal with exactly three keys. One deliberate difference: NumPy keeps the
 * last of duplicate keys; Pagoda refuses them. */
START_TEST(numpy_header_grammar)
{
    static const struct {
        const char *header;
        int accept;
        const char *says;
    } cases[] = {
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 1, NULL},
        {"{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (2, 3)}", 1, NULL},
        {"{'shape': (2, 3), 'fortran_order': False, 'descr': '<f4'}", 1, NULL},
        {"{'descr': '<f4',\n 'fortran_order': False,\n 'shape': (2,\n 3,)}", 1, NULL},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }", 1, NULL},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'shape': (2, 3)}", 0,
         "duplicate"},
        {"{'descr': '<f4', 'fortran_order': False, 'note': \"'shape': (2, 3)\"}", 0, "unknown"},
        {"{'descr': '<f4', 'fortran_order': Falsey, 'shape': (2, 3), }", 0, "True or False"},
        {"{'descr': '<f4', 'fortran_order': 0, 'shape': (2, 3), }", 0, "True or False"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2 3), }", 0, "commas"},
        {"{'descr': '<f4', 'shape': (2, 3), }", 0, "fortran_order"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'x': 1}", 0, "unknown"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (6), }", 0, "1-tuple"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3], }", 0, "tuple"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } x", 0, "after"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,, 3), }", 0, "integer"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (-2, -3), }", 0, "integer"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2.0, 3), }", 0, "decimal"},
        {"{, 'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}", 0, "key"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), ", 0, NULL},
    };
    unsigned char buf[1024];
    char p[4200];
    path_of(p, sizeof p, "hdr.npy");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n = header_file(buf, cases[i].header);
        if (!cases[i].accept) {
            expect_reject(buf, n, cases[i].says);
            continue;
        }
        write_raw(p, buf, n);
        pgd_error *err = NULL;
        float *y = NULL;
        int nd = 0;
        int64_t s[8];
        ck_assert_msg(pgd_npy_read(p, &y, &nd, s, &err) == PGD_OK, "refused %s: %s",
                      cases[i].header, pgd_error_get_message(err));
        ck_assert_int_eq(s[0] * (nd == 2 ? s[1] : 1), 6);
        ck_assert_float_eq(y[5], 5.0f);
        pgd_free(y);
    }
}
END_TEST

int main(void)
{
    dir = pgd_test_tempdir("npy");
    Suite *s = suite_create("npy");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, round_trip);
    tcase_add_test(tc, numpy_forms);
    tcase_add_test(tc, rejections);
    tcase_add_test(tc, numpy_header_grammar);
    suite_add_tcase(s, tc);
    int rc = pgd_test_run(s);
    pgd_test_rmtree(dir);
    free(dir);
    return rc;
}
