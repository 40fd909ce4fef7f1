/* gpt2.c — GPT-2 from libpagoda's ops, with a KV cache.
 *
 * Per block (pre-norm): ln_1 → c_attn (one linear giving q|k|v, heads contiguous inside each)
 * → causal attention over the cache (pgd_attention_ex appends the step's keys and values to
 * the layer's cache and attends over every cached token, with the padding mask) → c_proj +
 * residual → ln_2 → c_fc + GELU (tanh form: gelu_new) → c_proj + residual. Then ln_f and the
 * head (wte, tied, unless the file holds lm_head.weight). transformers' Conv1D stores its
 * weight [in, out], transposed against nn.Linear: it is transposed once at load. The token and
 * position embeddings are looked up on the host (a row each) and uploaded with the step's
 * tokens. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt2.h"

/* The additive mask of a padding key: finite, so that a row with no visible key (a padding
 * query) stays finite and no NaN reaches the keys and values later rows read. */
#define GPT2_MASKED (-1e30f)

typedef struct gpt2_layer {
    pgd_tensor *ln1_w, *ln1_b, *ln2_w, *ln2_b;
    pgd_linear *attn, *proj, *fc, *mlp_proj;
} gpt2_layer;

struct gpt2_model {
    pgd_ctx *ctx;
    gpt2_config cfg;
    float *wte, *wpe; /* host copies for the lookups */
    pgd_tensor *lnf_w, *lnf_b;
    pgd_linear *head;
    gpt2_layer *layer;
};

struct gpt2_state {
    gpt2_model *m;
    int batch, cap, len;
    pgd_tensor **k, **v;  /* per layer [batch, heads, cap, head size] */
    pgd_tensor *mask_dev; /* [batch, cap] additive */
    float *mask;          /* host copy */
    int any_pad;
    int *real; /* per sequence: real tokens so far */
    float *const *probs;
};

/* ---- config.json ---- */

static int cfg_int(json_t *root, const char *path, const char *key, int need, int *out,
                   pgd_error **err)
{
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) {
        if (need)
            return pgd_error_set(err, PGD_ERR_FORMAT, "%s: '%s' is missing (GPT-2 needs it)", path,
                                 key);
        return PGD_OK;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > (1 << 24))
        return pgd_error_set(err, PGD_ERR_FORMAT, "%s: '%s' must be an integer 1 .. 2^24", path,
                             key);
    *out = (int)json_integer_value(v);
    return PGD_OK;
}

/* The settings that change the computation and are not run: an error naming them. */
static int cfg_refuse(json_t *root, const char *path, pgd_error **err)
{
    static const char *const off[] = {"add_cross_attention", "scale_attn_by_inverse_layer_idx"};
    for (size_t i = 0; i < sizeof off / sizeof *off; i++)
        if (json_is_true(json_object_get(root, off[i])))
            return pgd_error_set(err, PGD_ERR_UNSUPPORTED, "%s: '%s' is true: not supported", path,
                                 off[i]);
    json_t *mt = json_object_get(root, "model_type");
    if (mt && (!json_is_string(mt) || strcmp(json_string_value(mt), "gpt2")))
        return pgd_error_set(err, PGD_ERR_UNSUPPORTED,
                             "%s: model_type is not \"gpt2\" (this command runs GPT-2)", path);
    return PGD_OK;
}

static int cfg_activation(json_t *root, const char *path, gpt2_config *cfg, pgd_error **err)
{
    json_t *a = json_object_get(root, "activation_function");
    cfg->act = GPT2_GELU_TANH;
    if (!a) {
        model_assume(&cfg->assumed, "activation_function", "\"gelu_new\"",
                     "activation_function in config.json");
        return PGD_OK;
    }
    const char *s = json_is_string(a) ? json_string_value(a) : "";
    if (!strcmp(s, "gelu_new") || !strcmp(s, "gelu_pytorch_tanh"))
        return PGD_OK;
    if (!strcmp(s, "gelu")) {
        cfg->act = GPT2_GELU_EXACT;
        return PGD_OK;
    }
    return pgd_error_set(err, PGD_ERR_UNSUPPORTED,
                         "%s: activation_function \"%s\" is not supported (gelu_new, "
                         "gelu_pytorch_tanh or gelu)",
                         path, s);
}

