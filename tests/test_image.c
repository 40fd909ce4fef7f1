/* test_image.c — image loading (JPEG, PNG, BMP round trips through stb's writers, odd sizes,
 * grey and alpha), rejection of other formats, truncated and oversized files, the preprocessing
 * presets against golden data made with torchvision/PIL (tools/golden/make-image-golden.py). Host
 * only: no OpenCL device needed. (The heat-map PNG writer moved with the models: test_maps.c.) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stb_image_write.h>

#include "harness.h"

static char *tmpdir;

static void setup(void)
{
    tmpdir = pgd_test_tempdir("image");
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

static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)len + 1);
    ck_assert(fread(b, 1, (size_t)len, f) == (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return b;
}

static void spit(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert(fwrite(data, 1, n, f) == n);
    fclose(f);
}

static const int sizes[][2] = {{1, 1}, {3, 500}, {500, 3}, {257, 131}, {2, 2}, {64, 48}};
#define N_SIZES (sizeof sizes / sizeof sizes[0])

START_TEST(roundtrip_png_bmp)
{
    for (size_t s = 0; s < N_SIZES; s++)
        for (int kind = 0; kind < 2; kind++) {
            int w = sizes[s][0], h = sizes[s][1];
            unsigned char *p = pattern(w, h, 3);
            const char *path = tpath(kind ? "rt.bmp" : "rt.png");
            ck_assert(kind ? stbi_write_bmp(path, w, h, 3, p)
                           : stbi_write_png(path, w, h, 3, p, w * 3));
            pgd_image *img = NULL;
            pgd_error *err = NULL;
            PGD_CHECK_OK(pgd_image_load(path, &img, &err), &err);
            ck_assert_int_eq(pgd_image_get_width(img), w);
            ck_assert_int_eq(pgd_image_get_height(img), h);
            ck_assert_msg(!memcmp(pgd_image_get_data(img), p, (size_t)w * h * 3),
                          "%s %dx%d pixels differ", kind ? "BMP" : "PNG", w, h);
            pgd_image_destroy(img);
            /* And from memory. */
            size_t n;
            unsigned char *file = slurp(path, &n);
            PGD_CHECK_OK(pgd_image_load_memory(file, n, "mem", &img, &err), &err);
            ck_assert(!memcmp(pgd_image_get_data(img), p, (size_t)w * h * 3));
            pgd_image_destroy(img);
            free(file);
            free(p);
        }
}
END_TEST

START_TEST(roundtrip_grey_alpha)
{
    for (int comp = 1; comp <= 4; comp++) {
        if (comp == 3)
            continue;
        int w = 257, h = 131;
        unsigned char *p = pattern(w, h, comp);
        const char *path = tpath("ga.png");
        ck_assert(stbi_write_png(path, w, h, comp, p, w * comp));
        pgd_image *img = NULL;
        pgd_error *err = NULL;
        PGD_CHECK_OK(pgd_image_load(path, &img, &err), &err);
        ck_assert_int_eq(pgd_image_get_width(img), w);
        ck_assert_int_eq(pgd_image_get_height(img), h);
        const uint8_t *d = pgd_image_get_data(img);
        int bad = -1; /* Check's asserts are slow without fork: one per image */
        for (int i = 0; i < w * h * 3 && bad < 0; i++) {
            int want = comp <= 2 ? p[(size_t)(i / 3) * comp] : p[(size_t)(i / 3) * comp + i % 3];
            if (d[i] != want)
                bad = i;
        }
        ck_assert_msg(bad < 0, "comp %d: byte %d differs", comp, bad);
        pgd_image_destroy(img);
        free(p);
    }
}
END_TEST

START_TEST(roundtrip_jpeg)
{
    for (size_t s = 0; s < N_SIZES; s++) {
        int w = sizes[s][0], h = sizes[s][1];
        unsigned char *p = pattern(w, h, 3);
        const char *path = tpath("rt.jpg");
        ck_assert(stbi_write_jpg(path, w, h, 3, p, 95));
        pgd_image *img = NULL;
        pgd_error *err = NULL;
        PGD_CHECK_OK(pgd_image_load(path, &img, &err), &err);
        ck_assert_int_eq(pgd_image_get_width(img), w);
        ck_assert_int_eq(pgd_image_get_height(img), h);
        double sum = 0;
        const uint8_t *d = pgd_image_get_data(img);
        for (size_t i = 0; i < (size_t)w * h * 3; i++)
            sum += fabs((double)d[i] - p[i]);
        double mad = sum / ((double)w * h * 3);
        ck_assert_msg(mad < 12.0, "JPEG %dx%d mean abs diff %g", w, h, mad);
        pgd_image_destroy(img);
        free(p);
    }
}
END_TEST

