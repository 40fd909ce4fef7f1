/* resnet_config.c — a ResNet's layout from a checkpoint's names and shapes (resnet_detect):
 * the standard depths, the walk over the residual blocks that detection, loading and the random
 * source share, and the non-local blocks a file holds or --nonlocal adds. Apart from resnet.c,
 * which holds the model itself. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "family.h"
#include "resnet.h"
#include "resnet_parts.h"

/* ---- configuration ------------------------------------------------------------------------ */

static const struct {
    int depth, bottleneck, blocks[4];
} standard[] = {
    {18, 0, {2, 2, 2, 2}},   {34, 0, {3, 4, 6, 3}},   {50, 1, {3, 4, 6, 3}},
    {101, 1, {3, 4, 23, 3}}, {152, 1, {3, 8, 36, 3}},
};

static int64_t dim0(const model_source *src, const char *name)
{
    int nd;
    int64_t s[8];
    if (src->shape(src->u, name, &nd, s) != 0 || nd < 1)
        return -1;
    return s[0];
}

/* The input channels of residual block layerL.B. */
static int64_t block_cin(const resnet_config *c, int L, int B)
{
    if (B > 0)
        return c->out[L - 1];
    return L == 1 ? c->stem : c->out[L - 2];
}

/* ---- the walk over the residual blocks ----------------------------------------------------
 * Detection, loading and the random source all visit every residual block in order and every
 * convolution in it, with the same names, widths and strides: next_block and block_convs say
 * them once. */

/* Moves *p to the next residual block (from a zeroed *p, to layer1.0); 0 after the last. */
int resnet_next_block(const resnet_config *c, block_pos *p)
{
    if (p->layer == 0)
        p->layer = 1, p->block = 0;
    else if (++p->block >= c->blocks[p->layer - 1])
        p->layer++, p->block = 0;
    while (p->layer <= 4 && c->blocks[p->layer - 1] < 1)
        p->layer++;
    if (p->layer > 4)
        return 0;
    int L = p->layer, B = p->block;
    p->cin = block_cin(c, L, B);
    p->width = c->width[L - 1];
    p->out = c->out[L - 1];
    p->stride = (L > 1 && B == 0 && !(L == 4 && c->dc5)) ? 2 : 1;
    p->needs_ds = p->stride != 1 || p->cin != p->out;
    return 1;
}

/* The convolutions of the block at p: conv1..conv3 (Bottleneck) or conv1..conv2 (BasicBlock),
 * then the downsample when `with_ds`. Returns how many it wrote (at most 4); the k-th
 * convolution (from 1) is out[k - 1], the downsample the last. */
int resnet_block_convs(const resnet_config *c, const block_pos *p, int with_ds, block_conv out[4])
{
    int L = p->layer, B = p->block, nconv = c->bottleneck ? 3 : 2;
    for (int k = 1; k <= nconv; k++) {
        block_conv *bc = &out[k - 1];
        snprintf(bc->weight, sizeof bc->weight, "layer%d.%d.conv%d.weight", L, B, k);
        snprintf(bc->bn, sizeof bc->bn, "layer%d.%d.bn%d", L, B, k);
        bc->cin = k == 1 ? p->cin : p->width;
        bc->cout = k == nconv ? p->out : p->width;
        bc->k = c->bottleneck ? (k == 2 ? 3 : 1) : 3;
        /* torchvision v1.5: the stride sits on the 3x3 convolution */
        bc->stride = (c->bottleneck ? k == 2 : k == 1) ? p->stride : 1;
        /* DC5: the 3x3 convolutions of layer4 dilated by 2, except where the first block
         * enters the layer (its conv2, or a BasicBlock's conv1), which keeps the previous 1 */
        bc->dil = 1;
        if (c->dc5 && L == 4 && bc->k == 3)
            bc->dil = (B == 0 && (c->bottleneck || k == 1)) ? 1 : 2;
        bc->last = k == nconv;
    }
    if (!with_ds)
        return nconv;
    block_conv *ds = &out[nconv];
    snprintf(ds->weight, sizeof ds->weight, "layer%d.%d.downsample.0.weight", L, B);
    snprintf(ds->bn, sizeof ds->bn, "layer%d.%d.downsample.1", L, B);
    ds->cin = p->cin;
    ds->cout = p->out;
    ds->k = 1;
    ds->stride = p->stride;
    ds->dil = 1;
    ds->last = 0;
    return nconv + 1;
}

