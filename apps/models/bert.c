/* bert.c — the BERT-family encoder (bert.h) on the device: embeddings (word + position + token
 * type, LayerNorm), post-norm Transformer layers whose attention hides padding through an
 * additive mask over the keys, and the masked-LM head with the decoder tied to the word
 * embeddings. Configuration: bert_config.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bert.h"

void bert__ln_names(const model_source *src, const char *base, char *w, char *b, size_t size);

typedef struct bert_layer {
    pgd_linear *qkv, *o, *fc1, *fc2; /* q, k and v joined into one [3D, D] layer */
    pgd_tensor *ln1_w, *ln1_b, *ln2_w, *ln2_b;
} bert_layer;

struct bert_model {
    pgd_ctx *ctx;
    bert_config cfg;
    pgd_tensor *word, *pos, *type, *eln_w, *eln_b;
    bert_layer *layers;
    pgd_linear *dense, *decoder; /* the MLM head (NULL without one) */
    pgd_tensor *hln_w, *hln_b;
    float *word_host; /* the word embeddings while loading (the tied decoder) */
};

/* The names of one layer's parts: q, k, v, attention output, its LayerNorm, FFN in, FFN out,
 * the output LayerNorm. */
static const char *const bert_parts[8] = {"attention.self.query",
                                          "attention.self.key",
                                          "attention.self.value",
                                          "attention.output.dense",
                                          "attention.output.LayerNorm",
                                          "intermediate.dense",
                                          "output.dense",
                                          "output.LayerNorm"};
static const char *const distil_parts[8] = {
    "attention.q_lin", "attention.k_lin", "attention.v_lin", "attention.out_lin",
    "sa_layer_norm",   "ffn.lin1",        "ffn.lin2",        "output_layer_norm"};

static void part_name(const bert_config *c, int i, int part, const char *suffix, char *buf,
                      size_t size)
{
    int d = c->arch == BERT_ARCH_DISTIL;
    snprintf(buf, size, "%s%s%d.%s%s", c->prefix, d ? "transformer.layer." : "encoder.layer.", i,
             (d ? distil_parts : bert_parts)[part], suffix);
}

static int load_ln(bert_model *m, const model_source *src, const char *base, pgd_tensor **w,
                   pgd_tensor **b, pgd_error **err)
{
    char wn[160], bn[160];
    int64_t s[1] = {m->cfg.hidden};
    bert__ln_names(src, base, wn, bn, sizeof wn);
    int rc = model_load_tensor(m->ctx, src, wn, 1, s, w, err);
    return rc ? rc : model_load_tensor(m->ctx, src, bn, 1, s, b, err);
}

static int load_linear(bert_model *m, const model_source *src, const char *base, int64_t out,
                       int64_t in, pgd_linear **l, pgd_error **err)
{
    char wn[160], bn[160];
    snprintf(wn, sizeof wn, "%.140s.weight", base);
    snprintf(bn, sizeof bn, "%.140s.bias", base);
    return model_load_linear(m->ctx, src, wn, bn, 1, out, in, l, err);
}

/* q, k and v read on the host and joined into one layer (one GEMM instead of three). */
static int load_qkv(bert_model *m, const model_source *src, int i, pgd_error **err)
{
    int64_t D = m->cfg.hidden, ws[2] = {D, D}, bs[1] = {D};
    float *w = malloc((size_t)(3 * D * D) * sizeof *w), *b = malloc((size_t)(3 * D) * sizeof *b);
    int rc = w && b ? PGD_OK : pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "q, k, v");
    for (int p = 0; p < 3 && !rc; p++) {
        char name[160];
        part_name(&m->cfg, i, p, ".weight", name, sizeof name);
        if (!(rc = model_need(src, name, 2, ws, err)))
            rc = model_read(src, name, w + p * D * D, D * D, err);
        part_name(&m->cfg, i, p, ".bias", name, sizeof name);
        if (!rc && !(rc = model_need(src, name, 1, bs, err)))
            rc = model_read(src, name, b + p * D, D, err);
    }
    if (!rc)
        rc = model_linear_from_host(m->ctx, w, b, 3 * D, D, &m->layers[i].qkv, err);
    free(w);
    free(b);
    return rc;
}