static void expect_fail(const void *data, size_t n, int code, const char *needle1,
                        const char *needle2)
{
    pgd_image *img = (pgd_image *)(uintptr_t)1;
    pgd_error *err = NULL;
    int rc = pgd_image_load_memory(data, n, "probe.bin", &img, &err);
    ck_assert_msg(rc != PGD_OK, "accepted %zu bytes", n);
    ck_assert_ptr_null(img);
    ck_assert_ptr_nonnull(err);
    if (code)
        ck_assert_msg(rc == code, "status %s: %s", pgd_status_name(rc), pgd_error_get_message(err));
    const char *m = pgd_error_get_message(err);
    ck_assert_msg(strstr(m, "probe.bin"), "message lacks the name: %s", m);
    if (needle1)
        ck_assert_msg(strstr(m, needle1), "message lacks '%s': %s", needle1, m);
    if (needle2)
        ck_assert_msg(strstr(m, needle2), "message lacks '%s': %s", needle2, m);
    pgd_error_destroy(err);
}

START_TEST(reject_formats)
{
    static const unsigned char gif[] = "GIF89a\x01\x00\x01\x00\x80\x00\x00\xff\xff\xff\x00\x00\x00"
                                       "!\xf9\x04\x00\x00\x00\x00\x00,\x00\x00\x00\x00\x01\x00\x01"
                                       "\x00\x00\x02\x02D\x01\x00;";
    expect_fail(gif, sizeof gif - 1, PGD_ERR_UNSUPPORTED, "GIF", NULL);
    static const char pnm[] = "P6\n2 2\n255\n\1\2\3\4\5\6\7\10\11\12\13\14";
    expect_fail(pnm, sizeof pnm - 1, PGD_ERR_UNSUPPORTED, "PNM", NULL);
    static const char psd[] = "8BPS\0\1\0\0\0\0\0\0\0\3";
    expect_fail(psd, sizeof psd - 1, PGD_ERR_UNSUPPORTED, "PSD", NULL);
    static const char hdr[] = "#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\n-Y 1 +X 1\n\1\1\1\1";
    expect_fail(hdr, sizeof hdr - 1, PGD_ERR_UNSUPPORTED, "HDR", NULL);
    /* A valid 1 x 1 uncompressed TGA: stb would decode it; we must not. */
    static const unsigned char tga[] = {0, 0, 2, 0, 0, 0,  0, 0, 0, 0, 0,
                                        0, 1, 0, 1, 0, 24, 0, 9, 8, 7};
    expect_fail(tga, sizeof tga, PGD_ERR_UNSUPPORTED, "unknown format", "00 00 02");
    static const char junk[] = "hello, this is not an image";
    expect_fail(junk, sizeof junk - 1, PGD_ERR_UNSUPPORTED, "unknown format", NULL);
    expect_fail("B", 1, PGD_ERR_UNSUPPORTED, "unknown", NULL);
    expect_fail("", 0, PGD_ERR_FORMAT, "empty", NULL);
    /* Magic right, body garbage. */
    expect_fail("BMxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", 50, PGD_ERR_FORMAT, "BMP",
                NULL);
    /* Zero-size file on disk and a file that does not exist. */
    spit(tpath("empty.png"), "", 0);
    pgd_image *img = NULL;
    pgd_error *err = NULL;
    ck_assert_int_eq(pgd_image_load(tpath("empty.png"), &img, &err), PGD_ERR_FORMAT);
    ck_assert(strstr(pgd_error_get_message(err), "empty.png"));
    pgd_error_destroy(err);
    err = NULL;
    ck_assert_int_eq(pgd_image_load(tpath("no-such-file.png"), &img, &err), PGD_ERR_NOT_FOUND);
    ck_assert(strstr(pgd_error_get_message(err), "no-such-file.png"));
    ck_assert_ptr_null(img);
    pgd_error_destroy(err);
    err = NULL;
    ck_assert_int_eq(pgd_image_load(tmpdir, &img, &err), PGD_ERR_IO); /* a directory */
    pgd_error_destroy(err);
}
END_TEST

