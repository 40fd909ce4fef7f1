/* gat.c — a stack of PyG GATConv layers from a state dict, and graph files (see gat.h). */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gat.h"

/* ---- names ------------------------------------------------------------------------------------
 */

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a > b && !strcmp(s + a - b, suffix);
}

/* strcmp with runs of digits compared as numbers: conv2 < conv10. */
static int natural_cmp(const char *a, const char *b)
{
    while (*a && *b) {
        if (isdigit((unsigned char)*a) && isdigit((unsigned char)*b)) {
            while (*a == '0')
                a++;
            while (*b == '0')
                b++;
            size_t la = 0, lb = 0;
            while (isdigit((unsigned char)a[la]))
                la++;
            while (isdigit((unsigned char)b[lb]))
                lb++;
            if (la != lb)
                return la < lb ? -1 : 1;
            int c = strncmp(a, b, la);
            if (c)
                return c;
            a += la, b += lb;
        } else {
            if (*a != *b)
                return (unsigned char)*a < (unsigned char)*b ? -1 : 1;
            a++, b++;
        }
    }
    return *a ? 1 : *b ? -1 : 0;
}

static int cmp_prefix(const void *x, const void *y)
{
    return natural_cmp(((const gat_layer_info *)x)->prefix, ((const gat_layer_info *)y)->prefix);
}

/* The layer prefixes: from "gat.layers", else every P of a P.att_src, naturally sorted. */
static int find_layers(const model_source *src, gat_model *m, pgd_error **err)
{
    const char *list = src->meta ? src->meta(src->u, "gat.layers") : NULL;
    if (list) {
        const char *p = list;
        while (*p) {
            const char *q = strchr(p, ',');
            size_t len = q ? (size_t)(q - p) : strlen(p);
            if (len == 0 || len >= sizeof m->info[0].prefix)
                return pgd_error_set(err, PGD_ERR_FORMAT,
                                     "%s: __metadata__ gat.layers '%s' has an empty or too long "
                                     "name",
                                     src->label, list);
            if (m->n_layers == GAT_MAX_LAYERS)
                return pgd_error_set(err, PGD_ERR_FORMAT, "%s: gat.layers lists more than %d",
                                     src->label, GAT_MAX_LAYERS);
            memcpy(m->info[m->n_layers].prefix, p, len);
            m->info[m->n_layers++].prefix[len] = '\0';
            p = q ? q + 1 : p + len;
            if (q && !*p)
                return pgd_error_set(err, PGD_ERR_FORMAT,
                                     "%s: __metadata__ gat.layers '%s' ends with a comma",
                                     src->label, list);
        }
        return PGD_OK;
    }
    const char *name;
    for (size_t i = 0; src->name_at && (name = src->name_at(src->u, i)); i++) {
        if (!ends_with(name, ".att_src"))
            continue;
        size_t len = strlen(name) - strlen(".att_src");
        if (len >= sizeof m->info[0].prefix)
            return pgd_error_set(err, PGD_ERR_FORMAT, "%s: tensor name too long: %.80s...",
                                 src->label, name);
        if (m->n_layers == GAT_MAX_LAYERS)
            return pgd_error_set(err, PGD_ERR_FORMAT, "%s: more than %d GAT layers", src->label,
                                 GAT_MAX_LAYERS);
        memcpy(m->info[m->n_layers].prefix, name, len);
        m->info[m->n_layers++].prefix[len] = '\0';
    }
    if (m->n_layers == 0)
        return pgd_error_set(err, PGD_ERR_FORMAT,
                             "%s: no GATConv layer (no tensor named <layer>.att_src)", src->label);
    qsort(m->info, (size_t)m->n_layers, sizeof m->info[0], cmp_prefix);
    return PGD_OK;
}

/* ---- metadata ----------------------------------------------------------------------------------
 */

static const char *meta_of(const model_source *src, const char *prefix, const char *key, char *buf,
                           size_t size)
{
    snprintf(buf, size, "%s.%s", prefix, key);
    return src->meta ? src->meta(src->u, buf) : NULL;
}

