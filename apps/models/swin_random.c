/* swin_random.c — seeded random Swin weights of the named sizes (see swin.h), for the demo, the
 * bench and tests: the torchvision naming's tensors for a configuration, filled by
 * model_random_source. Apart from swin.c, which holds the model itself. */
#include <stdio.h>
#include <string.h>

#include "family.h"
#include "swin.h"

static int rand_shape(const void *cfgp, const char *name, int *ndim, int64_t s[8])
{
    const swin_config *c = cfgp;
    int a = -1, b = -1, len = 0;
    *ndim = 1;
    if (sscanf(name, "features.%d.%d.%n", &a, &b, &len) == 2 && len > 0 && a % 2 == 1) {
        int st = (a - 1) / 2;
        if (st >= c->stages || b < 0 || b >= c->depth[st])
            return -1;
        int64_t C = (int64_t)c->dim << st, w = c->window[st], hid = C * c->mlp_ratio_x100 / 100;
        const char *r = name + len;
        s[0] = C;
        if (!strcmp(r, "norm1.weight") || !strcmp(r, "norm1.bias") || !strcmp(r, "norm2.weight") ||
            !strcmp(r, "norm2.bias") || !strcmp(r, "attn.proj.bias") || !strcmp(r, "mlp.3.bias"))
            return 0;
        if (!strcmp(r, "attn.qkv.weight"))
            *ndim = 2, s[0] = 3 * C, s[1] = C;
        else if (!strcmp(r, "attn.qkv.bias"))
            s[0] = 3 * C;
        else if (!strcmp(r, "attn.proj.weight"))
            *ndim = 2, s[1] = C;
        else if (!strcmp(r, "attn.relative_position_bias_table"))
            *ndim = 2, s[0] = (2 * w - 1) * (2 * w - 1), s[1] = c->heads[st];
        else if (!strcmp(r, "mlp.0.weight"))
            *ndim = 2, s[0] = hid, s[1] = C;
        else if (!strcmp(r, "mlp.0.bias"))
            s[0] = hid;
        else if (!strcmp(r, "mlp.3.weight"))
            *ndim = 2, s[1] = hid;
        else
            return -1;
        return 0;
    }
    if (sscanf(name, "features.%d.%n", &a, &len) == 1 && len > 0 && a >= 2 && a % 2 == 0 &&
        a / 2 - 1 < c->stages - 1) {
        int64_t C = (int64_t)c->dim << (a / 2 - 1);
        const char *r = name + len;
        if (!strcmp(r, "reduction.weight"))
            *ndim = 2, s[0] = 2 * C, s[1] = 4 * C;
        else if (!strcmp(r, "norm.weight") || !strcmp(r, "norm.bias"))
            s[0] = 4 * C;
        else
            return -1;
        return 0;
    }
    int64_t Cl = (int64_t)c->dim << (c->stages - 1);
    if (!strcmp(name, "features.0.0.weight"))
        *ndim = 4, s[0] = c->dim, s[1] = 3, s[2] = s[3] = c->patch;
    else if (!strcmp(name, "features.0.0.bias") || !strcmp(name, "features.0.2.weight") ||
             !strcmp(name, "features.0.2.bias"))
        s[0] = c->dim;
    else if (!strcmp(name, "norm.weight") || !strcmp(name, "norm.bias"))
        s[0] = Cl;
    else if (!strcmp(name, "head.weight"))
        *ndim = 2, s[0] = c->classes, s[1] = Cl;
    else if (!strcmp(name, "head.bias"))
        s[0] = c->classes;
    else
        return -1;
    return 0;
}

int swin_named_config(const char *name, swin_config *c)
{
    memset(c, 0, sizeof *c);
    c->family = SWIN_TORCHVISION;
    c->patch = 4;
    c->stages = 4;
    c->classes = 1000;
    c->mlp_ratio_x100 = 400;
    c->eps = 1e-5f;
    static const int heads[4] = {3, 6, 12, 24};
    int deep = 0;
    if (!strcmp(name, "t"))
        c->dim = 96;
    else if (!strcmp(name, "s"))
        c->dim = 96, deep = 1;
    else if (!strcmp(name, "b"))
        c->dim = 128, deep = 1;
    else if (!strcmp(name, "tiny")) {
        c->dim = 16, c->stages = 2, c->classes = 10;
        c->depth[0] = c->depth[1] = 2, c->heads[0] = 1, c->heads[1] = 2;
        c->window[0] = c->window[1] = 3;
        return 0;
    } else
        return -1;
    for (int s = 0; s < 4; s++) {
        c->depth[s] = s == 2 ? (deep ? 18 : 6) : 2;
        c->heads[s] = heads[s] * c->dim / 96;
        c->window[s] = 7;
    }
    return 0;
}

