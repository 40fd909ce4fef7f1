/* fuzz_safetensors.c — libFuzzer target: the safetensors reader on arbitrary bytes.
 *
 * Opens the input through pgd__weights_open_memory (the same validation as pgd_weights_open),
 * then exercises every accessor on what it accepted: names, lookups, metadata and the float32
 * conversion of each tensor (bounded, so huge-but-valid files stay fast). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pgd_weights *w = NULL;
    pgd_error *err = NULL;
    if (pgd__weights_open_memory(data, size, "fuzz.safetensors", &w, &err) != PGD_OK) {
        /* Every rejection must carry a message. */
        if (!err || !pgd_error_get_message(err)[0])
            abort();
        pgd_error_destroy(err);
        return 0;
    }
    size_t n = pgd_weights_get_count(w);
    uint64_t budget = 1u << 20; /* floats converted per input */
    for (size_t i = 0; i < n; i++) {
        const char *name = pgd_weights_get_name(w, i);
        pgd_weight_info info;
        if (!name || pgd_weights_find(w, name, &info) != PGD_OK)
            abort();
        uint64_t numel = 1;
        for (int d = 0; d < info.ndim; d++)
            numel *= (uint64_t)info.shape[d];
        if (numel > budget)
            continue;
        budget -= numel;
        float *dst = malloc((size_t)numel * sizeof *dst + 1);
        if (!dst)
            continue;
        pgd_error *e2 = NULL;
        (void)pgd_weights_to_float(w, name, dst, &e2);
        pgd_error_destroy(e2);
        free(dst);
    }
    (void)pgd_weights_find(w, "no.such.tensor", &(pgd_weight_info){0});
    (void)pgd_weights_get_metadata(w, "format");
    (void)pgd_weights_get_metadata(w, "num_heads");
    pgd_weights_destroy(w);
    return 0;
}
