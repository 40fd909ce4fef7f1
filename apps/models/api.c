/* api.c — libpagoda-models: the models of this folder behind the small handle of
 * pagoda_models.h (for the Python binding and other programs that want a whole model). The
 * family is recognised as the CLI's commands recognise it: `pagoda vit` (vit_detect) and
 * `pagoda nonlocal` (resnet_detect); no model code is repeated here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "labels.h"
#include "mixer.h"
#include "pagoda_models.h"
#include "resnet.h"
#include "swin.h"
#include "vit.h"

struct pgd_model {
    pgd_model_family family;
    vit_config vcfg;
    resnet_config rcfg;
    mixer_config mcfg;
    swin_config scfg;
    vit_model *vit;
    resnet_model *resnet;
    mixer_model *mixer;
    swin_model *swin;
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
    if (m->family == PGD_MODEL_VIT && (H % m->vcfg.patch || W % m->vcfg.patch))
        return pgd_error_set(err, PGD_ERR_SHAPE,
                             "pgd_model: the input [%d, 3, %d, %d] is not a multiple of the "
                             "ViT's patch %d",
                             B, H, W, m->vcfg.patch);
    return PGD_OK;
}

static int new_model(pgd_model **out, const char *label, pgd_error **err)
{
    pgd_model *m = calloc(1, sizeof *m);
    if (!m)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "pgd_model: %s", label);
    snprintf(m->label, sizeof m->label, "%s", label);
    *out = m;
    return PGD_OK;
}

static int has(const model_source *src, const char *name)
{
    int nd;
    int64_t s[8];
    return src->shape(src->u, name, &nd, s) == 0;
}

/* Loads the family of an open source by the rule of `pagoda classify` (detect_family in
 * apps/cli/classify_cmd.c): an MLP-Mixer's names, else a Swin's, else a torchvision ResNet's,
 * else a ViT, the ViT detector having the last word so that a file of no known family gets its
 * precise error. */
static int load_source(pgd_ctx *ctx, const model_source *src, const pgd_model_options *opt,
                       pgd_model *m, pgd_error **err)
{
    int rc;
    if (mixer_is(src)) {
        m->family = PGD_MODEL_MIXER;
        rc = mixer_detect(src, &m->mcfg, err);
        return rc ? rc : mixer_load(ctx, src, &m->mcfg, &m->mixer, err);
    }
    if (swin_is(src)) {
        m->family = PGD_MODEL_SWIN;
        rc = swin_detect(src, &m->scfg, err);
        return rc ? rc : swin_load(ctx, src, &m->scfg, &m->swin, err);
    }
    if (has(src, "layer1.0.conv1.weight") && has(src, "conv1.weight")) {
        m->family = PGD_MODEL_RESNET;
        resnet_options ro = {NULL, NULL, -1};
        if (opt) {
            ro.nonlocal_spec = opt->nonlocal_spec;
            ro.mode = opt->nonlocal_mode;
            if (opt->subsample_set) {
                if (opt->subsample != 0 && opt->subsample != 1)
                    return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT,
                                         "pgd_model_load: subsample must be 0 or 1, not %d",
                                         opt->subsample);
                ro.subsample = opt->subsample;
            }
        }
        rc = resnet_detect(src, &ro, &m->rcfg, err);
        return rc ? rc : resnet_load(ctx, src, &m->rcfg, &m->resnet, err);
    }
    m->family = PGD_MODEL_VIT;
    rc = vit_detect(src, opt ? opt->heads : 0, &m->vcfg, err);
    return rc ? rc : vit_load(ctx, src, &m->vcfg, &m->vit, err);
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
    int rc = model_source_open(&src, path, err);
    if (rc)
        return rc;
    rc = new_model(&m, path, err);
    if (!rc)
        rc = load_source(ctx, &src, opt, m, err);
    model_source_free(&src);
    if (rc) {
        pgd_model_free(m);
        return rc;
    }
    *out = m;
    return PGD_OK;
}