static int cfg_fields(json_t *root, const char *path, gpt2_config *cfg, pgd_error **err)
{
    int rc;
    if ((rc = cfg_refuse(root, path, err)) ||
        (rc = cfg_int(root, path, "n_embd", 1, &cfg->dim, err)) ||
        (rc = cfg_int(root, path, "n_head", 1, &cfg->heads, err)) ||
        (rc = cfg_int(root, path, "n_layer", 0, &cfg->layers, err)) ||
        (rc = cfg_int(root, path, "n_positions", 0, &cfg->positions, err)) ||
        (rc = cfg_int(root, path, "n_inner", 0, &cfg->inner, err)) ||
        (rc = cfg_activation(root, path, cfg, err)))
        return rc;
    if (cfg->dim % cfg->heads)
        return pgd_error_set(err, PGD_ERR_FORMAT, "%s: n_head %d does not divide n_embd %d", path,
                             cfg->heads, cfg->dim);
    json_t *eps = json_object_get(root, "layer_norm_epsilon");
    if (!eps) {
        model_assume(&cfg->assumed, "layer_norm_epsilon", "1e-05",
                     "layer_norm_epsilon in config.json");
    } else if (!json_is_number(eps) || !(json_number_value(eps) >= 0) ||
               json_number_value(eps) > 1) {
        return pgd_error_set(err, PGD_ERR_FORMAT,
                             "%s: layer_norm_epsilon must be a number in [0, 1]", path);
    } else {
        cfg->eps = (float)json_number_value(eps);
    }
    json_t *sc = json_object_get(root, "scale_attn_weights");
    cfg->scale_attn = !json_is_false(sc);
    json_t *eos = json_object_get(root, "eos_token_id");
    if (json_is_integer(eos) && json_integer_value(eos) >= 0 && json_integer_value(eos) < (1 << 24))
        cfg->eos = (int)json_integer_value(eos);
    return PGD_OK;
}

int gpt2_config_read(const char *config_json, gpt2_config *cfg, pgd_error **err)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->eps = 1e-5f;
    cfg->eos = -1;
    cfg->scale_attn = 1;
    json_error_t jerr;
    json_t *root = json_load_file(config_json, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return pgd_error_set(err, PGD_ERR_FORMAT, "%s: line %d: %s", config_json, jerr.line,
                             jerr.text);
    int rc = json_is_object(root)
                 ? cfg_fields(root, config_json, cfg, err)
                 : pgd_error_set(err, PGD_ERR_FORMAT, "%s: not a JSON object", config_json);
    json_decref(root);
    cfg->from_config = !rc;
    return rc;
}

/* ---- names and sizes ---- */

/* A tensor's name in the file's naming: `tail` of block `block`, or outside the blocks (-1). */
static void name_of(const gpt2_config *cfg, char *buf, size_t size, int block, const char *tail)
{
    const char *p = cfg->prefixed ? "transformer." : "";
    if (block < 0)
        snprintf(buf, size, "%s%s", p, tail);
    else
        snprintf(buf, size, "%sh.%d.%s", p, block, tail);
}

static int shape2(const model_source *src, const char *name, int64_t s[2])
{
    int nd;
    int64_t d[8];
    if (src->shape(src->u, name, &nd, d) || nd != 2)
        return -1;
    s[0] = d[0];
    s[1] = d[1];
    return 0;
}

