/* bert_config.c — a BERT-family encoder's configuration: config.json's values
 * (bert_config_parse), completed and checked against the checkpoint's names and shapes
 * (bert_detect), and the names and shapes of the seeded random model. Apart from bert.c, which
 * holds the model itself. */
#include <float.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bert.h"

const char *bert_arch_name(bert_arch a)
{
    static const char *const names[] = {"bert", "roberta", "distilbert"};
    return (unsigned)a < 3 ? names[a] : "?";
}

const char *bert_act_name(bert_act a)
{
    static const char *const names[] = {"gelu", "gelu_new", "relu"};
    return (unsigned)a < 3 ? names[a] : "?";
}

/* An integer key of config.json in [lo, hi] into *out; absent: *out untouched and 0. */
static int get_int(json_t *root, const char *key, int lo, int hi, int *out, const char *label,
                   pgd_error **err)
{
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v))
        return PGD_OK;
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return pgd_error_set(err, PGD_ERR_FORMAT, "%s: '%s' must be a whole number from %d to %d",
                             label, key, lo, hi);
    *out = (int)json_integer_value(v);
    return PGD_OK;
}

static int get_act(json_t *root, const char *key, bert_act *out, const char *label, pgd_error **err)
{
    json_t *v = json_object_get(root, key);
    if (!v)
        return PGD_OK; /* transformers' default for both families: "gelu" */
    const char *s = json_string_value(v);
    if (s && !strcmp(s, "gelu"))
        *out = BERT_ACT_GELU;
    else if (s && (!strcmp(s, "gelu_new") || !strcmp(s, "gelu_pytorch_tanh")))
        *out = BERT_ACT_GELU_TANH;
    else if (s && !strcmp(s, "relu"))
        *out = BERT_ACT_RELU;
    else
        return pgd_error_set(err, PGD_ERR_FORMAT,
                             "%s: '%s' must be \"gelu\", \"gelu_new\", \"gelu_pytorch_tanh\" or "
                             "\"relu\"",
                             label, key);
    return PGD_OK;
}

static int get_arch(json_t *root, bert_config *cfg, const char *label, pgd_error **err)
{
    json_t *v = json_object_get(root, "model_type");
    const char *s = json_string_value(v);
    cfg->arch = -1;
    if (!v)
        return PGD_OK; /* bert_detect decides from the names */
    if (s && !strcmp(s, "bert"))
        cfg->arch = BERT_ARCH_BERT;
    else if (s && (!strcmp(s, "roberta") || !strcmp(s, "xlm-roberta") || !strcmp(s, "camembert")))
        cfg->arch = BERT_ARCH_ROBERTA;
    else if (s && !strcmp(s, "distilbert"))
        cfg->arch = BERT_ARCH_DISTIL;
    else
        return pgd_error_set(err, PGD_ERR_UNSUPPORTED,
                             "%s: model_type must be \"bert\", \"roberta\", \"xlm-roberta\", "
                             "\"camembert\" or \"distilbert\" (a bidirectional encoder)",
                             label);
    return PGD_OK;
}

/* The keys both namings share, under their names (DistilBERT's are dim, n_heads, ...). */
static int get_sizes(json_t *root, bert_config *c, const char *label, pgd_error **err)
{
    int d = c->arch == BERT_ARCH_DISTIL;
    int rc = get_int(root, d ? "dim" : "hidden_size", 1, MODEL_SIZE_MAX, &c->hidden, label, err);
    if (!rc)
        rc = get_int(root, d ? "n_heads" : "num_attention_heads", 1, 4096, &c->heads, label, err);
    if (!rc)
        rc = get_int(root, d ? "n_layers" : "num_hidden_layers", 1, 4096, &c->layers, label, err);
    if (!rc)
        rc = get_int(root, d ? "hidden_dim" : "intermediate_size", 1, MODEL_SIZE_MAX, &c->inter,
                     label, err);
    if (!rc)
        rc = get_int(root, "vocab_size", 1, MODEL_SIZE_MAX, &c->vocab, label, err);
    if (!rc)
        rc = get_int(root, "max_position_embeddings", 1, MODEL_SIZE_MAX, &c->max_pos, label, err);
    if (!rc && !d)
        rc = get_int(root, "type_vocab_size", 0, 65536, &c->type_vocab, label, err);
    if (!rc)
        rc = get_int(root, "pad_token_id", 0, MODEL_SIZE_MAX, &c->pad_id, label, err);
    if (!rc)
        rc = get_act(root, d ? "activation" : "hidden_act", &c->act, label, err);
    return rc;
}

