/* test_maps.c — the models' heat-map PNG writer (apps/models/maps.c): the blend stays between
 * the image and the colour ramp, the corners are exact, constant and 1 x 1 maps work, and a
 * failing write reports the path and leaves no temporary file. Host only: no OpenCL device
 * needed. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <stb_image_write.h>

#include "harness.h"
#include "maps.h"

static char *tmpdir;

static void setup(void)
{
    tmpdir = pgd_test_tempdir("maps");
    ck_assert_ptr_nonnull(tmpdir);
}

static void teardown(void)
{
    pgd_test_rmtree(tmpdir);
    free(tmpdir);
    tmpdir = NULL;
}

static const char *tpath(const char *name)
{
    static char buf[4][4096];
    static int slot;
    char *b = buf[slot++ & 3];
    snprintf(b, sizeof buf[0], "%s/%s", tmpdir, name);
    return b;
}

/* A w x h image of comp channels: gradients plus a little hash noise. */
static unsigned char *pattern(int w, int h, int comp)
{
    unsigned char *p = malloc((size_t)w * h * comp);
    ck_assert_ptr_nonnull(p);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < comp; c++) {
                unsigned v = (unsigned)(x * 255 / (w > 1 ? w - 1 : 1)) * (c == 0) +
                             (unsigned)(y * 255 / (h > 1 ? h - 1 : 1)) * (c == 1) +
                             (unsigned)((x + y) * 7 + 40 * c) * (c >= 2) +
                             ((unsigned)(x * 31 + y * 17 + c * 5) % 7);
                p[((size_t)y * w + x) * comp + c] = (unsigned char)(v & 255);
            }
    return p;
}

/* ---- heat maps ---- */

static int count_temp_files(const char *dir)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strstr(e->d_name, ".tmp-"))
            n++;
    closedir(d);
    return n;
}

START_TEST(heatmap_png)
{
    int w = 257, h = 131, mw = 7, mh = 5;
    unsigned char *px = pattern(w, h, 3);
    ck_assert(stbi_write_png(tpath("base.png"), w, h, 3, px, w * 3));
    free(px);
    pgd_image *base = NULL, *got = NULL;
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_image_load(tpath("base.png"), &base, &err), &err);
    float map[35];
    for (int y = 0; y < mh; y++)
        for (int x = 0; x < mw; x++)
            map[y * mw + x] = 3.0f + (float)(x + y); /* min at (0, 0), max at (6, 4) */
    map[3] = NAN;                                    /* counts as the minimum */
    PGD_CHECK_OK(map_write_png(tpath("heat.png"), base, map, mw, mh, &err), &err);
    PGD_CHECK_OK(pgd_image_load(tpath("heat.png"), &got, &err), &err);
    ck_assert_int_eq(pgd_image_get_width(got), w);
    ck_assert_int_eq(pgd_image_get_height(got), h);
    uint8_t lo[3] = {255, 255, 255}, hi[3] = {0, 0, 0};
    for (int i = 0; i <= 1000; i++) {
        uint8_t c[3];
        map_color(i / 1000.0f, c);
        for (int k = 0; k < 3; k++) {
            if (c[k] < lo[k])
                lo[k] = c[k];
            if (c[k] > hi[k])
                hi[k] = c[k];
        }
    }
    const uint8_t *b = pgd_image_get_data(base), *g = pgd_image_get_data(got);
    int bad = -1;
    for (int i = 0; i < w * h * 3 && bad < 0; i++) {
        int k = i % 3, bv = b[i], gv = g[i];
        int mn = bv < lo[k] ? bv : lo[k], mx = bv > hi[k] ? bv : hi[k];
        if (gv < mn || gv > mx)
            bad = i;
    }
    ck_assert_msg(bad < 0, "byte %d: %d not between base %d and the ramp", bad,
                  bad < 0 ? 0 : g[bad], bad < 0 ? 0 : b[bad]);
    /* The corners are exact: (0, 0) is the minimum, (w-1, h-1) the maximum. */
    uint8_t c0[3], c1[3];
    map_color(0.0f, c0);
    map_color(1.0f, c1);
    size_t last = ((size_t)w * h - 1) * 3;
    for (int k = 0; k < 3; k++) {
        ck_assert_int_eq(g[k], (b[k] + c0[k] + 1) / 2);
        ck_assert_int_eq(g[last + k], (b[last + k] + c1[k] + 1) / 2);
    }
    pgd_image_destroy(got);
    /* A constant map and a 1 x 1 map work. */
    float one = 5.0f;
    PGD_CHECK_OK(map_write_png(tpath("heat1.png"), base, &one, 1, 1, &err), &err);
    /* Failures: a directory that does not exist, a target that is a directory, bad sizes. */
    ck_assert_int_eq(map_write_png(tpath("nodir/heat.png"), base, map, mw, mh, &err), PGD_ERR_IO);
    ck_assert(strstr(pgd_error_get_message(err), "nodir/heat.png"));
    pgd_error_destroy(err);
    err = NULL;
    struct stat st;
    ck_assert(stat(tpath("nodir"), &st) != 0);
    ck_assert(mkdir(tpath("adir"), 0755) == 0);
    ck_assert_int_eq(map_write_png(tpath("adir"), base, map, mw, mh, &err), PGD_ERR_IO);
    ck_assert_msg(strstr(pgd_error_get_message(err), "is a directory"), "%s",
                  pgd_error_get_message(err));
    pgd_error_destroy(err);
    err = NULL;
    ck_assert_int_eq(count_temp_files(tmpdir), 0);
    ck_assert_int_eq(map_write_png(tpath("x.png"), base, map, 0, 5, &err),
                     PGD_ERR_INVALID_ARGUMENT);
    pgd_error_destroy(err);
    ck_assert(stat(tpath("x.png"), &st) != 0);
    pgd_image_destroy(base);
}
END_TEST

/* The 60 % attention-mass mask against a brute-force reference: over every subset of up to
 * 10 cells, the smallest whose sum reaches the mass (largest values first, ties to the lower
 * index), on random maps with ties. */
START_TEST(mass_mask)
{
    pgd_rng r;
    pgd_rng_seed(&r, 17);
    for (int trial = 0; trial < 200; trial++) {
        int n = (int)pgd_rng_int(&r, 1, 10);
        float m[10], orig[10];
        for (int i = 0; i < n; i++)
            orig[i] = m[i] = (float)pgd_rng_int(&r, 0, 4) / 4.0f; /* ties on purpose */
        double mass = trial % 3 == 0 ? 0.6 : (double)pgd_rng_int(&r, 0, 10) / 10.0;
        ck_assert_int_eq(map_mass_mask(m, 1, n, mass), 0);
        double total = 0;
        for (int i = 0; i < n; i++)
            total += orig[i];
        /* Reference: take cells in order of value (desc), index (asc) until the sum reaches. */
        int taken[10] = {0}, keep = 0;
        double cum = 0;
        while (keep < n && cum < mass * total) {
            int best = -1;
            for (int i = 0; i < n; i++)
                if (!taken[i] && (best < 0 || orig[i] > orig[best]))
                    best = i;
            taken[best] = 1;
            cum += orig[best];
            keep++;
        }
        for (int i = 0; i < n; i++)
            ck_assert_msg(m[i] == (float)taken[i],
                          "trial %d (n %d, mass %.1f): cell %d is %g, "
                          "want %d",
                          trial, n, mass, i, m[i], taken[i]);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("maps");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, heatmap_png);
    tcase_add_test(tc, mass_mask);
    suite_add_tcase(s, tc);
    return pgd_test_run(s);
}
