/* detr_config.c — a DETR's configuration from a checkpoint (detr_detect): the three namings,
 * the view of the backbone's tensors under their own names, and the exact checks of the
 * Transformer's tensors. Apart from detr.c, which holds the model itself. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "detr.h"
#include "detr_parts.h"

/* ---- namings ------------------------------------------------------------------------------ */

const naming detr_namings[3] = {
    [DETR_HF4] = {"model.backbone.conv_encoder.model.",
                  "model.input_projection",
                  "model.query_position_embeddings.weight",
                  "model.encoder.layers.",
                  "model.decoder.layers.",
                  "self_attn.",
                  "encoder_attn.",
                  0,
                  "out_proj",
                  "fc1",
                  "fc2",
                  {"self_attn_layer_norm", "final_layer_norm"},
                  {"self_attn_layer_norm", "encoder_attn_layer_norm", "final_layer_norm"},
                  "model.decoder.layernorm",
                  "class_labels_classifier",
                  "bbox_predictor.layers"},
    [DETR_HF5] = {"model.backbone.model.",
                  "model.input_projection",
                  "model.query_position_embeddings.weight",
                  "model.encoder.layers.",
                  "model.decoder.layers.",
                  "self_attn.",
                  "encoder_attn.",
                  0,
                  "o_proj",
                  "mlp.fc1",
                  "mlp.fc2",
                  {"self_attn_layer_norm", "final_layer_norm"},
                  {"self_attn_layer_norm", "encoder_attn_layer_norm", "final_layer_norm"},
                  "model.decoder.layernorm",
                  "class_labels_classifier",
                  "bbox_predictor.layers"},
    [DETR_ORIGINAL] = {"backbone.0.body.",
                       "input_proj",
                       "query_embed.weight",
                       "transformer.encoder.layers.",
                       "transformer.decoder.layers.",
                       "self_attn.",
                       "multihead_attn.",
                       1,
                       "out_proj",
                       "linear1",
                       "linear2",
                       {"norm1", "norm2"},
                       {"norm1", "norm2", "norm3"},
                       "transformer.decoder.norm",
                       "class_embed",
                       "bbox_embed.layers"},
};

const char *detr_naming_name(detr_naming n)
{
    static const char *const names[] = {"hf4", "hf5", "original"};
    return (unsigned)n < 3 ? names[n] : "?";
}

/* The name of a part of layer `i` of the encoder (dec 0) or decoder (dec 1). */
void detr_layer_name(const naming *nm, int dec, int i, const char *part, char *buf, size_t size)
{
    snprintf(buf, size, "%.64s%d.%.64s", dec ? nm->dec : nm->enc, i, part);
}

/* ---- a view of the backbone's tensors under their own names ------------------------------- */

typedef struct prefix_view {
    model_source inner; /* not owned */
    char prefix[64];
    char label[512]; /* "<file>, under '<prefix>'": the backbone's messages name the prefix */
    char **names;
    size_t n;
    int listed;
} prefix_view;

static int pv_shape(void *u, const char *name, int *ndim, int64_t shape[8])
{
    prefix_view *v = u;
    char full[256];
    snprintf(full, sizeof full, "%.120s%.120s", v->prefix, name);
    return v->inner.shape(v->inner.u, full, ndim, shape);
}

static int pv_read(void *u, const char *name, float *dst, pgd_error **err)
{
    prefix_view *v = u;
    char full[256];
    snprintf(full, sizeof full, "%.120s%.120s", v->prefix, name);
    return v->inner.read(v->inner.u, full, dst, err);
}

static const char *pv_meta(void *u, const char *key)
{
    prefix_view *v = u;
    return v->inner.meta ? v->inner.meta(v->inner.u, key) : NULL;
}

static const char *pv_name_at(void *u, size_t i)
{
    prefix_view *v = u;
    return i < v->n ? v->names[i] : NULL;
}

static void pv_release(void *u)
{
    prefix_view *v = u;
    if (!v)
        return;
    for (size_t i = 0; i < v->n; i++)
        free(v->names[i]);
    free(v->names);
    free(v);
}

/* *out: the tensors of src under `prefix`, named without it (a listing when src has one). The
 * view does not own src; free it with model_source_free before src. */