static int load_layer(void *model, const model_source *src, int i, pgd_error **err)
{
    bert_model *m = model;
    bert_layer *l = &m->layers[i];
    int64_t D = m->cfg.hidden, I = m->cfg.inter;
    char name[160];
    int rc = load_qkv(m, src, i, err);
    part_name(&m->cfg, i, 3, "", name, sizeof name);
    if (!rc)
        rc = load_linear(m, src, name, D, D, &l->o, err);
    part_name(&m->cfg, i, 4, "", name, sizeof name);
    if (!rc)
        rc = load_ln(m, src, name, &l->ln1_w, &l->ln1_b, err);
    part_name(&m->cfg, i, 5, "", name, sizeof name);
    if (!rc)
        rc = load_linear(m, src, name, I, D, &l->fc1, err);
    part_name(&m->cfg, i, 6, "", name, sizeof name);
    if (!rc)
        rc = load_linear(m, src, name, D, I, &l->fc2, err);
    part_name(&m->cfg, i, 7, "", name, sizeof name);
    if (!rc)
        rc = load_ln(m, src, name, &l->ln2_w, &l->ln2_b, err);
    return rc;
}

/* The MLM head: transform (dense, activation, LayerNorm) and the decoder, whose weight is the
 * word embeddings' unless the file holds its own. */
static int load_head(bert_model *m, const model_source *src, pgd_error **err)
{
    static const char *const names[3][5] = {
        {"cls.predictions.transform.dense", "cls.predictions.transform.LayerNorm",
         "cls.predictions.decoder.weight", "cls.predictions.bias", "cls.predictions.decoder.bias"},
        {"lm_head.dense", "lm_head.layer_norm", "lm_head.decoder.weight", "lm_head.bias",
         "lm_head.decoder.bias"},
        {"vocab_transform", "vocab_layer_norm", "vocab_projector.weight", "vocab_projector.bias",
         ""}};
    const char *const *n = names[m->cfg.arch];
    int64_t D = m->cfg.hidden, V = m->cfg.vocab, ws[2] = {V, D}, bs[1] = {V};
    float *w = NULL, *b = NULL;
    int rc = load_linear(m, src, n[0], D, D, &m->dense, err);
    if (!rc)
        rc = load_ln(m, src, n[1], &m->hln_w, &m->hln_b, err);
    if (!rc && model_has(src, n[2]))
        rc = model_read_host(src, n[2], 2, ws, &w, err);
    if (!rc)
        rc = model_read_host(src, n[3], 1, bs, &b, err);
    if (!rc && n[4][0] && model_has(src, n[4]))
        model_mark(src, n[4]); /* transformers ties it to the bias above */
    if (!rc)
        rc = model_linear_from_host(m->ctx, w ? w : m->word_host, b, V, D, &m->decoder, err);
    free(w);
    free(b);
    return rc;
}

/* The parts no output uses (the pooler, BertForPreTraining's next-sentence head) and the
 * buffers older files hold (embeddings.position_ids, token_type_ids): consumed. */
static void mark_unused(bert_model *m, const model_source *src)
{
    char pooler[64];
    snprintf(pooler, sizeof pooler, "%spooler.", m->cfg.prefix);
    for (size_t i = 0; src->name_at && src->name_at(src->u, i); i++) {
        const char *name = src->name_at(src->u, i);
        size_t len = strlen(name);
        if (!strncmp(name, pooler, strlen(pooler)) || !strncmp(name, "cls.seq_relationship.", 21) ||
            (len >= 25 && !strcmp(name + len - 25, "embeddings.token_type_ids")) ||
            (len >= 23 && !strcmp(name + len - 23, "embeddings.position_ids")))
            model_mark(src, name);
    }
}

static int load_outer(void *model, const model_source *src, pgd_error **err)
{
    bert_model *m = model;
    const bert_config *c = &m->cfg;
    int64_t D = c->hidden, ws[2] = {c->vocab, D}, ps[2] = {c->max_pos, D},
            ts[2] = {c->type_vocab, D};
    char name[160];
    snprintf(name, sizeof name, "%sembeddings.word_embeddings.weight", c->prefix);
    int rc = model_read_host(src, name, 2, ws, &m->word_host, err);
    if (!rc)
        rc = model_upload(m->ctx, m->word_host, 2, ws, &m->word, err);
    snprintf(name, sizeof name, "%sembeddings.position_embeddings.weight", c->prefix);
    if (!rc)
        rc = model_load_tensor(m->ctx, src, name, 2, ps, &m->pos, err);
    snprintf(name, sizeof name, "%sembeddings.token_type_embeddings.weight", c->prefix);
    if (!rc && c->arch != BERT_ARCH_DISTIL)
        rc = model_load_tensor(m->ctx, src, name, 2, ts, &m->type, err);
    snprintf(name, sizeof name, "%sembeddings.LayerNorm", c->prefix);
    if (!rc)
        rc = load_ln(m, src, name, &m->eln_w, &m->eln_b, err);
    if (!rc && c->mlm)
        rc = load_head(m, src, err);
    mark_unused(m, src);
    return rc;
}