int resnet_need_conv(const model_source *src, const char *name, int64_t cout, int64_t cin, int k,
                     pgd_error **err)
{
    int64_t s[4] = {cout, cin, k, k};
    return model_need(src, name, 4, s, err);
}

int resnet_need_bn(const model_source *src, const char *prefix, int64_t c, pgd_error **err)
{
    static const char *const parts[] = {"weight", "bias", "running_mean", "running_var"};
    char name[160];
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "%s.%s", prefix, parts[i]);
        int rc = model_need(src, name, 1, &c, err);
        if (rc)
            return rc;
    }
    return PGD_OK;
}

int resnet_has_downsample(const model_source *src, int L, int B)
{
    char name[96];
    snprintf(name, sizeof name, "layer%d.%d.downsample.0.weight", L, B);
    return model_has(src, name);
}

/* Checks every tensor of the backbone; the error names the first missing or misshaped one. */
static int check_backbone(const model_source *src, const resnet_config *c, pgd_error **err)
{
    int rc = resnet_need_conv(src, "conv1.weight", c->stem, 3, 7, err);
    if (!rc)
        rc = resnet_need_bn(src, "bn1", c->stem, err);
    block_pos p = {0};
    while (!rc && resnet_next_block(c, &p)) {
        block_conv bc[4];
        int n = resnet_block_convs(c, &p,
                                   p.needs_ds || resnet_has_downsample(src, p.layer, p.block), bc);
        for (int i = 0; i < n && !rc; i++) {
            rc = resnet_need_conv(src, bc[i].weight, bc[i].cout, bc[i].cin, bc[i].k, err);
            if (!rc)
                rc = resnet_need_bn(src, bc[i].bn, bc[i].cout, err);
        }
    }
    if (!rc && !c->headless) {
        int64_t fw[2] = {c->classes, c->out[3]};
        rc = model_need(src, "fc.weight", 2, fw, err);
        if (!rc)
            rc = model_need(src, "fc.bias", 1, &c->classes, err);
    }
    return rc;
}

int resnet_site_index(const resnet_config *c, int L, int B)
{
    for (int i = 0; i < c->n_nl; i++)
        if (c->nl[i].layer == L && c->nl[i].block == B)
            return i;
    return -1;
}

static int add_site(resnet_config *c, const char *label, const char *what, int L, int B,
                    int identity, pgd_error **err)
{
    if (L < 1 || L > 4 || B < 0 || B >= c->blocks[L > 0 && L <= 4 ? L - 1 : 0])
        return pgd_error_set(err, PGD_ERR_SHAPE,
                             "%s: %s names residual block layer%d.%d, which doesn't exist "
                             "(layers 1-4 have %d, %d, %d and %d blocks)",
                             label, what, L, B, c->blocks[0], c->blocks[1], c->blocks[2],
                             c->blocks[3]);
    if (resnet_site_index(c, L, B) >= 0)
        return identity ? pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT,
                                        "%s: --nonlocal layer%d.%d: there is a non-local block "
                                        "before layer%d.%d already",
                                        label, L, B, L, B)
                        : PGD_OK;
    if (c->n_nl >= RESNET_MAX_NL)
        return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT, "%s: more than %d non-local blocks",
                             label, RESNET_MAX_NL);
    resnet_nl_site *s = &c->nl[c->n_nl++];
    s->layer = L;
    s->block = B;
    s->channels = block_cin(c, L, B);
    s->inner = s->channels / 2 > 0 ? s->channels / 2 : 1;
    s->identity = identity;
    return PGD_OK;
}

static const char *const nl_parts[] = {
    "theta.weight",
    "theta.bias",
    "phi.weight",
    "phi.bias",
    "g.weight",
    "g.bias",
    "w.weight",
    "w.bias",
    "bn.weight",
    "bn.bias",
    "bn.running_mean",
    "bn.running_var",
    "bn.num_batches_tracked",
    "concat.weight",
};

/* "layerL.B" at the start of p, L and B whole numbers 0 .. 2^31 - 1 (pgd_parse_int64_list: an
 * index past int is refused, not wrapped as sscanf's %d did); *used: the characters read.
 * 0, or -1 when p does not start so. */
