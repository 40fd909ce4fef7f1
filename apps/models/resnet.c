/* resnet.c — ResNet-18…152 (torchvision naming) with non-local blocks.
 *
 * Activations are NHWC throughout. Every convolution has its batch norm folded in at load time
 * and its ReLU / residual add fused into the GEMM epilogue (residual before ReLU, as ResNet
 * adds). Non-local blocks (Wang et al. 2018) are libpagoda's op (pgd_nonlocal_*, see
 * pagoda.h): this file reads their weights by name, or seeds the blocks --nonlocal inserts with
 * the paper's initialisation, and places them before their residual blocks.
 */
#define CL_TARGET_OPENCL_VERSION 120
#include "resnet.h"
#include "resnet_parts.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const mode_names[] = {"embedded_gaussian", "gaussian", "dot_product",
                                         "concatenation"};

const char *nl_mode_name(nl_mode m)
{
    return pgd_nonlocal_mode_name((pgd_nonlocal_mode)m);
}

int nl_mode_parse(const char *s, nl_mode *m)
{
    for (int i = 0; i < 4; i++)
        if (s && !strcmp(s, mode_names[i])) {
            *m = (nl_mode)i;
            return 0;
        }
    return -1;
}

/* ---- loading ------------------------------------------------------------------------------ */

typedef struct conv_layer {
    pgd_conv2d *c;
    pgd_conv2d_desc d;
} conv_layer;

typedef struct res_block {
    conv_layer conv[3], ds;
    int has_ds;
} res_block;

typedef struct nl_block {
    resnet_nl_site site;
    pgd_nonlocal *op;
} nl_block;

struct resnet_model {
    pgd_ctx *ctx;
    resnet_config cfg;
    conv_layer stem;
    res_block *blocks[4];
    nl_block nl[RESNET_MAX_NL];
    pgd_linear *fc;
    model_batching batching; /* measured bytes per image, images per pass of the last forward */
    model_probe *probe;      /* set by resnet_find_nonfinite: every stage's output is checked */
};

static float *read_host(const model_source *src, const char *name, int64_t n, pgd_error **err)
{
    float *h = malloc((size_t)n * sizeof *h + 1);
    if (!h) {
        pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "%s: reading '%s' (%lld floats)", src->label,
                      name, (long long)n);
        return NULL;
    }
    if (model_read(src, name, h, n, err)) {
        free(h);
        return NULL;
    }
    return h;
}

/* Reads a batch norm's four arrays; *arrays receives one block of 4·c floats. */
static int read_bn(const model_source *src, const char *prefix, int64_t c, float **arrays,
                   pgd_batchnorm *bn, pgd_error **err)
{
    static const char *const parts[] = {"weight", "bias", "running_mean", "running_var"};
    float *all = malloc((size_t)(4 * c) * sizeof *all);
    if (!all)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "%s: reading '%s'", src->label,
                             prefix);
    char name[160];
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "%s.%s", prefix, parts[i]);
        int rc = model_read(src, name, all + i * c, c, err);
        for (int64_t k = 0; !rc && i == 3 && k < c; k++)
            if (all[3 * c + k] < 0)
                rc = pgd_error_set(err, PGD_ERR_FORMAT,
                                   "%s: tensor '%s' holds a negative variance (%g) at index "
                                   "[%lld]: a running variance cannot be negative",
                                   src->label, name, (double)all[3 * c + k], (long long)k);
        if (rc) {
            free(all);
            return rc;
        }
    }
    bn->weight = all;
    bn->bias = all + c;
    bn->mean = all + 2 * c;
    bn->var = all + 3 * c;
    bn->eps = 1e-5f; /* torchvision's BatchNorm2d */
    *arrays = all;
    return PGD_OK;
}

static int make_conv(pgd_ctx *ctx, conv_layer *cl, int64_t cin, int64_t cout, int k, int stride,
                     int dil, const float *w, const float *bias, const pgd_batchnorm *bn,
                     pgd_error **err)
{
    memset(&cl->d, 0, sizeof cl->d);
    cl->d.cin = cin;
    cl->d.cout = cout;
    cl->d.kh = cl->d.kw = k;
    cl->d.stride_h = cl->d.stride_w = stride;
    cl->d.pad_h = cl->d.pad_w = dil * (k / 2);
    cl->d.dil_h = cl->d.dil_w = dil;
    cl->d.groups = 1;
    return pgd_conv2d_create(ctx, &cl->d, w, bias, bn, &cl->c, err);
}