int bert_load(pgd_ctx *ctx, const model_source *src, const bert_config *cfg, bert_model **out,
              pgd_error **err)
{
    *out = NULL;
    bert_model *m = calloc(1, sizeof *m);
    if (!m || !(m->layers = calloc((size_t)cfg->layers, sizeof *m->layers))) {
        free(m);
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "%s: the model", src->label);
    }
    m->ctx = ctx;
    m->cfg = *cfg;
    int rc = model_check_fits(ctx, src, "the BERT weights", err);
    if (!rc)
        rc = model_load_blocks(src, m, cfg->layers, load_outer, load_layer, err);
    free(m->word_host);
    m->word_host = NULL;
    if (rc) {
        bert_free(m);
        return rc;
    }
    *out = m;
    return PGD_OK;
}

void bert_free(bert_model *m)
{
    if (!m)
        return;
    for (int i = 0; m->layers && i < m->cfg.layers; i++) {
        bert_layer *l = &m->layers[i];
        pgd_linear_destroy(l->qkv);
        pgd_linear_destroy(l->o);
        pgd_linear_destroy(l->fc1);
        pgd_linear_destroy(l->fc2);
        pgd_tensor *ts[] = {l->ln1_w, l->ln1_b, l->ln2_w, l->ln2_b};
        model_destroy_tensors(ts, 4);
    }
    pgd_tensor *ts[] = {m->word, m->pos, m->type, m->eln_w, m->eln_b, m->hln_w, m->hln_b};
    model_destroy_tensors(ts, sizeof ts / sizeof *ts);
    pgd_linear_destroy(m->dense);
    pgd_linear_destroy(m->decoder);
    free(m->layers);
    free(m->word_host);
    free(m);
}

const bert_config *bert_get_config(const bert_model *m)
{
    return &m->cfg;
}

/* ---- forward ------------------------------------------------------------------------------- */

typedef struct pass {
    bert_model *m;
    int B, S;
    int64_t n; /* B * S rows */
    pgd_tensor *x, *t, *h, *qkv, *a, *f, *mask, *probs, *logits;
} pass;

static void pass_free(pass *p)
{
    pgd_tensor *ts[] = {p->x, p->t, p->h, p->qkv, p->a, p->f, p->mask, p->probs, p->logits};
    model_destroy_tensors(ts, sizeof ts / sizeof *ts);
}

/* Position ids as transformers makes them: 0 .. S-1 for BERT and DistilBERT whatever the
 * padding; for RoBERTa pad_token_id + (the count of non-pad ids so far) at non-pad ids and
 * pad_token_id at pad ids (create_position_ids_from_input_ids: it looks at the ids, not at the
 * attention mask). */
static int position_ids(const bert_config *c, const bert_batch *in, int64_t *pid, pgd_error **err)
{
    for (int b = 0; b < in->B; b++) {
        int64_t count = 0;
        for (int s = 0; s < in->S; s++) {
            int64_t k = (int64_t)b * in->S + s;
            if (c->arch != BERT_ARCH_ROBERTA)
                pid[k] = s;
            else
                pid[k] = in->ids[k] == c->pad_id ? c->pad_id : c->pad_id + ++count;
            if (pid[k] >= c->max_pos)
                return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT,
                                     "sequence %d: %d tokens need position %lld but the model has "
                                     "%d positions (max_position_embeddings)",
                                     b, in->S, (long long)pid[k], c->max_pos);
        }
    }
    return PGD_OK;
}

/* The host-side checks and index arrays: ids, positions, types and the additive mask (0 for a
 * token, -inf for padding: its key is hidden from every query). */
static int prepare(const bert_config *c, const bert_batch *in, int64_t *wid, int64_t *pid,
                   int64_t *tid, float *madd, pgd_error **err)
{
    for (int b = 0; b < in->B; b++) {
        int real = 0;
        for (int s = 0; s < in->S; s++) {
            int64_t k = (int64_t)b * in->S + s;
            if (in->ids[k] < 0 || in->ids[k] >= c->vocab)
                return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT,
                                     "sequence %d, position %d: token id %d is outside the "
                                     "vocabulary [0, %d)",
                                     b, s, (int)in->ids[k], c->vocab);
            int t = in->types ? in->types[k] : 0;
            if (t < 0 || (t > 0 && t >= c->type_vocab))
                return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT,
                                     "sequence %d, position %d: token type %d is outside [0, %d)",
                                     b, s, t, c->type_vocab ? c->type_vocab : 1);
            wid[k] = in->ids[k];
            tid[k] = t;
            int keep = !in->mask || in->mask[k];
            madd[k] = keep ? 0.0f : -INFINITY;
            real += keep;
        }
        if (!real)
            return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT,
                                 "sequence %d has no token under its attention mask", b);
    }
    return position_ids(c, in, pid, err);
}

