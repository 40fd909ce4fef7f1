/* bert_run.c — the run under `pagoda fill-mask` and `pagoda embed-text` (bert_cmd.h): model,
 * configuration and tokenizer from --weights (or the seeded random model with its built-in
 * vocabulary), the texts tokenized into one right-padded batch, the forward pass, and the
 * attention map of the first text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bert_cmd.h"
#include "text_map.h"

/* The random model's vocabulary: BERT's specials, common English words, punctuation, and every
 * lower-case letter and digit alone and as a "##" continuation, so that any ASCII text
 * tokenizes without [UNK]. */
static const char builtin_words[] =
    "the of and a to in is was he for it with as his on be at by i this had not are but from "
    "or have an they which one you were her all she there would their we him been has when who "
    "will more no if out so said what up its about into than them can only other new some could "
    "time these two may then do first any my now such like our over man me even most made after "
    "also did many before must through back years where much your way well down should because "
    "each just those people how too little state good very make world still own see men work "
    "long get here between both life being under never day same another know while last might "
    "us great old year off come since against go came right used take three paris france "
    "capital city london england river country . , ; : ! ? ' \" ( ) -";
static const char builtin_chars[] = "abcdefghijklmnopqrstuvwxyz0123456789";

static int builtin_tokenizer(tokenizer **t, pgd_error **err)
{
    size_t cap = 4096;
    char *v = malloc(cap);
    if (!v)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "the built-in vocabulary");
    int n = snprintf(v, cap, "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n");
    for (const char *w = builtin_words; *w;) {
        size_t len = strcspn(w, " ");
        n += snprintf(v + n, cap - n, "%.*s\n", (int)len, w);
        w += len + (w[len] == ' ');
    }
    for (int k = 0; k < 2; k++)
        for (const char *c = builtin_chars; *c; c++)
            if (k || (*c != 'a' && *c != 'i')) /* the words "a" and "i" are in already */
                n += snprintf(v + n, cap - n, "%s%c\n", k ? "##" : "", *c);
    int rc = tokenizer_wordpiece_from_text(v, (size_t)n, "the built-in vocabulary", 1, t, err);
    free(v);
    return rc;
}

static int open_random(bert_run *r, pgd_error **err)
{
    int rc = r->o.tokenizer ? text_load_tokenizer(&r->files, r->o.tokenizer, &r->tok, err)
                            : builtin_tokenizer(&r->tok, err);
    if (rc)
        return rc;
    bert_random_config(tokenizer_vocab_size(r->tok), &r->cfg);
    r->random = 1;
    fprintf(stderr,
            "pagoda: note: no --weights: a seeded random BERT (%d layers, width %d, %d heads, "
            "%d tokens): its answers mean nothing; a trained one in one command: pagoda %s "
            "--weights hf:%s ...\n",
            r->cfg.layers, r->cfg.hidden, r->cfg.heads, r->cfg.vocab,
            r->o.fill ? "fill-mask" : "embed-text",
            r->o.fill ? "google-bert/bert-base-uncased" : "sentence-transformers/all-MiniLM-L6-v2");
    return bert_random_source(&r->src, &r->cfg, 1, err);
}

static int open_weights(bert_run *r, pgd_error **err)
{
    int rc = text_files_find(r->o.weights, &r->files, err);
    char *text = NULL;
    size_t n = 0;
    char label[4300];
    snprintf(label, sizeof label, "%s/config.json", r->files.dir);
    if (!rc &&
        (rc = text_read_beside(&r->files, "config.json", &text, &n, err)) == PGD_ERR_NOT_FOUND)
        rc = pgd_error_set(err, PGD_ERR_NOT_FOUND,
                           "%s: no config.json beside the weights: the head count, activation "
                           "and epsilon are read from it (never guessed)",
                           r->files.dir);
    if (!rc)
        rc = bert_config_parse(text, n, label, &r->cfg, err);
    free(text);
    if (!rc)
        rc = model_source_open(&r->src, r->files.weights, err);
    if (!rc)
        rc = bert_detect(&r->src, &r->cfg, err);
    if (!rc)
        rc = text_load_tokenizer(&r->files, r->o.tokenizer, &r->tok, err);
    if (!rc && r->files.lower_assumed && !strstr(r->files.tokenizer, ".json"))
        fprintf(stderr,
                "pagoda: note: %s: no tokenizer_config.json beside it: lower-casing "
                "assumed (BertTokenizer's default do_lower_case)\n",
                r->files.tokenizer);
    if (!rc && r->o.fill && !r->cfg.mlm)
        rc = pgd_error_set(err, PGD_ERR_UNSUPPORTED,
                           "%s: no masked-LM head (a headless %s): fill-mask needs "
                           "BertForMaskedLM or its kin; embed-text runs it",
                           r->files.weights, bert_arch_name(r->cfg.arch));
    return rc;
}

