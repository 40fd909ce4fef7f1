/* fuzz_png.c — libFuzzer target: PNG decoding (the chunk and CRC checks, then libpng and the
 * conversions to RGB as Pillow's) on inputs starting with the PNG signature. See
 * fuzz_decode.h. A mutated chunk almost always fails its CRC and stops at our check, so each
 * input is decoded twice: as it is, and as a copy with every complete chunk's CRC rewritten to
 * match, so that mutations reach libpng. */
#include "fuzz_decode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint32_t crc32_png(const uint8_t *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
    }
    return ~c;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A};
    if (size < 8 || memcmp(data, sig, 8))
        return -1;
    fuzz_decode(data, size);
    uint8_t *fixed = malloc(size);
    if (!fixed)
        return 0;
    memcpy(fixed, data, size);
    for (size_t i = 8; size - i >= 12;) {
        uint32_t len = (uint32_t)fixed[i] << 24 | (uint32_t)fixed[i + 1] << 16 |
                       (uint32_t)fixed[i + 2] << 8 | fixed[i + 3];
        if (len > size - i - 12)
            break;
        uint32_t c = crc32_png(fixed + i + 4, 4 + (size_t)len);
        uint8_t *q = fixed + i + 8 + len;
        q[0] = (uint8_t)(c >> 24), q[1] = (uint8_t)(c >> 16), q[2] = (uint8_t)(c >> 8);
        q[3] = (uint8_t)c;
        i += 12 + (size_t)len;
    }
    fuzz_decode(fixed, size);
    free(fixed);
    return 0;
}