static int detect_embeddings(const model_source *src, const char *config, gpt2_config *cfg,
                             pgd_error **err)
{
    char wte[64], wpe[64];
    int64_t s[2], p[2];
    name_of(cfg, wte, sizeof wte, -1, "wte.weight");
    name_of(cfg, wpe, sizeof wpe, -1, "wpe.weight");
    if (shape2(src, wte, s) || shape2(src, wpe, p))
        return pgd_error_set(err, PGD_ERR_SHAPE, "%s: '%s' and '%s' must be 2-D", src->label, wte,
                             wpe);
    int rc, dim = 0;
    if ((rc = model_size(src, wte, "vocabulary", s[0], MODEL_SIZE_MAX, &cfg->vocab, err)) ||
        (rc = model_size(src, wte, "width", s[1], 1 << 16, &dim, err)))
        return rc;
    if (dim != cfg->dim)
        return pgd_error_set(err, PGD_ERR_SHAPE, "%s: '%s' is %d wide but %s says n_embd %d",
                             src->label, wte, dim, config, cfg->dim);
    int pos = 0;
    if ((rc = model_size(src, wpe, "positions", p[0], 1 << 20, &pos, err)))
        return rc;
    if (p[1] != dim || (cfg->positions && cfg->positions != pos))
        return pgd_error_set(err, PGD_ERR_SHAPE,
                             "%s: '%s' has shape [%lld, %lld]: expected [%s, %d] (n_positions "
                             "of %s)",
                             src->label, wpe, (long long)p[0], (long long)p[1],
                             cfg->positions ? "n_positions" : "positions", dim, config);
    cfg->positions = pos;
    return PGD_OK;
}

int gpt2_detect(const model_source *src, const char *config, gpt2_config *cfg, pgd_error **err)
{
    if (!cfg->dim || !cfg->heads || cfg->dim % cfg->heads)
        return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT,
                             "%s: GPT-2 needs n_embd and n_head (from %s)", src->label, config);
    cfg->prefixed = model_has(src, "transformer.wte.weight");
    if (!cfg->prefixed && !model_has(src, "wte.weight"))
        return pgd_error_set(err, PGD_ERR_NOT_FOUND,
                             "%s: not a GPT-2 checkpoint (neither 'transformer.wte.weight' nor "
                             "'wte.weight')",
                             src->label);
    int rc = detect_embeddings(src, config, cfg, err);
    if (rc)
        return rc;
    char name[96];
    name_of(cfg, name, sizeof name, -1, "h.");
    int n = model_count_indexed(src, name, ".");
    if (n < 0) /* a source without a listing (random weights): the configuration's */
        n = cfg->layers;
    if (n < 1 || (cfg->layers && cfg->layers != n))
        return pgd_error_set(err, PGD_ERR_SHAPE, "%s: %d blocks '%sN.' but %s says n_layer %d",
                             src->label, n, name, config, cfg->layers);
    cfg->layers = n;
    int64_t s[2];
    name_of(cfg, name, sizeof name, 0, "mlp.c_fc.weight");
    int inner = 0;
    if (shape2(src, name, s) || s[0] != cfg->dim)
        return pgd_error_set(err, PGD_ERR_SHAPE, "%s: '%s' missing or not [%d, inner]", src->label,
                             name, cfg->dim);
    if ((rc = model_size(src, name, "inner width", s[1], 1 << 20, &inner, err)))
        return rc;
    if (cfg->inner && cfg->inner != inner)
        return pgd_error_set(err, PGD_ERR_SHAPE, "%s: '%s' is %d wide but %s says n_inner %d",
                             src->label, name, inner, config, cfg->inner);
    cfg->inner = inner;
    cfg->lm_head = model_has(src, "lm_head.weight");
    return PGD_OK;
}

/* ---- loading ---- */