static int make(pgd_ctx *ctx, int64_t a, int64_t b, pgd_tensor **t, pgd_error **err)
{
    int64_t s[2] = {a, b};
    return pgd_tensor_create(ctx, 2, s, t, err);
}

static int alloc_pass(pass *p, int probs, int logits, pgd_error **err)
{
    const bert_config *c = &p->m->cfg;
    pgd_ctx *ctx = p->m->ctx;
    int64_t D = c->hidden;
    int rc = model_check_alloc(ctx, 0, model_mul(model_mul(p->n, 3 * D + c->inter), 4),
                               "the activations", err);
    if (!rc && logits)
        rc = model_check_alloc(ctx, 0, model_mul(model_mul(p->n, c->vocab), 4), "the logits", err);
    if (!rc)
        rc = make(ctx, p->n, D, &p->x, err);
    if (!rc)
        rc = make(ctx, p->n, D, &p->t, err);
    if (!rc)
        rc = make(ctx, p->n, D, &p->h, err);
    if (!rc)
        rc = make(ctx, p->n, 3 * D, &p->qkv, err);
    if (!rc)
        rc = make(ctx, p->n, D, &p->a, err);
    if (!rc)
        rc = make(ctx, p->n, c->inter, &p->f, err);
    if (!rc)
        rc = make(ctx, p->B, p->S, &p->mask, err);
    if (!rc && probs) {
        int64_t s[4] = {p->B, c->heads, p->S, p->S};
        rc = pgd_tensor_create(ctx, 4, s, &p->probs, err);
    }
    if (!rc && logits)
        rc = make(ctx, p->n, c->vocab, &p->logits, err);
    return rc;
}

/* Word + position (+ token type) embeddings, then LayerNorm, into p->x. */
static int embed(pass *p, const int64_t *wid, const int64_t *pid, const int64_t *tid,
                 pgd_error **err)
{
    bert_model *m = p->m;
    pgd_ctx *ctx = m->ctx;
    int64_t shape[1] = {p->n};
    int rc = pgd_gather(ctx, m->word, 0, wid, 1, shape, p->x, err);
    if (!rc)
        rc = pgd_gather(ctx, m->pos, 0, pid, 1, shape, p->t, err);
    if (!rc)
        rc = pgd_add(ctx, p->x, p->t, p->x, err);
    if (!rc && m->type)
        rc = pgd_gather(ctx, m->type, 0, tid, 1, shape, p->t, err);
    if (!rc && m->type)
        rc = pgd_add(ctx, p->x, p->t, p->x, err);
    if (!rc)
        rc = pgd_layernorm(ctx, p->x, m->eln_w, m->eln_b, m->cfg.eps, p->x, err);
    return rc;
}

/* y = act(l(x)) for the configuration's activation (the tanh form as a separate pass). */
static int linear_act(pgd_ctx *ctx, const pgd_linear *l, bert_act act, const pgd_tensor *x,
                      pgd_tensor *y, pgd_error **err)
{
    pgd_act fused = act == BERT_ACT_GELU   ? PGD_ACT_GELU
                    : act == BERT_ACT_RELU ? PGD_ACT_RELU
                                           : PGD_ACT_NONE;
    int rc = pgd_linear_forward(ctx, l, x, fused, NULL, y, err);
    if (!rc && act == BERT_ACT_GELU_TANH)
        rc = pgd_gelu(ctx, y, y, 1, err);
    return rc;
}

/* Layer i on p->x in place (post-norm: x = LN(x + attn(x)); x = LN(x + ffn(x))); its
 * attention probabilities into probs ([B, heads, S, S] host floats) when not NULL. */