/* A boolean __metadata__ value: true/false/1/0; absent keeps *out. */
static int meta_bool(const model_source *src, const char *prefix, const char *key, int *out,
                     pgd_error **err)
{
    char k[320];
    const char *v = meta_of(src, prefix, key, k, sizeof k);
    if (!v)
        return PGD_OK;
    if (!strcmp(v, "true") || !strcmp(v, "True") || !strcmp(v, "1"))
        *out = 1;
    else if (!strcmp(v, "false") || !strcmp(v, "False") || !strcmp(v, "0"))
        *out = 0;
    else
        return pgd_error_set(err, PGD_ERR_FORMAT,
                             "%s: __metadata__ %s is '%.40s', expected true or false", src->label,
                             k, v);
    return PGD_OK;
}

static int layer_meta(const model_source *src, gat_layer_info *L, int64_t bias_len, pgd_error **err)
{
    char k[320];
    int64_t H = L->desc.heads, C = L->desc.out_channels;
    /* concat: PyG's default, unless the bias says the heads are averaged. */
    L->desc.concat = !(bias_len == C && H > 1);
    int rc = meta_bool(src, L->prefix, "concat", &L->desc.concat, err);
    if (!rc)
        rc = meta_bool(src, L->prefix, "add_self_loops", &L->add_self_loops, err);
    if (rc)
        return rc;
    const char *v = meta_of(src, L->prefix, "negative_slope", k, sizeof k);
    double slope = 0.2;
    if (v && pgd_parse_double(v, -1e6, 1e6, &slope))
        return pgd_error_set(err, PGD_ERR_FORMAT, "%s: __metadata__ %s is '%.40s', not a number",
                             src->label, k, v);
    L->desc.negative_slope = (float)slope;
    v = meta_of(src, L->prefix, "heads", k, sizeof k);
    int64_t h;
    if (v && (pgd_parse_int64(v, 1, 1 << 24, &h) || h != H))
        return pgd_error_set(err, PGD_ERR_FORMAT,
                             "%s: __metadata__ %s is '%.40s' but %s.att_src has %lld heads",
                             src->label, k, v, L->prefix, (long long)H);
    return PGD_OK;
}

/* ---- layers ------------------------------------------------------------------------------------
 */

static int shape_of(const model_source *src, const char *name, int *nd, int64_t s[8])
{
    return src->shape(src->u, name, nd, s);
}

/* The tensor names of layer P. */
typedef struct layer_names {
    char as[300], ad[300], w[300], wd[300], b[300], r[300];
} layer_names;

/* Finds layer L's tensors and sizes: heads and channels from att_src, F from the weight, the
 * settings from __metadata__, `act` fused after it. Nothing is read yet. */
static int layer_shapes(const model_source *src, gat_layer_info *L, pgd_gat_act act, layer_names *n,
                        pgd_error **err)
{
    const char *P = L->prefix;
    char edge[300];
    int nd;
    int64_t s[8];
    snprintf(n->as, sizeof n->as, "%s.att_src", P);
    snprintf(n->ad, sizeof n->ad, "%s.att_dst", P);
    snprintf(edge, sizeof edge, "%s.lin_edge.weight", P);
    if (shape_of(src, edge, &nd, s) == 0 ||
        (snprintf(edge, sizeof edge, "%s.att_edge", P), shape_of(src, edge, &nd, s) == 0))
        return pgd_error_set(err, PGD_ERR_UNSUPPORTED,
                             "%s: %s: edge features (GATConv edge_dim) are not supported",
                             src->label, edge);
    if (shape_of(src, n->as, &nd, s) || nd != 3 || s[0] != 1 || s[1] < 1 || s[2] < 1) {
        char got[64] = "absent";
        if (shape_of(src, n->as, &nd, s) == 0)
            model_shape_str(nd, s, got, sizeof got);
        return pgd_error_set(err, PGD_ERR_FORMAT, "%s: %s is %s, expected [1, heads, channels]",
                             src->label, n->as, got);
    }
    int64_t H = s[1], C = s[2], HC = H * C;
    snprintf(n->w, sizeof n->w, "%s.lin.weight", P);
    if (shape_of(src, n->w, &nd, s)) {
        snprintf(n->w, sizeof n->w, "%s.lin_src.weight", P);
        snprintf(n->wd, sizeof n->wd, "%s.lin_dst.weight", P);
        L->lin_dst = 1;
        if (shape_of(src, n->w, &nd, s))
            return pgd_error_set(err, PGD_ERR_NOT_FOUND,
                                 "%s: layer %s has neither %s.lin.weight nor %s.lin_src.weight",
                                 src->label, P, P, P);
    }
    if (nd != 2 || s[0] != HC || s[1] < 1) {
        char got[64];
        model_shape_str(nd, s, got, sizeof got);
        return pgd_error_set(err, PGD_ERR_SHAPE,
                             "%s: %s is %s, expected [%lld, in_channels] (heads %lld x channels "
                             "%lld from %s)",
                             src->label, n->w, got, (long long)HC, (long long)H, (long long)C,
                             n->as);
    }
    pgd_gat_desc_init(&L->desc, s[1], C, H);
    L->add_self_loops = 1;
    snprintf(n->b, sizeof n->b, "%s.bias", P);
    snprintf(n->r, sizeof n->r, "%s.res.weight", P);
    int64_t bias_len = -1;
    if (shape_of(src, n->b, &nd, s) == 0)
        bias_len = nd == 1 ? s[0] : -2;
    L->bias = bias_len != -1;
    L->residual = shape_of(src, n->r, &nd, s) == 0;
    int rc = layer_meta(src, L, bias_len, err);
    L->desc.act = act;
    return rc;
}