/* A convolution `wname` [cout, cin, k, k] with batch norm `bnprefix` folded in. */
static int load_conv_bn(pgd_ctx *ctx, const model_source *src, const char *wname,
                        const char *bnprefix, int64_t cin, int64_t cout, int k, int stride, int dil,
                        conv_layer *cl, pgd_error **err)
{
    if (resnet_need_conv(src, wname, cout, cin, k, err) || resnet_need_bn(src, bnprefix, cout, err))
        return pgd_error_get_code(*err);
    float *w = read_host(src, wname, cout * cin * k * k, err), *bnarr = NULL;
    if (!w)
        return pgd_error_get_code(*err);
    pgd_batchnorm bn;
    int rc = read_bn(src, bnprefix, cout, &bnarr, &bn, err);
    if (!rc)
        rc = make_conv(ctx, cl, cin, cout, k, stride, dil, w, NULL, &bn, err);
    free(w);
    free(bnarr);
    return rc;
}

static void conv_free(conv_layer *cl)
{
    pgd_conv2d_destroy(cl->c);
    cl->c = NULL;
}

/* Seeded values for blocks inserted by --nonlocal: uniform in [-amp, amp]. */
void resnet_fill_seeded(float *dst, int64_t n, uint64_t seed, float amp)
{
    model_fill_seeded(dst, n, seed * 0x9E3779B97F4A7C15ull + 1, amp);
}

void resnet_nl_weights_free(resnet_nl_weights *h)
{
    free(h->theta);
    free(h->phi);
    free(h->g);
    free(h->bt);
    free(h->bp);
    free(h->bg);
    free(h->w);
    free(h->bw);
    free(h->bn);
    free(h->concat);
    memset(h, 0, sizeof *h);
}

/* The host arrays as pgd_nonlocal_create takes them; a missing bias stays NULL (zero). */
static void nl_params(resnet_nl_weights *h, int64_t C, pgd_nonlocal_params *p)
{
    memset(p, 0, sizeof *p);
    p->theta_weight = h->theta, p->theta_bias = h->bt;
    p->phi_weight = h->phi, p->phi_bias = h->bp;
    p->g_weight = h->g, p->g_bias = h->bg;
    p->w_weight = h->w, p->w_bias = h->bw;
    h->bn_desc = (pgd_batchnorm){h->bn, h->bn + C, h->bn + 2 * C, h->bn + 3 * C, 1e-5f};
    p->bn = &h->bn_desc;
    p->concat_weight = h->concat;
}

int resnet_nl_seeded(int64_t C, int64_t Ci, uint64_t seed, resnet_nl_weights *h,
                     pgd_nonlocal_params *params, pgd_error **err)
{
    memset(h, 0, sizeof *h);
    h->theta = malloc((size_t)(Ci * C) * sizeof(float));
    h->phi = malloc((size_t)(Ci * C) * sizeof(float));
    h->g = malloc((size_t)(Ci * C) * sizeof(float));
    h->w = malloc((size_t)(C * Ci) * sizeof(float));
    h->bt = calloc((size_t)Ci, sizeof(float));
    h->bp = calloc((size_t)Ci, sizeof(float));
    h->bg = calloc((size_t)Ci, sizeof(float));
    h->bw = calloc((size_t)C, sizeof(float));
    h->bn = calloc((size_t)(4 * C), sizeof(float));
    h->concat = malloc((size_t)(2 * Ci) * sizeof(float));
    if (!h->theta || !h->phi || !h->g || !h->w || !h->bt || !h->bp || !h->bg || !h->bw || !h->bn ||
        !h->concat) {
        resnet_nl_weights_free(h);
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY,
                             "seeded non-local block (C %lld, Ci %lld)", (long long)C,
                             (long long)Ci);
    }
    float amp = (float)sqrt(3.0 / (double)C);
    resnet_fill_seeded(h->theta, Ci * C, seed + 1, amp);
    resnet_fill_seeded(h->phi, Ci * C, seed + 2, amp);
    resnet_fill_seeded(h->g, Ci * C, seed + 3, amp);
    resnet_fill_seeded(h->w, C * Ci, seed + 4, (float)sqrt(3.0 / (double)Ci));
    resnet_fill_seeded(h->concat, 2 * Ci, seed + 5, (float)sqrt(3.0 / (double)(2 * Ci)));
    for (int64_t i = 0; i < C; i++)
        h->bn[3 * C + i] = 1.0f; /* running_var 1; γ, β, mean 0 */
    if (params)
        nl_params(h, C, params);
    return PGD_OK;
}