static int get_eps(json_t *root, bert_config *c, const char *label, pgd_error **err)
{
    json_t *e = json_object_get(root, "layer_norm_eps");
    c->eps = 1e-12f; /* BertConfig's default, and DistilBERT's fixed value */
    if (!e || c->arch == BERT_ARCH_DISTIL)
        return PGD_OK;
    /* The epsilon is used as a float: one that rounds to 0 (1e-83) would divide by zero. */
    if (!json_is_number(e) || !(json_number_value(e) >= FLT_MIN && json_number_value(e) < 1))
        return pgd_error_set(err, PGD_ERR_FORMAT,
                             "%s: 'layer_norm_eps' must be a number "
                             "from %g (the smallest normal float) to 1",
                             label, (double)FLT_MIN);
    c->eps = (float)json_number_value(e);
    return PGD_OK;
}

int bert_config_parse(const char *text, size_t n, const char *label, bert_config *cfg,
                      pgd_error **err)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->pad_id = -1;
    json_error_t je;
    json_t *root = json_loadb(text, n, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return pgd_error_set(err, PGD_ERR_FORMAT, "%s: not valid JSON (line %d: %s)", label,
                             je.line, je.text);
    int rc = json_is_object(root)
                 ? get_arch(root, cfg, label, err)
                 : pgd_error_set(err, PGD_ERR_FORMAT, "%s: not a JSON object", label);
    if (!rc && (int)cfg->arch < 0) /* the keys' names tell DistilBERT's apart */
        cfg->arch = json_object_get(root, "n_heads") ? BERT_ARCH_DISTIL : BERT_ARCH_BERT;
    if (!rc)
        rc = get_sizes(root, cfg, label, err);
    if (!rc)
        rc = get_eps(root, cfg, label, err);
    json_t *pe = json_object_get(root, "position_embedding_type");
    if (!rc && pe && !json_is_null(pe) &&
        (!json_is_string(pe) || strcmp(json_string_value(pe), "absolute")))
        rc = pgd_error_set(err, PGD_ERR_UNSUPPORTED,
                           "%s: position_embedding_type must be \"absolute\" (relative position "
                           "embeddings are not supported)",
                           label);
    const char *hk = cfg->arch == BERT_ARCH_DISTIL ? "n_heads" : "num_attention_heads";
    if (!rc && !cfg->heads)
        rc = pgd_error_set(err, PGD_ERR_FORMAT,
                           "%s: no '%s': the head count is not in the weights, and is "
                           "never guessed",
                           label, hk);
    if (!rc && cfg->hidden && cfg->hidden % cfg->heads)
        rc = pgd_error_set(err, PGD_ERR_FORMAT, "%s: '%s' %d does not divide the width %d", label,
                           hk, cfg->heads, cfg->hidden);
    if (!rc && cfg->arch == BERT_ARCH_ROBERTA && cfg->pad_id < 0)
        rc = pgd_error_set(err, PGD_ERR_FORMAT,
                           "%s: no 'pad_token_id': RoBERTa's position ids count from it", label);
    json_decref(root);
    return rc;
}

/* ---- names ---------------------------------------------------------------------------------- */