/* model_need then model_read. */
static int need_read(const model_source *src, const char *name, int nd, const int64_t *shape,
                     float *dst, int64_t n, pgd_error **err)
{
    int rc = model_need(src, name, nd, shape, err);
    return rc ? rc : model_read(src, name, dst, n, err);
}

/* Reads one layer's tensors and creates it with the activation `act` fused after it. */
static int load_layer(pgd_ctx *ctx, const model_source *src, gat_layer_info *L, pgd_gat_act act,
                      pgd_gat **out, pgd_error **err)
{
    layer_names n;
    int rc = layer_shapes(src, L, act, &n, err);
    if (rc)
        return rc;
    int64_t F = L->desc.in_channels, H = L->desc.heads, C = L->desc.out_channels, HC = H * C;
    int64_t OD = pgd_gat_out_width(&L->desc);
    size_t nw = (size_t)(HC * F);
    float *w = malloc(nw * sizeof *w), *wd = L->lin_dst ? malloc(nw * sizeof *wd) : NULL;
    float *as = malloc((size_t)HC * sizeof *as), *ad = malloc((size_t)HC * sizeof *ad);
    float *b = L->bias ? malloc((size_t)OD * sizeof *b) : NULL;
    float *r = L->residual ? malloc((size_t)(OD * F) * sizeof *r) : NULL;
    if (!w || !as || !ad || (L->lin_dst && !wd) || (L->bias && !b) || (L->residual && !r))
        rc = pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "%s: layer %s", src->label, L->prefix);
    int64_t s_att[3] = {1, H, C}, s_w[2] = {HC, F}, s_r[2] = {OD, F};
    if (!rc)
        rc = need_read(src, n.as, 3, s_att, as, HC, err);
    if (!rc)
        rc = need_read(src, n.ad, 3, s_att, ad, HC, err);
    if (!rc)
        rc = need_read(src, n.w, 2, s_w, w, HC * F, err);
    if (!rc && L->lin_dst)
        rc = need_read(src, n.wd, 2, s_w, wd, HC * F, err);
    if (!rc && L->bias)
        rc = need_read(src, n.b, 1, &OD, b, OD, err);
    if (!rc && L->residual)
        rc = need_read(src, n.r, 2, s_r, r, OD * F, err);
    /* lin_dst equal to lin_src (PyG versions that shared them) is the plain layer. */
    if (!rc && wd && !memcmp(w, wd, nw * sizeof *w)) {
        free(wd);
        wd = NULL;
        L->lin_dst = 0;
    }
    if (!rc) {
        pgd_gat_params p = {w, wd, as, ad, b, r};
        rc = pgd_gat_create(ctx, &L->desc, &p, out, err);
    }
    free(w), free(wd), free(as), free(ad), free(b), free(r);
    return rc;
}

void gat_model_free(gat_model *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->n_layers; i++)
        pgd_gat_destroy(m->layers[i]);
    free(m);
}