/* A Conv1D (weight [in, out], bias [out]) as a linear layer (weight [out, in]). */
static int load_conv1d(gpt2_model *m, const model_source *src, int i, const char *what, int in,
                       int out, pgd_linear **l, pgd_error **err)
{
    char wn[128], bn[128], f[64];
    snprintf(f, sizeof f, "%s.weight", what);
    name_of(&m->cfg, wn, sizeof wn, i, f);
    snprintf(f, sizeof f, "%s.bias", what);
    name_of(&m->cfg, bn, sizeof bn, i, f);
    float *w = NULL, *b = NULL, *t = NULL;
    int64_t ws[2] = {in, out}, bs[1] = {out};
    int rc = model_read_host(src, wn, 2, ws, &w, err);
    if (!rc)
        rc = model_read_host(src, bn, 1, bs, &b, err);
    if (!rc && !(t = malloc((size_t)in * (size_t)out * sizeof *t)))
        rc = pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "%s", wn);
    for (int64_t r = 0; !rc && r < in; r++)
        for (int64_t c = 0; c < out; c++)
            t[c * in + r] = w[r * out + c];
    if (!rc)
        rc = model_linear_from_host(m->ctx, t, b, out, in, l, err);
    free(w);
    free(b);
    free(t);
    return rc;
}

static int load_vec(gpt2_model *m, const model_source *src, int i, const char *tail, int n,
                    pgd_tensor **out, pgd_error **err)
{
    char name[128];
    int64_t s[1] = {n};
    name_of(&m->cfg, name, sizeof name, i, tail);
    return model_load_tensor(m->ctx, src, name, 1, s, out, err);
}

static int load_block(void *model, const model_source *src, int i, pgd_error **err)
{
    gpt2_model *m = model;
    gpt2_layer *L = &m->layer[i];
    int D = m->cfg.dim, F = m->cfg.inner, rc;
    if ((rc = load_vec(m, src, i, "ln_1.weight", D, &L->ln1_w, err)) ||
        (rc = load_vec(m, src, i, "ln_1.bias", D, &L->ln1_b, err)) ||
        (rc = load_vec(m, src, i, "ln_2.weight", D, &L->ln2_w, err)) ||
        (rc = load_vec(m, src, i, "ln_2.bias", D, &L->ln2_b, err)) ||
        (rc = load_conv1d(m, src, i, "attn.c_attn", D, 3 * D, &L->attn, err)) ||
        (rc = load_conv1d(m, src, i, "attn.c_proj", D, D, &L->proj, err)) ||
        (rc = load_conv1d(m, src, i, "mlp.c_fc", D, F, &L->fc, err)) ||
        (rc = load_conv1d(m, src, i, "mlp.c_proj", F, D, &L->mlp_proj, err)))
        return rc;
    /* the causal-mask buffers older files carry: the model computes its own */
    char name[128];
    name_of(&m->cfg, name, sizeof name, i, "attn.bias");
    model_mark(src, name);
    name_of(&m->cfg, name, sizeof name, i, "attn.masked_bias");
    model_mark(src, name);
    return PGD_OK;
}

static int load_outer(void *model, const model_source *src, pgd_error **err)
{
    gpt2_model *m = model;
    const gpt2_config *c = &m->cfg;
    char wte[64], wpe[64];
    int64_t es[2] = {c->vocab, c->dim}, ps[2] = {c->positions, c->dim};
    name_of(c, wte, sizeof wte, -1, "wte.weight");
    name_of(c, wpe, sizeof wpe, -1, "wpe.weight");
    int rc;
    if ((rc = model_read_host(src, wte, 2, es, &m->wte, err)) ||
        (rc = model_read_host(src, wpe, 2, ps, &m->wpe, err)) ||
        (rc = load_vec(m, src, -1, "ln_f.weight", c->dim, &m->lnf_w, err)) ||
        (rc = load_vec(m, src, -1, "ln_f.bias", c->dim, &m->lnf_b, err)))
        return rc;
    if (!c->lm_head)
        return model_linear_from_host(m->ctx, m->wte, NULL, c->vocab, c->dim, &m->head, err);
    float *w = NULL;
    if (!(rc = model_read_host(src, "lm_head.weight", 2, es, &w, err)))
        rc = model_linear_from_host(m->ctx, w, NULL, c->vocab, c->dim, &m->head, err);
    free(w);
    return rc;
}

