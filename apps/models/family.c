/* family.c — the table of model families, the one rule that detects a checkpoint's and the
 * lookup of a seeded random model's. */
#include <stdlib.h>
#include <string.h>

#include "family.h"
#include "vit.h"

const model_family *const model_families[] = {&family_vit, &family_resnet, &family_mixer,
                                              &family_swin, &family_onnx};
const size_t model_family_count = sizeof model_families / sizeof model_families[0];

/* Detection order: the most specific names first; the ViT's detector decides last. */
static const model_family *const detect_order[] = {&family_onnx, &family_mixer, &family_swin,
                                                   &family_resnet};

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

int family_random(const char *name, const model_family **out, void **cfg, model_source *src,
                  pgd_error **err)
{
    *out = NULL;
    *cfg = NULL;
    memset(src, 0, sizeof *src);
    for (size_t i = 0; i < model_family_count; i++) {
        const model_family *fam = model_families[i];
        void *c = calloc(1, fam->cfg_size);
        if (!c)
            return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "random model %s", name);
        int rc = fam->random(name, c, src, err);
        if (rc) {
            free(c);
            model_source_free(src);
        }
        if (rc == PGD_ERR_NOT_FOUND) /* not this family's name: the next */
            continue;
        if (rc)
            return rc;
        *out = fam;
        *cfg = c;
        return PGD_OK;
    }
    return PGD_ERR_NOT_FOUND;
}

const char *family_size_of(const char *const table[][2], size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(name, table[i][0]))
            return table[i][1];
    return NULL;
}
