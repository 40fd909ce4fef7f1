/* resnet_random.c — seeded random ResNet weights (resnet_random_source) for the demo, the
 * bench and tests, and the ResNet's entry of the family table (family.h). Apart from resnet.c,
 * which holds the model itself. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "family.h"
#include "resnet.h"
#include "resnet_parts.h"

/* ---- random weights ----------------------------------------------------------------------- */

typedef struct rs_entry {
    char name[128];
    int ndim;
    int64_t shape[4];
    int kind; /* 0 conv/fc weight, 1 bias, 2 BN weight, 3 BN bias, 4 mean, 5 var, 6 damped BN */
} rs_entry;

typedef struct rs_src {
    rs_entry *e;
    size_t n, cap;
    uint64_t seed;
    char meta_mode[32];
} rs_src;

static int rs_add(rs_src *r, const char *name, int ndim, int64_t a, int64_t b, int64_t c, int64_t d,
                  int kind)
{
    if (r->n == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 256;
        rs_entry *e = realloc(r->e, cap * sizeof *e);
        if (!e)
            return -1;
        r->e = e;
        r->cap = cap;
    }
    rs_entry *e = &r->e[r->n++];
    snprintf(e->name, sizeof e->name, "%s", name);
    e->ndim = ndim;
    e->shape[0] = a, e->shape[1] = b, e->shape[2] = c, e->shape[3] = d;
    e->kind = kind;
    return 0;
}

static int rs_conv_bn(rs_src *r, const char *w, const char *bn, int64_t co, int64_t ci, int k,
                      int damp)
{
    char name[96];
    int rc = rs_add(r, w, 4, co, ci, k, k, 0);
    static const char *const parts[] = {"weight", "bias", "running_mean", "running_var"};
    for (int i = 0; i < 4 && !rc; i++) {
        snprintf(name, sizeof name, "%s.%s", bn, parts[i]);
        rc = rs_add(r, name, 1, co, 0, 0, 0, i == 0 && damp ? 6 : 2 + i);
    }
    return rc;
}

static const rs_entry *rs_find(const rs_src *r, const char *name)
{
    for (size_t i = 0; i < r->n; i++)
        if (!strcmp(r->e[i].name, name))
            return &r->e[i];
    return NULL;
}

static int rs_shape(void *u, const char *name, int *ndim, int64_t s[8])
{
    const rs_entry *e = rs_find(u, name);
    if (!e)
        return -1;
    *ndim = e->ndim;
    for (int i = 0; i < e->ndim; i++)
        s[i] = e->shape[i];
    return 0;
}

static int rs_read(void *u, const char *name, float *dst, pgd_error **err)
{
    const rs_src *r = u;
    const rs_entry *e = rs_find(r, name);
    if (!e)
        return pgd_error_set(err, PGD_ERR_NOT_FOUND, "random weights: no tensor '%s'", name);
    int64_t n = 1;
    for (int i = 0; i < e->ndim; i++)
        n *= e->shape[i];
    uint64_t h = r->seed;
    for (const char *p = name; *p; p++)
        h = (h ^ (unsigned char)*p) * 0x100000001B3ull;
    /* He-uniform weights keep activations of the deep net bounded; BN is near identity. */
    int64_t fan_in = e->ndim == 4   ? e->shape[1] * e->shape[2] * e->shape[3]
                     : e->ndim == 2 ? e->shape[1]
                                    : 1;
    float amp = (float)sqrt(6.0 / (double)fan_in);
    switch (e->kind) {
    case 0: resnet_fill_seeded(dst, n, h, amp); break;
    case 1: resnet_fill_seeded(dst, n, h, 0.01f); break;
    case 2:
    case 6:
        resnet_fill_seeded(dst, n, h, 0.1f);
        for (int64_t i = 0; i < n; i++)
            dst[i] += e->kind == 6 ? 0.25f : 1.0f;
        break;
    case 3:
    case 4: resnet_fill_seeded(dst, n, h, 0.05f); break;
    default:
        resnet_fill_seeded(dst, n, h, 0.1f);
        for (int64_t i = 0; i < n; i++)
            dst[i] += 1.0f;
        break;
    }
    return PGD_OK;
}

static const char *rs_meta(void *u, const char *key)
{
    rs_src *r = u;
    if (!strcmp(key, "nonlocal.mode"))
        return r->meta_mode;
    if (!strcmp(key, "nonlocal.subsample"))
        return "false";
    return NULL;
}

static const char *rs_name_at(void *u, size_t i)
{
    const rs_src *r = u;
    return i < r->n ? r->e[i].name : NULL;
}

/* The backbone's tensors: stem, every residual block (its last BN damped), fc. 0 or -1 (out of
 * memory). */