/* A tensor the file may lack: NULL (and no error) when absent. */
static int read_optional(const model_source *src, const char *name, int64_t n, float **out,
                         pgd_error **err)
{
    *out = NULL;
    if (!model_has(src, name))
        return PGD_OK;
    *out = read_host(src, name, n, err);
    return *out ? PGD_OK : pgd_error_get_code(*err);
}

/* The parts of the file's block at prefix p that its mode does not use, left out on purpose:
 * recorded as consumed. θ and φ under the Gaussian form (the paper's block, as
 * tools/golden/make-nonlocal-golden.py writes it, keeps them whatever its mode; their shapes were
 * checked by check_site), and, only when the options force the mode (`forced`), the
 * concatenation weight under another mode. */
static void mark_unused_parts(const model_source *src, nl_mode mode, int forced, const char *p)
{
    static const char *const xparts[] = {"theta.weight", "theta.bias", "phi.weight", "phi.bias"};
    char name[128];
    for (int i = 0; i < 4 && mode == NL_GAUSSIAN; i++) {
        snprintf(name, sizeof name, "%s.%s", p, xparts[i]);
        model_mark(src, name);
    }
    snprintf(name, sizeof name, "%s.concat.weight", p);
    if (forced && mode != NL_CONCATENATION)
        model_mark(src, name);
}

/* The host arrays of one non-local block: from the file, or (identity sites) seeded values
 * with BN γ = 0, β = 0 so that z = x exactly. Missing biases stay NULL (zero). */
static int nl_host_read(const model_source *src, const resnet_config *c, const resnet_nl_site *s,
                        resnet_nl_weights *h, pgd_error **err)
{
    memset(h, 0, sizeof *h);
    int64_t C = s->channels, Ci = s->inner;
    int gauss = c->mode == NL_GAUSSIAN;
    if (s->identity)
        return resnet_nl_seeded(C, Ci, 0x6e6c0000u + (uint64_t)(s->layer * 1000 + s->block), h,
                                NULL, err);
    char p[64], name[128];
    snprintf(p, sizeof p, "nonlocal.layer%d.%d", s->layer, s->block);
#define RD(field, part, n)                                                                         \
    do {                                                                                           \
        snprintf(name, sizeof name, "%s.%s", p, part);                                             \
        if (!(h->field = read_host(src, name, n, err)))                                            \
            goto fail;                                                                             \
    } while (0)
#define RD_OPT(field, part, n)                                                                     \
    do {                                                                                           \
        snprintf(name, sizeof name, "%s.%s", p, part);                                             \
        if (read_optional(src, name, n, &h->field, err))                                           \
            goto fail;                                                                             \
    } while (0)
    if (!gauss) {
        RD(theta, "theta.weight", Ci * C);
        RD(phi, "phi.weight", Ci * C);
        RD_OPT(bt, "theta.bias", Ci);
        RD_OPT(bp, "phi.bias", Ci);
    }
    RD(g, "g.weight", Ci * C);
    RD_OPT(bg, "g.bias", Ci);
    RD(w, "w.weight", C * Ci);
    RD_OPT(bw, "w.bias", C);
    if (c->mode == NL_CONCATENATION)
        RD(concat, "concat.weight", 2 * Ci);
    mark_unused_parts(src, c->mode, c->mode_forced, p);
#undef RD
#undef RD_OPT
    {
        pgd_batchnorm bn;
        snprintf(name, sizeof name, "%s.bn", p);
        if (read_bn(src, name, C, &h->bn, &bn, err))
            goto fail;
    }
    return PGD_OK;
fail:
    resnet_nl_weights_free(h);
    return pgd_error_get_code(*err);
}

static int load_nl(resnet_model *m, const model_source *src, const resnet_nl_site *s, nl_block *nb,
                   pgd_error **err)
{
    const resnet_config *c = &m->cfg;
    nb->site = *s;
    resnet_nl_weights h;
    int rc = nl_host_read(src, c, s, &h, err);
    if (rc)
        return rc;
    pgd_nonlocal_params params;
    nl_params(&h, s->channels, &params);
    pgd_nonlocal_desc d = {s->channels, s->inner, (pgd_nonlocal_mode)c->mode, c->subsample, 0};
    rc = pgd_nonlocal_create(m->ctx, &d, &params, &nb->op, err);
    resnet_nl_weights_free(&h);
    return rc;
}

