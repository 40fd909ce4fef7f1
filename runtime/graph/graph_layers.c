/* graph_layers.c — the graph's layers: convolutions and pools on NHWC buffers (a convolution's
 * output is an NHWC buffer seen as the NCHW value ONNX names, so the next convolution reads it
 * without a copy), row ops, linear layers prepared once (weights packed for the device on first
 * use), and the fused groups of graph_fuse.c. */
#include "graph.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static gvalue *val(pgd_graph *g, int v)
{
    return v >= 0 ? &g->values[v] : NULL;
}

static const ghost *host_of(pgd_graph *g, int v)
{
    return v >= 0 && g->values[v].kind != V_DEVICE ? g->values[v].h : NULL;
}

static void set_out(pgd_graph *g, int v, gview *y)
{
    if (v < 0) {
        pgd__gview_drop(y);
        return;
    }
    pgd__gview_drop(&g->values[v].v);
    g->values[v].v = *y;
}

/* x [N, C, H, W] (any strides) as a contiguous NHWC buffer. */
static int nhwc_of(pgd_graph *g, const gview *x, gview *out, pgd_error **err)
{
    gview p = *x;
    static const int perm[4] = {0, 2, 3, 1};
    for (int d = 0; d < 4; d++)
        p.dim[d] = x->dim[perm[d]], p.st[d] = x->st[perm[d]];
    return pgd__gview_materialise(g, &p, out, err);
}

/* An NHWC buffer [N, H, W, C] seen as [N, C, H, W]. */
static void as_nchw(gview *y)
{
    int64_t d[4], s[4];
    memcpy(d, y->dim, sizeof d);
    memcpy(s, y->st, sizeof s);
    y->dim[1] = d[3], y->st[1] = s[3];
    y->dim[2] = d[1], y->st[2] = s[1];
    y->dim[3] = d[2], y->st[3] = s[2];
}

/* ---- convolution ------------------------------------------------------------------------ */

typedef struct conv_prep {
    pgd_conv2d *conv;
    pgd_conv2d_desc d;
    int pads[4], asym;
} conv_prep;

static void conv_free(void *p)
{
    conv_prep *c = p;
    pgd_conv2d_destroy(c->conv);
    free(c);
}

static int conv_prepare(pgd_graph *g, gnode *n, const gnode *bn, pgd_error **err)
{
    const ghost *w = host_of(g, n->in[1]), *b = n->nin > 2 ? host_of(g, n->in[2]) : NULL;
    if (!w || !w->f || w->nd != 4)
        return pgd__graph_fail(err, PGD_ERR_UNSUPPORTED, g, n,
                               "only 2-D convolutions with a constant float weight [O, I, kH, "
                               "kW] are supported");
    const int64_t *a;
    int na;
    conv_prep *c = calloc(1, sizeof *c);
    if (!c)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    c->d.cout = w->dim[0];
    c->d.groups = (int)pgd__graph_attr_i(n, "group", 1);
    c->d.cin = w->dim[1] * c->d.groups;
    c->d.kh = (int)w->dim[2], c->d.kw = (int)w->dim[3];
    c->d.stride_h = c->d.stride_w = c->d.dil_h = c->d.dil_w = 1;
    if ((na = pgd__graph_attr_ints(n, "strides", &a)) == 2)
        c->d.stride_h = (int)a[0], c->d.stride_w = (int)a[1];
    if ((na = pgd__graph_attr_ints(n, "dilations", &a)) == 2)
        c->d.dil_h = (int)a[0], c->d.dil_w = (int)a[1];
    if ((na = pgd__graph_attr_ints(n, "pads", &a)) == 4) {
        /* ONNX: [top, left, bottom, right] */
        c->pads[0] = (int)a[0], c->pads[1] = (int)a[1], c->pads[2] = (int)a[2];
        c->pads[3] = (int)a[3];
    }
    c->asym = c->pads[0] != c->pads[2] || c->pads[1] != c->pads[3];
    if (!c->asym)
        c->d.pad_h = c->pads[0], c->d.pad_w = c->pads[1];
    pgd_batchnorm bnp, *bnpp = NULL;
    if (bn) {
        const ghost *s = host_of(g, bn->in[1]), *bb = host_of(g, bn->in[2]),
                    *m = host_of(g, bn->in[3]), *v = host_of(g, bn->in[4]);
        if (!s || !bb || !m || !v || !s->f || !bb->f || !m->f || !v->f || s->n != c->d.cout ||
            bb->n != c->d.cout || m->n != c->d.cout || v->n != c->d.cout) {
            long long cout = (long long)c->d.cout;
            free(c);
            return pgd__graph_fail(err, PGD_ERR_SHAPE, g, bn,
                                   "scale, bias, mean and var must be %lld floats", cout);
        }
        bnp = (pgd_batchnorm){s->f, bb->f, m->f, v->f, pgd__graph_attr_f(bn, "epsilon", 1e-5f)};
        bnpp = &bnp;
    }
    if (b && (!b->f || b->n != c->d.cout)) {
        long long cout = (long long)c->d.cout;
        free(c);
        return pgd__graph_fail(err, PGD_ERR_SHAPE, g, n, "the bias must be %lld floats", cout);
    }
    int rc = pgd_conv2d_create(g->ctx, &c->d, w->f, b ? b->f : NULL, bnpp, &c->conv, err);
    if (rc) {
        free(c);
        return rc;
    }
    n->prep = c;
    n->prep_free = conv_free;
    return PGD_OK;
}