static int parse_site(const char *p, int *L, int *B, size_t *used)
{
    if (strncmp(p, "layer", 5) != 0)
        return -1;
    const char *q = p + 5;
    size_t nl = strspn(q, "0123456789");
    if (q[nl] != '.')
        return -1;
    size_t len = nl + 1 + strspn(q + nl + 1, "0123456789");
    char buf[32];
    int64_t v[2];
    int n = 0;
    if (len >= sizeof buf)
        return -1;
    memcpy(buf, q, len);
    buf[len] = 0;
    if (pgd_parse_int64_list(buf, '.', 0, INT32_MAX, v, 2, 2, &n))
        return -1;
    *L = (int)v[0], *B = (int)v[1], *used = 5 + len;
    return 0;
}

/* "nonlocal.layerL.B." at the start of name, L and B as model_parse_index reads them (so
 * "nonlocal.layer+2.00." is refused, not taken for layer2.0): the length of that prefix, or 0. */
static int nl_key_site(const char *name, int *L, int *B)
{
    static const char head[] = "nonlocal.layer";
    size_t n = sizeof head - 1;
    int k;
    if (strncmp(name, head, n) || !(k = model_parse_index(name + n, L)) || name[n + k] != '.')
        return 0;
    n += (size_t)k + 1;
    if (!(k = model_parse_index(name + n, B)) || name[n + k] != '.')
        return 0;
    return (int)n + k + 1;
}

/* The non-local keys of the file: each must name an existing block and a known part. */
static int scan_nonlocal(const model_source *src, resnet_config *c, pgd_error **err)
{
    if (!src->name_at)
        return PGD_OK;
    const char *name;
    for (size_t i = 0; (name = src->name_at(src->u, i)) != NULL; i++) {
        if (strncmp(name, "nonlocal.", 9) != 0)
            continue;
        int L = -1, B = -1, n = nl_key_site(name, &L, &B);
        if (n == 0)
            return pgd_error_set(err, PGD_ERR_FORMAT,
                                 "%s: tensor '%s': non-local keys are "
                                 "nonlocal.layerL.B.{theta,phi,g,w,bn,concat}.* (L and B plain "
                                 "decimals: no sign, no leading zeros)",
                                 src->label, name);
        int known = 0;
        for (size_t p = 0; p < sizeof nl_parts / sizeof *nl_parts; p++)
            known |= !strcmp(name + n, nl_parts[p]);
        if (!known)
            return pgd_error_set(err, PGD_ERR_FORMAT,
                                 "%s: tensor '%s': unknown part '%s' of a non-local block "
                                 "(theta, phi, g, w .weight/.bias; bn.*; concat.weight)",
                                 src->label, name, name + n);
        char what[200];
        snprintf(what, sizeof what, "tensor '%s'", name);
        int rc = add_site(c, src->label, what, L, B, 0, err);
        if (rc)
            return rc;
    }
    return PGD_OK;
}

int resnet_check_site(const model_source *src, const resnet_config *c, const resnet_nl_site *s,
                      pgd_error **err)
{
    char p[64], name[128];
    snprintf(p, sizeof p, "nonlocal.layer%d.%d", s->layer, s->block);
    int64_t C = s->channels, Ci = s->inner;
    const char *convs[] = {"theta", "phi", "g"};
    for (int k = 0; k < 3; k++) {
        snprintf(name, sizeof name, "%s.%s.weight", p, convs[k]);
        if (k < 2 && c->mode == NL_GAUSSIAN && !model_has(src, name))
            continue; /* the Gaussian form uses x itself; the paper's block still has θ, φ */
        int rc = resnet_need_conv(src, name, Ci, C, 1, err);
        snprintf(name, sizeof name, "%s.%s.bias", p, convs[k]);
        if (!rc && model_has(src, name))
            rc = model_need(src, name, 1, &Ci, err);
        if (rc)
            return rc;
    }
    snprintf(name, sizeof name, "%s.w.weight", p);
    int rc = resnet_need_conv(src, name, C, Ci, 1, err);
    snprintf(name, sizeof name, "%s.w.bias", p);
    if (!rc && model_has(src, name))
        rc = model_need(src, name, 1, &C, err);
    snprintf(name, sizeof name, "%s.bn", p);
    if (!rc)
        rc = resnet_need_bn(src, name, C, err);
    if (!rc && c->mode == NL_CONCATENATION) {
        int64_t cs[4] = {1, 2 * Ci, 1, 1};
        snprintf(name, sizeof name, "%s.concat.weight", p);
        rc = model_need(src, name, 4, cs, err);
    }
    return rc;
}