/* `base` + ".weight" or its old name ".gamma" (".bias" / ".beta"), whichever the source has. */
static void ln_name(const model_source *src, const char *base, int bias, char *buf, size_t size)
{
    snprintf(buf, size, "%s.%s", base, bias ? "beta" : "gamma");
    if (!model_has(src, buf))
        snprintf(buf, size, "%s.%s", base, bias ? "bias" : "weight");
}

/* A size `v` from dimension `what` of `tensor`, which config.json's `key` (0: absent) must
 * equal. */
static int size_from(const model_source *src, const char *tensor, const char *what, int64_t v,
                     int *field, const char *key, pgd_error **err)
{
    int got;
    int rc = model_size(src, tensor, what, v, MODEL_SIZE_MAX, &got, err);
    if (!rc && *field && *field != got)
        return pgd_error_set(err, PGD_ERR_SHAPE, "%s: '%s' has %s %d but config.json's %s is %d",
                             src->label, tensor, what, got, key, *field);
    *field = got;
    return rc;
}

static int shape2(const model_source *src, const char *name, int64_t s[8], pgd_error **err)
{
    int nd;
    if (src->shape(src->u, name, &nd, s))
        return pgd_error_set(err, PGD_ERR_NOT_FOUND, "%s: no tensor '%s'", src->label, name);
    if (nd != 2)
        return pgd_error_set(err, PGD_ERR_SHAPE, "%s: '%s' has %d dims, not 2", src->label, name,
                             nd);
    return PGD_OK;
}

static int detect_prefix(const model_source *src, bert_config *c, pgd_error **err)
{
    static const char *const prefixes[] = {"bert.", "roberta.", "distilbert.", ""};
    char name[96];
    for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++) {
        snprintf(name, sizeof name, "%sembeddings.word_embeddings.weight", prefixes[i]);
        if (model_has(src, name)) {
            snprintf(c->prefix, sizeof c->prefix, "%s", prefixes[i]);
            return PGD_OK;
        }
    }
    return pgd_error_set(err, PGD_ERR_NOT_FOUND,
                         "%s: no 'embeddings.word_embeddings.weight' (with or without a bert., "
                         "roberta. or distilbert. prefix): not a BERT-family checkpoint",
                         src->label);
}

/* The first layer's FFN input weight, whose rows give the intermediate size. */
static void fc1_name(const bert_config *c, int i, char *buf, size_t size)
{
    if (c->arch == BERT_ARCH_DISTIL)
        snprintf(buf, size, "%stransformer.layer.%d.ffn.lin1.weight", c->prefix, i);
    else
        snprintf(buf, size, "%sencoder.layer.%d.intermediate.dense.weight", c->prefix, i);
}

static int detect_layers(const model_source *src, bert_config *c, pgd_error **err)
{
    char pre[64];
    snprintf(pre, sizeof pre, "%s%s", c->prefix,
             c->arch == BERT_ARCH_DISTIL ? "transformer.layer." : "encoder.layer.");
    int n = model_count_indexed(src, pre, ".");
    char name[128];
    int64_t s[8];
    /* A source that lists no names (seeded weights) is asked layer by layer: config.json's
     * num_hidden_layers is checked against the checkpoint either way. */
    for (int i = 0; n < 0 && i <= 4096; i++) {
        fc1_name(c, i, name, sizeof name);
        n = model_has(src, name) ? -1 : i;
    }
    if (n < 0)
        return pgd_error_set(err, PGD_ERR_TOO_LARGE, "%s: more than 4096 layers", src->label);
    if (n == 0)
        return pgd_error_set(err, PGD_ERR_NOT_FOUND, "%s: no '%s0.*' tensors (%s naming)",
                             src->label, pre, bert_arch_name(c->arch));
    if (n > 0 && c->layers && n != c->layers)
        return pgd_error_set(err, PGD_ERR_SHAPE,
                             "%s: the names hold %d layers ('%sN.') but config.json says %d",
                             src->label, n, pre, c->layers);
    if (n > 0)
        c->layers = n;
    fc1_name(c, 0, name, sizeof name);
    int rc = shape2(src, name, s, err);
    if (!rc)
        rc = size_from(src, name, "rows (intermediate size)", s[0], &c->inter,
                       c->arch == BERT_ARCH_DISTIL ? "hidden_dim" : "intermediate_size", err);
    return rc;
}