int pgd__graph_exec_conv(pgd_graph *g, gnode *n, const gfuse *f, pgd_error **err)
{
    const gnode *bn = f && f->bias >= 0 ? &g->nodes[f->bias] : NULL;
    const char *ap = pgd__graph_attr_s(n, "auto_pad", "NOTSET");
    int rc = PGD_OK;
    if (!n->prep && (rc = conv_prepare(g, n, bn, err)))
        return rc;
    conv_prep *c = n->prep;
    gvalue *xv = val(g, n->in[0]);
    if (xv->kind != V_DEVICE || xv->v.nd != 4 || xv->v.dim[1] != c->d.cin)
        return pgd__graph_fail(err, PGD_ERR_SHAPE, g, n,
                               "the input must be a device tensor [N, %lld, H, W]",
                               (long long)c->d.cin);
    int pads[4] = {c->pads[0], c->pads[1], c->pads[2], c->pads[3]};
    int use_pads = c->asym;
    if (strcmp(ap, "NOTSET") && strcmp(ap, "VALID")) {
        pgd_conv2d_desc d = c->d;
        pgd_conv2d_same_pads(&d, xv->v.dim[2], xv->v.dim[3], !strcmp(ap, "SAME_LOWER"), pads);
        use_pads = 1;
    }
    if (use_pads && (c->d.pad_h || c->d.pad_w))
        return pgd__graph_fail(err, PGD_ERR_UNSUPPORTED, g, n, "auto_pad with explicit pads");
    int64_t oh, ow, H = xv->v.dim[2] + (use_pads ? pads[0] + pads[2] : 0);
    int64_t W = xv->v.dim[3] + (use_pads ? pads[1] + pads[3] : 0);
    pgd_conv2d_desc d0 = c->d;
    if (use_pads)
        d0.pad_h = d0.pad_w = 0;
    pgd_conv2d_out_size(&d0, H, W, &oh, &ow);
    if (oh <= 0 || ow <= 0)
        return pgd__graph_fail(err, PGD_ERR_SHAPE, g, n, "the kernel does not fit the input");
    gview x, y, r = {0};
    if ((rc = nhwc_of(g, &xv->v, &x, err)))
        return rc;
    int64_t dim[4] = {xv->v.dim[0], oh, ow, c->d.cout};
    rc = pgd__gview_new(g, 4, dim, &y, err);
    if (!rc && f && f->residual >= 0)
        rc = nhwc_of(g, &g->values[f->residual].v, &r, err);
    if (!rc) {
        pgd_tensor *xt = pgd__gview_tensor(&x), *yt = pgd__gview_tensor(&y);
        pgd_tensor *rt = r.b ? pgd__gview_tensor(&r) : NULL;
        pgd_act act = f ? f->act : PGD_ACT_NONE;
        rc = use_pads ? pgd_conv2d_forward_pads(g->ctx, c->conv, xt, pads, act, rt, yt, err)
                      : pgd_conv2d_forward(g->ctx, c->conv, xt, act, rt, yt, err);
    }
    pgd__gview_drop(&x);
    pgd__gview_drop(&r);
    if (rc) {
        pgd__gview_drop(&y);
        return rc;
    }
    g->flops += 2.0 * (double)dim[0] * (double)oh * (double)ow * (double)c->d.cout *
                (double)(c->d.cin / (c->d.groups ? c->d.groups : 1)) * c->d.kh * c->d.kw;
    as_nchw(&y);
    set_out(g, f ? f->out : n->out[0], &y);
    return PGD_OK;
}

/* ---- pooling ---------------------------------------------------------------------------- */