int64_t gat_model_in(const gat_model *m)
{
    return m->info[0].desc.in_channels;
}
int64_t gat_model_out(const gat_model *m)
{
    return pgd_gat_out_width(&m->info[m->n_layers - 1].desc);
}

int gat_model_load(pgd_ctx *ctx, const model_source *src0, gat_model **out, pgd_error **err)
{
    *out = NULL;
    gat_model *m = calloc(1, sizeof *m);
    if (!m)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "GAT model");
    model_source s = *src0, *src = &s;
    int rc = model_track_begin(src, err);
    if (!rc)
        rc = find_layers(src, m, err);
    const char *act = src->meta ? src->meta(src->u, "gat.activation") : NULL;
    m->act = PGD_GAT_ACT_ELU, m->act_name = "elu";
    if (!rc && act) {
        if (!strcmp(act, "relu"))
            m->act = PGD_GAT_ACT_RELU, m->act_name = "relu";
        else if (!strcmp(act, "none"))
            m->act = PGD_GAT_ACT_NONE, m->act_name = "none";
        else if (strcmp(act, "elu"))
            rc = pgd_error_set(err, PGD_ERR_FORMAT,
                               "%s: __metadata__ gat.activation is '%.40s', expected elu, relu "
                               "or none",
                               src->label, act);
    }
    for (int i = 0; !rc && i < m->n_layers; i++) {
        gat_layer_info *L = &m->info[i];
        /* The activation between layers is fused into the layer before it. */
        rc = load_layer(ctx, src, L, i + 1 < m->n_layers ? m->act : PGD_GAT_ACT_NONE, &m->layers[i],
                        err);
        if (!rc && i > 0 && L->desc.in_channels != pgd_gat_out_width(&m->info[i - 1].desc))
            rc = pgd_error_set(err, PGD_ERR_SHAPE,
                               "%s: layer %s takes %lld input channels but layer %s gives %lld",
                               src->label, L->prefix, (long long)L->desc.in_channels,
                               m->info[i - 1].prefix,
                               (long long)pgd_gat_out_width(&m->info[i - 1].desc));
    }
    if (!rc)
        rc = model_check_consumed(src, NULL, 0, err);
    model_track_end(src);
    if (rc) {
        gat_model_free(m);
        return rc;
    }
    *out = m;
    return PGD_OK;
}

/* ---- graph files -------------------------------------------------------------------------------
 */

void gat_graph_free(gat_graph_file *g)
{
    free(g->x), free(g->edge_index), free(g->y), free(g->test_mask);
    memset(g, 0, sizeof *g);
}

/* Reads an integer tensor (I64 or I32) of n elements into dst as int64. */
static int read_ints(pgd_weights *w, const char *path, const pgd_weight_info *info, int64_t *dst,
                     pgd_error **err)
{
    if (info->dtype != PGD_DTYPE_I64 && info->dtype != PGD_DTYPE_I32)
        return pgd_error_set(err, PGD_ERR_FORMAT, "graph '%s': %s is %s, expected I64 (int64)",
                             path, info->name, info->dtype_name);
    if (info->dtype == PGD_DTYPE_I64)
        return pgd_weights_read(w, info->name, dst, err);
    int32_t *tmp = malloc((size_t)(info->numel ? info->numel : 1) * sizeof *tmp);
    if (!tmp)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "graph '%s': %s", path, info->name);
    int rc = pgd_weights_read(w, info->name, tmp, err);
    for (uint64_t i = 0; !rc && i < info->numel; i++)
        dst[i] = tmp[i];
    free(tmp);
    return rc;
}

/* Every tensor must be a known one: a misnamed x or y is not silently ignored. */
static int graph_names(pgd_weights *w, const char *path, pgd_error **err)
{
    for (size_t i = 0; i < pgd_weights_get_count(w); i++) {
        const char *n = pgd_weights_get_name(w, i);
        if (strcmp(n, "x") && strcmp(n, "edge_index") && strcmp(n, "y") && strcmp(n, "test_mask") &&
            strcmp(n, "train_mask") && strcmp(n, "val_mask"))
            return pgd_error_set(err, PGD_ERR_FORMAT,
                                 "graph '%s': unknown tensor '%.100s' (a graph holds x, "
                                 "edge_index, and optionally y, test_mask, train_mask, val_mask)",
                                 path, n);
    }
    return PGD_OK;
}

