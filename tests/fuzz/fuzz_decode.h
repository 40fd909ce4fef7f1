/* fuzz_decode.h — the body of the per-decoder fuzz targets (fuzz_jpeg.c, fuzz_png.c,
 * fuzz_webp.c): inputs of the target's format (by magic bytes; others are rejected, return -1,
 * so that libFuzzer keeps them out of the corpus) go through pgd_image_load_memory, which hands
 * them to libjpeg-turbo, libpng or libwebp (stb_image where the build lacks the library). A
 * refusal must come with a message and no image; a success with a sane size and pixels, which
 * are then read in full (a short buffer is an ASan report) and, for small images, preprocessed.
 *
 * The libraries are Debian's shared builds: no coverage feedback or ASan inside them (they are
 * fuzzed upstream, OSS-Fuzz); what these targets exercise is our side — the header checks and
 * size cap, the error managers and their longjmps, the colour conversions, every buffer we
 * allocate and free on each failure path (LeakSanitizer at exit of each run). */
#ifndef PGD_FUZZ_DECODE_H
#define PGD_FUZZ_DECODE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pagoda.h"

static int fuzz_decode(const uint8_t *data, size_t size)
{
    pgd_image *img = NULL;
    pgd_error *err = NULL;
    if (pgd_image_load_memory(data, size, "fuzz.img", &img, &err) != PGD_OK) {
        if (!err || !pgd_error_get_message(err)[0] || img)
            abort();
        pgd_error_destroy(err);
        return 0;
    }
    int w = pgd_image_get_width(img), h = pgd_image_get_height(img);
    const uint8_t *px = pgd_image_get_data(img);
    if (w <= 0 || h <= 0 || (uint64_t)w * (uint64_t)h > PGD_IMAGE_MAX_PIXELS || !px)
        abort();
    /* Every byte is read: an uninitialised or short buffer shows up under the sanitizers. */
    unsigned sum = 0;
    for (size_t i = 0, n = (size_t)w * h * 3; i < n; i++)
        sum += px[i];
    if (sum == 0xFFFFFFFFu)
        abort(); /* keeps the loop */
    if ((uint64_t)w * (uint64_t)h <= 256u * 256u) {
        static float out[3 * 224 * 224];
        pgd_error *e2 = NULL;
        (void)pgd_image_preprocess(img, PGD_PREPROCESS_TORCHVISION, out, &e2);
        pgd_error_destroy(e2);
    }
    pgd_image_destroy(img);
    return 0;
}

#endif