int pgd__graph_exec_pool(pgd_graph *g, gnode *n, pgd_error **err)
{
    gvalue *xv = val(g, n->in[0]);
    if (xv->kind != V_DEVICE || xv->v.nd != 4)
        return pgd__graph_fail(err, PGD_ERR_UNSUPPORTED, g, n,
                               "only 2-D pooling of [N, C, H, W] is supported");
    if (n->nout > 1 && n->out[1] >= 0)
        return pgd__graph_fail(err, PGD_ERR_UNSUPPORTED, g, n, "the Indices output");
    gview x, y;
    int rc = nhwc_of(g, &xv->v, &x, err);
    if (rc)
        return rc;
    int global = !strncmp(n->op, "Global", 6);
    int64_t N = xv->v.dim[0], C = xv->v.dim[1];
    if (global) {
        int64_t dim[2] = {N, C};
        if (!(rc = pgd__gview_new(g, 2, dim, &y, err))) {
            rc =
                strstr(n->op, "Average")
                    ? pgd_global_avgpool(g->ctx, pgd__gview_tensor(&x), pgd__gview_tensor(&y), err)
                    : pgd_global_maxpool(g->ctx, pgd__gview_tensor(&x), pgd__gview_tensor(&y), err);
            int64_t d4[4] = {N, C, 1, 1};
            gview y4;
            if (!rc && pgd__gview_reshape(&y, 4, d4, &y4))
                y = y4;
        }
    } else {
        pgd_pool_desc d = {.mode = !strcmp(n->op, "MaxPool") ? PGD_POOL_MAX : PGD_POOL_AVG,
                           .sh = 1,
                           .sw = 1,
                           .dh = 1,
                           .dw = 1};
        const int64_t *a;
        if (pgd__graph_attr_ints(n, "kernel_shape", &a) != 2) {
            pgd__gview_drop(&x);
            return pgd__graph_fail(err, PGD_ERR_UNSUPPORTED, g, n, "kernel_shape of 2 dims");
        }
        d.kh = (int)a[0], d.kw = (int)a[1];
        if (pgd__graph_attr_ints(n, "strides", &a) == 2)
            d.sh = (int)a[0], d.sw = (int)a[1];
        if (pgd__graph_attr_ints(n, "dilations", &a) == 2)
            d.dh = (int)a[0], d.dw = (int)a[1];
        if (pgd__graph_attr_ints(n, "pads", &a) == 4)
            d.pad_top = (int)a[0], d.pad_left = (int)a[1], d.pad_bottom = (int)a[2],
            d.pad_right = (int)a[3];
        d.ceil_mode = (int)pgd__graph_attr_i(n, "ceil_mode", 0);
        d.count_include_pad = (int)pgd__graph_attr_i(n, "count_include_pad", 0);
        const char *ap = pgd__graph_attr_s(n, "auto_pad", "NOTSET");
        if (strcmp(ap, "NOTSET") && strcmp(ap, "VALID")) {
            pgd_conv2d_desc cd = {.kh = d.kh,
                                  .kw = d.kw,
                                  .stride_h = d.sh,
                                  .stride_w = d.sw,
                                  .dil_h = d.dh,
                                  .dil_w = d.dw};
            int p[4];
            pgd_conv2d_same_pads(&cd, xv->v.dim[2], xv->v.dim[3], !strcmp(ap, "SAME_LOWER"), p);
            d.pad_top = p[0], d.pad_left = p[1], d.pad_bottom = p[2], d.pad_right = p[3];
        }
        int64_t oh, ow;
        rc = pgd_pool2d_output_size(&d, xv->v.dim[2], xv->v.dim[3], &oh, &ow, err);
        int64_t dim[4] = {N, oh, ow, C};
        if (!rc && !(rc = pgd__gview_new(g, 4, dim, &y, err))) {
            rc = pgd_pool2d(g->ctx, pgd__gview_tensor(&x), &d, pgd__gview_tensor(&y), NULL, err);
            as_nchw(&y);
        }
    }
    pgd__gview_drop(&x);
    if (rc) {
        pgd__gview_drop(&y);
        return rc;
    }
    set_out(g, n->out[0], &y);
    return PGD_OK;
}

/* ---- row ops ---------------------------------------------------------------------------- */

typedef struct row_prep {
    gview t[4];
} row_prep;

static void row_free(void *p)
{
    row_prep *r = p;
    for (int k = 0; k < 4; k++)
        pgd__gview_drop(&r->t[k]);
    free(r);
}

/* Input k uploaded once (kept in the node) as a 1-D tensor, or NULL when absent. */
static int row_param(pgd_graph *g, gnode *n, int k, pgd_tensor **out, pgd_error **err)
{
    *out = NULL;
    if (k >= n->nin || n->in[k] < 0)
        return PGD_OK;
    if (!n->prep) {
        n->prep = calloc(1, sizeof(row_prep));
        n->prep_free = row_free;
        if (!n->prep)
            return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    }
    row_prep *r = n->prep;
    if (!r->t[k - 1].b) {
        const ghost *h = host_of(g, n->in[k]);
        if (!h)
            return pgd__graph_fail(err, PGD_ERR_UNSUPPORTED, g, n, "input %d must be a constant",
                                   k);
        int rc = pgd__graph_const_tensor(g, h, 1, &h->n, &r->t[k - 1], err);
        if (rc)
            return rc;
    }
    *out = pgd__gview_tensor(&r->t[k - 1]);
    return PGD_OK;
}

static int hard_sigmoid(pgd_graph *g, gnode *n, pgd_tensor *x, pgd_tensor *y, pgd_error **err)
{
    int swish = !strcmp(n->op, "HardSwish");
    float alpha = swish ? 1.0f / 6 : pgd__graph_attr_f(n, "alpha", 0.2f);
    float beta = swish ? 0.5f : pgd__graph_attr_f(n, "beta", 0.5f);
    pgd_tensor *b;
    int64_t one = 1;
    int rc = pgd_tensor_create(g->ctx, 1, &one, &b, err);
    if (rc)
        return rc;
    rc = pgd_tensor_fill(b, beta, err);
    if (!rc)
        rc = pgd_scale(g->ctx, x, alpha, y, err);
    int64_t n1 = pgd_tensor_get_numel(y);
    pgd_tensor_reshape(y, 1, &n1, NULL);
    pgd_tensor_reshape(x, 1, &n1, NULL);
    if (!rc)
        rc = pgd_binary(g->ctx, PGD_BINARY_ADD, y, b, y, err);
    if (!rc)
        rc = pgd_clip(g->ctx, y, 0.0f, 1.0f, y, err);
    if (!rc && swish)
        rc = pgd_binary(g->ctx, PGD_BINARY_MUL, y, x, y, err);
    pgd_tensor_destroy(b);
    return rc;
}