static int graph_tensors(pgd_weights *w, const char *path, gat_graph_file *g, pgd_error **err)
{
    pgd_weight_info x, ei, info;
    char got[64];
    if (pgd_weights_find(w, "x", &x))
        return pgd_error_set(err, PGD_ERR_NOT_FOUND, "graph '%s' has no tensor x [N, F]", path);
    if (x.ndim != 2 || x.shape[0] < 1 || x.shape[1] < 1) {
        model_shape_str(x.ndim, x.shape, got, sizeof got);
        return pgd_error_set(err, PGD_ERR_SHAPE, "graph '%s': x is %s, expected [N, F] (N, F >= 1)",
                             path, got);
    }
    if (pgd_weights_find(w, "edge_index", &ei))
        return pgd_error_set(err, PGD_ERR_NOT_FOUND, "graph '%s' has no tensor edge_index [2, E]",
                             path);
    if (ei.ndim != 2 || ei.shape[0] != 2) {
        model_shape_str(ei.ndim, ei.shape, got, sizeof got);
        return pgd_error_set(err, PGD_ERR_SHAPE, "graph '%s': edge_index is %s, expected [2, E]",
                             path, got);
    }
    g->n = x.shape[0], g->f = x.shape[1], g->e = ei.shape[1];
    g->x = malloc((size_t)(g->n * g->f) * sizeof *g->x);
    g->edge_index = malloc((size_t)(2 * g->e + 1) * sizeof *g->edge_index);
    if (!g->x || !g->edge_index)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "graph '%s': %lld nodes, %lld edges",
                             path, (long long)g->n, (long long)g->e);
    int rc = pgd_weights_to_float(w, "x", g->x, err);
    int64_t bad = rc ? -1 : model_first_nonfinite(g->x, g->n * g->f);
    if (!rc && bad >= 0)
        return pgd_error_set(err, PGD_ERR_FORMAT, "graph '%s': x[%lld][%lld] is %g (not finite)",
                             path, (long long)(bad / g->f), (long long)(bad % g->f),
                             (double)g->x[bad]);
    if (!rc)
        rc = read_ints(w, path, &ei, g->edge_index, err);
    const char *names[] = {"y", "test_mask"};
    for (int k = 0; !rc && k < 2; k++) {
        if (pgd_weights_find(w, names[k], &info))
            continue;
        if (info.ndim != 1 || info.shape[0] != g->n) {
            model_shape_str(info.ndim, info.shape, got, sizeof got);
            return pgd_error_set(err, PGD_ERR_SHAPE, "graph '%s': %s is %s, expected [%lld]", path,
                                 names[k], got, (long long)g->n);
        }
        if (k == 0) {
            g->y = malloc((size_t)g->n * sizeof *g->y);
            if (!g->y)
                return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "graph '%s': y", path);
            rc = read_ints(w, path, &info, g->y, err);
            for (int64_t i = 0; !rc && i < g->n; i++)
                if (g->y[i] < 0 || g->y[i] > INT32_MAX)
                    return pgd_error_set(err, PGD_ERR_FORMAT,
                                         "graph '%s': y[%lld] = %lld is not a class index", path,
                                         (long long)i, (long long)g->y[i]);
        } else {
            if (info.dtype != PGD_DTYPE_BOOL && info.dtype != PGD_DTYPE_U8)
                return pgd_error_set(err, PGD_ERR_FORMAT,
                                     "graph '%s': test_mask is %s, expected BOOL or U8", path,
                                     info.dtype_name);
            g->test_mask = malloc((size_t)g->n);
            if (!g->test_mask)
                return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "graph '%s': test_mask",
                                     path);
            rc = pgd_weights_read(w, "test_mask", g->test_mask, err);
            for (int64_t i = 0; !rc && i < g->n; i++)
                if (g->test_mask[i] > 1)
                    return pgd_error_set(err, PGD_ERR_FORMAT,
                                         "graph '%s': test_mask[%lld] is %d, not 0 or 1", path,
                                         (long long)i, g->test_mask[i]);
        }
    }
    return rc ? rc : graph_names(w, path, err);
}