static void nl_free(nl_block *nb)
{
    pgd_nonlocal_destroy(nb->op);
    nb->op = NULL;
}

void resnet_free(resnet_model *m)
{
    if (!m)
        return;
    conv_free(&m->stem);
    for (int L = 0; L < 4; L++) {
        if (!m->blocks[L])
            continue;
        for (int b = 0; b < m->cfg.blocks[L]; b++) {
            for (int k = 0; k < 3; k++)
                conv_free(&m->blocks[L][b].conv[k]);
            conv_free(&m->blocks[L][b].ds);
        }
        free(m->blocks[L]);
    }
    for (int i = 0; i < m->cfg.n_nl; i++)
        nl_free(&m->nl[i]);
    pgd_linear_destroy(m->fc);
    free(m);
}

static int load_fc(resnet_model *m, const model_source *src, pgd_error **err)
{
    int64_t ws[2] = {m->cfg.classes, m->cfg.out[3]};
    if (model_need(src, "fc.weight", 2, ws, err) || model_need(src, "fc.bias", 1, ws, err))
        return pgd_error_get_code(*err);
    float *w = read_host(src, "fc.weight", ws[0] * ws[1], err);
    float *b = w ? read_host(src, "fc.bias", ws[0], err) : NULL;
    pgd_tensor *tw = NULL, *tb = NULL;
    int rc = b ? PGD_OK : pgd_error_get_code(*err);
    if (!rc)
        rc = model_upload(m->ctx, w, 2, ws, &tw, err);
    if (!rc)
        rc = model_upload(m->ctx, b, 1, ws, &tb, err);
    if (!rc)
        rc = pgd_linear_create(m->ctx, tw, tb, &m->fc, err);
    pgd_tensor_destroy(tw);
    pgd_tensor_destroy(tb);
    free(w);
    free(b);
    return rc;
}

/* Every residual block: its convolutions with their batch norms folded in, and the downsample
 * where the block needs one or the file has one. */
static int load_blocks(resnet_model *m, const model_source *src, pgd_error **err)
{
    const resnet_config *c = &m->cfg;
    for (int L = 1; L <= 4; L++) {
        m->blocks[L - 1] = calloc((size_t)c->blocks[L - 1], sizeof(res_block));
        if (!m->blocks[L - 1])
            return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "ResNet layer%d", L);
    }
    int rc = PGD_OK;
    block_pos p = {0};
    while (!rc && resnet_next_block(c, &p)) {
        res_block *rb = &m->blocks[p.layer - 1][p.block];
        rb->has_ds = p.needs_ds || resnet_has_downsample(src, p.layer, p.block);
        block_conv bc[4];
        int n = resnet_block_convs(c, &p, rb->has_ds, bc);
        for (int i = 0; i < n && !rc; i++) {
            conv_layer *cl = rb->has_ds && i == n - 1 ? &rb->ds : &rb->conv[i];
            rc = load_conv_bn(m->ctx, src, bc[i].weight, bc[i].bn, bc[i].cin, bc[i].cout, bc[i].k,
                              bc[i].stride, bc[i].dil, cl, err);
        }
    }
    return rc;
}

/* Strict, as vit_load. torchvision's BatchNorm2d writes one buffer the model has no use for,
 * num_batches_tracked (an int64 count); it is ignored beside a running_var the load consumed,
 * and reported anywhere else. */
int resnet_load(pgd_ctx *ctx, const model_source *src, const resnet_config *cfg, resnet_model **out,
                pgd_error **err)
{
    static const model_ignore ignore[] = {{"num_batches_tracked", "running_var"}};
    *out = NULL;
    if (model_check_fits(ctx, src, "ResNet weights", err))
        return PGD_ERR_TOO_LARGE;
    resnet_model *m = calloc(1, sizeof *m);
    if (!m)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "ResNet model");
    m->ctx = ctx;
    m->cfg = *cfg;
    const resnet_config *c = &m->cfg;
    model_source ts = *src;
    int rc = model_track_begin(&ts, err);
    if (!rc)
        rc = load_conv_bn(ctx, &ts, "conv1.weight", "bn1", 3, c->stem, 7, 2, 1, &m->stem, err);
    if (!rc)
        rc = load_blocks(m, &ts, err);
    for (int i = 0; i < c->n_nl && !rc; i++)
        rc = load_nl(m, &ts, &c->nl[i], &m->nl[i], err);
    if (!rc && !c->headless)
        rc = load_fc(m, &ts, err);
    if (!rc)
        rc = model_check_consumed(&ts, ignore, sizeof ignore / sizeof *ignore, err);
    model_track_end(&ts);
    if (rc) {
        resnet_free(m);
        return rc;
    }
    *out = m;
    return PGD_OK;
}