static void put_be32(unsigned char *p, unsigned v)
{
    p[0] = (unsigned char)(v >> 24), p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8), p[3] = (unsigned char)v;
}

/* PNG signature + IHDR only (no data): stb can report the size but not decode. */
static size_t png_header(unsigned char *b, unsigned w, unsigned h)
{
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A};
    memcpy(b, sig, 8);
    put_be32(b + 8, 13);
    memcpy(b + 12, "IHDR", 4);
    put_be32(b + 16, w);
    put_be32(b + 20, h);
    b[24] = 8, b[25] = 2, b[26] = 0, b[27] = 0, b[28] = 0; /* 8-bit RGB */
    put_be32(b + 29, 0);                                   /* CRC: wrong; size checks come first */
    return 33;
}

START_TEST(reject_sizes)
{
    unsigned char b[64];
    size_t n = png_header(b, 9000, 9000);
    spit(tpath("huge.png"), b, n);
    pgd_image *img = NULL;
    pgd_error *err = NULL;
    ck_assert_int_eq(pgd_image_load(tpath("huge.png"), &img, &err), PGD_ERR_TOO_LARGE);
    ck_assert_msg(strstr(pgd_error_get_message(err), "9000 x 9000"), "%s",
                  pgd_error_get_message(err));
    pgd_error_destroy(err);
    n = png_header(b, 8192, 8193);
    expect_fail(b, n, PGD_ERR_TOO_LARGE, "8192 x 8193", NULL);
    n = png_header(b, 100000, 1);
    expect_fail(b, n, 0, NULL, NULL);
    n = png_header(b, 0, 5);
    expect_fail(b, n, PGD_ERR_FORMAT, NULL, NULL);
    /* Within the limit: refused before decoding (the CRC is wrong and IEND is missing). */
    n = png_header(b, 8192, 8192);
    expect_fail(b, n, PGD_ERR_FORMAT, "corrupt PNG", NULL);
}
END_TEST

START_TEST(reject_truncated)
{
    int w = 257, h = 131;
    unsigned char *p = pattern(w, h, 3);
    ck_assert(stbi_write_png(tpath("t.png"), w, h, 3, p, w * 3));
    ck_assert(stbi_write_jpg(tpath("t.jpg"), w, h, 3, p, 90));
    free(p);
    int jpeg_ok = 0, jpeg_err = 0;
    for (int kind = 0; kind < 2; kind++) {
        size_t n;
        unsigned char *file = slurp(tpath(kind ? "t.jpg" : "t.png"), &n);
        size_t lens[] = {1,     2,     3,       4,      7,      8,     9,    16,  20,
                         24,    32,    33,      40,     60,     100,   200,  300, 623,
                         n / 4, n / 2, n - 100, n - 13, n - 12, n - 5, n - 1};
        for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
            size_t len = lens[i];
            /* An exact-size copy so that valgrind sees any over-read. */
            unsigned char *cut = malloc(len);
            memcpy(cut, file, len);
            pgd_image *img = NULL;
            pgd_error *err = NULL;
            int rc = pgd_image_load_memory(cut, len, "probe.bin", &img, &err);
            if (kind == 0 ? len <= n - 5 : len < 300) {
                /* PNG: any cut into the data is an error (stb forgives only a cut in the final
                 * IEND CRC, after every pixel arrived). JPEG: the headers (~600 bytes) must be
                 * whole. */
                ck_assert_msg(rc != PGD_OK, "%s cut to %zu bytes accepted", kind ? "JPEG" : "PNG",
                              len);
                ck_assert(strstr(pgd_error_get_message(err), "probe.bin"));
            } else if (rc == PGD_OK) {
                /* stb fills a JPEG cut inside the entropy data with grey; no crash is the bar. */
                ck_assert_int_eq(pgd_image_get_width(img), w);
                ck_assert_int_eq(pgd_image_get_height(img), h);
                jpeg_ok++;
            } else {
                jpeg_err++;
            }
            pgd_image_destroy(img);
            pgd_error_destroy(err);
            free(cut);
        }
        free(file);
    }
    printf("truncated past the headers (JPEG) or in the IEND CRC (PNG): %d decoded, %d refused\n",
           jpeg_ok, jpeg_err);
}
END_TEST

