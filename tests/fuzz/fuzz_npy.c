/* fuzz_npy.c — libFuzzer target: the .npy reader (magic, version, header dict, shape tuple,
 * element count against the data length) on arbitrary bytes, through pgd__npy_parse — the
 * body of pgd_npy_read without the file read. */
#include <stdint.h>
#include <stdlib.h>

#include "internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    float *out = NULL;
    int ndim = -1;
    int64_t shape[PGD_MAX_DIMS];
    pgd_error *err = NULL;
    int rc = pgd__npy_parse(data, size, "fuzz.npy", &out, &ndim, shape, &err);
    if (rc != PGD_OK) {
        if (!err || !pgd_error_get_message(err)[0] || out || ndim != 0)
            abort();
        pgd_error_destroy(err);
        return 0;
    }
    if (!out || ndim < 0 || ndim > PGD_MAX_DIMS)
        abort();
    /* Touch every element: the count must match what was allocated. */
    uint64_t count = 1;
    for (int i = 0; i < ndim; i++)
        count *= (uint64_t)shape[i];
    volatile float sink = 0;
    for (uint64_t i = 0; i < count; i++)
        sink += out[i];
    (void)sink;
    free(out);
    return 0;
}