/* ---- forward ------------------------------------------------------------------------------ */

static int64_t dimv(const pgd_tensor *t, int i)
{
    return pgd_tensor_get_dim(t, i);
}

static int new4(pgd_ctx *ctx, int64_t a, int64_t b, int64_t c, int64_t d, pgd_tensor **out,
                pgd_error **err)
{
    int64_t s[4] = {a, b, c, d};
    return pgd_tensor_create(ctx, 4, s, out, err);
}

static int conv_run(pgd_ctx *ctx, const conv_layer *cl, const pgd_tensor *x, pgd_act act,
                    const pgd_tensor *res, pgd_tensor **y, pgd_error **err)
{
    int64_t oh, ow;
    pgd_conv2d_out_size(&cl->d, dimv(x, 1), dimv(x, 2), &oh, &ow);
    int rc = new4(ctx, dimv(x, 0), oh, ow, cl->d.cout, y, err);
    if (!rc)
        rc = pgd_conv2d_forward(ctx, cl->c, x, act, res, *y, err);
    if (rc) {
        pgd_tensor_destroy(*y);
        *y = NULL;
    }
    return rc;
}

int64_t resnet_site_grid(const resnet_config *c, const resnet_nl_site *s, int H, int W, int64_t *h,
                         int64_t *w, int64_t *kh, int64_t *kw)
{
    /* stem /2, maxpool /2, then /2 per layer after the first (conv arithmetic, k3 p1 s2) */
    *h = H, *w = W;
    *h = (*h + 6 - 7) / 2 + 1, *w = (*w + 6 - 7) / 2 + 1;
    *h = (*h + 2 - 3) / 2 + 1, *w = (*w + 2 - 3) / 2 + 1;
    for (int L = 2; L <= s->layer; L++)
        if (!(L == s->layer && s->block == 0))
            *h = (*h - 1) / 2 + 1, *w = (*w - 1) / 2 + 1;
    pgd_nonlocal_desc d = {s->channels, s->inner, (pgd_nonlocal_mode)c->mode, c->subsample, 0};
    return pgd_nonlocal_key_grid(&d, *h, *w, kh, kw);
}

int64_t resnet_nl_grid(const resnet_model *m, int H, int W, int *gh, int *gw)
{
    if (m->cfg.n_nl == 0)
        return 0;
    int64_t h, w, kh = 0, kw = 0;
    int64_t cells = resnet_site_grid(&m->cfg, &m->cfg.nl[0], H, W, &h, &w, &kh, &kw);
    *gh = (int)kh;
    *gw = (int)kw;
    return cells;
}

/* z = x + BN(W·y(x)) through the block's op; *z is a new tensor shaped like x. With aff (and
 * aff->row), also the affinity row of the query at (aff->qy, aff->qx) of the block's grid. */
static int nl_forward(resnet_model *m, const nl_block *nb, const pgd_tensor *x,
                      resnet_affinity *aff, pgd_tensor **z, pgd_error **err)
{
    pgd_ctx *ctx = m->ctx;
    int64_t H = dimv(x, 1), W = dimv(x, 2);
    *z = NULL;
    if (m->cfg.subsample && (H < 2 || W < 2))
        return pgd_error_set(err, PGD_ERR_SHAPE,
                             "non-local block before layer%d.%d: a %lldx%lld input has nothing "
                             "left after 2x2 subsampling",
                             nb->site.layer, nb->site.block, (long long)H, (long long)W);
    int rc = PGD_OK;
    if (aff && aff->row) {
        int64_t qi = (int64_t)(aff->qy * (double)H), qj = (int64_t)(aff->qx * (double)W);
        qi = qi < 0 ? 0 : qi >= H ? H - 1 : qi;
        qj = qj < 0 ? 0 : qj >= W ? W - 1 : qj;
        aff->qi = (int)qi;
        aff->qj = (int)qj;
        int64_t gh = 0, gw = 0;
        rc = pgd_nonlocal_affinity(ctx, nb->op, x, qi, qj, aff->row, &gh, &gw, err);
        aff->gh = (int)gh;
        aff->gw = (int)gw;
    }
    if (!rc)
        rc = new4(ctx, dimv(x, 0), H, W, dimv(x, 3), z, err);
    if (!rc)
        rc = pgd_nonlocal_forward(ctx, nb->op, x, *z, err);
    if (rc) {
        pgd_tensor_destroy(*z);
        *z = NULL;
    }
    return rc;
}