int bert_detect(const model_source *src, bert_config *c, pgd_error **err)
{
    int rc = detect_prefix(src, c, err);
    if (!rc && ((c->arch == BERT_ARCH_DISTIL) != !strcmp(c->prefix, "distilbert.")) && c->prefix[0])
        rc = pgd_error_set(err, PGD_ERR_FORMAT,
                           "%s: the names begin '%s' but config.json's model_type is \"%s\"",
                           src->label, c->prefix, bert_arch_name(c->arch));
    char name[128];
    int64_t s[8];
    const char *hk = c->arch == BERT_ARCH_DISTIL ? "dim" : "hidden_size";
    snprintf(name, sizeof name, "%sembeddings.word_embeddings.weight", c->prefix);
    if (!rc && !(rc = shape2(src, name, s, err)))
        rc = size_from(src, name, "rows (vocabulary)", s[0], &c->vocab, "vocab_size", err);
    if (!rc)
        rc = size_from(src, name, "columns (width)", s[1], &c->hidden, hk, err);
    if (!rc && c->hidden % c->heads)
        rc = pgd_error_set(err, PGD_ERR_FORMAT,
                           "config.json: %d heads do not divide the width "
                           "%d of '%s'",
                           c->heads, c->hidden, name);
    snprintf(name, sizeof name, "%sembeddings.position_embeddings.weight", c->prefix);
    if (!rc && !(rc = shape2(src, name, s, err)))
        rc = size_from(src, name, "rows (positions)", s[0], &c->max_pos, "max_position_embeddings",
                       err);
    snprintf(name, sizeof name, "%sembeddings.token_type_embeddings.weight", c->prefix);
    if (!rc && c->arch != BERT_ARCH_DISTIL && !(rc = shape2(src, name, s, err)))
        rc = size_from(src, name, "rows (token types)", s[0], &c->type_vocab, "type_vocab_size",
                       err);
    if (!rc)
        rc = detect_layers(src, c, err);
    if (!rc && c->arch == BERT_ARCH_ROBERTA && c->max_pos <= c->pad_id + 1)
        rc = pgd_error_set(err, PGD_ERR_FORMAT,
                           "%s: %d positions leave none after RoBERTa's offset pad_token_id + 1 "
                           "= %d (config.json)",
                           src->label, c->max_pos, c->pad_id + 1);
    static const char *const heads[] = {"cls.predictions.transform.dense.weight",
                                        "lm_head.dense.weight", "vocab_transform.weight"};
    c->mlm = !rc && model_has(src, heads[c->arch]);
    return rc;
}

/* ---- the seeded random model ---------------------------------------------------------------- */

void bert_random_config(int vocab, bert_config *c)
{
    memset(c, 0, sizeof *c);
    *c = (bert_config){.arch = BERT_ARCH_BERT,
                       .layers = 2,
                       .hidden = 64,
                       .heads = 4,
                       .inter = 128,
                       .vocab = vocab,
                       .max_pos = 128,
                       .type_vocab = 2,
                       .pad_id = 0,
                       .act = BERT_ACT_GELU,
                       .mlm = 1,
                       .eps = 1e-12f};
    snprintf(c->prefix, sizeof c->prefix, "bert.");
}