int gpt2_load(pgd_ctx *ctx, const model_source *src, const gpt2_config *cfg, gpt2_model **out,
              pgd_error **err)
{
    *out = NULL;
    int rc = model_check_fits(ctx, src, "GPT-2", err);
    if (rc)
        return rc;
    gpt2_model *m = calloc(1, sizeof *m);
    if (!m || !(m->layer = calloc((size_t)cfg->layers, sizeof *m->layer))) {
        free(m);
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "%s: GPT-2", src->label);
    }
    m->ctx = ctx;
    m->cfg = *cfg;
    rc = model_load_blocks(src, m, cfg->layers, load_outer, load_block, err);
    if (rc) {
        gpt2_free(m);
        return rc;
    }
    *out = m;
    return PGD_OK;
}

void gpt2_free(gpt2_model *m)
{
    if (!m)
        return;
    for (int i = 0; m->layer && i < m->cfg.layers; i++) {
        gpt2_layer *L = &m->layer[i];
        pgd_tensor *t[4] = {L->ln1_w, L->ln1_b, L->ln2_w, L->ln2_b};
        model_destroy_tensors(t, 4);
        pgd_linear_destroy(L->attn);
        pgd_linear_destroy(L->proj);
        pgd_linear_destroy(L->fc);
        pgd_linear_destroy(L->mlp_proj);
    }
    pgd_tensor *t[2] = {m->lnf_w, m->lnf_b};
    model_destroy_tensors(t, 2);
    pgd_linear_destroy(m->head);
    free(m->layer);
    free(m->wte);
    free(m->wpe);
    free(m);
}

const gpt2_config *gpt2_get_config(const gpt2_model *m)
{
    return &m->cfg;
}

/* ---- the decoder state ---- */

int gpt2_state_create(gpt2_model *m, int batch, int capacity, gpt2_state **out, pgd_error **err)
{
    *out = NULL;
    const gpt2_config *c = &m->cfg;
    if (batch < 1 || capacity < 1 || capacity > c->positions)
        return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT,
                             "GPT-2: %d sequences of %d tokens: the model holds 1 .. %d "
                             "positions (n_positions)",
                             batch, capacity, c->positions);
    gpt2_state *st = calloc(1, sizeof *st);
    int rc = PGD_OK;
    if (!st || !(st->k = calloc((size_t)c->layers, sizeof *st->k)) ||
        !(st->v = calloc((size_t)c->layers, sizeof *st->v)) ||
        !(st->mask = calloc((size_t)batch * (size_t)capacity, sizeof *st->mask)) ||
        !(st->real = calloc((size_t)batch, sizeof *st->real)))
        rc = pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "GPT-2: state");
    if (st) {
        st->m = m;
        st->batch = batch;
        st->cap = capacity;
    }
    int64_t ks[4] = {batch, c->heads, capacity, c->dim / c->heads}, ms[2] = {batch, capacity};
    for (int l = 0; !rc && l < c->layers; l++)
        if (!(rc = pgd_tensor_create(m->ctx, 4, ks, &st->k[l], err)))
            rc = pgd_tensor_create(m->ctx, 4, ks, &st->v[l], err);
    if (!rc)
        rc = pgd_tensor_create(m->ctx, 2, ms, &st->mask_dev, err);
    if (rc) {
        gpt2_state_free(st);
        return rc;
    }
    *out = st;
    return PGD_OK;
}

void gpt2_state_free(gpt2_state *st)
{
    if (!st)
        return;
    for (int l = 0; l < st->m->cfg.layers; l++) {
        if (st->k)
            pgd_tensor_destroy(st->k[l]);
        if (st->v)
            pgd_tensor_destroy(st->v[l]);
    }
    pgd_tensor_destroy(st->mask_dev);
    free(st->k);
    free(st->v);
    free(st->mask);
    free(st->real);
    free(st);
}

int gpt2_state_length(const gpt2_state *st)
{
    return st->len;
}

void gpt2_set_probs(gpt2_state *st, float *const *probs)
{
    st->probs = probs;
}