int swin_random_source(model_source *src, const swin_config *cfg, uint64_t seed, pgd_error **err)
{
    swin_config c = *cfg;
    c.family = SWIN_TORCHVISION;
    return model_random_source(src, &c, sizeof c, rand_shape, "features.0.2.weight", seed, err);
}

/* ---- the family entry (family.h) ---- */

MODEL_FAMILY_ADAPTERS(swin)
MODEL_FAMILY_PLAIN(swin)
MODEL_FAMILY_RANDOM(swin, {"swin_t", "t"}, {"swin_s", "s"}, {"swin_b", "b"}, {"swin_tiny", "tiny"})

static void fam_info(const void *cfg, const char *label, pgd_model_info *info)
{
    const swin_config *c = cfg;
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
             "%s: %s Swin, width %d, %d stages, %d blocks, window %d, patch %d, %d classes", label,
             swin_family_name(c->family), c->dim, c->stages, blocks, c->window[0], c->patch,
             c->classes);
}

static int fam_classes(const void *cfg)
{
    return ((const swin_config *)cfg)->classes;
}

static void swin_fam_attention(void *model, pgd_attention_mode mode, int64_t topk, uint64_t seed)
{
    swin_set_attention(model, mode, topk, seed);
}

/* Multiply-adds per stage (the grid quartered and the width doubled from one to the next):
 * qkv, projection and MLP ((4 + 2 · MLP ratio) N C²), window attention (2 N w² C; the padding
 * of a grid that is not whole windows left out), each merge (N/4 · 8C²); the stem and the head. */
static double fam_macs(const void *cfg, int H, int W)
{
    const swin_config *c = cfg;
    double N0 = (double)(H / c->patch) * (W / c->patch), lin = 4 + 2 * c->mlp_ratio_x100 / 100.0;
    double mac = N0 * (3 * c->patch * c->patch) * c->dim;
    for (int st = 0; st < c->stages; st++) {
        double N = N0 / (1 << (2 * st)), C = (double)c->dim * (1 << st);
        double w2 = (double)c->window[st] * c->window[st];
        mac += c->depth[st] * (lin * N * C * C + 2 * N * w2 * C);
        if (st + 1 < c->stages)
            mac += N / 4 * 8 * C * C;
    }
    return mac + (double)(c->dim << (c->stages - 1)) * c->classes;
}

static void fam_sizes(const void *cfg, char *buf, size_t size)
{
    const swin_config *c = cfg;
    int n = snprintf(buf, size, "\"dim\":%d,\"depths\":[", c->dim);
    for (int st = 0; st < c->stages && n > 0 && (size_t)n < size; st++)
        n += snprintf(buf + n, size - (size_t)n, "%s%d", st ? "," : "", c->depth[st]);
    if (n > 0 && (size_t)n < size)
        snprintf(buf + n, size - (size_t)n, "],\"window\":%d", c->window[0]);
}

/* The window attention's share of the blocks (swin_forward's times[4]). */
static int fam_forward_share(void *model, const float *images, int B, int H, int W, float *logits,
                             double *share, pgd_error **err)
{
    double t[5] = {0};
    int rc = swin_forward(model, images, B, H, W, logits, t, err);
    *share = t[4];
    return rc;
}

const model_family family_swin = {
    .id = PGD_MODEL_SWIN,
    .name = "swin",
    .cfg_size = sizeof(swin_config),
    .is = swin_is,
    .detect = swin_fam_detect,
    .load = swin_fam_load,
    .random = swin_fam_random,
    .forward = swin_fam_forward,
    .find_nonfinite = swin_fam_nonfinite,
    .info = fam_info,
    .classes = fam_classes,
    .no_maps = "Swin (windowed attention: no class token)",
    .set_attention = swin_fam_attention,
    .free = swin_fam_free,
    .macs = fam_macs,
    .sizes_json = fam_sizes,
    .share_key = "window_attention_share",
    .forward_share = fam_forward_share,
};
