/* weights.c — a vit_source over a safetensors file. */
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"

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

static const char *st_name_at(void *u, size_t i)
{
    return i < pgd_weights_count(u) ? pgd_weights_name(u, i) : NULL;
}

void model_shape_str(int ndim, const int64_t *s, char *buf, size_t size)
{
    size_t used = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < ndim && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%lld", i ? ", " : "", (long long)s[i]);
    if (used < size)
        snprintf(buf + used, size - used, "]");
}

static int64_t count(int ndim, const int64_t *s)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= s[i];
    return n;
}

int model_need(const vit_source *src, const char *name, int want_ndim, const int64_t *want,
               pgd_error **err)
{
    int nd = 0;
    int64_t s[8];
    char ws[96], gs[96];
    model_shape_str(want_ndim, want, ws, sizeof ws);
    if (src->shape(src->u, name, &nd, s) != 0)
        return pgd__error_set(err, PGD_ERR_NOT_FOUND, "%s: tensor '%s' %s is missing", src->label,
                              name, ws);
    if (count(nd, s) != count(want_ndim, want)) {
        model_shape_str(nd, s, gs, sizeof gs);
        return pgd__error_set(err, PGD_ERR_SHAPE, "%s: tensor '%s' has shape %s, expected %s",
                              src->label, name, gs, ws);
    }
    return PGD_OK;
}

void vit_weights_source(vit_source *src, pgd_weights *w, const char *label)
{
    src->u = w;
    src->label = label;
    src->shape = st_shape;
    src->read = st_read;
    src->meta = st_meta;
    src->name_at = st_name_at;
}
