/* vit_hf.c — Hugging Face's ViT checkpoints that are read under another naming (the headless
 * ViTModel, DINOv2): sources that wrap the file and answer under the names vit.c loads
 * (vit_source_adapt). Apart from vit.c, which holds the model itself. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vit.h"

/* ---- Hugging Face checkpoints read under another naming ----
 * An adapter owns the source it wraps, lists the wrapped tensors under the names the loader
 * knows (a tensor the model does not use left out) and answers shape/read by mapping those names
 * back. Both Hugging Face layouts below resize the position grid as current transformers does
 * (plain bicubic interpolation to the new size; the scale-factor rule of the "vit." family's
 * goldens is the older transformers'), reported through the metadata key "pagoda_pos_resize". */
typedef struct adapter {
    model_source inner;
    int v5; /* transformers 5.x names (DINOv2) */
    char **names;
    size_t n;
} adapter;

static const char *adapter_meta(void *u, const char *key)
{
    adapter *a = u;
    if (!strcmp(key, "pagoda_pos_resize"))
        return "bicubic";
    return a->inner.meta ? a->inner.meta(a->inner.u, key) : NULL;
}

static const char *adapter_name_at(void *u, size_t i)
{
    adapter *a = u;
    return i < a->n ? a->names[i] : NULL;
}

static void adapter_release(void *u)
{
    adapter *a = u;
    for (size_t i = 0; i < a->n; i++)
        free(a->names[i]);
    free(a->names);
    model_source_free(&a->inner);
    free(a);
}

/* Wraps *src: every listed name through rename (into buf; "" leaves the tensor out). */
static int adapter_wrap(model_source *src, int v5,
                        void (*rename)(const char *name, char *buf, size_t size),
                        int (*shape)(void *, const char *, int *, int64_t[8]),
                        int (*read)(void *, const char *, float *, pgd_error **), pgd_error **err)
{
    size_t count = 0;
    while (src->name_at(src->u, count))
        count++;
    adapter *a = calloc(1, sizeof *a);
    if (!a || !(a->names = calloc(count ? count : 1, sizeof *a->names))) {
        free(a);
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "%s: names", src->label);
    }
    a->v5 = v5;
    for (size_t i = 0; i < count; i++) {
        char t[256];
        rename(src->name_at(src->u, i), t, sizeof t);
        if (!t[0])
            continue;
        if (!(a->names[a->n] = strdup(t))) {
            adapter_release(a); /* a->inner is still empty: src stays the caller's */
            return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "%s: names", src->label);
        }
        a->n++;
    }
    a->inner = *src;
    *src = (model_source){.u = a,
                          .label = a->inner.label,
                          .shape = shape,
                          .read = read,
                          .meta = adapter_meta,
                          .name_at = adapter_name_at,
                          .release = adapter_release};
    return PGD_OK;
}

/* Hugging Face's headless ViTModel (facebook/dino-vits16): ViTForImageClassification's names
 * without the "vit." prefix, plus a pooler the features do not use (they are the class token
 * after the final LayerNorm, HF's last_hidden_state[:, 0]). */
static void hf_rename(const char *name, char *buf, size_t size)
{
    if (!strncmp(name, "pooler.", 7))
        buf[0] = '\0';
    else
        snprintf(buf, size, "vit.%s", name);
}

static int hf_shape(void *u, const char *name, int *ndim, int64_t shape[8])
{
    adapter *a = u;
    if (strncmp(name, "vit.", 4))
        return -1;
    return a->inner.shape(a->inner.u, name + 4, ndim, shape);
}

static int hf_read(void *u, const char *name, float *dst, pgd_error **err)
{
    adapter *a = u;
    if (strncmp(name, "vit.", 4))
        return pgd_error_set(err, PGD_ERR_NOT_FOUND, "%s: no tensor '%s'", a->inner.label, name);
    return a->inner.read(a->inner.u, name + 4, dst, err);
}

