/* api.c — libpagoda-models: the models of this folder behind the small handle of
 * pagoda_models.h (for the Python binding and other programs that want a whole model). Every
 * family is reached through its entry of the family table (family.h): detection by
 * family_detect, the rule of `pagoda classify`; no model code and no switch over families here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "family.h"
#include "labels.h"
#include "pagoda_models.h"

struct pgd_model {
    const model_family *fam;
    void *cfg;       /* fam->cfg_size bytes: the family's configuration */
    void *model;     /* the family's model */
    char label[160]; /* the file (or random name), for the description */
};

static int check_batch(const pgd_model *m, const float *images, int B, int H, int W,
                       pgd_error **err)
{
    if (!m || !images || B < 1 || H < 1 || W < 1)
        return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT,
                             "pgd_model: a model, images and B, H, W >= 1 are required "
                             "(got B %d, H %d, W %d)",
                             B, H, W);
    return m->fam->check_input ? m->fam->check_input(m->cfg, B, H, W, err) : PGD_OK;
}

static int new_model(pgd_model **out, const model_family *fam, const char *label, pgd_error **err)
{
    pgd_model *m = calloc(1, sizeof *m);
    void *cfg = calloc(1, fam->cfg_size);
    if (!m || !cfg) {
        free(m);
        free(cfg);
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "pgd_model: %s", label);
    }
    m->fam = fam;
    m->cfg = cfg;
    snprintf(m->label, sizeof m->label, "%s", label);
    *out = m;
    return PGD_OK;
}

int pgd_model_load(pgd_ctx *ctx, const char *path, const pgd_model_options *opt, pgd_model **out,
                   pgd_error **err)
{
    if (!out)
        return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT, "pgd_model_load: out is NULL");
    *out = NULL;
    if (!ctx || !path)
        return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT,
                             "pgd_model_load: a context and a path are required");
    model_source src;
    pgd_model *m = NULL;
    const model_family *fam = NULL;
    int rc = model_source_open(&src, path, err);
    if (rc)
        return rc;
    rc = family_detect(&src, opt, &fam, err);
    if (!rc)
        rc = new_model(&m, fam, path, err);
    if (!rc)
        rc = fam->detect(&src, opt, m->cfg, err);
    if (!rc)
        rc = fam->load(ctx, &src, m->cfg, &m->model, err);
    model_source_free(&src);
    if (rc) {
        pgd_model_destroy(m);
        return rc;
    }
    *out = m;
    return PGD_OK;
}

int pgd_model_random(pgd_ctx *ctx, const char *name, pgd_model **out, pgd_error **err)
{
    if (!out)
        return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT, "pgd_model_random: out is NULL");
    *out = NULL;
    if (!ctx || !name)
        return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT,
                             "pgd_model_random: a context and a name are required");
    model_source src;
    const model_family *fam = NULL;
    void *cfg = NULL;
    pgd_model *m = NULL;
    int rc = family_random(name, &fam, &cfg, &src, err);
    if (rc == PGD_ERR_NOT_FOUND)
        return pgd_error_set(err, PGD_ERR_NOT_FOUND,
                             "pgd_model_random: unknown model '%s' (vit_ti16, vit_s16, vit_b16, "
                             "vit_tiny, dinov2_s14, resnet50, resnet50-nl, mixer_s16, mixer_b16, "
                             "mixer_l16, mixer_tiny, swin_t, swin_s, swin_b or swin_tiny)",
                             name);
    if (!rc)
        rc = new_model(&m, fam, name, err);
    if (!rc) {
        memcpy(m->cfg, cfg, fam->cfg_size);
        rc = fam->load(ctx, &src, m->cfg, &m->model, err);
    }
    free(cfg);
    model_source_free(&src);
    if (rc) {
        pgd_model_destroy(m);
        return rc;
    }
    *out = m;
    return PGD_OK;
}

void pgd_model_destroy(pgd_model *m)
{
    if (!m)
        return;
    if (m->model)
        m->fam->free(m->model);
    free(m->cfg);
    free(m);
}

int pgd_model_get_info(const pgd_model *m, pgd_model_info *info)
{
    if (!m || !info)
        return PGD_ERR_INVALID_ARGUMENT;
    memset(info, 0, sizeof *info);
    info->family = m->fam->id;
    snprintf(info->family_name, sizeof info->family_name, "%s", m->fam->name);
    m->fam->info(m->cfg, m->label, info);
    return PGD_OK;
}