/* ---- the forward pass of one append ---- */

typedef struct step {
    int T;
    pgd_tensor *x, *h, *qkv, *att, *mlp;
} step;

/* Checks the ids, then fills x [batch, T, dim] with wte[id] + wpe[position] and the mask. */
static int embed(gpt2_state *st, const int32_t *ids, const uint8_t *mask, int T, float *x,
                 pgd_error **err)
{
    const gpt2_model *m = st->m;
    int D = m->cfg.dim, B = st->batch;
    for (int i = 0; i < B * T; i++)
        if (ids[i] < 0 || ids[i] >= m->cfg.vocab)
            return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT,
                                 "GPT-2: token id %ld (sequence %d, token %d) is outside the "
                                 "vocabulary of %d",
                                 (long)ids[i], i / T, i % T, m->cfg.vocab);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            int real = mask ? mask[b * T + t] != 0 : 1;
            int pos = real ? st->real[b]++ : (m->cfg.positions > 1 ? 1 : 0);
            const float *e = m->wte + (size_t)ids[b * T + t] * D, *p = m->wpe + (size_t)pos * D;
            float *o = x + ((size_t)b * T + t) * D;
            for (int d = 0; d < D; d++)
                o[d] = e[d] + p[d];
            st->mask[(size_t)b * st->cap + st->len + t] = real ? 0.0f : GPT2_MASKED;
            st->any_pad |= !real;
        }
    return PGD_OK;
}

static int attention(gpt2_state *st, int l, const step *s, pgd_error **err)
{
    const gpt2_config *c = &st->m->cfg;
    int64_t B = st->batch, T = s->T, H = c->heads, D = c->dim, hd = D / H, cap = st->cap;
    pgd_attention_args a = {.batch = B,
                            .heads = H,
                            .nq = T,
                            .nk = T,
                            .head_dim = hd,
                            .scale = c->scale_attn ? 0.0f : 1.0f,
                            .causal = PGD_CAUSAL_AFTER_PAST};
    a.q = (pgd_view){s->qkv, 0, T * 3 * D, hd, 3 * D};
    a.k = (pgd_view){s->qkv, D, T * 3 * D, hd, 3 * D};
    a.v = (pgd_view){s->qkv, 2 * D, T * 3 * D, hd, 3 * D};
    a.o = (pgd_view){s->att, 0, T * D, hd, D};
    if (st->any_pad) /* one row a sequence, shared by its heads and queries */
        a.mask = (pgd_view){st->mask_dev, 0, cap, 0, 0};
    pgd_attention_ext e = {.size = sizeof e, .past = st->len};
    e.k_cache = (pgd_view){st->k[l], 0, H * cap * hd, cap * hd, hd};
    e.v_cache = (pgd_view){st->v[l], 0, H * cap * hd, cap * hd, hd};
    pgd_tensor *scores = NULL;
    int rc = PGD_OK;
    if (st->probs && st->probs[l]) {
        int64_t ss[4] = {B, H, T, st->len + T};
        rc = pgd_tensor_create(st->m->ctx, 4, ss, &scores, err);
        e.scores = scores;
        e.scores_kind = PGD_SCORES_PROBS;
    }
    if (!rc)
        rc = pgd_attention_ex(st->m->ctx, &a, &e, err);
    if (!rc && scores)
        rc = pgd_tensor_download(scores, st->probs[l], err);
    pgd_tensor_destroy(scores);
    return rc;
}