static void dv2_timm_name(const char *hf, char *buf, size_t size);
static int dv2_shape(void *u, const char *name, int *ndim, int64_t shape[8]);
static int dv2_read(void *u, const char *name, float *dst, pgd_error **err);

int vit_source_adapt(model_source *src, pgd_error **err)
{
    if (!src->name_at || !model_has(src, "embeddings.patch_embeddings.projection.weight"))
        return PGD_OK;
    if (model_has(src, "encoder.layer.0.layer_scale1.lambda1"))
        return adapter_wrap(src, model_has(src, "encoder.layer.0.attention.q_proj.weight"),
                            dv2_timm_name, dv2_shape, dv2_read, err);
    if (model_has(src, "vit.embeddings.patch_embeddings.projection.weight") ||
        !model_has(src, "encoder.layer.0.attention.attention.query.weight"))
        return PGD_OK;
    return adapter_wrap(src, 0, hf_rename, hf_shape, hf_read, err);
}

/* ---- Hugging Face's DINOv2 (facebook/dinov2-small: Dinov2Model) ----
 * Presented in timm's names, which hold the same model: query/key/value joined into qkv,
 * layer_scale{1,2}.lambda1 as ls{1,2}.gamma, the unused mask_token left out. transformers 4.x
 * (the hub's files) names the attention attention.attention.{query,key,value} and
 * attention.output.dense, 5.x attention.{q,k,v,o}_proj. Its position grid is resized with plain
 * bicubic interpolation to the new size (transformers' interpolate_pos_encoding). */

/* The HF name of a timm-named tensor (part: 0..2 for the q/k/v pieces of qkv), in buf. */
static const char *dv2_name(const adapter *a, const char *name, int part, char *buf, size_t size)
{
    static const char *const qkv4[3] = {"attention.attention.query", "attention.attention.key",
                                        "attention.attention.value"};
    static const char *const qkv5[3] = {"attention.q_proj", "attention.k_proj", "attention.v_proj"};
    static const char *const outer[][2] = {
        {"cls_token", "embeddings.cls_token"},
        {"pos_embed", "embeddings.position_embeddings"},
        {"patch_embed.proj.weight", "embeddings.patch_embeddings.projection.weight"},
        {"patch_embed.proj.bias", "embeddings.patch_embeddings.projection.bias"},
        {"norm.weight", "layernorm.weight"},
        {"norm.bias", "layernorm.bias"}};
    for (size_t i = 0; i < sizeof outer / sizeof *outer; i++)
        if (!strcmp(name, outer[i][0]))
            return snprintf(buf, size, "%s", outer[i][1]), buf;
    int blk = -1, len = 0;
    if (sscanf(name, "blocks.%d.%n", &blk, &len) != 1 || len <= 0 || blk < 0)
        return NULL;
    const char *r = name + len;
    const char *w = !strcmp(r + strlen(r) - 5, ".bias") ? "bias" : "weight";
    if (!strncmp(r, "attn.qkv.", 9))
        snprintf(buf, size, "encoder.layer.%d.%s.%s", blk, (a->v5 ? qkv5 : qkv4)[part], w);
    else if (!strncmp(r, "attn.proj.", 10))
        snprintf(buf, size, "encoder.layer.%d.%s.%s", blk,
                 a->v5 ? "attention.o_proj" : "attention.output.dense", w);
    else if (!strcmp(r, "ls1.gamma") || !strcmp(r, "ls2.gamma"))
        snprintf(buf, size, "encoder.layer.%d.layer_scale%c.lambda1", blk, r[2]);
    else if (!strncmp(r, "norm1.", 6) || !strncmp(r, "norm2.", 6) || !strncmp(r, "mlp.fc", 6))
        snprintf(buf, size, "encoder.layer.%d.%s", blk, r);
    else
        return NULL;
    return buf;
}

static int dv2_shape(void *u, const char *name, int *ndim, int64_t shape[8])
{
    adapter *a = u;
    char hf[256];
    if (!dv2_name(a, name, 0, hf, sizeof hf) || a->inner.shape(a->inner.u, hf, ndim, shape))
        return -1;
    if (strstr(name, "attn.qkv."))
        shape[0] *= 3; /* q, k and v stacked */
    return 0;
}