static int rs_backbone(rs_src *r, const resnet_config *c)
{
    int rc = rs_conv_bn(r, "conv1.weight", "bn1", 64, 3, 7, 0);
    block_pos p = {0};
    while (!rc && resnet_next_block(c, &p)) {
        block_conv bc[4];
        int n = resnet_block_convs(c, &p, p.needs_ds, bc);
        for (int i = 0; i < n && !rc; i++)
            rc = rs_conv_bn(r, bc[i].weight, bc[i].bn, bc[i].cout, bc[i].cin, bc[i].k, bc[i].last);
    }
    if (!rc && c->classes > 0)
        rc = rs_add(r, "fc.weight", 2, c->classes, c->out[3], 0, 0, 0);
    if (!rc && c->classes > 0)
        rc = rs_add(r, "fc.bias", 1, c->classes, 0, 0, 0, 1);
    return rc;
}

/* The tensors of one non-local block at site s in `mode`: real (non-identity) weights. 0 or -1
 * (out of memory). */
static int rs_nonlocal_site(rs_src *r, const resnet_nl_site *s, nl_mode mode)
{
    char p[64], name[128], bn[96];
    snprintf(p, sizeof p, "nonlocal.layer%d.%d", s->layer, s->block);
    const char *convs[] = {"theta", "phi", "g"};
    int rc = 0;
    for (int k = 0; k < 3 && !rc; k++) {
        if (k < 2 && mode == NL_GAUSSIAN)
            continue;
        snprintf(name, sizeof name, "%s.%s.weight", p, convs[k]);
        rc = rs_add(r, name, 4, s->inner, s->channels, 1, 1, 0);
        snprintf(name, sizeof name, "%s.%s.bias", p, convs[k]);
        if (!rc)
            rc = rs_add(r, name, 1, s->inner, 0, 0, 0, 1);
    }
    snprintf(name, sizeof name, "%s.w.weight", p);
    snprintf(bn, sizeof bn, "%s.bn", p);
    if (!rc)
        rc = rs_conv_bn(r, name, bn, s->channels, s->inner, 1, 1);
    if (!rc && mode == NL_CONCATENATION) {
        snprintf(name, sizeof name, "%s.concat.weight", p);
        rc = rs_add(r, name, 4, 1, 2 * s->inner, 1, 1, 0);
    }
    return rc;
}

/* Non-local blocks at the sites of spec. */
static int rs_nonlocal(rs_src *r, const resnet_config *c, const char *spec, nl_mode mode,
                       pgd_error **err)
{
    resnet_config tmp = *c;
    int rc = resnet_parse_spec("random weights", spec, &tmp, 0, err);
    for (int i = 0; i < tmp.n_nl && !rc; i++) {
        rc = rs_nonlocal_site(r, &tmp.nl[i], mode);
        if (rc && !*err)
            pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "random weights");
    }
    return rc;
}

/* The release of a random source (model_source_free). */
static void rs_release(void *u)
{
    rs_src *r = u;
    if (r)
        free(r->e);
    free(r);
}

int resnet_random_source(model_source *src, int depth, int64_t classes, const char *spec,
                         nl_mode mode, uint64_t seed, pgd_error **err)
{
    int si = resnet_standard_index(depth);
    if (si < 0)
        return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT,
                             "random ResNet-%d: depth must be 18, 34, 50, 101 or 152", depth);
    rs_src *r = calloc(1, sizeof *r);
    if (!r)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "random weights");
    r->seed = seed * 0x9E3779B97F4A7C15ull + 7;
    snprintf(r->meta_mode, sizeof r->meta_mode, "%s", nl_mode_name(mode));
    resnet_config c;
    resnet_standard_config(si, &c);
    c.classes = classes;
    int rc = rs_backbone(r, &c);
    if (rc)
        rc = pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "random weights");
    else if (spec)
        rc = rs_nonlocal(r, &c, spec, mode, err);
    if (rc) {
        free(r->e);
        free(r);
        return rc;
    }
    *src = (model_source){.u = r,
                          .label = "random weights",
                          .shape = rs_shape,
                          .read = rs_read,
                          .meta = rs_meta,
                          .name_at = rs_name_at,
                          .release = rs_release};
    return PGD_OK;
}

/* ---- the family entry (family.h) ---- */

MODEL_FAMILY_ADAPTERS(resnet)

static int is_resnet(const model_source *src)
{
    return model_has(src, "layer1.0.conv1.weight") && model_has(src, "conv1.weight");
}

static int fam_detect(const model_source *src, const pgd_model_options *opt, void *cfg,
                      pgd_error **err)
{
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
    return resnet_detect(src, &ro, cfg, err);
}

static int fam_random(const char *name, void *cfg, model_source *src, pgd_error **err)
{
    if (strcmp(name, "resnet50") && strcmp(name, "resnet50-nl"))
        return PGD_ERR_NOT_FOUND;
    int rc = resnet_random_source(src, 50, 1000, name[8] ? "layer3.5" : NULL, NL_EMBEDDED_GAUSSIAN,
                                  1, err);
    resnet_options ro = {NULL, NULL, -1};
    return rc ? rc : resnet_detect(src, &ro, cfg, err);
}