static int block(gpt2_state *st, int l, const step *s, pgd_error **err)
{
    pgd_ctx *ctx = st->m->ctx;
    const gpt2_layer *L = &st->m->layer[l];
    const gpt2_config *c = &st->m->cfg;
    int exact = c->act == GPT2_GELU_EXACT;
    int rc = pgd_layernorm(ctx, s->x, L->ln1_w, L->ln1_b, c->eps, s->h, err);
    if (!rc)
        rc = pgd_linear_forward(ctx, L->attn, s->h, PGD_ACT_NONE, NULL, s->qkv, err);
    if (!rc)
        rc = attention(st, l, s, err);
    if (!rc)
        rc = pgd_linear_forward(ctx, L->proj, s->att, PGD_ACT_NONE, s->x, s->x, err);
    if (!rc)
        rc = pgd_layernorm(ctx, s->x, L->ln2_w, L->ln2_b, c->eps, s->h, err);
    if (!rc)
        rc = pgd_linear_forward(ctx, L->fc, s->h, exact ? PGD_ACT_GELU : PGD_ACT_NONE, NULL, s->mlp,
                                err);
    if (!rc && !exact)
        rc = pgd_gelu(ctx, s->mlp, s->mlp, 1, err);
    if (!rc)
        rc = pgd_linear_forward(ctx, L->mlp_proj, s->mlp, PGD_ACT_NONE, s->x, s->x, err);
    return rc;
}

/* ln_f, then the head over every row or the last token's. */
static int head(gpt2_state *st, const step *s, int all_rows, float *logits, pgd_error **err)
{
    gpt2_model *m = st->m;
    int64_t B = st->batch, T = s->T, V = m->cfg.vocab, D = m->cfg.dim;
    int64_t rows = all_rows ? T : 1, ls[3] = {B, rows, V}, hs[3] = {B, 1, D};
    pgd_tensor *last = NULL, *out = NULL;
    int rc = pgd_layernorm(m->ctx, s->x, m->lnf_w, m->lnf_b, m->cfg.eps, s->h, err);
    if (!rc && !all_rows && T > 1 && !(rc = pgd_tensor_create(m->ctx, 3, hs, &last, err)))
        rc = pgd_tensor_slice(s->h, 1, T - 1, 1, last, err);
    if (!rc)
        rc = pgd_tensor_create(m->ctx, 3, ls, &out, err);
    if (!rc)
        rc = pgd_linear_forward(m->ctx, m->head, last ? last : s->h, PGD_ACT_NONE, NULL, out, err);
    if (!rc)
        rc = pgd_tensor_download(out, logits, err);
    pgd_tensor_destroy(last);
    pgd_tensor_destroy(out);
    return rc;
}

static int step_create(gpt2_state *st, int T, step *s, pgd_error **err)
{
    const gpt2_config *c = &st->m->cfg;
    int64_t B = st->batch;
    int64_t xs[3] = {B, T, c->dim}, qs[3] = {B, T, 3 * (int64_t)c->dim}, fs[3] = {B, T, c->inner};
    memset(s, 0, sizeof *s);
    s->T = T;
    int rc;
    if ((rc = pgd_tensor_create(st->m->ctx, 3, xs, &s->x, err)) ||
        (rc = pgd_tensor_create(st->m->ctx, 3, xs, &s->h, err)) ||
        (rc = pgd_tensor_create(st->m->ctx, 3, qs, &s->qkv, err)) ||
        (rc = pgd_tensor_create(st->m->ctx, 3, xs, &s->att, err)))
        return rc;
    return pgd_tensor_create(st->m->ctx, 3, fs, &s->mlp, err);
}

static void step_free(step *s)
{
    pgd_tensor *t[5] = {s->x, s->h, s->qkv, s->att, s->mlp};
    model_destroy_tensors(t, 5);
}

