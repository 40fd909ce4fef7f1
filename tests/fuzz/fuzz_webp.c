/* fuzz_webp.c — libFuzzer target: WebP decoding (libwebp, lossy and lossless, through
 * pgd_image_load_memory) on inputs starting "RIFF....WEBP". See fuzz_decode.h. */
#include "fuzz_decode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 12 || memcmp(data, "RIFF", 4) || memcmp(data + 8, "WEBP", 4))
        return -1;
    return fuzz_decode(data, size);
}
