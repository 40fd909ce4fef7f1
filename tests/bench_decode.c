/* bench_decode.c — decode speed of this build's decoder for a file against stb_image's, in one
 * run (not a test; built with the suite, run by hand):
 *
 *   build/tests/bench_decode FILE [SECONDS] [PIL.rgb]
 *
 * Decodes FILE in memory repeatedly for about SECONDS (default 3) each way and prints images/s
 * for pgd_image_load_memory (libjpeg-turbo, libpng or libwebp when the build has them) and for
 * stbi_load_from_memory to RGB, and with --fast-decode's scaling (pgd_image_load_memory_scaled,
 * the shorter side kept >= 256), and what --fast-decode changes in the torchvision preset's
 * input. With PIL.rgb (the bytes of Image.open(FILE).convert("RGB")), it
 * also prints each decoder's max difference from Pillow. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <stb_image.h>

#include "harness.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static int max_diff(const uint8_t *a, const uint8_t *b, size_t n)
{
    int m = 0;
    for (size_t i = 0; i < n; i++) {
        int d = abs((int)a[i] - (int)b[i]);
        m = d > m ? d : m;
    }
    return m;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_decode FILE [SECONDS] [PIL.rgb]\n");
        return 2;
    }
    double secs = argc > 2 ? atof(argv[2]) : 3.0;
    unsigned char *buf = NULL, *want = NULL;
    size_t size = 0, wsize = 0;
    if (pgd_test_read_file(argv[1], &buf, &size) ||
        (argc > 3 && pgd_test_read_file(argv[3], &want, &wsize))) {
        fprintf(stderr, "bench_decode: cannot read the files\n");
        return 1;
    }
    const char *fmt = buf[0] == 0xFF ? "JPEG" : buf[0] == 0x89 ? "PNG" : "WebP";
    for (int way = 0; way < 3; way++) {
        long n = 0;
        int w = 0, h = 0, diff = -1;
        double t0 = now(), t;
        do {
            if (way == 1) {
                int c;
                unsigned char *p = stbi_load_from_memory(buf, (int)size, &w, &h, &c, 3);
                if (!p) {
                    fprintf(stderr, "stb_image: %s\n", stbi_failure_reason());
                    return 1;
                }
                if (n == 0 && want && wsize == (size_t)w * h * 3)
                    diff = max_diff(p, want, wsize);
                stbi_image_free(p);
            } else {
                pgd_image *img = NULL;
                pgd_error *err = NULL;
                int rc = way == 0
                             ? pgd_image_load_memory(buf, size, argv[1], &img, &err)
                             : pgd_image_load_memory_scaled(buf, size, argv[1], 256, &img, &err);
                if (rc) {
                    fprintf(stderr, "%s\n", pgd_error_get_message(err));
                    return 1;
                }
                w = pgd_image_get_width(img), h = pgd_image_get_height(img);
                if (n == 0 && want && wsize == (size_t)w * h * 3)
                    diff = max_diff(pgd_image_get_data(img), want, wsize);
                pgd_image_destroy(img);
            }
            n++;
            t = now() - t0;
        } while (t < secs);
        printf("%-44s %5d x %-5d %8.1f images/s (%ld in %.2f s)",
               way == 0   ? pgd_image_decoder(fmt)
               : way == 1 ? "stb_image"
                          : "--fast-decode (shorter side >= 256)",
               w, h, n / t, n, t);
        if (diff >= 0)
            printf(", max diff vs Pillow %d", diff);
        printf("\n");
    }
    /* What --fast-decode changes in the model's input: the torchvision preset's 224 x 224 input
     * from the scaled decode against the exact one (normalised units). */
    static float a[3 * 224 * 224], b[3 * 224 * 224];
    pgd_image *ia = NULL, *ib = NULL;
    pgd_error *err = NULL;
    if (pgd_image_load_memory(buf, size, argv[1], &ia, &err) ||
        pgd_image_load_memory_scaled(buf, size, argv[1], 256, &ib, &err) ||
        pgd_image_preprocess(ia, PGD_PREPROCESS_TORCHVISION, a, &err) ||
        pgd_image_preprocess(ib, PGD_PREPROCESS_TORCHVISION, b, &err)) {
        fprintf(stderr, "%s\n", pgd_error_get_message(err));
        return 1;
    }
    double sum = 0, worst = 0;
    for (size_t i = 0; i < sizeof a / sizeof a[0]; i++) {
        double d = a[i] > b[i] ? a[i] - b[i] : b[i] - a[i];
        sum += d;
        worst = d > worst ? d : worst;
    }
    printf("--fast-decode vs exact, torchvision input: mean abs diff %.4f, max %.4f "
           "(normalised units; one 8-bit level is ~0.0175)\n",
           sum / (sizeof a / sizeof a[0]), worst);
    pgd_image_destroy(ia);
    pgd_image_destroy(ib);
    free(buf);
    free(want);
    return 0;
}