int gpt2_append(gpt2_model *m, gpt2_state *st, const int32_t *ids, const uint8_t *mask, int T,
                int all_rows, float *logits, pgd_error **err)
{
    if (T < 1 || T > st->cap - st->len)
        return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT,
                             "GPT-2: %d more tokens after %d: the sequences hold %d (n_positions "
                             "%d)",
                             T, st->len, st->cap, m->cfg.positions);
    float *x = malloc((size_t)st->batch * (size_t)T * (size_t)m->cfg.dim * sizeof *x);
    int *real = malloc((size_t)st->batch * sizeof *real);
    if (!x || !real) {
        free(x);
        free(real);
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "GPT-2: %d tokens", T);
    }
    memcpy(real, st->real, (size_t)st->batch * sizeof *real);
    step s;
    int rc = embed(st, ids, mask, T, x, err);
    if (!rc)
        rc = step_create(st, T, &s, err);
    else
        memset(&s, 0, sizeof s);
    if (!rc)
        rc = pgd_tensor_upload(s.x, x, err);
    if (!rc && st->any_pad)
        rc = pgd_tensor_upload(st->mask_dev, st->mask, err);
    for (int l = 0; !rc && l < m->cfg.layers; l++)
        rc = block(st, l, &s, err);
    if (!rc)
        rc = head(st, &s, all_rows, logits, err);
    step_free(&s);
    if (rc) /* the cache past len is overwritten by the next append: only the counts go back */
        memcpy(st->real, real, (size_t)st->batch * sizeof *real);
    else
        st->len += T;
    free(x);
    free(real);
    return rc;
}

/* ---- seeded random weights ---- */

void gpt2_random_config(gpt2_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    *cfg = (gpt2_config){.layers = 2,
                         .dim = 64,
                         .heads = 4,
                         .vocab = 257,
                         .positions = 256,
                         .inner = 256,
                         .eps = 1e-5f,
                         .act = GPT2_GELU_TANH,
                         .scale_attn = 1,
                         .eos = 256};
}

int gpt2_named_config(const char *name, gpt2_config *cfg)
{
    gpt2_random_config(cfg);
    if (!strcmp(name, "tiny"))
        return 0;
    if (strcmp(name, "small"))
        return -1;
    cfg->layers = 12, cfg->dim = 768, cfg->heads = 12, cfg->vocab = 50257;
    cfg->positions = 1024, cfg->inner = 3072, cfg->eos = 50256;
    return 0;
}

static int random_shape(const void *cfgp, const char *name, int *ndim, int64_t s[8])
{
    const gpt2_config *c = cfgp;
    int64_t D = c->dim;
    int i = -1, n = 0;
    *ndim = 2;
    if (!strcmp(name, "wte.weight"))
        return s[0] = c->vocab, s[1] = D, 0;
    if (!strcmp(name, "wpe.weight"))
        return s[0] = c->positions, s[1] = D, 0;
    *ndim = 1;
    if (!strcmp(name, "ln_f.weight") || !strcmp(name, "ln_f.bias"))
        return s[0] = D, 0;
    if (sscanf(name, "h.%d.%n", &i, &n) != 1 || n <= 0 || i < 0 || i >= c->layers)
        return -1;
    const char *r = name + n;
    static const struct {
        const char *name;
        int nd, a, b;
    } t[] = {{"ln_1.weight", 1, 1, 0},        {"ln_1.bias", 1, 1, 0},
             {"ln_2.weight", 1, 1, 0},        {"ln_2.bias", 1, 1, 0},
             {"attn.c_attn.weight", 2, 1, 3}, {"attn.c_attn.bias", 1, 3, 0},
             {"attn.c_proj.weight", 2, 1, 1}, {"attn.c_proj.bias", 1, 1, 0},
             {"mlp.c_fc.weight", 2, 1, -1},   {"mlp.c_fc.bias", 1, -1, 0},
             {"mlp.c_proj.weight", 2, -1, 1}, {"mlp.c_proj.bias", 1, 1, 0}};
    for (size_t k = 0; k < sizeof t / sizeof *t; k++)
        if (!strcmp(r, t[k].name)) {
            *ndim = t[k].nd;
            s[0] = t[k].a < 0 ? c->inner : t[k].a * D;
            s[1] = t[k].b < 0 ? c->inner : t[k].b * D;
            return 0;
        }
    return -1;
}

int gpt2_random_source(model_source *src, const gpt2_config *cfg, uint64_t seed, pgd_error **err)
{
    return model_random_source(src, cfg, sizeof *cfg, random_shape, NULL, seed, err);
}
