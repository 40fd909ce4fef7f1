/* weights.c — a vit_source over a safetensors file. */
#include <stdlib.h>

#include "vit.h"

static int st_shape(void *u, const char *name, int *ndim, int64_t shape[8])
{
    pgd_weight_info info;
    if (pgd_weights_find(u, name, &info) != PGD_OK)
        return -1;
    *ndim = info.ndim;
    for (int i = 0; i < info.ndim && i < 8; i++)
        shape[i] = info.shape[i];
    return 0;
}

static int st_read(void *u, const char *name, float *dst, pgd_error **err)
{
    return pgd_weights_to_float(u, name, dst, err);
}

static const char *st_meta(void *u, const char *key) { return pgd_weights_metadata(u, key); }

void vit_weights_source(vit_source *src, pgd_weights *w, const char *label)
{
    src->u = w;
    src->label = label;
    src->shape = st_shape;
    src->read = st_read;
    src->meta = st_meta;
}