/* Replaces *x by the block's output. The last convolution adds the identity in place — into
 * the downsampled copy, or into the block's input, which nothing reads afterwards — so it
 * writes no new tensor: the sum reads and writes the same lines instead of fetching a fresh
 * output's (PoCL 3.1, Xeon, batch 8: layer1's last convolutions 3.2-3.8 -> 2.9-3.3 ms). */
static int block_forward(resnet_model *m, const res_block *rb, pgd_tensor **x, pgd_error **err)
{
    pgd_ctx *ctx = m->ctx;
    pgd_tensor *t1 = NULL, *t2 = NULL, *idt = NULL;
    int n = m->cfg.bottleneck ? 3 : 2;
    int rc = conv_run(ctx, &rb->conv[0], *x, PGD_ACT_RELU, NULL, &t1, err);
    if (!rc && n == 3)
        rc = conv_run(ctx, &rb->conv[1], t1, PGD_ACT_RELU, NULL, &t2, err);
    if (!rc && rb->has_ds)
        rc = conv_run(ctx, &rb->ds, *x, PGD_ACT_NONE, NULL, &idt, err);
    pgd_tensor *sum = idt ? idt : *x;
    if (!rc)
        rc = pgd_conv2d_forward(ctx, rb->conv[n - 1].c, n == 3 ? t2 : t1, PGD_ACT_RELU, sum, sum,
                                err);
    if (!rc && idt) {
        pgd_tensor_destroy(*x);
        *x = idt;
        idt = NULL;
    }
    pgd_tensor_destroy(t1);
    pgd_tensor_destroy(t2);
    pgd_tensor_destroy(idt);
    return rc;
}

/* The stem: images [B, 3, H, W] uploaded, to NHWC, conv1 + BN + ReLU, 3x3/2 max-pool into a
 * new *x (NULL on error). */
static int stem_forward(resnet_model *m, const float *images, int B, int H, int W, pgd_tensor **x,
                        pgd_error **err)
{
    pgd_ctx *ctx = m->ctx;
    pgd_tensor *img = NULL, *nhwc = NULL, *t = NULL;
    *x = NULL;
    int64_t is[4] = {B, 3, H, W};
    int rc = model_upload(ctx, images, 4, is, &img, err);
    if (!rc)
        rc = new4(ctx, B, H, W, 3, &nhwc, err);
    if (!rc)
        rc = pgd_nchw_to_nhwc(ctx, img, nhwc, err);
    pgd_tensor_destroy(img);
    if (!rc)
        rc = conv_run(ctx, &m->stem, nhwc, PGD_ACT_RELU, NULL, &t, err);
    pgd_tensor_destroy(nhwc);
    if (!rc) {
        int64_t ph = (dimv(t, 1) + 2 - 3) / 2 + 1, pw = (dimv(t, 2) + 2 - 3) / 2 + 1;
        rc = new4(ctx, B, ph, pw, dimv(t, 3), x, err);
        if (!rc)
            rc = pgd_maxpool2d(ctx, t, 3, 2, 1, *x, err);
    }
    pgd_tensor_destroy(t);
    if (rc) {
        pgd_tensor_destroy(*x);
        *x = NULL;
    }
    return rc;
}

/* The time spent in the residual layers and in the non-local blocks (ms); with `timed` the
 * queue is drained at every switch between them, so each gets its own. */
typedef struct layer_times {
    int timed;
    double layers, nonlocal;
} layer_times;