int resnet_parse_spec(const char *label, const char *spec, resnet_config *c, int identity,
                      pgd_error **err)
{
    const char *p = spec;
    while (p && *p) {
        int L = -1, B = -1;
        size_t n = 0;
        if (parse_site(p, &L, &B, &n) != 0 || (p[n] != ',' && p[n] != '\0') ||
            (p[n] == ',' && p[n + 1] == '\0'))
            return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT,
                                 "--nonlocal '%s': expected layerL.B[,layerL.B…], e.g. layer3.5",
                                 spec);
        char what[64];
        snprintf(what, sizeof what, "--nonlocal layer%d.%d", L, B);
        int rc = add_site(c, label, what, L, B, identity, err);
        if (rc)
            return rc;
        p += n;
        if (*p == ',')
            p++;
    }
    return PGD_OK;
}

/* The residual blocks of layer L: one more than the highest index of the file's layerL.B.*
 * names (a block held in part, or missing between two others, then fails to load naming what
 * it lacks), or, for a source without a listing, the blocks counted by their conv1. */
static int count_blocks(const model_source *src, int L)
{
    char prefix[16], name[96];
    snprintf(prefix, sizeof prefix, "layer%d.", L);
    int n = model_count_indexed(src, prefix, ".");
    if (n >= 0)
        return n;
    for (n = 0; n <= RESNET_MAX_BLOCKS; n++) {
        snprintf(name, sizeof name, "layer%d.%d.conv1.weight", L, n);
        if (!model_has(src, name))
            break;
    }
    return n;
}

/* Blocks per layer (counted by name), inner widths and output channels. */
static int detect_layers(const model_source *src, resnet_config *cfg, pgd_error **err)
{
    char name[96];
    for (int L = 1; L <= 4; L++) {
        int n = count_blocks(src, L);
        if (n > RESNET_MAX_BLOCKS)
            return pgd_error_set(err, PGD_ERR_FORMAT,
                                 "%s: layer%d has %d residual blocks, more than the %d supported",
                                 src->label, L, n, RESNET_MAX_BLOCKS);
        if (n == 0)
            return pgd_error_set(err, PGD_ERR_NOT_FOUND,
                                 "%s: tensor 'layer%d.0.conv1.weight' is missing (a ResNet has "
                                 "four layers of residual blocks)",
                                 src->label, L);
        cfg->blocks[L - 1] = n;
        snprintf(name, sizeof name, "layer%d.0.conv1.weight", L);
        cfg->width[L - 1] = dim0(src, name);
        if (cfg->width[L - 1] >= 1)
            snprintf(name, sizeof name, "layer%d.0.conv%d.weight", L, cfg->bottleneck ? 3 : 2);
        cfg->out[L - 1] = cfg->width[L - 1] >= 1 ? dim0(src, name) : -1;
        if (cfg->width[L - 1] < 1 || cfg->out[L - 1] < 1) /* -1: missing; 0: no channels */
            return pgd_error_set(err, PGD_ERR_NOT_FOUND, "%s: tensor '%s' %s", src->label, name,
                                 model_has(src, name) ? "has a zero dimension: 0 rows"
                                                      : "is missing");
    }
    return PGD_OK;
}

/* Non-local blocks: mode and subsampling from the metadata unless overridden, the blocks the
 * file holds (each checked) and those opt->nonlocal_spec adds. */
static int detect_nonlocal(const model_source *src, const resnet_options *opt, resnet_config *cfg,
                           pgd_error **err)
{
    int rc;
    const char *mode = opt && opt->mode ? opt->mode : src->meta(src->u, "nonlocal.mode");
    cfg->mode_forced = opt && opt->mode;
    if (mode && nl_mode_parse(mode, &cfg->mode) != 0)
        return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT,
                             "%s: unknown non-local mode '%s'%s (embedded_gaussian, gaussian, "
                             "dot_product or concatenation)",
                             src->label, mode,
                             opt && opt->mode ? "" : " in __metadata__ 'nonlocal.mode'");
    int forced = opt && opt->subsample >= 0;
    const char *sub = forced ? NULL : src->meta(src->u, "nonlocal.subsample");
    if (sub && strcmp(sub, "true") && strcmp(sub, "false"))
        return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT,
                             "%s: __metadata__ "
                             "'nonlocal.subsample' is '%s', expected true or false",
                             src->label, sub);
    cfg->subsample = forced ? opt->subsample : sub && !strcmp(sub, "true");
    if ((rc = scan_nonlocal(src, cfg, err)))
        return rc;
    if (cfg->n_nl && !mode) /* the file's blocks: neither is told by their tensors alone */
        model_assume(&cfg->assumed, "nonlocal_mode", "\"embedded_gaussian\"",
                     "--mode M, or nonlocal.mode in __metadata__");
    if (cfg->n_nl && !forced && !sub)
        model_assume(&cfg->assumed, "nonlocal_subsample", "false",
                     "--subsample or --no-subsample, or nonlocal.subsample in __metadata__");
    for (int i = 0; i < cfg->n_nl; i++)
        if ((rc = resnet_check_site(src, cfg, &cfg->nl[i], err)))
            return rc;
    return opt && opt->nonlocal_spec
               ? resnet_parse_spec(src->label, opt->nonlocal_spec, cfg, 1, err)
               : PGD_OK;
}