int detr_prefix_view(const model_source *src, const char *prefix, model_source *out,
                     pgd_error **err)
{
    prefix_view *v = calloc(1, sizeof *v);
    if (!v)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "%s: backbone view", src->label);
    v->inner = *src;
    v->inner.used = NULL;
    snprintf(v->prefix, sizeof v->prefix, "%s", prefix);
    size_t pl = strlen(prefix), count = 0;
    const char *name;
    if (src->name_at) {
        v->listed = 1;
        while (src->name_at(src->u, count))
            count++;
        v->names = calloc(count ? count : 1, sizeof *v->names);
        if (!v->names) {
            free(v);
            return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "%s: names", src->label);
        }
        for (size_t i = 0; i < count; i++) {
            name = src->name_at(src->u, i);
            if (strncmp(name, prefix, pl))
                continue;
            if (!(v->names[v->n] = strdup(name + pl))) {
                pv_release(v);
                return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "%s: names", src->label);
            }
            v->n++;
        }
    }
    snprintf(v->label, sizeof v->label, "%.400s, under '%s'", src->label, prefix);
    *out = (model_source){.u = v,
                          .label = v->label,
                          .shape = pv_shape,
                          .read = pv_read,
                          .meta = pv_meta,
                          .name_at = v->listed ? pv_name_at : NULL,
                          .release = pv_release};
    return PGD_OK;
}

/* ---- configuration ------------------------------------------------------------------------ */

static int64_t dim_of(const model_source *src, const char *name, int i, int want_ndim)
{
    int nd;
    int64_t s[8];
    if (src->shape(src->u, name, &nd, s) != 0 || nd != want_ndim || i >= nd)
        return -1;
    return s[i];
}

static int meta_int(const model_source *src, const char *key, int64_t *v)
{
    const char *s = src->meta ? src->meta(src->u, key) : NULL;
    return s && pgd_parse_int64(s, 1, 4096, v) == 0;
}

static int need2(const model_source *src, const char *name, int64_t a, int64_t b, pgd_error **err)
{
    int64_t s[2] = {a, b};
    return model_need(src, name, 2, s, err);
}

static int need1(const model_source *src, const char *name, int64_t a, pgd_error **err)
{
    return model_need(src, name, 1, &a, err);
}

/* A linear layer's two tensors "<p>.weight" [out, in] and "<p>.bias" [out]. */
int detr_need_linear(const model_source *src, const char *p, int64_t out, int64_t in,
                     pgd_error **err)
{
    char w[256], b[256];
    snprintf(w, sizeof w, "%.200s.weight", p);
    snprintf(b, sizeof b, "%.200s.bias", p);
    int rc = need2(src, w, out, in, err);
    return rc ? rc : need1(src, b, out, err);
}

/* The attention at `p` (ends with '.'): packed or q/k/v projections, and the output one. */
int detr_need_attention(const model_source *src, const naming *nm, const char *p, int64_t D,
                        pgd_error **err)
{
    char name[256];
    int rc;
    if (nm->packed) {
        snprintf(name, sizeof name, "%.200sin_proj_weight", p);
        rc = need2(src, name, 3 * D, D, err);
        snprintf(name, sizeof name, "%.200sin_proj_bias", p);
        if (!rc)
            rc = need1(src, name, 3 * D, err);
    } else {
        static const char *const proj[] = {"q_proj", "k_proj", "v_proj"};
        rc = PGD_OK;
        for (int i = 0; i < 3 && !rc; i++) {
            snprintf(name, sizeof name, "%.120s%.120s", p, proj[i]);
            rc = detr_need_linear(src, name, D, D, err);
        }
    }
    snprintf(name, sizeof name, "%.120s%.120s", p, nm->o);
    return rc ? rc : detr_need_linear(src, name, D, D, err);
}

static int need_ln(const model_source *src, const char *p, int64_t D, pgd_error **err)
{
    char w[256], b[256];
    snprintf(w, sizeof w, "%.200s.weight", p);
    snprintf(b, sizeof b, "%.200s.bias", p);
    int rc = need1(src, w, D, err);
    return rc ? rc : need1(src, b, D, err);
}