/* Long because it is one flat table walk over the families' size names. */
int pgd_model_random(pgd_ctx *ctx, const char *name, pgd_model **out, pgd_error **err)
{
    static const char *const vits[][2] = {
        {"vit_ti16", "ti"}, {"vit_s16", "s"}, {"vit_b16", "b"}, {"vit_tiny", "tiny"}};
    if (!out)
        return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT, "pgd_model_random: out is NULL");
    *out = NULL;
    if (!ctx || !name)
        return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT,
                             "pgd_model_random: a context and a name are required");
    model_source src;
    memset(&src, 0, sizeof src);
    pgd_model *m = NULL;
    int rc = PGD_ERR_NOT_FOUND, found = 0;
    for (size_t i = 0; i < sizeof vits / sizeof vits[0] && !found; i++)
        if (!strcmp(name, vits[i][0])) {
            found = 1;
            rc = new_model(&m, name, err);
            if (!rc && vit_named_config(vits[i][1], &m->vcfg) != 0)
                rc = pgd_error_set(err, PGD_ERR_INTERNAL, "pgd_model_random: %s", name);
            if (!rc)
                rc = vit_random_source(&src, &m->vcfg, 1, err);
            if (!rc) {
                m->family = PGD_MODEL_VIT;
                rc = vit_load(ctx, &src, &m->vcfg, &m->vit, err);
            }
        }
    static const char *const mixers[][2] = {
        {"mixer_s16", "s16"}, {"mixer_b16", "b16"}, {"mixer_l16", "l16"}, {"mixer_tiny", "tiny"}};
    for (size_t i = 0; i < sizeof mixers / sizeof mixers[0] && !found; i++)
        if (!strcmp(name, mixers[i][0])) {
            found = 1;
            rc = new_model(&m, name, err);
            if (!rc && mixer_named_config(mixers[i][1], &m->mcfg) != 0)
                rc = pgd_error_set(err, PGD_ERR_INTERNAL, "pgd_model_random: %s", name);
            if (!rc)
                rc = mixer_random_source(&src, &m->mcfg, 1, err);
            if (!rc) {
                m->family = PGD_MODEL_MIXER;
                rc = mixer_load(ctx, &src, &m->mcfg, &m->mixer, err);
            }
        }
    static const char *const swins[][2] = {
        {"swin_t", "t"}, {"swin_s", "s"}, {"swin_b", "b"}, {"swin_tiny", "tiny"}};
    for (size_t i = 0; i < sizeof swins / sizeof swins[0] && !found; i++)
        if (!strcmp(name, swins[i][0])) {
            found = 1;
            rc = new_model(&m, name, err);
            if (!rc && swin_named_config(swins[i][1], &m->scfg) != 0)
                rc = pgd_error_set(err, PGD_ERR_INTERNAL, "pgd_model_random: %s", name);
            if (!rc)
                rc = swin_random_source(&src, &m->scfg, 1, err);
            if (!rc) {
                m->family = PGD_MODEL_SWIN;
                rc = swin_load(ctx, &src, &m->scfg, &m->swin, err);
            }
        }
    if (!found && (!strcmp(name, "resnet50") || !strcmp(name, "resnet50-nl"))) {
        found = 1;
        rc = new_model(&m, name, err);
        if (!rc)
            rc = resnet_random_source(&src, 50, 1000, name[8] ? "layer3.5" : NULL,
                                      NL_EMBEDDED_GAUSSIAN, 1, err);
        resnet_options ro = {NULL, NULL, -1};
        if (!rc) {
            m->family = PGD_MODEL_RESNET;
            rc = resnet_detect(&src, &ro, &m->rcfg, err);
        }
        if (!rc)
            rc = resnet_load(ctx, &src, &m->rcfg, &m->resnet, err);
    }
    model_source_free(&src);
    if (!found)
        return pgd_error_set(err, PGD_ERR_NOT_FOUND,
                             "pgd_model_random: unknown model '%s' (vit_ti16, vit_s16, vit_b16, "
                             "vit_tiny, resnet50, resnet50-nl, mixer_s16, mixer_b16, mixer_l16, "
                             "mixer_tiny, swin_t, swin_s, swin_b or swin_tiny)",
                             name);
    if (rc) {
        pgd_model_free(m);
        return rc;
    }
    *out = m;
    return PGD_OK;
}

void pgd_model_free(pgd_model *m)
{
    if (!m)
        return;
    vit_free(m->vit);
    resnet_free(m->resnet);
    mixer_free(m->mixer);
    swin_free(m->swin);
    free(m);
}

