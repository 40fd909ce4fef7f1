/* bert_cmd.c — `pagoda fill-mask` and `pagoda embed-text`: a BERT-family encoder (bert.h) over
 * texts tokenized by the tokenizer beside its weights (text_files.h), the masked words' top-k
 * candidates or the sentences' embeddings, and the token x token attention as a picture
 * (text_map.h). */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bert.h"
#include "bert_cmd.h"
#include "commands.h"
#include "text_files.h"
#include "text_map.h"

static const char fill_usage[] =
    "usage: pagoda fill-mask [--weights DIR|FILE|hf:ORG/NAME] [--top-k K] [--json]\n"
    "                        [--attention-map OUT.png [--layers L] [--heads H]] TEXT...\n"
    "\n"
    "Fills in the masked words of each TEXT with a masked language model (BERT, DistilBERT,\n"
    "RoBERTa: BertForMaskedLM and its kin as Hugging Face's transformers saves them): every\n"
    "token attends to every other token of its text, before and after it, and the model gives\n"
    "each [MASK] (RoBERTa: <mask>) a distribution over its vocabulary; the K most probable\n"
    "tokens are printed with their probabilities and the text they make. Several texts run as\n"
    "one batch, padded to the longest (the padding is masked out of the attention).\n"
    "\n" BERT_COMMON_HELP "  --top-k K          candidates per mask (default 5)\n"
    "  --json             the results as JSON: per text its tokens and per mask the candidates\n"
    "                     (token, id, probability, the filled-in text)\n"
    "  -h, --help         show this help\n"
    "\n"
    "Example: pagoda fill-mask --weights hf:google-bert/bert-base-uncased \\\n"
    "             \"Paris is the [MASK] of France.\"\n";

static const char embed_usage[] =
    "usage: pagoda embed-text [--weights DIR|FILE|hf:ORG/NAME] [--pooling mean|cls]\n"
    "                         [--normalize] [--json] [--attention-map OUT.png [--layers L]\n"
    "                         [--heads H]] TEXT...\n"
    "\n"
    "Sentence embeddings of each TEXT from a BERT-family encoder, as sentence-transformers\n"
    "computes them: the last layer's token vectors averaged over the text's tokens (the\n"
    "padding of a batch left out; [CLS] and [SEP] included), or with --pooling cls the first\n"
    "token's vector. With two texts or more the cosine similarity of every pair is printed too.\n"
    "\n" BERT_COMMON_HELP "  --pooling P        mean (default) or cls\n"
    "  --normalize        scale each embedding to unit length (models whose sentence-\n"
    "                     transformers pipeline ends with Normalize, e.g. all-MiniLM-L6-v2)\n"
    "  --json             the results as JSON: per text its token count and embedding, and\n"
    "                     the similarity matrix\n"
    "  -h, --help         show this help\n"
    "\n"
    "Example: pagoda embed-text --weights hf:sentence-transformers/all-MiniLM-L6-v2 \\\n"
    "             --normalize \"A cat sits on the mat.\" \"A dog lies on the rug.\"\n";

/* ---- options -------------------------------------------------------------------------------- */

enum {
    O_WEIGHTS = 1,
    O_TOKENIZER,
    O_DEVICE,
    O_TOPK,
    O_JSON,
    O_POOL,
    O_NORM,
    O_MAP,
    O_LAYERS,
    O_HEADS
};

static int parse_one(bert_opts *o, int c, const char *arg, const char *cmd)
{
    int64_t v;
    switch (c) {
    case O_WEIGHTS: o->weights = arg; return EXIT_OK;
    case O_TOKENIZER: o->tokenizer = arg; return EXIT_OK;
    case O_DEVICE: o->device = arg; return EXIT_OK;
    case O_JSON: o->json = 1; return EXIT_OK;
    case O_NORM: o->normalize = 1; return EXIT_OK;
    case O_MAP: o->map = arg; return EXIT_OK;
    case O_LAYERS: o->layers = arg; return EXIT_OK;
    case O_HEADS: o->heads = arg; return EXIT_OK;
    case O_TOPK:
        if (pgd_parse_int64(arg, 1, 1000, &v))
            return app_usage_error(cmd, "--top-k wants 1..1000, got '%s'", arg);
        o->top_k = (int)v;
        return EXIT_OK;
    case O_POOL:
        if (strcmp(arg, "mean") && strcmp(arg, "cls"))
            return app_usage_error(cmd, "--pooling wants mean or cls, got '%s'", arg);
        o->pool_cls = !strcmp(arg, "cls");
        return EXIT_OK;
    default: return app_usage_error(cmd, "bad option");
    }
}