/* One text's ids with the model's framing: [CLS] ... [SEP] from WordPiece's encode, <s> ...
 * </s> around byte-level BPE's (RoBERTa): a tokenizer.json's post-processor adds them, a
 * vocab.json + merges.txt tokenizer does not, and then they are added here. */
static int encode(bert_run *r, const char *text, int32_t **ids, size_t *n, pgd_error **err)
{
    int rc = tokenizer_encode(r->tok, text, strlen(text), 1, ids, n, err);
    int32_t bos = tokenizer_id(r->tok, "<s>", 3), eos = tokenizer_id(r->tok, "</s>", 4);
    if (rc || tokenizer_get_kind(r->tok) != TOKENIZER_BPE || bos < 0 || eos < 0 ||
        (*n && (*ids)[0] == bos))
        return rc;
    int32_t *w = realloc(*ids, (*n + 2) * sizeof *w);
    if (!w)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "tokens");
    memmove(w + 1, w, *n * sizeof *w);
    w[0] = bos, w[*n + 1] = eos;
    *ids = w, *n += 2;
    return PGD_OK;
}

static int has_mask(const bert_run *r, const int32_t *ids, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (ids[i] == r->mask_id)
            return 1;
    return 0;
}

/* The texts as one batch, right-padded with the padding id (masked out). */
static int tokenize(bert_run *r, pgd_error **err)
{
    int B = r->o.ntexts, rc = PGD_OK;
    int32_t **seq = calloc((size_t)B, sizeof *seq);
    size_t *n = calloc((size_t)B, sizeof *n);
    r->first = calloc((size_t)B, sizeof *r->first);
    r->len = calloc((size_t)B, sizeof *r->len);
    if (!seq || !n || !r->first || !r->len)
        rc = pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "tokens");
    r->mask_id = tokenizer_id(r->tok, "[MASK]", 6);
    if (r->mask_id < 0)
        r->mask_id = tokenizer_id(r->tok, "<mask>", 6);
    int S = 0;
    for (int b = 0; b < B && !rc; b++) {
        rc = encode(r, r->o.texts[b], &seq[b], &n[b], err);
        if (!rc && r->o.fill && !has_mask(r, seq[b], n[b]))
            rc = pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT,
                               "text %d has no mask token (%s) to fill in", b + 1,
                               r->mask_id < 0 ? "the tokenizer has none" : "[MASK] or <mask>");
        if (!rc && (n[b] < 1 || n[b] > (size_t)r->cfg.max_pos))
            rc = pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT,
                               "text %d is %zu tokens: the model takes 1 to %d", b + 1, n[b],
                               r->cfg.max_pos);
        S = !rc && (int)n[b] > S ? (int)n[b] : S;
    }
    int pad = r->cfg.pad_id >= 0 ? r->cfg.pad_id : 0;
    if (!rc && (!(r->ids = malloc((size_t)B * S * sizeof *r->ids)) ||
                !(r->mask = calloc((size_t)B * S, sizeof *r->mask))))
        rc = pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "tokens");
    for (int b = 0; b < B && !rc; b++) {
        r->len[b] = (int)n[b];
        for (int s = 0; s < S; s++) {
            r->ids[(size_t)b * S + s] = s < (int)n[b] ? seq[b][s] : pad;
            r->mask[(size_t)b * S + s] = s < (int)n[b];
        }
    }
    r->B = B, r->S = S;
    for (int b = 0; seq && b < B; b++)
        free(seq[b]);
    free(seq);
    free(n);
    return rc;
}