static int fam_forward(void *model, const float *images, int B, int H, int W, float *logits,
                       double *total_ms, pgd_error **err)
{
    double t[5] = {0};
    int rc = resnet_forward(model, images, B, H, W, logits, NULL, total_ms ? t : NULL, err);
    if (!rc && total_ms)
        *total_ms = t[4];
    return rc;
}

static void fam_info(const void *cfg, const char *label, pgd_model_info *info)
{
    const resnet_config *c = cfg;
    snprintf(info->naming, sizeof info->naming, "torchvision");
    info->classes = (int)c->classes;
    info->patch = 1;
    info->input_h = info->input_w = PGD_PREPROCESS_SIZE;
    info->depth = c->depth;
    info->width = (int)c->stem;
    info->nonlocal_blocks = c->n_nl;
    info->preprocess = PGD_PREPROCESS_TORCHVISION;
    info->has_affinity = c->n_nl > 0;
    int n = snprintf(info->description, sizeof info->description,
                     "%s: ResNet-%d (%s blocks %d-%d-%d-%d, %lld classes); non-local: ", label,
                     c->depth, c->bottleneck ? "bottleneck" : "basic", c->blocks[0], c->blocks[1],
                     c->blocks[2], c->blocks[3], (long long)c->classes);
    for (int i = 0; i < c->n_nl && n > 0 && (size_t)n < sizeof info->description; i++)
        n += snprintf(info->description + n, sizeof info->description - (size_t)n, "%slayer%d.%d",
                      i ? ", " : "", c->nl[i].layer, c->nl[i].block);
    if (n > 0 && (size_t)n < sizeof info->description)
        snprintf(info->description + n, sizeof info->description - (size_t)n, "%s%s%s",
                 c->n_nl ? " [" : "none", c->n_nl ? nl_mode_name(c->mode) : "",
                 c->n_nl ? (c->subsample ? ", subsampled]" : "]") : "");
}

static int fam_classes(const void *cfg)
{
    return (int)((const resnet_config *)cfg)->classes;
}

static int64_t fam_grid(const void *model, int H, int W, int *gh, int *gw)
{
    return resnet_nl_grid(model, H, W, gh, gw);
}

static int fam_affinity(void *model, const float *images, int B, int H, int W, double qx, double qy,
                        float *logits, float *row, int *qi, int *qj, pgd_error **err)
{
    resnet_affinity aff;
    memset(&aff, 0, sizeof aff);
    aff.qx = qx, aff.qy = qy, aff.row = row;
    int rc = resnet_forward(model, images, B, H, W, logits, &aff, NULL, err);
    if (!rc && qi)
        *qi = aff.qi;
    if (!rc && qj)
        *qj = aff.qj;
    return rc;
}

/* torchvision's 4.09 G multiply-adds of ResNet-50 at 224 x 224, scaled by the pixels, and each
 * non-local block's as embedded Gaussian counts them: θ, φ, g and W (4 N C Ci over its N cells)
 * and the two attention products (2 N K Ci over K keys). Another depth: not known (0). */
static double fam_macs(const void *cfg, int H, int W)
{
    const resnet_config *c = cfg;
    if (c->depth != 50)
        return 0;
    double mac = 4.089e9 * H * W / (224.0 * 224);
    for (int i = 0; i < c->n_nl; i++) {
        const resnet_nl_site *s = &c->nl[i];
        int64_t h, w, kh, kw, keys = resnet_site_grid(c, s, H, W, &h, &w, &kh, &kw);
        double N = (double)(h * w), C = (double)s->channels, Ci = (double)s->inner;
        mac += 4.0 * N * C * Ci + 2.0 * N * (double)keys * Ci;
    }
    return mac;
}

/* The non-local blocks' share of the whole pass (resnet_forward's times[2] over times[4]). Stage
 * times drain the queue between stages and around every block, which costs the launches that
 * wait (PoCL 3.1, AMD EPYC: 0.1-0.2 ms a pass at batch 1): a model without a block runs
 * untimed. */
static int fam_forward_share(void *model, const float *images, int B, int H, int W, float *logits,
                             double *share, pgd_error **err)
{
    int gh, gw;
    double t[5] = {0, 0, 0, 0, 0};
    int timed = resnet_nl_grid(model, H, W, &gh, &gw) > 0;
    int rc = resnet_forward(model, images, B, H, W, logits, NULL, timed ? t : NULL, err);
    *share = timed && t[4] > 0 ? t[2] / t[4] : -1;
    return rc;
}

const model_family family_resnet = {
    .id = PGD_MODEL_RESNET,
    .name = "resnet",
    .cfg_size = sizeof(resnet_config),
    .is = is_resnet,
    .detect = fam_detect,
    .load = resnet_fam_load,
    .random = fam_random,
    .forward = fam_forward,
    .find_nonfinite = resnet_fam_nonfinite,
    .info = fam_info,
    .classes = fam_classes,
    .no_maps = "ResNet",
    .affinity_grid = fam_grid,
    .affinity = fam_affinity,
    .free = resnet_fam_free,
    .macs = fam_macs,
    .share_key = "nonlocal_share",
    .forward_share = fam_forward_share,
};