static int dv2_read(void *u, const char *name, float *dst, pgd_error **err)
{
    adapter *a = u;
    char hf[256];
    int nd;
    int64_t s[8];
    if (!dv2_name(a, name, 0, hf, sizeof hf) || a->inner.shape(a->inner.u, hf, &nd, s))
        return pgd_error_set(err, PGD_ERR_NOT_FOUND, "%s: no tensor for '%s'", a->inner.label,
                             name);
    if (!strstr(name, "attn.qkv."))
        return a->inner.read(a->inner.u, hf, dst, err);
    int64_t part = 1;
    for (int i = 0; i < nd; i++)
        part *= s[i];
    int rc = PGD_OK;
    for (int p = 0; p < 3 && !rc; p++) {
        int pnd;
        int64_t ps[8];
        dv2_name(a, name, p, hf, sizeof hf);
        if (a->inner.shape(a->inner.u, hf, &pnd, ps) || pnd != nd || ps[0] != s[0] ||
            (nd > 1 && ps[1] != s[1]))
            return pgd_error_set(err, PGD_ERR_SHAPE,
                                 "%s: '%s' is missing or not shaped like "
                                 "the query's",
                                 a->inner.label, hf);
        rc = a->inner.read(a->inner.u, hf, dst + p * part, err);
    }
    return rc;
}

/* The timm name of HF tensor `hf` into buf ("" for the mask token and the k/v pieces, which
 * qkv's query stands for; the HF name itself when it is not DINOv2's, so that it is reported
 * as unused). */
static void dv2_timm_name(const char *hf, char *buf, size_t size)
{
    int blk = -1, len = 0;
    buf[0] = '\0';
    if (!strcmp(hf, "embeddings.mask_token"))
        return;
    static const char *const outer[][2] = {
        {"embeddings.cls_token", "cls_token"},
        {"embeddings.position_embeddings", "pos_embed"},
        {"embeddings.patch_embeddings.projection.weight", "patch_embed.proj.weight"},
        {"embeddings.patch_embeddings.projection.bias", "patch_embed.proj.bias"},
        {"layernorm.weight", "norm.weight"},
        {"layernorm.bias", "norm.bias"}};
    for (size_t i = 0; i < sizeof outer / sizeof *outer; i++)
        if (!strcmp(hf, outer[i][0])) {
            snprintf(buf, size, "%s", outer[i][1]);
            return;
        }
    snprintf(buf, size, "%s", hf);
    if (sscanf(hf, "encoder.layer.%d.%n", &blk, &len) != 1 || len <= 0 || blk < 0)
        return;
    const char *r = hf + len, *w = strstr(r, ".bias") ? "bias" : "weight";
    if (!strncmp(r, "attention.attention.query.", 26) || !strncmp(r, "attention.q_proj.", 17))
        snprintf(buf, size, "blocks.%d.attn.qkv.%s", blk, w);
    else if (!strncmp(r, "attention.attention.key.", 24) ||
             !strncmp(r, "attention.attention.value.", 26) ||
             !strncmp(r, "attention.k_proj.", 17) || !strncmp(r, "attention.v_proj.", 17))
        buf[0] = '\0';
    else if (!strncmp(r, "attention.output.dense.", 23) || !strncmp(r, "attention.o_proj.", 17))
        snprintf(buf, size, "blocks.%d.attn.proj.%s", blk, w);
    else if (!strcmp(r, "layer_scale1.lambda1") || !strcmp(r, "layer_scale2.lambda1"))
        snprintf(buf, size, "blocks.%d.ls%c.gamma", blk, r[11]);
    else if (!strncmp(r, "norm1.", 6) || !strncmp(r, "norm2.", 6) || !strncmp(r, "mlp.fc", 6))
        snprintf(buf, size, "blocks.%d.%s", blk, r);
}