/* Every tensor outside the backbone, exactly. */
static int check_transformer(const model_source *src, const detr_config *c, pgd_error **err)
{
    const naming *nm = &detr_namings[c->naming];
    int64_t D = c->dim;
    char name[256], p[256];
    int64_t ps[4] = {D, c->backbone.out[3], 1, 1};
    snprintf(name, sizeof name, "%.200s.weight", nm->input_proj);
    int rc = model_need(src, name, 4, ps, err);
    snprintf(name, sizeof name, "%.200s.bias", nm->input_proj);
    if (!rc)
        rc = need1(src, name, D, err);
    if (!rc)
        rc = need2(src, nm->query, c->queries, D, err);
    for (int dec = 0; dec < 2 && !rc; dec++) {
        int n = dec ? c->dec_layers : c->enc_layers;
        int64_t F = dec ? c->dec_ffn : c->enc_ffn;
        for (int i = 0; i < n && !rc; i++) {
            detr_layer_name(nm, dec, i, nm->sa, p, sizeof p);
            rc = detr_need_attention(src, nm, p, D, err);
            if (!rc && dec) {
                detr_layer_name(nm, dec, i, nm->ca, p, sizeof p);
                rc = detr_need_attention(src, nm, p, D, err);
            }
            detr_layer_name(nm, dec, i, nm->fc1, name, sizeof name);
            if (!rc)
                rc = detr_need_linear(src, name, F, D, err);
            detr_layer_name(nm, dec, i, nm->fc2, name, sizeof name);
            if (!rc)
                rc = detr_need_linear(src, name, D, F, err);
            for (int k = 0; k < (dec ? 3 : 2) && !rc; k++) {
                detr_layer_name(nm, dec, i, dec ? nm->dec_ln[k] : nm->enc_ln[k], name, sizeof name);
                rc = need_ln(src, name, D, err);
            }
        }
    }
    if (!rc)
        rc = need_ln(src, nm->dec_norm, D, err);
    if (!rc)
        rc = detr_need_linear(src, nm->cls, c->classes, D, err);
    for (int i = 0; i < 3 && !rc; i++) {
        snprintf(name, sizeof name, "%s.%d", nm->box, i);
        rc = detr_need_linear(src, name, i == 2 ? 4 : D, D, err);
    }
    return rc;
}

static int detect_naming(const model_source *src, detr_naming *n)
{
    for (int i = 0; i < 3; i++) {
        char name[128];
        snprintf(name, sizeof name, "%.100sconv1.weight", detr_namings[i].backbone);
        if (model_has(src, name)) {
            *n = (detr_naming)i;
            return 0;
        }
    }
    return -1;
}

/* Layers counted by name (one more than the highest index), or for a source without a listing
 * by their first LayerNorm. */
static int count_layers(const model_source *src, const naming *nm, int dec)
{
    char name[256];
    int n = model_count_indexed(src, dec ? nm->dec : nm->enc, ".");
    if (n >= 0)
        return n;
    for (n = 0; n < 1000; n++) {
        detr_layer_name(nm, dec, n, dec ? nm->dec_ln[2] : nm->enc_ln[1], name, sizeof name);
        strcat(name, ".weight");
        if (!model_has(src, name))
            break;
    }
    return n;
}

/* Heads from opt (> 0), else __metadata__ `key`, else 8 (recorded as assumed). */
static int heads_of(const model_source *src, const detr_options *opt, int dec, int64_t D,
                    int64_t *heads, detr_config *cfg, pgd_error **err)
{
    const char *key = dec ? "decoder_attention_heads" : "encoder_attention_heads";
    int forced = opt ? (dec ? opt->dec_heads : opt->enc_heads) : 0;
    const char *meta = src->meta ? src->meta(src->u, key) : NULL;
    const char *origin = forced ? opt->origin[dec] ? opt->origin[dec] : "the options"
                         : meta ? "__metadata__"
                                : "the default";
    int64_t h = 8;
    if (forced > 0)
        h = forced;
    else if (meta && !meta_int(src, key, &h))
        return pgd_error_set(err, PGD_ERR_FORMAT, "%s: __metadata__ '%s' is '%s', not a count",
                             src->label, key, meta);
    else if (!meta)
        model_assume(&cfg->assumed, dec ? "decoder_heads" : "encoder_heads", "8",
                     dec ? "--heads N,M, or decoder_attention_heads in config.json"
                         : "--heads N[,M], or encoder_attention_heads in config.json");
    if (D % h)
        return pgd_error_set(err, PGD_ERR_SHAPE,
                             "%s: width %lld is not a multiple of %lld attention heads (%s "
                             "from %s)",
                             src->label, (long long)D, (long long)h, key, origin);
    *heads = h;
    return PGD_OK;
}