/* A reduction's axes (input or attribute, -1 naxes: all) and its output dims. */
static int reduce_shape(pgd_graph *g, gnode *n, const gview *x, int64_t *dim, int *ynd, int *axes,
                        int *naxes, pgd_error **err)
{
    int nd = x->nd, keep = (int)pgd__graph_attr_i(n, "keepdims", 1), mark[PGD_MAX_DIMS] = {0};
    const ghost *h = n->nin > 1 ? host_of(g, n->in[1]) : NULL;
    const int64_t *aa = NULL;
    int na =
        h && h->i ? (int)(h->n <= PGD_MAX_DIMS ? h->n : -1) : pgd__graph_attr_ints(n, "axes", &aa);
    if (h && h->i)
        aa = h->i;
    if (na > PGD_MAX_DIMS || (n->nin > 1 && n->in[1] >= 0 && !h))
        return pgd__graph_fail(err, PGD_ERR_UNSUPPORTED, g, n, "axes must be host constants");
    *naxes = na < 0 || (na == 0 && !pgd__graph_attr_i(n, "noop_with_empty_axes", 0)) ? -1 : na;
    for (int j = 0; j < *naxes; j++) {
        int64_t a = aa[j] < 0 ? aa[j] + nd : aa[j];
        if (a < 0 || a >= nd)
            return pgd__graph_fail(err, PGD_ERR_SHAPE, g, n, "axis %lld out of range",
                                   (long long)aa[j]);
        axes[j] = (int)a;
        mark[a] = 1;
    }
    *ynd = 0;
    for (int d = 0; d < nd; d++) {
        int r = *naxes < 0 || mark[d];
        if (!r)
            dim[(*ynd)++] = x->dim[d];
        else if (keep)
            dim[(*ynd)++] = 1;
    }
    return PGD_OK;
}

