/* test_decode.c — decoded pixels against Pillow's: every file of tests/data/decode (JPEG at
 * several qualities and subsamplings, progressive, grey, CMYK; PNG grey 1..16 bit, grey+alpha,
 * RGB(A) 8/16, palette; WebP lossy and lossless; tools/golden/make-decode-golden.py) must decode to
 * exactly Image.open(f).convert("RGB")'s bytes, and two of them preprocessed with the
 * torchvision preset must equal torchvision's transforms exactly. Which exactness is checked
 * follows the build: a format served by its library (pgd_image_decoder) must match exactly; one
 * served by stb_image (-Djpeg=disabled, -Dpng=disabled) within the tolerance stated below, and
 * a 16-bit PNG or one with palette indices past its PLTE through stb_image is only required to
 * load; WebP without libwebp must be
 * refused as unsupported. Both checks run twice in a build with the libraries: as built, and
 * with JPEG and PNG sent to stb_image (pgd__image_use_stb), so CI tests the fallback too. Then
 * damaged copies of each library-decoded file (truncated, bytes flipped) are refused or decoded,
 * never crash (the sanitizer build checks the rest). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "runtime/io/image_decode.h" /* white-box: pgd__image_use_stb */

/* stb_image's JPEG decoder (another IDCT and chroma upsampling) against libjpeg-turbo's, on
 * these files: measured max 19 levels (jpeg_q75_422, at the red disc's edge); the bound leaves a
 * little room. Not a promise about other files. stb_image's 8-bit PNGs (palette, grey 1..8 bit,
 * grey+alpha, RGBA) equal Pillow's exactly: tolerance 0. */
#define STB_JPEG_TOLERANCE 24

static const char *data_dir(void)
{
    const char *d = getenv("PAGODA_TEST_DATA");
    return d && *d ? d : "tests/data";
}