/* Long because it is one flat switch filling the fields of each family in turn. */
int pgd_model_get_info(const pgd_model *m, pgd_model_info *info)
{
    if (!m || !info)
        return PGD_ERR_INVALID_ARGUMENT;
    memset(info, 0, sizeof *info);
    info->family = m->family;
    if (m->family == PGD_MODEL_VIT) {
        const vit_config *c = &m->vcfg;
        snprintf(info->family_name, sizeof info->family_name, "vit");
        snprintf(info->naming, sizeof info->naming, "%s",
                 c->family == VIT_HF            ? "hf"
                 : c->family == VIT_TORCHVISION ? "torchvision"
                                                : "timm");
        info->classes = c->classes;
        info->patch = c->patch;
        info->input_h = c->patch * c->grid_h;
        info->input_w = c->patch * c->grid_w;
        info->depth = c->depth;
        info->width = c->dim;
        info->heads = c->heads;
        info->preprocess = c->family == VIT_HF            ? PGD_PREPROCESS_HF
                           : c->family == VIT_TORCHVISION ? PGD_PREPROCESS_TORCHVISION
                                                          : PGD_PREPROCESS_TIMM;
        info->has_attention_maps = 1;
        info->headless = c->headless;
        snprintf(info->description, sizeof info->description,
                 "%s: %s ViT, width %d, depth %d, %d heads, patch %d, %dx%d grid, %d classes",
                 m->label, vit_family_name(c->family), c->dim, c->depth, c->heads, c->patch,
                 c->grid_h, c->grid_w, c->classes);
    } else if (m->family == PGD_MODEL_SWIN) {
        const swin_config *c = &m->scfg;
        snprintf(info->family_name, sizeof info->family_name, "swin");
        snprintf(info->naming, sizeof info->naming, "%s",
                 c->family == SWIN_TORCHVISION ? "torchvision"
                 : c->family == SWIN_TIMM      ? "timm"
                 : c->family == SWIN_TIMM_OLD  ? "timm-old"
                 : c->family == SWIN_HF4       ? "hf4"
                                               : "hf5");
        info->classes = c->classes;
        info->patch = c->patch;
        /* as `pagoda classify` sizes its synthetic input: any multiple of the patch runs */
        info->input_h = info->input_w = c->dim <= 16 ? 40 : PGD_PREPROCESS_SIZE;
        int blocks = 0;
        for (int s = 0; s < c->stages; s++)
            blocks += c->depth[s];
        info->depth = blocks;
        info->width = c->dim;
        info->heads = c->heads[0];
        /* ImageNet mean/std; the nearest preset to each library's Swin transform (as
         * `pagoda classify`) */
        info->preprocess = PGD_PREPROCESS_TORCHVISION;
        snprintf(info->description, sizeof info->description,
                 "%s: %s Swin, width %d, %d stages, %d blocks, window %d, patch %d, %d classes",
                 m->label, swin_family_name(c->family), c->dim, c->stages, blocks, c->window[0],
                 c->patch, c->classes);
    } else if (m->family == PGD_MODEL_MIXER) {
        const mixer_config *c = &m->mcfg;
        snprintf(info->family_name, sizeof info->family_name, "mixer");
        snprintf(info->naming, sizeof info->naming, "timm");
        info->classes = c->classes;
        info->patch = c->patch;
        info->input_h = c->patch * c->grid_h;
        info->input_w = c->patch * c->grid_w;
        info->depth = c->depth;
        info->width = c->dim;
        /* timm's mixer_*_224: bicubic, crop 0.875, mean/std 0.5 (as `pagoda classify`) */
        info->preprocess = PGD_PREPROCESS_TIMM;
        snprintf(info->description, sizeof info->description,
                 "%s: MLP-Mixer, width %d, depth %d, patch %d, %dx%d grid, %d classes", m->label,
                 c->dim, c->depth, c->patch, c->grid_h, c->grid_w, c->classes);
    } else {
        const resnet_config *c = &m->rcfg;
        snprintf(info->family_name, sizeof info->family_name, "resnet");
        snprintf(info->naming, sizeof info->naming, "torchvision");
        info->classes = (int)c->classes;
        info->patch = 1;
        info->input_h = info->input_w = PGD_PREPROCESS_SIZE;
        info->depth = c->depth;
        info->width = (int)c->stem;
        info->nonlocal_blocks = c->n_nl;
        info->preprocess = PGD_PREPROCESS_TORCHVISION;
        info->has_affinity = c->n_nl > 0;
        int n =
            snprintf(info->description, sizeof info->description,
                     "%s: ResNet-%d (%s blocks %d-%d-%d-%d, %lld classes); non-local: ", m->label,
                     c->depth, c->bottleneck ? "bottleneck" : "basic", c->blocks[0], c->blocks[1],
                     c->blocks[2], c->blocks[3], (long long)c->classes);
        for (int i = 0; i < c->n_nl && n > 0 && (size_t)n < sizeof info->description; i++)
            n += snprintf(info->description + n, sizeof info->description - (size_t)n,
                          "%slayer%d.%d", i ? ", " : "", c->nl[i].layer, c->nl[i].block);
        if (n > 0 && (size_t)n < sizeof info->description)
            snprintf(info->description + n, sizeof info->description - (size_t)n, "%s%s%s",
                     c->n_nl ? " [" : "none", c->n_nl ? nl_mode_name(c->mode) : "",
                     c->n_nl ? (c->subsample ? ", subsampled]" : "]") : "");
    }
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
    double t[5] = {0};
    if (m->family == PGD_MODEL_VIT)
        rc = vit_forward(m->vit, images, B, H, W, logits, NULL, NULL, t, err);
    else if (m->family == PGD_MODEL_MIXER)
        rc = mixer_forward(m->mixer, images, B, H, W, logits, t, err);
    else if (m->family == PGD_MODEL_SWIN)
        rc = swin_forward(m->swin, images, B, H, W, logits, t, err);
    else
        rc = resnet_forward(m->resnet, images, B, H, W, logits, NULL, t, err);
    if (!rc && times_ms)
        *times_ms = m->family == PGD_MODEL_RESNET ? t[4] : t[3];
    return rc;
}

