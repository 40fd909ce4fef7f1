/* craft.h — variants of a safetensors file for the strict-loading tests: a copy of a committed
 * tiny model with tensors reshaped (same bytes, another layout), dropped, copied under another
 * name, or with one float32 element overwritten. Made at test time, so no variant is committed. */
#ifndef PAGODA_TEST_CRAFT_H
#define PAGODA_TEST_CRAFT_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

typedef enum craft_op {
    CRAFT_RESHAPE, /* `name` reports shape[0..ndim) (same element count) */
    CRAFT_DROP,    /* `name` is left out */
    CRAFT_COPY,    /* a new tensor `to`, a copy of `name` */
    CRAFT_POKE,    /* element `index` of `name` (F32) becomes `value` */
    CRAFT_RESIZE   /* `name` gets shape[0..ndim) of any element count (a zero dimension, a
                      larger table): its bytes are the old ones repeated, or none */
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

/* One model family's detect + load, for craft_try_variant. `load` returns the status and sets
 * *model (left NULL on failure); `unload` frees a loaded model (NULL is allowed); `user` is passed
 * to `load` (options such as a forced mode). */
typedef struct craft_loader {
    const char *family; /* in the variant's file name: craft-<family>-<tag>.safetensors */
    int (*load)(pgd_ctx *ctx, const model_source *src, void *user, void **model, pgd_error **err);
    void (*unload)(void *model);
    void *user;
} craft_loader;

/* Writes a variant of tests/data/<base> made with edits[0..n) to the test temporary directory
 * and loads it with `l`: with `named` NULL it must load; else it must fail with no model and a
 * message naming `named` and (when given) `also`. The variant is removed afterwards. */
void craft_try_variant(pgd_ctx *ctx, const craft_loader *l, const char *base, const char *tag,
                       const craft_edit *edits, size_t n, const char *named, const char *also);

#endif