static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)len + 1);
    ck_assert(fread(b, 1, (size_t)len, f) == (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return b;
}

typedef struct entry {
    char name[64], file[80], mode[16];
    int w, h;
} entry;

static int read_manifest(entry *e, int max)
{
    char path[8192];
    ck_assert((size_t)snprintf(path, sizeof path, "%s/decode/MANIFEST", data_dir()) < sizeof path);
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    int n = 0;
    while (n < max && fscanf(f, "%63s %79s %d %d %15s", e[n].name, e[n].file, &e[n].w, &e[n].h,
                             e[n].mode) == 5)
        n++;
    fclose(f);
    return n;
}

static const char *format_of(const char *file)
{
    const char *dot = strrchr(file, '.');
    if (!strcmp(dot, ".jpg"))
        return "JPEG";
    if (!strcmp(dot, ".png"))
        return "PNG";
    return "WebP";
}

static int is_stb(const char *format)
{
    const char *d = pgd_image_decoder(format);
    return d && !strcmp(d, "stb_image");
}

/* _i = 1: JPEG and PNG through stb_image (pgd__image_use_stb), as a build without the libraries
 * decodes them; the tolerances of that build apply. */
START_TEST(pixels_equal_pillow)
{
    pgd__image_use_stb(_i);
    entry e[64];
    int n = read_manifest(e, 64);
    ck_assert_int_ge(n, 44);
    int exact = 0, tolerated = 0, loaded_only = 0, refused = 0, worst_stb = 0;
    for (int i = 0; i < n; i++) {
        const char *fmt = format_of(e[i].file);
        const char *dec = pgd_image_decoder(fmt);
        char path[8192];
        ck_assert((size_t)snprintf(path, sizeof path, "%s/decode/%s", data_dir(), e[i].file) <
                  sizeof path);
        pgd_image *img = NULL;
        pgd_error *err = NULL;
        int rc = pgd_image_load(path, &img, &err);
        if (!dec) { /* WebP without libwebp */
            ck_assert_msg(rc == PGD_ERR_UNSUPPORTED, "%s: %d", e[i].file, rc);
            ck_assert(strstr(pgd_error_get_message(err), "WebP"));
            pgd_error_destroy(err);
            refused++;
            continue;
        }
        PGD_CHECK_OK(rc, &err);
        ck_assert_int_eq(pgd_image_get_width(img), e[i].w);
        ck_assert_int_eq(pgd_image_get_height(img), e[i].h);
        ck_assert((size_t)snprintf(path, sizeof path, "%s/decode/%s.rgb", data_dir(), e[i].name) <
                  sizeof path);
        size_t len;
        unsigned char *want = slurp(path, &len);
        ck_assert_uint_eq(len, (size_t)e[i].w * e[i].h * 3);
        const uint8_t *got = pgd_image_get_data(img);
        int worst = 0;
        size_t first = len;
        for (size_t k = 0; k < len; k++) {
            int d = abs((int)got[k] - (int)want[k]);
            if (d && first == len)
                first = k;
            worst = d > worst ? d : worst;
        }
        /* Where stb_image is known to differ from Pillow: 16-bit samples (scaled its own way) and
         * palette indices past PLTE (not black). */
        int stb_differs = strstr(e[i].name, "16") || strstr(e[i].name, "past_plte");
        if (!is_stb(fmt)) {
            ck_assert_msg(worst == 0,
                          "%s (%s, Pillow mode %s) through %s: max diff %d, first at byte %zu "
                          "(got %d, Pillow %d)",
                          e[i].file, fmt, e[i].mode, dec, worst, first,
                          first < len ? got[first] : 0, first < len ? want[first] : 0);
            exact++;
        } else if (!strcmp(fmt, "PNG") && stb_differs) {
            loaded_only++;
        } else {
            int tol = strcmp(fmt, "JPEG") ? 0 : STB_JPEG_TOLERANCE;
            ck_assert_msg(worst <= tol, "%s through stb_image: max diff %d > %d", e[i].file, worst,
                          tol);
            worst_stb = worst > worst_stb ? worst : worst_stb;
            tolerated++;
        }
        free(want);
        pgd_image_destroy(img);
    }
    printf("decoders: JPEG %s, PNG %s, WebP %s\n", pgd_image_decoder("JPEG"),
           pgd_image_decoder("PNG"),
           pgd_image_decoder("WebP") ? pgd_image_decoder("WebP") : "none (refused)");
    printf("%d files equal Pillow's pixels exactly; %d through stb_image within tolerance (max "
           "diff %d, JPEG bound %d); %d PNGs through stb_image only loaded; %d WebP refused\n",
           exact, tolerated, worst_stb, STB_JPEG_TOLERANCE, loaded_only, refused);
    ck_assert_int_eq(exact + tolerated + loaded_only + refused, n);
    pgd__image_use_stb(0);
}
END_TEST

#define S PGD_PREPROCESS_SIZE
#define STRIDE 7
#define NSUB (3 * S * S / STRIDE)

START_TEST(preprocess_equals_torchvision)
{
    pgd__image_use_stb(_i);
    static const char *names[] = {"jpeg_q90_420_progressive.jpg", "png_rgb16.png"};
    float *out = malloc(sizeof(float) * 3 * S * S);
    float *want = malloc(sizeof(float) * NSUB);
    for (int i = 0; i < 2; i++) {
        const char *fmt = format_of(names[i]);
        char path[8192];
        ck_assert((size_t)snprintf(path, sizeof path, "%s/decode/%s", data_dir(), names[i]) <
                  sizeof path);
        pgd_image *img = NULL;
        pgd_error *err = NULL;
        PGD_CHECK_OK(pgd_image_load(path, &img, &err), &err);
        PGD_CHECK_OK(pgd_image_preprocess(img, PGD_PREPROCESS_TORCHVISION, out, &err), &err);
        pgd_image_destroy(img);
        char stem[64];
        snprintf(stem, sizeof stem, "%.*s", (int)(strrchr(names[i], '.') - names[i]), names[i]);
        ck_assert((size_t)snprintf(path, sizeof path, "%s/decode/%s.torchvision.f32", data_dir(),
                                   stem) < sizeof path);
        FILE *f = fopen(path, "rb");
        ck_assert_msg(f != NULL, "cannot open %s", path);
        ck_assert(fread(want, sizeof(float), NSUB, f) == NSUB);
        fclose(f);
        double worst = 0;
        for (int k = 0; k < NSUB; k++) {
            double d = fabs((double)out[(size_t)k * STRIDE] - want[k]);
            worst = d > worst ? d : worst;
        }
        if (is_stb(fmt)) {
            printf("%s (stb_image): preprocessed max abs diff vs torchvision %.3g (not checked "
                   "for exactness)\n",
                   names[i], worst);
            if (!strcmp(fmt, "JPEG")) /* the pixel bound / 255 / the smallest std, 0.224 */
                ck_assert_msg(worst <= STB_JPEG_TOLERANCE / 255.0 / 0.224 + 1e-5, "%g", worst);
        } else {
            printf("%s (%s): preprocessed max abs diff vs torchvision %.3g\n", names[i],
                   pgd_image_decoder(fmt), worst);
            ck_assert_msg(worst == 0.0, "%s: max abs diff %g", names[i], worst);
        }
    }
    free(out);
    free(want);
    pgd__image_use_stb(0);
}
END_TEST

/* Damaged copies of every file: each prefix cut at 37 points and 200 single-byte changes. A
 * library decoder refuses every cut inside the image data (truncated input is never grey- or
 * zero-filled); nothing crashes. */
START_TEST(damaged_files)
{
    entry e[64];
    int n = read_manifest(e, 64);
    long ok = 0, refused = 0;
    unsigned seed = 12345;
    for (int i = 0; i < n; i++) {
        const char *fmt = format_of(e[i].file);
        if (!pgd_image_decoder(fmt) || is_stb(fmt))
            continue;
        char path[8192];
        ck_assert((size_t)snprintf(path, sizeof path, "%s/decode/%s", data_dir(), e[i].file) <
                  sizeof path);
        size_t len;
        unsigned char *file = slurp(path, &len);
        for (int k = 0; k < 37 + 200; k++) {
            size_t cut = len;
            unsigned char *b = malloc(len);
            memcpy(b, file, len);
            if (k < 37) {
                cut = len * (size_t)k / 37;
                if (cut == 0)
                    cut = 1;
            } else {
                seed = seed * 1103515245u + 12345u;
                size_t at = (seed >> 8) % len;
                b[at] ^= (unsigned char)(1u + (seed >> 24) % 255u);
            }
            pgd_image *img = NULL;
            pgd_error *err = NULL;
            int rc = pgd_image_load_memory(b, cut, "damaged", &img, &err);
            if (rc == PGD_OK) {
                /* The cuts lose at least 1/37 of the file: never decodable. A flipped byte may
                 * decode (entropy-coded data has no checksum), even at another size (SOF). */
                ck_assert_msg(k >= 37, "%s cut to %zu of %zu bytes decoded", e[i].file, cut, len);
                ck_assert(pgd_image_get_width(img) > 0 && pgd_image_get_data(img) != NULL);
                ok++;
            } else {
                ck_assert_msg(err && strstr(pgd_error_get_message(err), "damaged"), "%s: %d",
                              e[i].file, rc);
                refused++;
            }
            pgd_image_destroy(img);
            pgd_error_destroy(err);
            free(b);
        }
        free(file);
    }
    printf("damaged copies through the libraries: %ld decoded, %ld refused (stb_image's formats: "
           "test_image)\n",
           ok, refused);
}
END_TEST

/* pgd_image_load_scaled (--fast-decode): a JPEG through libjpeg shrinks to the smallest of
 * 1/8, 1/4, 1/2 whose shorter side stays >= min_side; a min_side above the image gives the
 * exact full-size pixels; other formats are never scaled. */
START_TEST(scaled_decode)
{
    static const struct {
        int min_side, w, h;
    } cases[] = {{1, 8, 6},    {6, 8, 6},    {7, 16, 12},  {12, 16, 12},
                 {13, 32, 24}, {24, 32, 24}, {25, 64, 48}, {1000, 64, 48}};
    int lib = !is_stb("JPEG");
    char path[8192];
    ck_assert((size_t)snprintf(path, sizeof path, "%s/decode/jpeg_q90_420_progressive.jpg",
                               data_dir()) < sizeof path);
    pgd_image *full = NULL;
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_image_load(path, &full, &err), &err);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pgd_image *img = NULL;
        PGD_CHECK_OK(pgd_image_load_scaled(path, cases[i].min_side, &img, &err), &err);
        int w = lib ? cases[i].w : 64, h = lib ? cases[i].h : 48;
        ck_assert_int_eq(pgd_image_get_width(img), w);
        ck_assert_int_eq(pgd_image_get_height(img), h);
        if (w == 64)
            ck_assert(
                !memcmp(pgd_image_get_data(img), pgd_image_get_data(full), (size_t)64 * 48 * 3));
        pgd_image_destroy(img);
    }
    pgd_image_destroy(full);
    ck_assert((size_t)snprintf(path, sizeof path, "%s/decode/png_rgb16.png", data_dir()) <
              sizeof path);
    pgd_image *img = NULL;
    PGD_CHECK_OK(pgd_image_load_scaled(path, 1, &img, &err), &err);
    ck_assert_int_eq(pgd_image_get_width(img), 33);
    pgd_image_destroy(img);
    ck_assert_int_eq(pgd_image_load_scaled(path, 0, &img, &err), PGD_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(img);
    pgd_error_destroy(err);
}
END_TEST