static int layer_forward(pass *p, int i, float *probs, pgd_error **err)
{
    bert_model *m = p->m;
    const bert_config *c = &m->cfg;
    const bert_layer *l = &m->layers[i];
    pgd_ctx *ctx = m->ctx;
    int64_t D = c->hidden, hd = D / c->heads, S = p->S;
    int rc = pgd_linear_forward(ctx, l->qkv, p->x, PGD_ACT_NONE, NULL, p->qkv, err);
    pgd_attention_args aa;
    memset(&aa, 0, sizeof aa);
    aa.batch = p->B, aa.heads = c->heads, aa.nq = S, aa.nk = S, aa.head_dim = hd;
    aa.q = (pgd_view){p->qkv, 0, S * 3 * D, hd, 3 * D};
    aa.k = (pgd_view){p->qkv, D, S * 3 * D, hd, 3 * D};
    aa.v = (pgd_view){p->qkv, 2 * D, S * 3 * D, hd, 3 * D};
    aa.o = (pgd_view){p->a, 0, S * D, hd, D};
    aa.mask = (pgd_view){p->mask, 0, S, 0, 0}; /* [b, ., ., j]: the same for every head, row */
    if (probs) {
        aa.probs = p->probs;
        aa.probs_head = -1;
        aa.probs_q1 = S;
    }
    if (!rc)
        rc = pgd_attention(ctx, &aa, err);
    if (!rc && probs)
        rc = pgd_tensor_download(p->probs, probs, err);
    if (!rc)
        rc = pgd_linear_forward(ctx, l->o, p->a, PGD_ACT_NONE, p->x, p->h, err);
    if (!rc)
        rc = pgd_layernorm(ctx, p->h, l->ln1_w, l->ln1_b, c->eps, p->x, err);
    if (!rc)
        rc = linear_act(ctx, l->fc1, c->act, p->x, p->f, err);
    if (!rc)
        rc = pgd_linear_forward(ctx, l->fc2, p->f, PGD_ACT_NONE, p->x, p->h, err);
    if (!rc)
        rc = pgd_layernorm(ctx, p->h, l->ln2_w, l->ln2_b, c->eps, p->x, err);
    return rc;
}

/* The MLM head on p->x into logits (host [n, vocab]). RoBERTa's head applies the exact GELU
 * whatever hidden_act says (RobertaLMHead calls gelu). */
static int head_forward(pass *p, float *logits, pgd_error **err)
{
    bert_model *m = p->m;
    pgd_ctx *ctx = m->ctx;
    bert_act act = m->cfg.arch == BERT_ARCH_ROBERTA ? BERT_ACT_GELU : m->cfg.act;
    int rc = linear_act(ctx, m->dense, act, p->x, p->h, err);
    if (!rc)
        rc = pgd_layernorm(ctx, p->h, m->hln_w, m->hln_b, m->cfg.eps, p->h, err);
    if (!rc)
        rc = pgd_linear_forward(ctx, m->decoder, p->h, PGD_ACT_NONE, NULL, p->logits, err);
    if (!rc)
        rc = pgd_tensor_download(p->logits, logits, err);
    return rc;
}

static int run_pass(pass *p, const bert_batch *in, bert_outputs *out, pgd_error **err)
{
    const bert_config *c = &p->m->cfg;
    size_t n = (size_t)p->n;
    int64_t *idx = malloc(3 * n * sizeof *idx);
    float *madd = malloc(n * sizeof *madd);
    int rc =
        idx && madd ? PGD_OK : pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "the token indices");
    if (!rc)
        rc = prepare(c, in, idx, idx + n, idx + 2 * n, madd, err);
    if (!rc)
        rc = alloc_pass(p, out->probs != NULL, out->logits != NULL, err);
    if (!rc)
        rc = pgd_tensor_upload(p->mask, madd, err);
    if (!rc)
        rc = embed(p, idx, idx + n, idx + 2 * n, err);
    size_t per = (size_t)p->B * c->heads * p->S * p->S;
    for (int i = 0; i < c->layers && !rc; i++)
        rc = layer_forward(p, i, out->probs ? out->probs + i * per : NULL, err);
    if (!rc && out->hidden)
        rc = pgd_tensor_download(p->x, out->hidden, err);
    if (!rc && out->logits)
        rc = head_forward(p, out->logits, err);
    free(idx);
    free(madd);
    return rc;
}

int bert_forward(bert_model *m, const bert_batch *in, bert_outputs *out, pgd_error **err)
{
    if (in->B < 1 || in->S < 1 || !in->ids)
        return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT, "bert_forward: an empty batch");
    if (out->logits && !m->cfg.mlm)
        return pgd_error_set(err, PGD_ERR_UNSUPPORTED,
                             "the checkpoint has no masked-LM head (a headless %s encoder): no "
                             "logits",
                             bert_arch_name(m->cfg.arch));
    if (model_mul(in->B, in->S) > (int64_t)1 << 24)
        return pgd_error_set(err, PGD_ERR_TOO_LARGE, "bert_forward: %d x %d tokens", in->B, in->S);
    pass p = {.m = m, .B = in->B, .S = in->S, .n = (int64_t)in->B * in->S};
    int rc = run_pass(&p, in, out, err);
    pass_free(&p);
    return rc;
}
