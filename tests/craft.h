/* craft.h — variants of a safetensors file for the strict-loading tests: a copy of a committed
 * tiny model with tensors reshaped (same bytes, another layout), dropped, copied under another
 * name, or with one float32 element overwritten. Made at test time, so no variant is committed. */
#ifndef PAGODA_TEST_CRAFT_H
#define PAGODA_TEST_CRAFT_H

#include <stddef.h>
#include <stdint.h>

typedef enum craft_op {
    CRAFT_RESHAPE, /* `name` reports shape[0..ndim) (same element count) */
    CRAFT_DROP,    /* `name` is left out */
    CRAFT_COPY,    /* a new tensor `to`, a copy of `name` */
    CRAFT_POKE     /* element `index` of `name` (F32) becomes `value` */
} craft_op;

typedef struct craft_edit {
    craft_op op;
    const char *name;
    int ndim;
    int64_t shape[8];
    const char *to;
    int64_t index;
    float value;
} craft_edit;

/* Writes the file `in` with edits[0..n) applied to `out` (header JSON + data, offsets recomputed);
 * fails the running test on any error. */
void craft_safetensors(const char *in, const char *out, const craft_edit *edits, size_t n);

#endif
