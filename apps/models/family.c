/* family.c — the table of model families and the one rule that detects a checkpoint's. */
#include <string.h>

#include "family.h"
#include "vit.h"

const model_family *const model_families[] = {&family_vit, &family_resnet, &family_mixer,
                                              &family_swin};
const size_t model_family_count = sizeof model_families / sizeof model_families[0];

/* Detection order: the most specific names first; the ViT's detector decides last. */
static const model_family *const detect_order[] = {&family_mixer, &family_swin, &family_resnet};

int family_detect(const model_source *src, const pgd_model_options *opt, const model_family **out,
                  pgd_error **err)
{
    *out = NULL;
    for (size_t i = 0; i < sizeof detect_order / sizeof detect_order[0]; i++)
        if (detect_order[i]->is(src)) {
            *out = detect_order[i];
            return PGD_OK;
        }
    /* the fallback's detector, run only to tell whether the file is one (or why not) */
    vit_config probe;
    int rc = family_vit.detect(src, opt, &probe, err);
    if (!rc)
        *out = &family_vit;
    return rc;
}

const char *family_size_of(const char *const table[][2], size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(name, table[i][0]))
            return table[i][1];
    return NULL;
}