static int parse(int argc, char **argv, bert_opts *o, int fill)
{
    static const struct option fill_opts[] = {
        {"weights", 1, 0, O_WEIGHTS}, {"tokenizer", 1, 0, O_TOKENIZER},
        {"device", 1, 0, O_DEVICE},   {"top-k", 1, 0, O_TOPK},
        {"json", 0, 0, O_JSON},       {"attention-map", 1, 0, O_MAP},
        {"layers", 1, 0, O_LAYERS},   {"heads", 1, 0, O_HEADS},
        {"help", 0, 0, 'h'},          {0, 0, 0, 0}};
    static const struct option embed_opts[] = {{"weights", 1, 0, O_WEIGHTS},
                                               {"tokenizer", 1, 0, O_TOKENIZER},
                                               {"device", 1, 0, O_DEVICE},
                                               {"pooling", 1, 0, O_POOL},
                                               {"normalize", 0, 0, O_NORM},
                                               {"json", 0, 0, O_JSON},
                                               {"attention-map", 1, 0, O_MAP},
                                               {"layers", 1, 0, O_LAYERS},
                                               {"heads", 1, 0, O_HEADS},
                                               {"help", 0, 0, 'h'},
                                               {0, 0, 0, 0}};
    const char *cmd = fill ? "fill-mask " : "embed-text ";
    int c;
    memset(o, 0, sizeof *o);
    o->fill = fill;
    o->top_k = 5;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", fill ? fill_opts : embed_opts, NULL)) != -1) {
        if (c == 'h') {
            fputs(fill ? fill_usage : embed_usage, stdout);
            return -1;
        }
        int rc = c == '?' ? app_usage_error(cmd, "bad option") : parse_one(o, c, optarg, cmd);
        if (rc)
            return rc;
    }
    if ((o->layers || o->heads) && !o->map)
        return app_usage_error(cmd, "--layers and --heads choose what --attention-map draws: "
                                    "give --attention-map OUT.png");
    if (optind >= argc)
        return app_usage_error(cmd, "give one TEXT or more");
    if (argc - optind > 256)
        return app_usage_error(cmd, "at most 256 texts, got %d", argc - optind);
    o->texts = argv + optind;
    o->ntexts = argc - optind;
    return EXIT_OK;
}

/* ---- fill-mask ------------------------------------------------------------------------------ */

/* The k best of row (n logits) by softmax probability: ids in best[], probabilities in p[]. */
static void top_k(const float *row, int n, int k, int *best, double *p)
{
    double mx = -INFINITY, sum = 0.0;
    for (int v = 0; v < n; v++)
        mx = row[v] > mx ? row[v] : mx;
    for (int v = 0; v < n; v++)
        sum += exp((double)row[v] - mx);
    int have = 0;
    for (int v = 0; v < n; v++) {
        int at = have < k ? have++ : k;
        while (at > 0 && row[best[at - 1]] < row[v]) {
            if (at < k)
                best[at] = best[at - 1];
            at--;
        }
        if (at < k)
            best[at] = v;
    }
    for (int i = 0; i < have; i++)
        p[i] = exp((double)row[best[i]] - mx) / sum;
}

/* The text of sequence b with position pos replaced by token id (special tokens skipped). */
static char *filled(const bert_run *r, int b, int pos, int id)
{
    int n = r->len[b];
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    if (!ids)
        return NULL;
    memcpy(ids, r->ids + (size_t)b * r->S + r->first[b], (size_t)n * sizeof *ids);
    ids[pos - r->first[b]] = id;
    char *text = NULL;
    size_t len = 0;
    pgd_error *err = NULL;
    if (tokenizer_decode(r->tok, ids, (size_t)n, 1, &text, &len, &err))
        pgd_error_destroy(err);
    free(ids);
    return text;
}

static json_t *mask_json(const bert_run *r, int b, int pos, const int *best, const double *p, int k)
{
    json_t *preds = json_array();
    for (int i = 0; preds && i < k; i++) {
        char *text = filled(r, b, pos, best[i]);
        json_array_append_new(preds, json_pack("{s:o, s:i, s:f, s:o}", "token",
                                               bert_token_json(r, best[i]), "id", best[i],
                                               "probability", p[i], "sequence",
                                               text ? app_json_text(text) : json_null()));
        free(text);
    }
    return json_pack("{s:i, s:o}", "position", pos - r->first[b], "predictions", preds);
}

static void mask_print(const bert_run *r, int b, int pos, const int *best, const double *p, int k)
{
    char shown[512], tok[256];
    printf("  %s at token %d:\n", bert_token_text(r, r->mask_id, tok, sizeof tok),
           pos - r->first[b]);
    for (int i = 0; i < k; i++) {
        char *text = filled(r, b, pos, best[i]);
        printf("    %.4f  %-14s %s\n", p[i], bert_token_text(r, best[i], tok, sizeof tok),
               text ? app_term_text(text, shown, sizeof shown) : "");
        free(text);
    }
}

static int fill_report(bert_run *r)
{
    const bert_opts *o = &r->o;
    int V = r->cfg.vocab, k = o->top_k < V ? o->top_k : V;
    int best[1000];
    double p[1000];
    json_t *results = o->json ? json_array() : NULL;
    char shown[1024];
    for (int b = 0; b < r->B; b++) {
        json_t *masks = o->json ? json_array() : NULL;
        if (!o->json)
            printf("%s%s\n", b ? "\n" : "", app_term_text(o->texts[b], shown, sizeof shown));
        for (int s = r->first[b]; s < r->first[b] + r->len[b]; s++) {
            if (r->ids[(size_t)b * r->S + s] != r->mask_id)
                continue;
            top_k(r->logits + ((size_t)b * r->S + s) * V, V, k, best, p);
            if (masks)
                json_array_append_new(masks, mask_json(r, b, s, best, p, k));
            else
                mask_print(r, b, s, best, p, k);
        }
        if (results)
            json_array_append_new(results,
                                  json_pack("{s:o, s:o, s:o}", "text", app_json_text(o->texts[b]),
                                            "tokens", bert_tokens_json(r, b), "masks", masks));
    }
    return results ? app_print_json(bert_doc(r, "results", results)) : EXIT_OK;
}

