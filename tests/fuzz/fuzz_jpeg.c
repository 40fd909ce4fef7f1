/* fuzz_jpeg.c — libFuzzer target: JPEG decoding (libjpeg-turbo with Pillow's settings, through
 * pgd_image_load_memory) on inputs starting with the JPEG magic FF D8 FF. See fuzz_decode.h. */
#include "fuzz_decode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3 || data[0] != 0xFF || data[1] != 0xD8 || data[2] != 0xFF)
        return -1;
    return fuzz_decode(data, size);
}