/* ---- preprocessing against the golden data ---- */

#define S PGD_PREPROCESS_SIZE
#define STRIDE 7
#define NSUB (3 * S * S / STRIDE)

static const char *data_dir(void)
{
    const char *d = getenv("PAGODA_TEST_DATA");
    return d && *d ? d : "tests/data";
}

/* Files stb_image 2.27 decodes by inventing what they lack (tools/golden/make-bad-images.py):
 * refused with the reason, while the intact PNG they were made from still loads. */
START_TEST(refuse_invented_pixels)
{
    static const struct {
        const char *file, *says;
    } cases[] = {
        {"bmp-truncated-half.bmp", "need 3072 bytes"},
        {"bmp-8192-in-1000-bytes.bmp", "8192 x 8192"},
        {"png-corrupt-idat.png", "CRC"},
    };
    char path[4096];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", data_dir(), cases[i].file);
        pgd_image *img = NULL;
        pgd_error *err = NULL;
        int rc = pgd_image_load(path, &img, &err);
        ck_assert_msg(rc == PGD_ERR_FORMAT, "%s: got %s (%s)", cases[i].file, pgd_status_name(rc),
                      pgd_error_get_message(err));
        ck_assert_ptr_null(img);
        ck_assert_msg(strstr(pgd_error_get_message(err), cases[i].says) != NULL, "no '%s' in: %s",
                      cases[i].says, pgd_error_get_message(err));
        pgd_error_destroy(err);
    }
    snprintf(path, sizeof path, "%s/png-ok-16x16.png", data_dir());
    pgd_image *img = NULL;
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_image_load(path, &img, &err), &err);
    ck_assert_int_eq(pgd_image_get_width(img), 16);
    pgd_image_destroy(img);
}
END_TEST

/* A thumbnail keeps its source's size and view, so maps drawn over it line up with the crop the
 * model saw (apps keep only thumbnails once the batch is preprocessed). */
START_TEST(thumbnail_view)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/grad_300x200.png", data_dir());
    pgd_image *full = NULL, *t = NULL, *same = NULL;
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_image_load(path, &full, &err), &err);
    PGD_CHECK_OK(pgd_image_thumbnail(full, 100, &t, &err), &err);
    ck_assert_int_eq(pgd_image_get_width(t), 100);
    ck_assert_int_eq(pgd_image_get_height(t), 67);
    ck_assert_int_eq(pgd_image_get_source_width(t), 300);
    ck_assert_int_eq(pgd_image_get_source_height(t), 200);
    ck_assert_int_eq(pgd_image_get_source_width(full), 300);
    for (int p = 0; p < 3; p++) {
        double vf[4], vt[4];
        ck_assert_int_eq(pgd_image_preprocess_view(full, (pgd_preprocess)p, vf), PGD_OK);
        ck_assert_int_eq(pgd_image_preprocess_view(t, (pgd_preprocess)p, vt), PGD_OK);
        for (int k = 0; k < 4; k++) {
            double f = k % 2 ? 67.0 / 200 : 100.0 / 300;
            ck_assert_double_eq_tol(vt[k], vf[k] * f, 1e-9);
        }
    }
    /* the average colour survives the resampling */
    double mf = 0, mt = 0;
    for (int i = 0; i < 300 * 200 * 3; i++)
        mf += pgd_image_get_data(full)[i];
    for (int i = 0; i < 100 * 67 * 3; i++)
        mt += pgd_image_get_data(t)[i];
    ck_assert_double_eq_tol(mt / (100 * 67 * 3), mf / (300 * 200 * 3), 2.0);
    /* already small enough: the same size */
    PGD_CHECK_OK(pgd_image_thumbnail(full, 1024, &same, &err), &err);
    ck_assert_int_eq(pgd_image_get_width(same), 300);
    ck_assert_int_eq(memcmp(pgd_image_get_data(same), pgd_image_get_data(full), 300 * 200 * 3), 0);
    pgd_image_destroy(same);
    ck_assert_int_eq(pgd_image_thumbnail(full, 0, &same, &err), PGD_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(same);
    pgd_error_destroy(err);
    pgd_image_destroy(t);
    pgd_image_destroy(full);
}
END_TEST