static int forward(bert_run *r, pgd_error **err)
{
    size_t n = (size_t)r->B * r->S;
    const bert_config *c = &r->cfg;
    int rc = PGD_OK;
    if (!(r->hidden = malloc(n * c->hidden * sizeof *r->hidden)) ||
        (r->o.fill && !(r->logits = malloc(n * c->vocab * sizeof *r->logits))) ||
        (r->o.map &&
         !(r->probs = malloc((size_t)c->layers * n * r->S * c->heads * sizeof *r->probs))))
        rc = pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "the outputs");
    bert_batch in = {r->B, r->S, r->ids, r->mask, NULL};
    bert_outputs out = {r->hidden, r->logits, r->probs};
    if (!rc)
        rc = bert_forward(r->m, &in, &out, err);
    return rc;
}

/* A list of indices ("all", or "0,2,-1") below `count` into pick[] (1 each chosen). */
static int pick_list(const char *arg, const char *opt, int count, int dflt, unsigned char *pick)
{
    memset(pick, 0, (size_t)count);
    if (!arg) {
        for (int i = 0; i < count; i++)
            pick[i] = dflt < 0 || i == dflt;
        return EXIT_OK;
    }
    if (!strcmp(arg, "all")) {
        memset(pick, 1, (size_t)count);
        return EXIT_OK;
    }
    char buf[256];
    snprintf(buf, sizeof buf, "%s", arg);
    for (char *save = NULL, *p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
        int64_t v;
        if (pgd_parse_int64(p, -count, count - 1, &v))
            return app_usage_error(NULL,
                                   "%s wants all, or indices from %d to %d separated by "
                                   "commas, got '%s'",
                                   opt, -count, count - 1, arg);
        pick[v < 0 ? v + count : v] = 1;
    }
    return EXIT_OK;
}

/* The first text's attention, each chosen (layer, head), into the staged PNG. */
static int draw_map(bert_run *r)
{
    const bert_config *c = &r->cfg;
    unsigned char lp[4096], hp[4096];
    int rc = pick_list(r->o.layers, "--layers", c->layers, c->layers - 1, lp);
    if (!rc)
        rc = pick_list(r->o.heads, "--heads", c->heads, -1, hp);
    int T = r->len[0], f = r->first[0], count = 0;
    for (int l = 0; !rc && l < c->layers; l++)
        for (int h = 0; h < c->heads; h++)
            count += lp[l] && hp[h];
    float *maps = rc ? NULL : malloc((size_t)count * T * T * sizeof *maps);
    char(*titles)[48] = rc ? NULL : malloc((size_t)count * sizeof *titles);
    const char **tp = rc ? NULL : malloc((size_t)(count + T) * sizeof *tp);
    char(*toks)[64] = rc ? NULL : malloc((size_t)T * sizeof *toks);
    pgd_error *err = NULL;
    if (!rc && (!maps || !titles || !tp || !toks))
        rc = app_fail(pgd_error_set(&err, PGD_ERR_OUT_OF_HOST_MEMORY, "the attention map") ? err
                                                                                           : NULL);
    for (int l = 0, k = 0; !rc && l < c->layers; l++)
        for (int h = 0; h < c->heads; h++) {
            if (!lp[l] || !hp[h])
                continue;
            const float *p = r->probs + (((size_t)l * r->B) * c->heads + h) * r->S * r->S;
            for (int i = 0; i < T; i++)
                memcpy(maps + ((size_t)k * T + i) * T, p + (size_t)(f + i) * r->S + f,
                       (size_t)T * sizeof *maps);
            snprintf(titles[k], sizeof titles[k], "layer %d head %d", l, h);
            tp[k] = titles[k];
            k++;
        }
    for (int i = 0; !rc && i < T; i++) {
        size_t len = 0;
        const char *s = tokenizer_token(r->tok, r->ids[f + i], &len);
        snprintf(toks[i], sizeof toks[i], "%.*s", (int)(len < 63 ? len : 63), s ? s : "?");
        tp[count + i] = toks[i];
    }
    if (!rc && (text_map_write_png(r->map, maps, count, T, tp, tp + count, &err) ||
                pgd_outfile_commit(r->map, &err)))
        rc = app_fail(err);
    if (!rc)
        r->map = NULL; /* committed */
    free(maps), free(titles), free(tp), free(toks);
    return rc;
}