int gat_graph_load(const char *path, gat_graph_file *g, pgd_error **err)
{
    memset(g, 0, sizeof *g);
    pgd_weights *w = NULL;
    int rc = pgd_weights_open(path, &w, err);
    if (!rc)
        rc = graph_tensors(w, path, g, err);
    pgd_weights_destroy(w);
    if (rc)
        gat_graph_free(g);
    return rc;
}

/* ---- running -----------------------------------------------------------------------------------
 */

int gat_model_run(pgd_ctx *ctx, const gat_model *m, const gat_graph_file *g, float *logits,
                  float **alpha, int64_t **alpha_edges, int64_t *alpha_rows, double times[2],
                  pgd_error **err)
{
    if (alpha)
        *alpha = NULL;
    if (alpha_edges)
        *alpha_edges = NULL;
    if (g->f != gat_model_in(m))
        return pgd_error_set(err, PGD_ERR_SHAPE,
                             "the graph's x has %lld features per node, the model's first layer "
                             "(%s) takes %lld",
                             (long long)g->f, m->info[0].prefix, (long long)gat_model_in(m));
    double t0 = model_now_ms();
    pgd_gat_graph *graphs[2] = {NULL, NULL}; /* without and with self loops */
    int rc = PGD_OK;
    for (int i = 0; !rc && i < m->n_layers; i++) {
        int l = m->info[i].add_self_loops;
        if (!graphs[l])
            rc = pgd_gat_graph_create(ctx, g->n, g->edge_index, g->e, l, &graphs[l], err);
    }
    double t1 = model_now_ms();
    int64_t xs[2] = {g->n, g->f};
    pgd_tensor *x = NULL, *y = NULL, *a = NULL;
    if (!rc)
        rc = model_upload(ctx, g->x, 2, xs, &x, err);
    const pgd_gat_graph *last = graphs[m->info[m->n_layers - 1].add_self_loops];
    int64_t H = m->info[m->n_layers - 1].desc.heads, E2 = pgd_gat_graph_get_num_edges(last);
    if (!rc && alpha) {
        int64_t as[2] = {E2, H};
        rc = pgd_tensor_create(ctx, 2, as, &a, err);
    }
    for (int i = 0; !rc && i < m->n_layers; i++) {
        int64_t ys[2] = {g->n, pgd_gat_out_width(&m->info[i].desc)};
        rc = pgd_tensor_create(ctx, 2, ys, &y, err);
        if (!rc)
            rc = pgd_gat_forward(ctx, m->layers[i], graphs[m->info[i].add_self_loops], x, y,
                                 i + 1 == m->n_layers ? a : NULL, err);
        pgd_tensor_destroy(x);
        x = y, y = NULL;
    }
    if (!rc)
        rc = pgd_tensor_download(x, logits, err);
    double t2 = model_now_ms();
    if (!rc && alpha) {
        *alpha = malloc((size_t)(E2 * H + 1) * sizeof **alpha);
        if (!*alpha)
            rc = pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "attention [%lld, %lld]",
                               (long long)E2, (long long)H);
        if (!rc)
            rc = pgd_tensor_download(a, *alpha, err);
        if (!rc && alpha_edges) {
            *alpha_edges = malloc((size_t)(2 * E2 + 1) * sizeof **alpha_edges);
            if (!*alpha_edges)
                rc = pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "edge_index [2, %lld]",
                                   (long long)E2);
            else
                memcpy(*alpha_edges, pgd_gat_graph_get_edge_index(last),
                       (size_t)(2 * E2) * sizeof **alpha_edges);
        }
        if (alpha_rows)
            *alpha_rows = E2;
        if (rc) {
            free(*alpha);
            *alpha = NULL;
            if (alpha_edges) {
                free(*alpha_edges);
                *alpha_edges = NULL;
            }
        }
    }
    if (times)
        times[0] = t1 - t0, times[1] = t2 - t1;
    pgd_tensor_destroy(x);
    pgd_tensor_destroy(a);
    pgd_gat_graph_destroy(graphs[0]);
    pgd_gat_graph_destroy(graphs[1]);
    return rc;
}