int cmd_fill_mask(int argc, char **argv)
{
    bert_run r;
    int rc = parse(argc, argv, &r.o, 1);
    if (rc)
        return rc < 0 ? EXIT_OK : rc;
    return bert_run_command(&r, fill_report);
}

/* ---- embed-text ----------------------------------------------------------------------------- */

/* Sequence b's embedding into e (dim floats): mean over its tokens, or its first token. */
static void pool(const bert_run *r, int b, float *e)
{
    int D = r->cfg.hidden;
    const float *h = r->hidden + (size_t)b * r->S * D;
    double norm = 0.0;
    for (int d = 0; d < D; d++) {
        double s = 0.0;
        if (r->o.pool_cls)
            s = h[(size_t)r->first[b] * D + d];
        else {
            for (int t = r->first[b]; t < r->first[b] + r->len[b]; t++)
                s += h[(size_t)t * D + d];
            s /= r->len[b];
        }
        e[d] = (float)s;
        norm += s * s;
    }
    for (int d = 0; r->o.normalize && norm > 0 && d < D; d++)
        e[d] = (float)(e[d] / sqrt(norm));
}

static double cosine(const float *a, const float *b, int n)
{
    double ab = 0, aa = 0, bb = 0;
    for (int i = 0; i < n; i++)
        ab += (double)a[i] * b[i], aa += (double)a[i] * a[i], bb += (double)b[i] * b[i];
    return aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : 0.0;
}

static void embed_print(const bert_run *r, const float *e)
{
    int D = r->cfg.hidden;
    char shown[1024];
    for (int b = 0; b < r->B; b++) {
        const float *v = e + (size_t)b * D;
        double n = 0;
        for (int d = 0; d < D; d++)
            n += (double)v[d] * v[d];
        printf("%s\n  %d tokens, %d dims, norm %.4f: [",
               app_term_text(r->o.texts[b], shown, sizeof shown), r->len[b], D, sqrt(n));
        for (int d = 0; d < D && d < 6; d++)
            printf("%s%.4f", d ? ", " : "", v[d]);
        printf("%s]\n", D > 6 ? ", ..." : "");
    }
    if (r->B < 2)
        return;
    printf("\ncosine similarity\n");
    for (int a = 0; a < r->B; a++) {
        printf("  %3d", a + 1);
        for (int b = 0; b < r->B; b++)
            printf(" %7.4f", cosine(e + (size_t)a * D, e + (size_t)b * D, D));
        printf("\n");
    }
}

static json_t *embed_json(const bert_run *r, const float *e)
{
    int D = r->cfg.hidden;
    json_t *results = json_array(), *sim = json_array();
    for (int b = 0; results && sim && b < r->B; b++) {
        json_t *v = json_array(), *row = json_array();
        for (int d = 0; v && d < D; d++)
            json_array_append_new(v, json_real(e[(size_t)b * D + d]));
        for (int c = 0; row && c < r->B; c++)
            json_array_append_new(row, json_real(cosine(e + (size_t)b * D, e + (size_t)c * D, D)));
        json_array_append_new(results,
                              json_pack("{s:o, s:i, s:o}", "text", app_json_text(r->o.texts[b]),
                                        "tokens", r->len[b], "embedding", v));
        json_array_append_new(sim, row);
    }
    json_t *doc = bert_doc(r, "results", results);
    if (doc) {
        json_object_set_new(doc, "pooling", json_string(r->o.pool_cls ? "cls" : "mean"));
        json_object_set_new(doc, "normalized", json_boolean(r->o.normalize));
        json_object_set_new(doc, "dim", json_integer(D));
        json_object_set_new(doc, "similarity", sim);
    } else
        json_decref(sim);
    return doc;
}

static int embed_report(bert_run *r)
{
    float *e = malloc((size_t)r->B * r->cfg.hidden * sizeof *e);
    if (!e) {
        fprintf(stderr, "pagoda: error: out of host memory\n");
        return EXIT_RUNTIME;
    }
    for (int b = 0; b < r->B; b++)
        pool(r, b, e + (size_t)b * r->cfg.hidden);
    int rc = EXIT_OK;
    if (r->o.json)
        rc = app_print_json(embed_json(r, e));
    else
        embed_print(r, e);
    free(e);
    return rc;
}

int cmd_embed_text(int argc, char **argv)
{
    bert_run r;
    int rc = parse(argc, argv, &r.o, 0);
    if (rc)
        return rc < 0 ? EXIT_OK : rc;
    return bert_run_command(&r, embed_report);
}