/* Replaces *x by the output of non-local block nb (with the affinity when aff is non-NULL). */
static int nl_step(resnet_model *m, const nl_block *nb, pgd_tensor **x, resnet_affinity *aff,
                   layer_times *lt, pgd_error **err)
{
    double a = model_now_ms();
    int rc = PGD_OK;
    double a2 = model_stage_end(m->ctx, lt->timed, &rc, err);
    lt->layers += a2 - a;
    pgd_tensor *z = NULL;
    if (!rc)
        rc = nl_forward(m, nb, *x, aff, &z, err);
    lt->nonlocal += model_stage_end(m->ctx, lt->timed, &rc, err) - a2;
    pgd_tensor_destroy(*x);
    *x = z;
    return rc;
}

/* Every residual block in order, each non-local block before the block it precedes; *x is
 * replaced by the output of the last. The first non-local block gives the affinity. */
static int layers_forward(resnet_model *m, pgd_tensor **x, resnet_affinity *aff, layer_times *lt,
                          pgd_error **err)
{
    int rc = PGD_OK, first_nl = 1;
    block_pos p = {0};
    while (!rc && resnet_next_block(&m->cfg, &p)) {
        int si = resnet_site_index(&m->cfg, p.layer, p.block);
        if (si >= 0) {
            rc = nl_step(m, &m->nl[si], x, first_nl ? aff : NULL, lt, err);
            first_nl = 0;
            if (!rc)
                rc = model_probe_tensor(m->probe, *x, err, "nonlocal.layer%d.%d%s", p.layer,
                                        p.block, m->nl[si].site.identity ? " (--nonlocal)" : "");
            if (rc)
                break;
        }
        double a = model_now_ms();
        rc = block_forward(m, &m->blocks[p.layer - 1][p.block], x, err);
        lt->layers += model_now_ms() - a;
        if (!rc)
            rc = model_probe_tensor(m->probe, *x, err, "layer%d.%d", p.layer, p.block);
    }
    double a = model_now_ms();
    lt->layers += model_stage_end(m->ctx, lt->timed, &rc, err) - a;
    return rc;
}

/* The head: global average pool, fc, logits [B, classes] downloaded. */
static int head_forward(resnet_model *m, const pgd_tensor *x, int B, float *logits, pgd_error **err)
{
    pgd_ctx *ctx = m->ctx;
    pgd_tensor *feat = NULL, *out = NULL;
    int64_t fs[2] = {B, m->cfg.out[3]};
    int rc = pgd_tensor_create(ctx, 2, fs, &feat, err);
    if (!rc)
        rc = pgd_global_avgpool(ctx, x, feat, err);
    if (!rc) {
        int64_t os[2] = {B, m->cfg.classes};
        rc = pgd_tensor_create(ctx, 2, os, &out, err);
    }
    if (!rc)
        rc = model_probe_tensor(m->probe, feat, err, "avgpool");
    if (!rc)
        rc = pgd_linear_forward(ctx, m->fc, feat, PGD_ACT_NONE, NULL, out, err);
    if (!rc)
        rc = model_probe_tensor(m->probe, out, err, "fc");
    if (!rc)
        rc = pgd_tensor_download(out, logits, err);
    pgd_tensor_destroy(feat);
    pgd_tensor_destroy(out);
    return rc;
}

static int forward_pass(resnet_model *m, const float *images, int B, int H, int W, float *logits,
                        resnet_affinity *aff, double times[5], pgd_error **err)
{
    if (B < 1 || H < 32 || W < 32)
        return pgd_error_set(err, PGD_ERR_SHAPE,
                             "ResNet input must be at least 1 x 3 x 32 x 32, got %d x 3 x %d x %d",
                             B, H, W);
    if (m->cfg.headless)
        return pgd_error_set(err, PGD_ERR_UNSUPPORTED,
                             "a headless ResNet backbone has no logits (resnet_features)");
    double t0 = model_now_ms();
    pgd_tensor *x = NULL;
    int rc = stem_forward(m, images, B, H, W, &x, err);
    if (!rc)
        rc = model_probe_tensor(m->probe, x, err, "conv1, bn1, maxpool (stem)");
    double ts = model_stage_end(m->ctx, times != NULL, &rc, err) - t0;
    layer_times lt = {times != NULL, 0, 0};
    if (!rc)
        rc = layers_forward(m, &x, aff, &lt, err);
    double a = model_now_ms();
    if (!rc)
        rc = head_forward(m, x, B, logits, err);
    double th = model_now_ms() - a;
    pgd_tensor_destroy(x);
    if (times && !rc) {
        times[0] = ts;
        times[1] = lt.layers;
        times[2] = lt.nonlocal;
        times[3] = th;
        times[4] = model_now_ms() - t0;
    }
    return rc;
}