/* Logits the caller does not want still need somewhere to go. */
static float *logits_or_scratch(const pgd_model *m, float *logits, int B, float **scratch,
                                pgd_error **err)
{
    *scratch = NULL;
    if (logits)
        return logits;
    int classes = m->family == PGD_MODEL_VIT     ? m->vcfg.classes
                  : m->family == PGD_MODEL_MIXER ? m->mcfg.classes
                  : m->family == PGD_MODEL_SWIN  ? m->scfg.classes
                                                 : (int)m->rcfg.classes;
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
    if (m->family != PGD_MODEL_VIT)
        return pgd_error_set(
            err, PGD_ERR_UNSUPPORTED, "%s: attention maps are a ViT's; this is a %s", m->label,
            m->family == PGD_MODEL_MIXER  ? "MLP-Mixer (no attention)"
            : m->family == PGD_MODEL_SWIN ? "Swin (windowed attention: no class token)"
                                          : "ResNet");
    float *scratch, *out = logits_or_scratch(m, logits, B, &scratch, err);
    if (!out)
        return PGD_ERR_OUT_OF_HOST_MEMORY;
    rc = vit_forward(m->vit, images, B, H, W, out, last, rollout, NULL, err);
    free(scratch);
    return rc;
}

int64_t pgd_model_affinity_grid(const pgd_model *m, int H, int W, int *gh, int *gw)
{
    int h = 0, w = 0;
    int64_t n = 0;
    if (m && m->family == PGD_MODEL_RESNET && H > 0 && W > 0)
        n = resnet_nl_grid(m->resnet, H, W, &h, &w);
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
    if (m->family != PGD_MODEL_RESNET || m->rcfg.n_nl == 0)
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
    resnet_affinity aff;
    memset(&aff, 0, sizeof aff);
    aff.qx = qx, aff.qy = qy, aff.row = row;
    rc = resnet_forward(m->resnet, images, B, H, W, out, &aff, NULL, err);
    free(scratch);
    if (!rc && qi)
        *qi = aff.qi;
    if (!rc && qj)
        *qj = aff.qj;
    return rc;
}

int pgd_model_set_pool(pgd_model *m, int pool, pgd_error **err)
{
    if (!m)
        return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT, "pgd_model_set_pool: no model");
    if (m->family != PGD_MODEL_VIT || !m->vcfg.headless)
        return pgd_error_set(err, PGD_ERR_UNSUPPORTED,
                             "%s: pooled features are a headless ViT's (a file without a "
                             "classifier); this model has one",
                             m->label);
    if (pool != PGD_MODEL_POOL_CLS && pool != PGD_MODEL_POOL_MEAN)
        return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT,
                             "pgd_model_set_pool: pool %d is neither PGD_MODEL_POOL_CLS (0) nor "
                             "PGD_MODEL_POOL_MEAN (1)",
                             pool);
    vit_set_pool(m->vit, pool == PGD_MODEL_POOL_MEAN ? VIT_POOL_MEAN : VIT_POOL_CLS);
    return PGD_OK;
}

const char *pgd_model_imagenet_label(int i)
{
    return i >= 0 && i < 1000 ? pgd_imagenet_labels[i] : NULL;
}