int pgd_model_forward(pgd_model *m, const float *images, int B, int H, int W, float *logits,
                      double *times_ms, pgd_error **err)
{
    int rc = check_batch(m, images, B, H, W, err);
    if (rc)
        return rc;
    if (!logits)
        return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT, "pgd_model_forward: logits is NULL");
    return m->fam->forward(m->model, images, B, H, W, logits, times_ms, err);
}

/* Logits the caller does not want still need somewhere to go. */
static float *logits_or_scratch(const pgd_model *m, float *logits, int B, float **scratch,
                                pgd_error **err)
{
    *scratch = NULL;
    if (logits)
        return logits;
    int classes = m->fam->classes(m->cfg);
    *scratch = malloc((size_t)B * (size_t)classes * sizeof **scratch);
    if (!*scratch)
        pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "pgd_model: %d x %d logits", B, classes);
    return *scratch;
}

int pgd_model_attention_maps(pgd_model *m, const float *images, int B, int H, int W, float *logits,
                             float *last, float *rollout, pgd_error **err)
{
    int rc = check_batch(m, images, B, H, W, err);
    if (rc)
        return rc;
    if (!m->fam->attention_maps)
        return pgd_error_set(err, PGD_ERR_UNSUPPORTED,
                             "%s: attention maps are a ViT's; this is a %s", m->label,
                             m->fam->no_maps);
    float *scratch, *out = logits_or_scratch(m, logits, B, &scratch, err);
    if (!out)
        return PGD_ERR_OUT_OF_HOST_MEMORY;
    rc = m->fam->attention_maps(m->model, images, B, H, W, out, last, rollout, err);
    free(scratch);
    return rc;
}

int64_t pgd_model_affinity_grid(const pgd_model *m, int H, int W, int *gh, int *gw)
{
    int h = 0, w = 0;
    int64_t n = 0;
    if (m && m->fam->affinity_grid && H > 0 && W > 0)
        n = m->fam->affinity_grid(m->model, H, W, &h, &w);
    if (gh)
        *gh = h;
    if (gw)
        *gw = w;
    return n;
}

int pgd_model_affinity(pgd_model *m, const float *images, int B, int H, int W, double qx, double qy,
                       float *logits, float *row, int *qi, int *qj, pgd_error **err)
{
    int rc = check_batch(m, images, B, H, W, err);
    if (rc)
        return rc;
    pgd_model_info info;
    pgd_model_get_info(m, &info);
    if (!m->fam->affinity || !info.has_affinity)
        return pgd_error_set(err, PGD_ERR_UNSUPPORTED,
                             "%s: the affinity map is a non-local block's; this model has none",
                             m->label);
    if (!row || !(qx >= 0 && qx < 1) || !(qy >= 0 && qy < 1))
        return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT,
                             "pgd_model_affinity: the query (%g, %g) must lie in [0, 1) and row "
                             "must be given",
                             qx, qy);
    float *scratch, *out = logits_or_scratch(m, logits, B, &scratch, err);
    if (!out)
        return PGD_ERR_OUT_OF_HOST_MEMORY;
    rc = m->fam->affinity(m->model, images, B, H, W, qx, qy, out, row, qi, qj, err);
    free(scratch);
    return rc;
}

int pgd_model_set_pool(pgd_model *m, int pool, pgd_error **err)
{
    if (!m)
        return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT, "pgd_model_set_pool: no model");
    pgd_model_info info;
    pgd_model_get_info(m, &info);
    if (!m->fam->set_pool || !info.headless)
        return pgd_error_set(err, PGD_ERR_UNSUPPORTED,
                             "%s: pooled features are a headless ViT's (a file without a "
                             "classifier); this model has one",
                             m->label);
    if (pool != PGD_MODEL_POOL_CLS && pool != PGD_MODEL_POOL_MEAN)
        return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT,
                             "pgd_model_set_pool: pool %d is neither PGD_MODEL_POOL_CLS (0) nor "
                             "PGD_MODEL_POOL_MEAN (1)",
                             pool);
    return m->fam->set_pool(m->model, pool == PGD_MODEL_POOL_MEAN);
}

const char *pgd_model_imagenet_label(int i)
{
    return i >= 0 && i < 1000 ? pgd_imagenet_labels[i] : NULL;
}