static int detect(const model_source *src, const resnet_options *opt, int headless, int dc5,
                  resnet_config *cfg, pgd_error **err)
{
    memset(cfg, 0, sizeof *cfg);
    int nd;
    int64_t s[8];
    if (src->shape(src->u, "conv1.weight", &nd, s) != 0 || !model_has(src, "layer1.0.conv1.weight"))
        return pgd_error_set(err, PGD_ERR_FORMAT,
                             "%s: not a ResNet checkpoint: 'conv1.weight' and "
                             "'layer1.0.conv1.weight' (torchvision naming) are required",
                             src->label);
    if (nd != 4 || s[0] < 1 || s[1] != 3 || s[2] != 7 || s[3] != 7) {
        char gs[96];
        model_shape_str(nd, s, gs, sizeof gs);
        return pgd_error_set(err, PGD_ERR_SHAPE,
                             "%s: 'conv1.weight' has shape %s, expected [C, 3, 7, 7]", src->label,
                             gs);
    }
    cfg->stem = s[0];
    cfg->bottleneck = model_has(src, "layer1.0.conv3.weight");
    int rc = detect_layers(src, cfg, err);
    if (rc)
        return rc;
    cfg->headless = headless;
    cfg->dc5 = dc5;
    cfg->classes = cfg->headless ? 0 : dim0(src, "fc.weight");
    if (!cfg->headless && cfg->classes < 1)
        return pgd_error_set(err, PGD_ERR_NOT_FOUND, "%s: tensor 'fc.weight' %s", src->label,
                             cfg->classes ? "is missing" : "has a zero dimension: 0 classes");
    for (size_t i = 0; i < sizeof standard / sizeof *standard; i++)
        if (standard[i].bottleneck == cfg->bottleneck &&
            !memcmp(standard[i].blocks, cfg->blocks, sizeof cfg->blocks))
            cfg->depth = standard[i].depth;
    rc = check_backbone(src, cfg, err);
    if (!rc)
        rc = detect_nonlocal(src, opt, cfg, err);
    return rc;
}

int resnet_detect(const model_source *src, const resnet_options *opt, resnet_config *cfg,
                  pgd_error **err)
{
    return detect(src, opt, 0, 0, cfg, err);
}

int resnet_detect_backbone(const model_source *src, int dc5, resnet_config *cfg, pgd_error **err)
{
    resnet_options none = {NULL, NULL, 0};
    int rc = detect(src, &none, 1, dc5, cfg, err);
    if (!rc && cfg->n_nl)
        rc = pgd_error_set(err, PGD_ERR_FORMAT,
                           "%s: a detector's backbone has no non-local "
                           "blocks ('nonlocal.layer%d.%d.*')",
                           src->label, cfg->nl[0].layer, cfg->nl[0].block);
    return rc;
}

/* The layout of a standard ResNet (standard[si]) with torchvision's widths. */
void resnet_standard_config(int si, resnet_config *c)
{
    memset(c, 0, sizeof *c);
    c->bottleneck = standard[si].bottleneck;
    memcpy(c->blocks, standard[si].blocks, sizeof c->blocks);
    c->stem = 64;
    for (int L = 0; L < 4; L++) {
        c->width[L] = 64 << L;
        c->out[L] = c->width[L] * (c->bottleneck ? 4 : 1);
    }
}

int resnet_standard_index(int depth)
{
    for (size_t i = 0; i < sizeof standard / sizeof *standard; i++)
        if (standard[i].depth == depth)
            return (int)i;
    return -1;
}