int pgd__graph_exec_rowop(pgd_graph *g, gnode *n, pgd_error **err)
{
    gview xin, x, y = {0};
    int rc = pgd__graph_input_view(g, n, 0, &xin, err);
    if (rc)
        return rc;
    rc = pgd__gview_materialise(g, &xin, &x, err);
    pgd__gview_drop(&xin);
    if (rc)
        return rc;
    const char *op = n->op;
    int nd = x.nd;
    int64_t dim[PGD_MAX_DIMS];
    memcpy(dim, x.dim, sizeof dim);
    int red = !strncmp(op, "Reduce", 6), ynd = nd;
    int axes[PGD_MAX_DIMS], naxes = -1, keep = (int)pgd__graph_attr_i(n, "keepdims", 1);
    if (red && (rc = reduce_shape(g, n, &x, dim, &ynd, axes, &naxes, err))) {
        pgd__gview_drop(&x);
        return rc;
    }
    rc = pgd__gview_new(g, ynd, dim, &y, err);
    pgd_tensor *xt = pgd__gview_tensor(&x), *yt = rc ? NULL : pgd__gview_tensor(&y);
    if (rc) {
    } else if (strstr(op, "Softmax")) {
        int64_t axis = pgd__graph_attr_i(n, "axis", g->opset >= 13 ? -1 : 1);
        axis = axis < 0 ? axis + nd : axis;
        if (g->opset < 13 && axis != nd - 1)
            rc = pgd__graph_fail(err, PGD_ERR_UNSUPPORTED, g, n,
                                 "opset < 13 softmax over dims %lld.. (only the last)",
                                 (long long)axis);
        else
            rc = pgd_softmax_axis(g->ctx, xt, (int)axis, 1.0f, op[0] == 'L', yt, err);
    } else if (!strcmp(op, "LayerNormalization")) {
        pgd_tensor *w, *b;
        int64_t axis = pgd__graph_attr_i(n, "axis", -1);
        if (n->nout > 1 && (n->out[1] >= 0 || (n->nout > 2 && n->out[2] >= 0)))
            rc = pgd__graph_fail(err, PGD_ERR_UNSUPPORTED, g, n, "the Mean/InvStdDev outputs");
        if (!rc && !(rc = row_param(g, n, 1, &w, err)) && !(rc = row_param(g, n, 2, &b, err)))
            rc = pgd_layernorm_axis(g->ctx, xt, (int)axis, w, b,
                                    pgd__graph_attr_f(n, "epsilon", 1e-5f), yt, NULL, NULL, err);
        if (!rc && !b && w) /* ONNX's bias is optional, Pagoda's comes with the scale */
            rc = pgd__graph_fail(err, PGD_ERR_UNSUPPORTED, g, n, "a scale without a bias");
    } else if (!strcmp(op, "BatchNormalization")) {
        pgd_tensor *s, *b, *m, *v;
        if (pgd__graph_attr_i(n, "training_mode", 0))
            rc = pgd__graph_fail(err, PGD_ERR_UNSUPPORTED, g, n, "training_mode");
        if (!rc && !(rc = row_param(g, n, 1, &s, err)) && !(rc = row_param(g, n, 2, &b, err)) &&
            !(rc = row_param(g, n, 3, &m, err)) && !(rc = row_param(g, n, 4, &v, err)))
            rc = pgd_batch_norm(g->ctx, xt, m, v, s, b, pgd__graph_attr_f(n, "epsilon", 1e-5f), yt,
                                err);
    } else if (red) {
        static const char *const names[] = {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"};
        int code = -1;
        for (int k = 0; k < 4; k++)
            if (!strcmp(op, names[k]))
                code = k;
        rc = code < 0 ? pgd__graph_fail(err, PGD_ERR_UNSUPPORTED, g, n, "this reduction")
                      : pgd_reduce(g->ctx, (pgd_reduce_op)code, xt, naxes < 0 ? NULL : axes,
                                   naxes < 0 ? 0 : naxes, keep, yt, err);
    } else {
        rc = hard_sigmoid(g, n, xt, yt, err);
        gview yy;
        if (!rc && pgd__gview_reshape(&y, x.nd, x.dim, &yy))
            y = yy;
    }
    pgd__gview_drop(&x);
    if (rc) {
        pgd__gview_drop(&y);
        return rc;
    }
    set_out(g, n->out[0], &y);
    return PGD_OK;
}

/* ---- matrix products -------------------------------------------------------------------- */

typedef struct lin_prep {
    pgd_linear *l;
    int64_t in, out;
} lin_prep;

static void lin_free(void *p)
{
    lin_prep *l = p;
    pgd_linear_destroy(l->l);
    free(l);
}

/* The linear layer of MatMul(x, B) / Gemm(x, B, C): W = Bᵀ (or B with transB), bias from the
 * Add (bias_v) or Gemm's C; 0 when the constants do not have the shapes a linear layer needs
 * (the caller runs the nodes as they are). */
static int linear_prepare(pgd_graph *g, gnode *n, int bias_v, int *ok, pgd_error **err)
{
    int gemm = !strcmp(n->op, "Gemm");
    const ghost *b = host_of(g, n->in[1]);
    const ghost *c = bias_v >= 0          ? host_of(g, bias_v)
                     : gemm && n->nin > 2 ? host_of(g, n->in[2])
                                          : NULL;
    int tb = gemm ? (int)pgd__graph_attr_i(n, "transB", 0) : 0;
    *ok = 0;
    if (!b || !b->f || b->nd != 2 ||
        (gemm && (pgd__graph_attr_i(n, "transA", 0) || pgd__graph_attr_f(n, "alpha", 1) != 1 ||
                  (c && pgd__graph_attr_f(n, "beta", 1) != 1))))
        return PGD_OK;
    int64_t K = tb ? b->dim[1] : b->dim[0], N = tb ? b->dim[0] : b->dim[1];
    if (c && (!c->f || c->n != N || (c->nd >= 1 && c->dim[c->nd - 1] != N)))
        return PGD_OK;
    float *wt = malloc(sizeof(float) * (size_t)(K * N > 0 ? K * N : 1));
    if (!wt)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    for (int64_t o = 0; o < N; o++)
        for (int64_t i = 0; i < K; i++)
            wt[o * K + i] = tb ? b->f[o * K + i] : b->f[i * N + o];
    pgd_tensor *w = NULL, *bias = NULL;
    int64_t wd[2] = {N, K};
    lin_prep *lp = calloc(1, sizeof *lp);
    int rc = lp ? pgd_tensor_create_from(g->ctx, 2, wd, wt, &w, err)
                : pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    free(wt);
    if (!rc && c)
        rc = pgd_tensor_create_from(g->ctx, 1, &N, c->f, &bias, err);
    if (!rc)
        rc = pgd_linear_create(g->ctx, w, bias, &lp->l, err);
    pgd_tensor_destroy(w);
    pgd_tensor_destroy(bias);
    if (rc) {
        free(lp);
        return rc;
    }
    lp->in = K, lp->out = N;
    n->prep = lp;
    n->prep_free = lin_free;
    *ok = 1;
    return PGD_OK;
}

/* y = x·Wᵀ + b through the prepared layer (act, residual as the group says). */
static int linear_run(pgd_graph *g, gnode *n, const gfuse *f, int *done, pgd_error **err)
{
    lin_prep *lp = n->prep;
    gvalue *xv = val(g, n->in[0]);
    *done = 0;
    if (xv->kind != V_DEVICE || xv->v.nd < 1 || xv->v.dim[xv->v.nd - 1] != lp->in)
        return PGD_OK;
    gview x, y, r = {0};
    int rc = pgd__gview_materialise(g, &xv->v, &x, err);
    if (rc)
        return rc;
    int64_t dim[PGD_MAX_DIMS], M = 1;
    memcpy(dim, x.dim, sizeof dim);
    dim[x.nd - 1] = lp->out;
    for (int d = 0; d < x.nd - 1; d++)
        M *= x.dim[d];
    rc = pgd__gview_new(g, x.nd, dim, &y, err);
    if (!rc && f && f->residual >= 0) {
        gview *rv = &g->values[f->residual].v;
        int same = rv->nd == y.nd;
        for (int d = 0; same && d < y.nd; d++)
            same = rv->dim[d] == y.dim[d];
        if (!same) {
            pgd__gview_drop(&x);
            pgd__gview_drop(&y);
            return PGD_OK; /* a broadcasting residual: the nodes as they are */
        }
        rc = pgd__gview_materialise(g, rv, &r, err);
    }
    if (!rc)
        rc = pgd_linear_forward(g->ctx, lp->l, pgd__gview_tensor(&x), f ? f->act : PGD_ACT_NONE,
                                r.b ? pgd__gview_tensor(&r) : NULL, pgd__gview_tensor(&y), err);
    pgd__gview_drop(&x);
    pgd__gview_drop(&r);
    if (rc) {
        pgd__gview_drop(&y);
        return rc;
    }
    g->flops += 2.0 * (double)M * (double)lp->in * (double)lp->out;
    set_out(g, f ? f->out : n->out[0], &y);
    *done = 1;
    return PGD_OK;
}

int pgd__graph_exec_matmul(pgd_graph *g, gnode *n, pgd_error **err)
{
    int rc, done = 0, ok = 1;
    if (!n->prep && g->values[n->in[0]].kind == V_DEVICE && n->in[1] >= 0 &&
        g->values[n->in[1]].kind != V_DEVICE && (rc = linear_prepare(g, n, -1, &ok, err)))
        return rc;
    if (n->prep && (rc = linear_run(g, n, NULL, &done, err)))
        return rc;
    if (done)
        return PGD_OK;
    if (!strcmp(n->op, "Gemm"))
        return pgd__graph_fail(err, PGD_ERR_UNSUPPORTED, g, n,
                               "only Gemm(x, constant B[, constant C]) with transA 0, alpha 1 "
                               "and beta 1 is supported");
    gview a0, b0, a, b, y;
    if ((rc = pgd__graph_input_view(g, n, 0, &a0, err)))
        return rc;
    if ((rc = pgd__graph_input_view(g, n, 1, &b0, err))) {
        pgd__gview_drop(&a0);
        return rc;
    }
    rc = pgd__gview_materialise(g, &a0, &a, err);
    if (!rc && (rc = pgd__gview_materialise(g, &b0, &b, err)))
        pgd__gview_drop(&a);
    pgd__gview_drop(&a0);
    pgd__gview_drop(&b0);
    if (rc)
        return rc;
    /* numpy.matmul's shape */
    int64_t dim[PGD_MAX_DIMS];
    int nd = a.nd > b.nd ? a.nd : b.nd;
    if (a.nd < 1 || b.nd < 1 || nd > PGD_MAX_DIMS) {
        rc = pgd__graph_fail(err, PGD_ERR_SHAPE, g, n, "operands of 0 dims");
    } else {
        for (int d = 0; d < nd - 2; d++) {
            int da = d - (nd - a.nd), db = d - (nd - b.nd);
            int64_t x = da >= 0 ? a.dim[da] : 1, z = db >= 0 ? b.dim[db] : 1;
            dim[d] = x == 1 ? z : x;
        }
        int k = 0;
        if (a.nd >= 2)
            dim[nd - 2 - (a.nd < 2)] = a.dim[a.nd - 2];
        int ynd = nd;
        if (a.nd == 1 || b.nd == 1)
            ynd = nd - 1 + (a.nd == 1 && b.nd == 1 ? -1 : 0) + (nd == 1 ? 1 : 0);
        (void)k;
        /* rebuild exactly: batch dims, then M (if a is 2-D+), then N (if b is 2-D+) */
        int64_t out[PGD_MAX_DIMS];
        int o = 0;
        for (int d = 0; d < nd - 2; d++)
            out[o++] = dim[d];
        if (a.nd >= 2)
            out[o++] = a.dim[a.nd - 2];
        if (b.nd >= 2)
            out[o++] = b.dim[b.nd - 1];
        (void)ynd;
        if (!(rc = pgd__gview_new(g, o, out, &y, err))) {
            rc = pgd_matmul(g->ctx, pgd__gview_tensor(&a), pgd__gview_tensor(&b),
                            pgd__gview_tensor(&y), err);
            if (rc)
                pgd__gview_drop(&y);
            else {
                int64_t M = a.nd >= 2 ? a.dim[a.nd - 2] : 1, K = a.dim[a.nd - 1];
                int64_t N = b.nd >= 2 ? b.dim[b.nd - 1] : 1, batch = 1;
                for (int d = 0; d < o - 2; d++)
                    batch *= out[d];
                g->flops += 2.0 * (double)batch * (double)M * (double)N * (double)K;
                set_out(g, n->out[0], &y);
            }
        }
    }
    pgd__gview_drop(&a);
    pgd__gview_drop(&b);
    return rc;
}

/* ---- fused groups ----------------------------------------------------------------------- */

/* The group's members one by one (a group whose values do not fit the fused kernel). */
static int run_members(pgd_graph *g, const gfuse *f, pgd_error **err)
{
    int fi = (int)(f - g->fuses) + 1;
    for (int oi = 0; oi < g->nnodes; oi++) {
        gnode *n = &g->nodes[g->order[oi]];
        if (n->fuse != fi)
            continue;
        int rc = pgd__graph_exec_node(g, n, err);
        if (rc)
            return rc;
    }
    /* intermediates die here */
    for (int oi = 0; oi < g->nnodes; oi++) {
        gnode *n = &g->nodes[g->order[oi]];
        if (n->fuse != fi)
            continue;
        for (int k = 0; k < n->nout; k++)
            if (n->out[k] >= 0 && n->out[k] != f->out)
                pgd__gview_drop(&g->values[n->out[k]].v);
    }
    return PGD_OK;
}

static int near(const ghost *h, double want)
{
    return h && h->n == 1 && fabs(pgd__ghost_get(h, 0) - want) <= 1e-4 * fabs(want);
}

/* The erf-GELU constants: x / sqrt 2 (or x · 1/sqrt 2), + 1, · 0.5. */
static int gelu_constants_ok(pgd_graph *g, const gfuse *f)
{
    int fi = (int)(f - g->fuses) + 1, stage = 0, ok = 1;
    for (int oi = 0; oi < g->nnodes && ok; oi++) {
        gnode *n = &g->nodes[g->order[oi]];
        if (n->fuse != fi)
            continue;
        const ghost *c0 = n->nin == 2 ? host_of(g, n->in[0]) : NULL;
        const ghost *c1 = n->nin == 2 ? host_of(g, n->in[1]) : NULL;
        const ghost *c = c1 ? c1 : c0;
        if (!strcmp(n->op, "Div") && stage == 0)
            ok = near(c1, sqrt(2.0)), stage = 1;
        else if (!strcmp(n->op, "Mul") && stage == 0 && c)
            ok = near(c, sqrt(0.5)), stage = 1;
        else if (!strcmp(n->op, "Add") && stage == 1)
            ok = near(c, 1.0), stage = 2;
        else if (!strcmp(n->op, "Mul") && stage == 2 && c && n->out[0] == f->out)
            ok = near(c, 0.5);
    }
    return ok;
}

static int attention_run(pgd_graph *g, const gfuse *f, int *done, pgd_error **err);

int pgd__graph_exec_fused(pgd_graph *g, gfuse *f, pgd_error **err)
{
    gnode *head = &g->nodes[f->head];
    int rc, done = 0, ok = 1;
    g->steps++;
    if (f->kind == F_CONV)
        return pgd__graph_exec_conv(g, head, f, err);
    if (f->kind == F_GELU) {
        if (!gelu_constants_ok(g, f))
            return run_members(g, f, err);
        gview x, y;
        if ((rc = pgd__gview_materialise(g, &g->values[f->q].v, &x, err)))
            return rc;
        if (!(rc = pgd__gview_new(g, x.nd, x.dim, &y, err))) {
            rc = pgd_unary(g->ctx, PGD_UNARY_GELU, pgd__gview_tensor(&x), pgd__gview_tensor(&y),
                           err);
            if (rc)
                pgd__gview_drop(&y);
            else
                set_out(g, f->out, &y);
        }
        pgd__gview_drop(&x);
        return rc;
    }
    if (f->kind == F_ATTENTION) {
        if ((rc = attention_run(g, f, &done, err)))
            return rc;
        return done ? PGD_OK : run_members(g, f, err);
    }
    /* linear */
    if (f->act == PGD_ACT_GELU && !strcmp(g->nodes[f->head].op, "MatMul") &&
        !gelu_constants_ok(g, f))
        return run_members(g, f, err);
    if (!head->prep && (rc = linear_prepare(g, head, f->bias, &ok, err)))
        return rc;
    if (head->prep && (rc = linear_run(g, head, f, &done, err)))
        return rc;
    return done ? PGD_OK : run_members(g, f, err);
}

/* ---- attention -------------------------------------------------------------------------- */

/* The product of the constant scalars of the group's Mul/Div nodes (0 when one is not a
 * scalar). */
static float attention_scale(pgd_graph *g, const gfuse *f)
{
    int fi = (int)(f - g->fuses) + 1;
    double s = 1;
    for (int oi = 0; oi < g->nnodes; oi++) {
        gnode *n = &g->nodes[g->order[oi]];
        if (n->fuse != fi || (strcmp(n->op, "Mul") && strcmp(n->op, "Div")))
            continue;
        const ghost *c = host_of(g, n->in[1]) ? host_of(g, n->in[1]) : host_of(g, n->in[0]);
        if (!c || c->n != 1 || !c->f)
            return 0;
        s = !strcmp(n->op, "Div") ? s / c->f[0] : s * c->f[0];
    }
    return (float)s;
}

/* A [.., t, d] view as pgd_view's (batch, head, token) strides; 0 when it has no unit d stride
 * or more than two batch dims. */
static int as_pgd_view(const gview *v, int64_t *batch, int64_t *heads, pgd_view *pv)
{
    if (v->nd < 2 || v->nd > 4 || v->st[v->nd - 1] != 1)
        return 0;
    int bd = v->nd - 2;
    *batch = bd >= 1 ? v->dim[0] : 1;
    *heads = bd == 2 ? v->dim[1] : 1;
    int64_t n = pgd_tensor_get_numel(v->b->t);
    pgd_tensor_reshape(v->b->t, 1, &n, NULL);
    pv->t = v->b->t;
    pv->offset = v->off;
    pv->batch_stride = bd >= 1 ? v->st[0] : 0;
    pv->head_stride = bd == 2 ? v->st[1] : 0;
    pv->token_stride = v->st[v->nd - 2];
    return 1;
}

static int attention_run(pgd_graph *g, const gfuse *f, int *done, pgd_error **err)
{
    *done = 0;
    if (f->mask >= 0)
        return PGD_OK;
    gvalue *qv = val(g, f->q), *ktv = val(g, f->k), *vv = val(g, f->v);
    if (qv->kind != V_DEVICE || ktv->kind != V_DEVICE || vv->kind != V_DEVICE)
        return PGD_OK;
    float scale = attention_scale(g, f);
    gview q = qv->v, k = ktv->v, v = vv->v;
    if (q.nd != k.nd || q.nd != v.nd || q.nd < 2 || q.nd > 4 || scale == 0 || !isfinite(scale))
        return PGD_OK;
    /* softmax over the last axis */
    int fi = (int)(f - g->fuses) + 1;
    for (int oi = 0; oi < g->nnodes; oi++) {
        gnode *n = &g->nodes[g->order[oi]];
        if (n->fuse == fi && !strcmp(n->op, "Softmax")) {
            int64_t ax = pgd__graph_attr_i(n, "axis", g->opset >= 13 ? -1 : 1);
            if (ax != -1 && ax != q.nd - 1)
                return PGD_OK;
        }
    }
    /* k holds Kᵀ [.., d, nk]: swap to K [.., nk, d] */
    int nd = q.nd;
    int64_t t = k.dim[nd - 1];
    k.dim[nd - 1] = k.dim[nd - 2], k.dim[nd - 2] = t;
    t = k.st[nd - 1], k.st[nd - 1] = k.st[nd - 2], k.st[nd - 2] = t;
    int64_t nq = q.dim[nd - 2], d = q.dim[nd - 1], nk = k.dim[nd - 2], dv = v.dim[nd - 1];
    if (k.dim[nd - 1] != d || v.dim[nd - 2] != nk)
        return PGD_OK;
    for (int i = 0; i < nd - 2; i++)
        if (q.dim[i] != k.dim[i] || q.dim[i] != v.dim[i])
            return PGD_OK;
    /* operands without a unit last stride are copied once */
    gview cq = {0}, ck = {0}, cv = {0}, y;
    int rc = PGD_OK;
    if (q.st[nd - 1] != 1 && !(rc = pgd__gview_materialise(g, &q, &cq, err)))
        q = cq;
    if (!rc && k.st[nd - 1] != 1 && !(rc = pgd__gview_materialise(g, &k, &ck, err)))
        k = ck;
    if (!rc && v.st[nd - 1] != 1 && !(rc = pgd__gview_materialise(g, &v, &cv, err)))
        v = cv;
    int64_t ydim[PGD_MAX_DIMS];
    memcpy(ydim, q.dim, sizeof ydim);
    ydim[nd - 1] = dv;
    if (!rc)
        rc = pgd__gview_new(g, nd, ydim, &y, err);
    if (!rc) {
        pgd_attention_args a = {0};
        int64_t b, h, b2, h2;
        pgd_view pq, pk, pvv, po;
        /* each view's tensor is its buffer, flat */
        as_pgd_view(&q, &b, &h, &pq);
        as_pgd_view(&k, &b2, &h2, &pk);
        as_pgd_view(&v, &b2, &h2, &pvv);
        as_pgd_view(&y, &b2, &h2, &po);
        a.batch = b, a.heads = h, a.nq = nq, a.nk = nk, a.head_dim = d, a.scale = scale;
        a.q = pq, a.k = pk, a.v = pvv, a.o = po;
        pgd_attention_ext ext = {.size = sizeof ext, .v_head_dim = dv};
        rc = pgd_attention_ex(g->ctx, &a, dv == d ? NULL : &ext, err);
        if (rc)
            pgd__gview_drop(&y);
        else {
            g->flops += 2.0 * (double)(b * h) * (double)nq * (double)nk * (double)(d + dv);
            set_out(g, f->out, &y);
            *done = 1;
        }
    }
    pgd__gview_drop(&cq);
    pgd__gview_drop(&ck);
    pgd__gview_drop(&cv);
    return rc;
}