int resnet_features(resnet_model *m, const float *images, int B, int H, int W, pgd_tensor **c5,
                    pgd_error **err)
{
    *c5 = NULL;
    if (B < 1 || H < 32 || W < 32)
        return pgd_error_set(err, PGD_ERR_SHAPE,
                             "ResNet input must be at least 1 x 3 x 32 x 32, got %d x 3 x %d x %d",
                             B, H, W);
    pgd_tensor *x = NULL;
    int rc = stem_forward(m, images, B, H, W, &x, err);
    layer_times lt = {0, 0, 0};
    if (!rc)
        rc = layers_forward(m, &x, NULL, &lt, err);
    if (rc) {
        pgd_tensor_destroy(x);
        return rc;
    }
    *c5 = x;
    return PGD_OK;
}

int resnet_last_split(const resnet_model *m)
{
    return m->batching.last_split;
}

int resnet_find_nonfinite(resnet_model *m, const float *image, int H, int W, model_probe *p,
                          pgd_error **err)
{
    memset(p, 0, sizeof *p);
    float *logits = malloc((size_t)m->cfg.classes * sizeof *logits);
    if (!logits)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "resnet: logits");
    m->probe = p;
    int rc = forward_pass(m, image, 1, H, W, logits, NULL, NULL, err);
    m->probe = NULL;
    free(logits);
    return rc;
}

/* One pass of resnet_forward over images [first, first + n); the affinity rows at their
 * offset, the grid and query it reports copied back. */
typedef struct resnet_pass_args {
    resnet_model *m;
    const float *images;
    int H, W;
    float *logits;
    resnet_affinity *aff;
    int cells;
} resnet_pass_args;

static int resnet_pass(void *u, int first, int n, double *times, pgd_error **err)
{
    resnet_pass_args *a = u;
    size_t i = (size_t)first;
    resnet_affinity part;
    if (a->aff) {
        part = *a->aff;
        part.row = a->aff->row + i * (size_t)a->cells;
    }
    int rc =
        forward_pass(a->m, a->images + i * 3 * (size_t)a->H * (size_t)a->W, n, a->H, a->W,
                     a->logits + i * (size_t)a->m->cfg.classes, a->aff ? &part : NULL, times, err);
    if (!rc && a->aff) {
        a->aff->gh = part.gh;
        a->aff->gw = part.gw;
        a->aff->qi = part.qi;
        a->aff->qj = part.qj;
    }
    return rc;
}

/* As vit_forward: a batch too big for the device runs as several passes of at most b images,
 * b from the free global memory and one image's tensors (estimated from the widest stage, or
 * measured in an earlier pass at this size), halved again on an allocation failure. */
int resnet_forward(resnet_model *m, const float *images, int B, int H, int W, float *logits,
                   resnet_affinity *aff, double times[5], pgd_error **err)
{
    const resnet_config *c = &m->cfg;
    if (B < 1 || H < 32 || W < 32)
        return forward_pass(m, images, B, H, W, logits, aff, times, err);
    /* The widest activation: the stem's output or a layer's (strides 4, 8, 16, 32). */
    uint64_t hw2 = (uint64_t)((H + 1) / 2) * (uint64_t)((W + 1) / 2);
    uint64_t widest = hw2 * (uint64_t)c->stem;
    for (int L = 0; L < 4; L++) {
        uint64_t s = (uint64_t)4 << L;
        uint64_t px = (uint64_t)((H + s - 1) / s) * (uint64_t)((W + s - 1) / s);
        uint64_t ch = (uint64_t)(c->out[L] > c->width[L] ? c->out[L] : c->width[L]);
        if (px * ch > widest)
            widest = px * ch;
    }
    /* The non-local blocks are fused: no N x N' scratch beyond the activations. */
    int kh = 0, kw = 0;
    resnet_nl_grid(m, H, W, &kh, &kw);
    uint64_t per = 4u * (6u * (uint64_t)H * (uint64_t)W + 5u * widest);
    per += per / 4;
    uint64_t largest = 4u * widest;
    int cells = aff ? kh * kw : 0; /* the affinity row covers the non-local grid */
    resnet_pass_args a = {m, images, H, W, logits, aff, cells};
    return model_forward_batched(m->ctx, &m->batching, H, W, 0, B, per, largest, "resnet", 5,
                                 resnet_pass, &a, times, err);
}