static int run_all(bert_run *r, int (*report)(bert_run *r))
{
    pgd_error *err = NULL;
    int rc = r->o.map ? pgd_outfile_open(r->o.map, &r->map, &err) : PGD_OK;
    if (!rc)
        rc = r->o.weights ? open_weights(r, &err) : open_random(r, &err);
    if (rc)
        return app_fail(err);
    if ((rc = app_ctx_open(r->o.device, &r->ctx)))
        return rc;
    if (bert_load(r->ctx, &r->src, &r->cfg, &r->m, &err) || tokenize(r, &err) || forward(r, &err))
        return app_fail(err);
    rc = report(r);
    if (!rc && r->map)
        rc = draw_map(r);
    if (!rc && r->o.map && !r->o.json)
        fprintf(stderr, "pagoda: attention map of text 1 written to %s\n", r->o.map);
    return rc;
}

int bert_run_command(bert_run *r, int (*report)(bert_run *r))
{
    bert_opts o = r->o;
    memset(r, 0, sizeof *r);
    r->o = o;
    int rc = run_all(r, report);
    pgd_outfile_abort(r->map);
    bert_free(r->m);
    model_source_free(&r->src);
    tokenizer_free(r->tok);
    pgd_ctx_destroy(r->ctx);
    free(r->ids), free(r->mask), free(r->first), free(r->len);
    free(r->hidden), free(r->logits), free(r->probs);
    return rc;
}

/* ---- shared output -------------------------------------------------------------------------- */

json_t *bert_token_json(const bert_run *r, int id)
{
    size_t len = 0;
    const char *s = tokenizer_token(r->tok, id, &len);
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%.*s", (int)(len < 1024 ? len : 1024), s ? s : "");
    return s ? app_json_text(tmp) : json_null();
}

json_t *bert_tokens_json(const bert_run *r, int b)
{
    json_t *a = json_array();
    for (int s = r->first[b]; a && s < r->first[b] + r->len[b]; s++)
        json_array_append_new(a, bert_token_json(r, r->ids[(size_t)b * r->S + s]));
    return a;
}

const char *bert_token_text(const bert_run *r, int id, char *buf, size_t size)
{
    size_t len = 0;
    const char *s = tokenizer_token(r->tok, id, &len);
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%.*s", (int)(len < 1024 ? len : 1024), s ? s : "?");
    return app_term_text(tmp, buf, size);
}

json_t *bert_doc(const bert_run *r, const char *key, json_t *value)
{
    const bert_config *c = &r->cfg;
    json_t *model = json_pack("{s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:s, s:b}", "family", "bert",
                              "arch", bert_arch_name(c->arch), "layers", c->layers, "hidden",
                              c->hidden, "heads", c->heads, "vocab", c->vocab, "positions",
                              c->max_pos, "activation", bert_act_name(c->act), "mlm", c->mlm);
    json_t *doc = json_pack(
        "{s:o, s:b, s:o, s:o, s:o, s:o}", "weights",
        r->random ? json_null() : app_json_text(r->files.weights), "random", r->random, "tokenizer",
        r->files.tokenizer[0] ? app_json_text(r->files.tokenizer) : json_string("built-in"),
        "device", app_device_json(pgd_ctx_get_device(r->ctx)), "model", model, key, value);
    if (doc && r->o.map)
        json_object_set_new(doc, "attention_map", app_json_text(r->o.map));
    return doc;
}