START_TEST(preprocess_golden)
{
    static const char *images[] = {"grad_300x200", "noise_97x143", "checker_13x7"};
    static const char *presets[] = {"torchvision", "timm", "hf"};
    static const pgd_preprocess ids[] = {PGD_PREPROCESS_TORCHVISION, PGD_PREPROCESS_TIMM,
                                         PGD_PREPROCESS_HF};
    float *out = malloc(sizeof(float) * 3 * S * S);
    float *want = malloc(sizeof(float) * NSUB);
    for (int p = 0; p < 3; p++) {
        double worst = 0;
        long off_by_levels = 0;
        for (int i = 0; i < 3; i++) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s.png", data_dir(), images[i]);
            pgd_image *img = NULL;
            pgd_error *err = NULL;
            PGD_CHECK_OK(pgd_image_load(path, &img, &err), &err);
            PGD_CHECK_OK(pgd_image_preprocess(img, ids[p], out, &err), &err);
            pgd_image_destroy(img);
            snprintf(path, sizeof path, "%s/%s.%s.f32", data_dir(), images[i], presets[p]);
            FILE *f = fopen(path, "rb");
            ck_assert_msg(f, "cannot open %s", path);
            ck_assert(fread(want, sizeof(float), NSUB, f) == NSUB);
            fclose(f);
            for (int k = 0; k < NSUB; k++) {
                double d = fabs((double)out[(size_t)k * STRIDE] - want[k]);
                if (d > worst)
                    worst = d;
                if (d > 1e-5)
                    off_by_levels++;
            }
        }
        printf("preprocess %-11s: max abs diff vs PIL/torchvision %.3g, %ld of %d samples differ\n",
               presets[p], worst, off_by_levels, 3 * NSUB);
        ck_assert_msg(worst <= 1e-2, "%s: max abs diff %g", presets[p], worst);
        ck_assert_msg(worst <= 1e-5, "%s: not 8-bit exact (max abs diff %g)", presets[p], worst);
    }
    free(out);
    free(want);
}
END_TEST

START_TEST(preprocess_odd_sizes)
{
    float *out = malloc(sizeof(float) * 3 * S * S);
    for (size_t s = 0; s < N_SIZES; s++)
        for (int p = 0; p < 3; p++) {
            int w = sizes[s][0], h = sizes[s][1];
            unsigned char *px = pattern(w, h, 3);
            ck_assert(stbi_write_png(tpath("o.png"), w, h, 3, px, w * 3));
            pgd_image *img = NULL;
            pgd_error *err = NULL;
            PGD_CHECK_OK(pgd_image_load(tpath("o.png"), &img, &err), &err);
            for (int i = 0; i < 3 * S * S; i++)
                out[i] = NAN;
            PGD_CHECK_OK(pgd_image_preprocess(img, (pgd_preprocess)p, out, &err), &err);
            int bad = -1;
            for (int i = 0; i < 3 * S * S && bad < 0; i++)
                if (!(isfinite(out[i]) && out[i] >= -2.2f && out[i] <= 2.7f) ||
                    (w == 1 && h == 1 && out[i] != out[(i / (S * S)) * S * S]))
                    bad = i;
            ck_assert_msg(bad < 0, "%dx%d preset %d: out[%d] = %g", w, h, p, bad,
                          bad < 0 ? 0.0 : out[bad]);
            pgd_image_destroy(img);
            free(px);
        }
    pgd_error *err = NULL;
    ck_assert_int_eq(pgd_image_preprocess(NULL, PGD_PREPROCESS_HF, out, &err),
                     PGD_ERR_INVALID_ARGUMENT);
    pgd_error_destroy(err);
    free(out);
}
END_TEST

/* A top-down BMP (negative height: the first row in the file is the top row, as Windows
 * writes them and Pillow reads them) decodes to the same pixels as the bottom-up file of the
 * same image, in 24-bit, 32-bit and 8-bit palette forms; only INT32_MIN stays refused. */