int detr_detect(const model_source *src, const detr_options *opt, detr_config *cfg, pgd_error **err)
{
    memset(cfg, 0, sizeof *cfg);
    if (detect_naming(src, &cfg->naming))
        return pgd_error_set(err, PGD_ERR_FORMAT,
                             "%s: not a DETR checkpoint: none of "
                             "'model.backbone.conv_encoder.model.conv1.weight' (transformers "
                             "4.x), 'model.backbone.model.conv1.weight' (5.x) or "
                             "'backbone.0.body.conv1.weight' (the original repository) is there",
                             src->label);
    const naming *nm = &detr_namings[cfg->naming];
    int dc5 = opt ? opt->dc5 : 0;
    const char *dil = src->meta ? src->meta(src->u, "dilation") : NULL;
    if (!dc5 && dil && strcmp(dil, "true") && strcmp(dil, "false"))
        return pgd_error_set(err, PGD_ERR_FORMAT,
                             "%s: __metadata__ 'dilation' is '%s', expected true or false",
                             src->label, dil);
    if (!dc5 && !dil)
        model_assume(&cfg->assumed, "dilation", "false",
                     "--dilation true|false, or dilation in config.json");
    dc5 = dc5 > 0 || (!dc5 && dil && !strcmp(dil, "true"));
    model_source bb;
    int rc = detr_prefix_view(src, nm->backbone, &bb, err);
    if (rc)
        return rc;
    rc = resnet_detect_backbone(&bb, dc5, &cfg->backbone, err);
    model_source_free(&bb);
    if (rc)
        return rc;
    char name[256];
    snprintf(name, sizeof name, "%.200s.weight", nm->input_proj);
    cfg->dim = dim_of(src, name, 0, 4);
    if (cfg->dim < 1)
        return pgd_error_set(err, PGD_ERR_NOT_FOUND,
                             "%s: tensor '%s' is missing or not a [D, C, 1, 1] convolution",
                             src->label, name);
    cfg->queries = dim_of(src, nm->query, 0, 2);
    if (cfg->queries < 1)
        return pgd_error_set(err, PGD_ERR_NOT_FOUND, "%s: tensor '%s' is missing or not [Q, D]",
                             src->label, nm->query);
    snprintf(name, sizeof name, "%.200s.weight", nm->cls);
    cfg->classes = dim_of(src, name, 0, 2);
    if (cfg->classes < 2)
        return pgd_error_set(err, PGD_ERR_NOT_FOUND,
                             "%s: tensor '%s' is missing or not [classes + 1, D]", src->label,
                             name);
    cfg->enc_layers = count_layers(src, nm, 0);
    cfg->dec_layers = count_layers(src, nm, 1);
    if (cfg->dec_layers < 1) {
        detr_layer_name(nm, 1, 0, nm->fc1, name, sizeof name);
        return pgd_error_set(err, PGD_ERR_NOT_FOUND,
                             "%s: tensor '%s.weight' is missing (DETR has decoder layers)",
                             src->label, name);
    }
    detr_layer_name(nm, 0, 0, nm->fc1, name, sizeof name);
    strcat(name, ".weight");
    cfg->enc_ffn = cfg->enc_layers ? dim_of(src, name, 0, 2) : 1;
    detr_layer_name(nm, 1, 0, nm->fc1, name, sizeof name);
    strcat(name, ".weight");
    cfg->dec_ffn = dim_of(src, name, 0, 2);
    if (cfg->enc_ffn < 1 || cfg->dec_ffn < 1)
        return pgd_error_set(err, PGD_ERR_NOT_FOUND, "%s: tensor '%s' is missing or not 2-D",
                             src->label, name);
    rc = heads_of(src, opt, 0, cfg->dim, &cfg->enc_heads, cfg, err);
    if (!rc)
        rc = heads_of(src, opt, 1, cfg->dim, &cfg->dec_heads, cfg, err);
    if (!rc)
        rc = check_transformer(src, cfg, err);
    return rc;
}
