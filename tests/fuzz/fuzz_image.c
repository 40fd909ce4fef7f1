/* fuzz_image.c — libFuzzer target: the image loader (magic sniffing, the size cap, stb_image's
 * JPEG/PNG/BMP decoders — JPEG and PNG are sent to stb_image even where the build has libjpeg
 * and libpng, pgd__image_use_stb; those have their own targets, fuzz_jpeg and fuzz_png) on
 * arbitrary bytes, then the three preprocessing presets on what it decodes (Pillow-exact
 * resampling with every crop and scale a small image can produce). */
#include <stdint.h>
#include <stdlib.h>

#include "pagoda.h"
#include "runtime/io/image_decode.h" /* white-box: pgd__image_use_stb */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pgd_image *img = NULL;
    pgd_error *err = NULL;
    pgd__image_use_stb(1);
    int rc = pgd_image_load_memory(data, size, "fuzz.img", &img, &err);
    pgd__image_use_stb(0);
    if (rc != PGD_OK) {
        if (!err || !pgd_error_get_message(err)[0] || img)
            abort();
        pgd_error_destroy(err);
        return 0;
    }
    int w = pgd_image_get_width(img), h = pgd_image_get_height(img);
    if (w <= 0 || h <= 0 || (uint64_t)w * (uint64_t)h > PGD_IMAGE_MAX_PIXELS ||
        !pgd_image_get_data(img))
        abort();
    /* Resampling costs grow with the image, and with the longer side alone (a 4 x 32771 BMP of
     * 78 bytes takes 3 s per preset in this instrumented build: legitimate work, ~50 ms in a
     * release build); small ones give the interesting edge cases. */
    if ((uint64_t)w * (uint64_t)h <= 512u * 512u && w <= 2048 && h <= 2048) {
        static float out[3 * 224 * 224];
        const pgd_preprocess presets[] = {PGD_PREPROCESS_TORCHVISION, PGD_PREPROCESS_TIMM,
                                          PGD_PREPROCESS_HF};
        for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
            pgd_error *e2 = NULL;
            (void)pgd_image_preprocess(img, presets[i], out, &e2);
            pgd_error_destroy(e2);
        }
    }
    pgd_image_destroy(img);
    return 0;
}