/* The shape of a BertForMaskedLM tensor of configuration cfg (-1: no such tensor). */
static int random_shape(const void *cfg, const char *name, int *ndim, int64_t s[8])
{
    const bert_config *c = cfg;
    int64_t D = c->hidden, I = c->inter, V = c->vocab;
    int w = strlen(name) > 7 && !strcmp(name + strlen(name) - 7, ".weight");
    *ndim = 1;
    s[0] = D;
    if (!strcmp(name, "cls.predictions.bias"))
        return s[0] = V, 0;
    if (!strncmp(name, "bert.embeddings.", 16)) {
        const char *r = name + 16;
        int64_t rows = !strcmp(r, "word_embeddings.weight")         ? V
                       : !strcmp(r, "position_embeddings.weight")   ? c->max_pos
                       : !strcmp(r, "token_type_embeddings.weight") ? c->type_vocab
                                                                    : 0;
        if (rows)
            return *ndim = 2, s[0] = rows, s[1] = D, 0;
        return strncmp(r, "LayerNorm.", 10) ? -1 : 0;
    }
    int i = -1, len = 0;
    const char *r = name;
    if (sscanf(name, "bert.encoder.layer.%d.%n", &i, &len) == 1 && len > 0 && i < c->layers)
        r = name + len;
    else if (strncmp(name, "cls.predictions.transform.", 26))
        return -1;
    if (strstr(r, "LayerNorm."))
        return 0;
    if (strstr(r, "intermediate.dense."))
        return w ? (*ndim = 2, s[0] = I, s[1] = D, 0) : (s[0] = I, 0);
    if (!strncmp(r, "output.dense.", 13))
        return w ? (*ndim = 2, s[0] = D, s[1] = I, 0) : 0;
    if (strstr(r, "attention.") || strstr(r, "dense."))
        return w ? (*ndim = 2, s[0] = D, s[1] = D, 0) : 0;
    return -1;
}

/* model_random_source's rule (LayerNorm scales 1 ± 0.1, biases ±0.01, the rest ±0.035), with
 * BERT's "LayerNorm" names recognised as norms; the configuration and seed are held by u. */
typedef struct bert_rand {
    bert_config cfg;
    uint64_t seed;
} bert_rand;

static int rand_shape(void *u, const char *name, int *ndim, int64_t s[8])
{
    return random_shape(&((bert_rand *)u)->cfg, name, ndim, s);
}

static int rand_read(void *u, const char *name, float *dst, pgd_error **err)
{
    const bert_rand *r = u;
    int nd;
    int64_t s[8], n = 1;
    if (random_shape(&r->cfg, name, &nd, s))
        return pgd_error_set(err, PGD_ERR_NOT_FOUND, "random weights: no tensor '%s'", name);
    uint64_t h = r->seed * 0x9E3779B97F4A7C15ull;
    for (const char *p = name; *p; p++)
        h = (h ^ (unsigned char)*p) * 0x100000001B3ull;
    for (int i = 0; i < nd; i++)
        n *= s[i];
    size_t len = strlen(name);
    int norm = strstr(name, "LayerNorm.weight") != NULL;
    int bias = len > 5 && !strcmp(name + len - 5, ".bias");
    model_fill_seeded(dst, n, h ? h : 1, 1.0f);
    for (int64_t i = 0; i < n; i++)
        dst[i] = norm ? 1.0f + 0.1f * dst[i] : (bias ? 0.01f : 0.035f) * dst[i];
    return PGD_OK;
}

static const char *rand_meta(void *u, const char *key)
{
    (void)u;
    (void)key;
    return NULL;
}

int bert_random_source(model_source *src, const bert_config *cfg, uint64_t seed, pgd_error **err)
{
    memset(src, 0, sizeof *src);
    bert_rand *r = malloc(sizeof *r);
    if (!r)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "random weights");
    r->cfg = *cfg;
    r->seed = seed;
    *src = (model_source){.u = r,
                          .label = "random weights",
                          .shape = rand_shape,
                          .read = rand_read,
                          .meta = rand_meta,
                          .release = free};
    return PGD_OK;
}

/* Used by bert.c: the LayerNorm names of `base`. */
void bert__ln_names(const model_source *src, const char *base, char *w, char *b, size_t size);
void bert__ln_names(const model_source *src, const char *base, char *w, char *b, size_t size)
{
    ln_name(src, base, 0, w, size);
    ln_name(src, base, 1, b, size);
}