/* EXIF orientation: read as Pillow reads it (the digit in the file name), ignored by loading
 * (pixels_equal_pillow), and pgd_image_apply_orientation gives exactly
 * ImageOps.exif_transpose's pixels (NAME.upright.rgb). */
START_TEST(exif_orientation)
{
    entry e[64];
    int n = read_manifest(e, 64), checked = 0;
    for (int i = 0; i < n; i++) {
        const char *o = strstr(e[i].name, "exif_o");
        if (!o || !pgd_image_decoder(format_of(e[i].file)))
            continue;
        char path[8192];
        ck_assert((size_t)snprintf(path, sizeof path, "%s/decode/%s", data_dir(), e[i].file) <
                  sizeof path);
        size_t len, wlen;
        unsigned char *file = slurp(path, &len);
        int orientation = pgd_image_exif_orientation(file, len);
        ck_assert_msg(orientation == o[6] - '0', "%s: orientation %d", e[i].file, orientation);
        pgd_image *img = NULL, *up = NULL;
        pgd_error *err = NULL;
        PGD_CHECK_OK(pgd_image_load_memory(file, len, e[i].file, &img, &err), &err);
        PGD_CHECK_OK(pgd_image_apply_orientation(img, orientation, &up, &err), &err);
        ck_assert((size_t)snprintf(path, sizeof path, "%s/decode/%s.upright.rgb", data_dir(),
                                   e[i].name) < sizeof path);
        unsigned char *want = slurp(path, &wlen);
        int swap = orientation >= 5;
        ck_assert_int_eq(pgd_image_get_width(up), swap ? e[i].h : e[i].w);
        ck_assert_int_eq(pgd_image_get_height(up), swap ? e[i].w : e[i].h);
        ck_assert_uint_eq(wlen, (size_t)e[i].w * e[i].h * 3);
        /* Exact through the libraries; within the fallback's tolerance through stb_image. */
        int tol = is_stb(format_of(e[i].file)) ? STB_JPEG_TOLERANCE : 0, worst = 0;
        for (size_t k = 0; k < wlen; k++) {
            int d = abs((int)pgd_image_get_data(up)[k] - (int)want[k]);
            worst = d > worst ? d : worst;
        }
        ck_assert_msg(worst <= tol, "%s: max diff %d from exif_transpose's pixels", e[i].file,
                      worst);
        pgd_image_destroy(img);
        pgd_image_destroy(up);
        free(want);
        free(file);
        checked++;
    }
    ck_assert_int_ge(checked, 9);
    ck_assert_int_eq(pgd_image_exif_orientation("\xff\xd8\xff\xe1\x00\x08Exif", 12), 1);
    ck_assert_int_eq(pgd_image_exif_orientation(NULL, 0), 1);
    printf("EXIF orientation: %d files turned as ImageOps.exif_transpose (%s)\n", checked,
           is_stb("JPEG") ? "JPEG within the stb_image tolerance" : "exactly");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("decode");
    TCase *tc = tcase_create("core");
    tcase_add_loop_test(tc, pixels_equal_pillow, 0, 2);
    tcase_add_loop_test(tc, preprocess_equals_torchvision, 0, 2);
    tcase_add_test(tc, damaged_files);
    tcase_add_test(tc, scaled_decode);
    tcase_add_test(tc, exif_orientation);
    suite_add_tcase(s, tc);
    return pgd_test_run(s);
}