static size_t bmp_file(unsigned char *f, const unsigned char *rgb, int w, int h, int bpp,
                       int top_down)
{
    int pal = bpp == 8 ? 256 : 0;
    size_t row = ((size_t)w * bpp / 8 + 3) & ~(size_t)3, off = 54 + 4 * (size_t)pal;
    size_t n = off + row * (size_t)h;
    memset(f, 0, n);
    f[0] = 'B', f[1] = 'M';
    unsigned char *q = f + 2;
    uint32_t fields[] = {(uint32_t)n, 0,           (uint32_t)off,
                         40,          (uint32_t)w, (uint32_t)(top_down ? -h : h)};
    for (size_t i = 0; i < 6; i++, q += 4)
        for (int b = 0; b < 4; b++)
            q[b] = (unsigned char)(fields[i] >> (8 * b));
    f[26] = 1, f[28] = (unsigned char)bpp;
    for (int i = 0; i < pal; i++) /* a grey ramp */
        f[54 + 4 * i] = f[55 + 4 * i] = f[56 + 4 * i] = (unsigned char)i;
    for (int y = 0; y < h; y++) {
        unsigned char *r = f + off + row * (size_t)(top_down ? y : h - 1 - y);
        for (int x = 0; x < w; x++) {
            const unsigned char *px = rgb + ((size_t)y * w + x) * 3;
            if (bpp == 8)
                r[x] = px[0];
            else
                for (int c = 0; c < 3; c++)
                    r[x * bpp / 8 + c] = px[2 - c];
        }
    }
    return n;
}

START_TEST(bmp_top_down)
{
    const int w = 7, h = 5;
    unsigned char *rgb = pattern(w, h, 3), file[54 + 1024 + 32 * 5 + 64];
    for (int bpp = 8; bpp <= 32; bpp += 8) {
        if (bpp == 16)
            continue;
        pgd_image *img[2] = {NULL, NULL};
        pgd_error *err = NULL;
        for (int td = 0; td < 2; td++) {
            size_t n = bmp_file(file, rgb, w, h, bpp, td);
            PGD_CHECK_OK(pgd_image_load_memory(file, n, td ? "top-down.bmp" : "bottom-up.bmp",
                                               &img[td], &err),
                         &err);
            ck_assert_int_eq(pgd_image_get_width(img[td]), w);
            ck_assert_int_eq(pgd_image_get_height(img[td]), h);
        }
        const uint8_t *a = pgd_image_get_data(img[0]), *b = pgd_image_get_data(img[1]);
        for (int i = 0; i < w * h * 3; i++) {
            int want = bpp == 8 ? rgb[i / 3 * 3] : rgb[i];
            ck_assert_msg(a[i] == want && b[i] == want,
                          "%d-bit pixel %d channel %d: %d, %d, not %d", bpp, i / 3, i % 3, a[i],
                          b[i], want);
        }
        pgd_image_destroy(img[0]);
        pgd_image_destroy(img[1]);
    }
    /* -INT32_MIN has no int32: refused with a message, not decoded. */
    size_t n = bmp_file(file, rgb, w, h, 24, 1);
    file[22] = file[23] = file[24] = 0, file[25] = 0x80;
    pgd_image *bad = NULL;
    pgd_error *err = NULL;
    ck_assert_int_ne(pgd_image_load_memory(file, n, "min.bmp", &bad, &err), PGD_OK);
    ck_assert_ptr_null(bad);
    ck_assert(pgd_error_get_message(err)[0] != '\0');
    pgd_error_destroy(err);
    free(rgb);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("image");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, roundtrip_png_bmp);
    tcase_add_test(tc, refuse_invented_pixels);
    tcase_add_test(tc, bmp_top_down);
    tcase_add_test(tc, thumbnail_view);
    tcase_add_test(tc, roundtrip_grey_alpha);
    tcase_add_test(tc, roundtrip_jpeg);
    tcase_add_test(tc, reject_formats);
    tcase_add_test(tc, reject_sizes);
    tcase_add_test(tc, reject_truncated);
    tcase_add_test(tc, preprocess_golden);
    tcase_add_test(tc, preprocess_odd_sizes);
    suite_add_tcase(s, tc);
    return pgd_test_run(s);
}
