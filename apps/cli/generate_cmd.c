/* generate_cmd.c — `pagoda generate`: text from GPT-2 (apps/models/gpt2*.h) with the KV cache,
 * greedy or sampled, streamed to the terminal as the tokens come; one prompt or a batch; the
 * token × token attention of chosen layers and heads as a picture (text_map.h). */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "commands.h"
#include "gpt2.h"
#include "gpt2_generate.h"
#include "gpt2_text.h"
#include "text_map.h"

#define MAX_STOPS 8

static const char usage[] =
    "usage: pagoda generate [--weights DIR|FILE|hf:ORG/NAME] [--tokenizer F] [--max-new N]\n"
    "                       [--top-k K] [--top-p P] [--temperature T] [--sample] [--seed S]\n"
    "                       [--stop TEXT]... [--no-eos] [--attention-map OUT.png]\n"
    "                       [--map-layers L,...|all] [--map-heads H,...|all] [--device D]\n"
    "                       [--weights-dtype f32|f16] [--json] PROMPT...\n"
    "\n"
    "Continues each PROMPT with GPT-2 (Hugging Face's GPT2LMHeadModel or GPT2Model). The prompt\n"
    "runs once, then every new token costs one position: each layer keeps the keys and values\n"
    "of the tokens so far (a KV cache). With one prompt the new text is printed as it comes;\n"
    "several prompts run as one batch (left-padded, the padding masked, as transformers'\n"
    "generate does) and are printed at the end.\n"
    "\n"
    "By default each token is the most likely one (greedy: transformers' do_sample=False).\n"
    "--temperature, --top-k, --top-p or --sample draw it instead, in transformers' order:\n"
    "logits / T, the K most likely kept, then the fewest most likely whose probabilities reach\n"
    "P; drawn with Pagoda's own generator seeded by --seed (the same text on every machine and\n"
    "device for the same seed, but not the text torch's generator would draw).\n"
    "\n"
    "Without --weights: a GPT-2 of seeded random weights (width 64, 2 layers) over the 256\n"
    "bytes, said on stderr; its text is noise.\n"
    "\n"
    "Options:\n"
    "  --weights W        a folder holding model.safetensors and config.json (n_embd and n_head\n"
    "                     are read from it) and the tokenizer (tokenizer.json, or vocab.json +\n"
    "                     merges.txt), as save_pretrained writes them; or the model.safetensors\n"
    "                     in such a folder; or hf:ORG/NAME (e.g. hf:openai-community/gpt2),\n"
    "                     pulled once into the Hugging Face cache\n"
    "  --tokenizer F      the tokenizer.json to use instead of the one beside the weights\n"
    "  --max-new N        new tokens at most per prompt (default 32)\n"
    "  --top-k K          keep the K most likely tokens (0: all; default 0)\n"
    "  --top-p P          keep the fewest most likely tokens whose probabilities sum to P\n"
    "                     (0 < P <= 1; default 1)\n"
    "  --temperature T    divide the logits by T > 0 (default 1)\n"
    "  --sample           draw tokens (implied by the three options above)\n"
    "  --seed S           the generator's seed (default 0)\n"
    "  --stop TEXT        end a sequence once its new text holds TEXT (up to 8 of them)\n"
    "  --no-eos           do not end a sequence at the end-of-text token (eos_token_id)\n"
    "  --attention-map F  writes the first prompt's attention, prompt and new tokens, as a PNG:\n"
    "                     a grid of token x token heat maps, one per layer and head (rows the\n"
    "                     query tokens, columns the keys; GPT-2's causal mask leaves the upper\n"
    "                     triangle grey)\n"
    "  --map-layers L     the layers to draw, from 0: a list (0,3), 'all', or 'last' (default)\n"
    "  --map-heads H      the heads to draw: a list or 'all' (default)\n"
    "  --device D         the OpenCL device (see pagoda devices)\n" APP_WEIGHTS_DTYPE_HELP
    "  --json             one JSON document: the prompts, their ids, the new ids and text, why\n"
    "                     each ended, the sampling, times and tokens per second\n"
    "  -h, --help         show this help\n";

typedef struct gen_opts {
    const char *weights, *tokenizer, *device, *map_path, *map_layers, *map_heads;
    const char *stops[MAX_STOPS];
    int n_stop, max_new, json, no_eos, sample;
    gpt2_sampling s;
    char **prompts;
    int n_prompts;
} gen_opts;

static int parse_number(int c, const char *arg, gen_opts *o)
{
    int64_t v;
    double d;
    switch (c) {
    case 'n':
        if (pgd_parse_int64(arg, 1, 1 << 20, &v))
            return app_usage_error("generate ", "--max-new '%s': expected 1 .. 1048576", arg);
        o->max_new = (int)v;
        return EXIT_OK;
    case 'k':
        if (pgd_parse_int64(arg, 0, 1 << 24, &v))
            return app_usage_error("generate ", "--top-k '%s': expected a whole number >= 0", arg);
        o->s.top_k = (int)v;
        o->sample = 1;
        return EXIT_OK;
    case 'p':
        if (pgd_parse_double(arg, 0, 1, &d) || !(d > 0))
            return app_usage_error("generate ", "--top-p '%s': expected 0 < P <= 1", arg);
        o->s.top_p = (float)d;
        o->sample = 1;
        return EXIT_OK;
    case 't':
        if (pgd_parse_double(arg, 0, 1e6, &d) || !(d > 0))
            return app_usage_error("generate ", "--temperature '%s': expected T > 0", arg);
        o->s.temperature = (float)d;
        o->sample = 1;
        return EXIT_OK;
    default: /* 'S' */
        if (pgd_parse_int64(arg, 0, INT64_MAX, &v))
            return app_usage_error("generate ", "--seed '%s': expected a whole number >= 0", arg);
        o->s.seed = (uint64_t)v;
        return EXIT_OK;
    }
}

static int parse_option(int c, gen_opts *o)
{
    switch (c) {
    case 'w': o->weights = optarg; return EXIT_OK;
    case 'T': o->tokenizer = optarg; return EXIT_OK;
    case 'd': o->device = optarg; return EXIT_OK;
    case 'm': o->map_path = optarg; return EXIT_OK;
    case 'L': o->map_layers = optarg; return EXIT_OK;
    case 'H': o->map_heads = optarg; return EXIT_OK;
    case 'x':
        if (o->n_stop == MAX_STOPS)
            return app_usage_error("generate ", "at most %d --stop texts", MAX_STOPS);
        if (!optarg[0])
            return app_usage_error("generate ", "--stop wants a non-empty text");
        o->stops[o->n_stop++] = optarg;
        return EXIT_OK;
    case 'j': o->json = 1; return EXIT_OK;
    case 'W': return app_set_weights_dtype("generate ", optarg);
    case 'e': o->no_eos = 1; return EXIT_OK;
    case 's': o->sample = 1; return EXIT_OK;
    case 'h': fputs(usage, stdout); return -1;
    case 'n':
    case 'k':
    case 'p':
    case 't':
    case 'S': return parse_number(c, optarg, o);
    default: return app_usage_error("generate ", "bad option");
    }
}

static int parse(int argc, char **argv, gen_opts *o)
{
    static const struct option opts[] = {{"weights", required_argument, 0, 'w'},
                                         {"tokenizer", required_argument, 0, 'T'},
                                         {"max-new", required_argument, 0, 'n'},
                                         {"top-k", required_argument, 0, 'k'},
                                         {"top-p", required_argument, 0, 'p'},
                                         {"temperature", required_argument, 0, 't'},
                                         {"seed", required_argument, 0, 'S'},
                                         {"stop", required_argument, 0, 'x'},
                                         {"no-eos", no_argument, 0, 'e'},
                                         {"sample", no_argument, 0, 's'},
                                         {"attention-map", required_argument, 0, 'm'},
                                         {"map-layers", required_argument, 0, 'L'},
                                         {"map-heads", required_argument, 0, 'H'},
                                         {"device", required_argument, 0, 'd'},
                                         {"json", no_argument, 0, 'j'},
                                         {"weights-dtype", required_argument, 0, 'W'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    memset(o, 0, sizeof *o);
    o->max_new = 32;
    o->s.top_p = 1.0f;
    o->s.temperature = 1.0f;
    int c, rc;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1)
        if ((rc = parse_option(c, o)))
            return rc;
    o->s.greedy = !o->sample;
    o->prompts = argv + optind;
    o->n_prompts = argc - optind;
    if (o->n_prompts < 1)
        return app_usage_error("generate ", "give a PROMPT (several for a batch)");
    if ((o->map_layers || o->map_heads) && !o->map_path)
        return app_usage_error("generate ", "--map-layers and --map-heads go with "
                                            "--attention-map");
    if (o->map_path) {
        pgd_error *err = NULL;
        if (pgd_outfile_check(o->map_path, &err))
            return app_fail_in("--attention-map", err);
    }
    return EXIT_OK;
}

typedef struct gen_model {
    gpt2_config cfg;
    model_source src;
    gpt2_model *m;
    tokenizer *tk;
    int random;
    char label[4200];
} gen_model;

static int open_files(const gen_opts *o, gen_model *g, pgd_error **err)
{
    gpt2_files f;
    int rc = gpt2_files_find(o->weights, &f, err);
    if (!rc)
        rc = gpt2_config_read(f.config, &g->cfg, err);
    if (!rc)
        rc = model_source_open(&g->src, strcpy(g->label, f.weights), err);
    if (!rc)
        rc = gpt2_detect(&g->src, f.config, &g->cfg, err);
    if (!rc)
        rc = o->tokenizer ? tokenizer_load_json(o->tokenizer, &g->tk, err)
                          : gpt2_files_tokenizer(&f, &g->tk, err);
    return rc;
}

static int open_model(const gen_opts *o, pgd_ctx *ctx, gen_model *g, pgd_error **err)
{
    int rc;
    if (o->weights) {
        rc = open_files(o, g, err);
    } else {
        g->random = 1;
        snprintf(g->label, sizeof g->label, "random weights");
        gpt2_random_config(&g->cfg);
        rc = gpt2_random_source(&g->src, &g->cfg, 1, err);
        if (!rc)
            rc = gpt2_detect(&g->src, "the random configuration", &g->cfg, err);
        if (!rc)
            rc = o->tokenizer ? tokenizer_load_json(o->tokenizer, &g->tk, err)
                              : gpt2_byte_tokenizer(&g->tk, err);
        fprintf(stderr,
                "pagoda: note: no --weights: a GPT-2 of seeded random weights (width "
                "%d, %d layers) over the 256 bytes: the text is noise\n"
                "pagoda: note: real weights in one command: pagoda generate --weights "
                "hf:openai-community/gpt2 \"Once upon a time\"\n",
                g->cfg.dim, g->cfg.layers);
    }
    if (!rc && tokenizer_vocab_size(g->tk) > g->cfg.vocab)
        rc = pgd_error_set(err, PGD_ERR_FORMAT,
                           "the tokenizer has %ld tokens but %s's vocabulary only %d",
                           (long)tokenizer_vocab_size(g->tk), g->label, g->cfg.vocab);
    if (!rc)
        app_note_assumed(g->label, &g->cfg.assumed);
    if (!rc)
        rc = gpt2_load(ctx, &g->src, &g->cfg, &g->m, err);
    return rc;
}

static void close_model(gen_model *g)
{
    gpt2_free(g->m);
    model_source_free(&g->src);
    tokenizer_free(g->tk);
}

/* ---- the run ---- */

typedef struct seq {
    int32_t *prompt;
    size_t n_prompt;
    const char *why; /* "eos", "stop", "length" */
} seq;

typedef struct gen_run {
    const gen_opts *o;
    gen_model *g;
    seq *seqs;
    int32_t eos;
    gpt2_generated out;
    int32_t *grown; /* the new ids of the sequence being checked, [max_new] */
    gpt2_stream stream;
    int streaming;
    pgd_error *err; /* a failure inside the callback */
} gen_run;

/* Writes model text to stdout with the bytes that would steer a terminal (C0 controls but
 * newline and tab, DEL, C1 controls) as \xNN: a model's text is data, not commands. */
static void put_text(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        int c1 = c == 0xC2 && i + 1 < n && (unsigned char)s[i + 1] >= 0x80 &&
                 (unsigned char)s[i + 1] <= 0x9F;
        if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7F)
            printf("\\x%02X", c);
        else if (c1)
            printf("\\xC2\\x%02X", (unsigned char)s[++i]);
        else
            putchar(c);
    }
}

/* Whether the new text of sequence b (ids[0..n)) holds a stop text. */
static int stop_seen(gen_run *r, const int32_t *ids, size_t n)
{
    if (!r->o->n_stop)
        return 0;
    char *text = NULL;
    size_t len = 0;
    if (tokenizer_decode(r->g->tk, ids, n, 1, &text, &len, r->err ? NULL : &r->err))
        return 1;
    int seen = 0;
    for (int k = 0; k < r->o->n_stop && !seen; k++)
        seen = strstr(text, r->o->stops[k]) != NULL;
    free(text);
    return seen;
}

static int on_token(void *u, int b, int index, int32_t id)
{
    gen_run *r = u;
    const int32_t *ids = r->out.ids + (size_t)b * r->o->max_new;
    size_t n = (size_t)index + 1;
    int eos = !r->o->no_eos && id == r->eos;
    if (r->streaming && index == 0) { /* the prompt once the prefill has run */
        put_text(r->o->prompts[0], strlen(r->o->prompts[0]));
        fflush(stdout);
    }
    if (r->streaming && !eos) {
        const char *s;
        size_t len;
        if (!gpt2_stream_next(&r->stream, ids, n, 0, &s, &len, r->err ? NULL : &r->err)) {
            put_text(s, len);
            fflush(stdout);
        }
    }
    int stop = !eos && stop_seen(r, ids, n);
    r->seqs[b].why = eos ? "eos" : stop ? "stop" : "length";
    return stop;
}

static int encode_prompts(gen_run *r, int **lens, pgd_error **err)
{
    const gen_opts *o = r->o;
    *lens = calloc((size_t)o->n_prompts, sizeof **lens);
    if (!*lens || !(r->seqs = calloc((size_t)o->n_prompts, sizeof *r->seqs)))
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "generate: prompts");
    for (int b = 0; b < o->n_prompts; b++) {
        seq *s = &r->seqs[b];
        int rc = tokenizer_encode(r->g->tk, o->prompts[b], strlen(o->prompts[b]), 0, &s->prompt,
                                  &s->n_prompt, err);
        if (rc)
            return rc;
        if (s->n_prompt == 0)
            return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT,
                                 "prompt %d is empty: GPT-2 continues at least one token", b + 1);
        (*lens)[b] = (int)s->n_prompt;
    }
    return PGD_OK;
}

static int run_generation(gen_run *r, pgd_error **err)
{
    const gen_opts *o = r->o;
    int *lens = NULL;
    int rc = encode_prompts(r, &lens, err);
    const int32_t **prompts = calloc((size_t)o->n_prompts, sizeof *prompts);
    if (!rc && !prompts)
        rc = pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "generate: prompts");
    for (int b = 0; !rc && b < o->n_prompts; b++)
        prompts[b] = r->seqs[b].prompt;
    int32_t stop = r->eos;
    gpt2_generation gen = {.max_new = o->max_new,
                           .stop_ids = &stop,
                           .n_stop = o->no_eos || r->eos < 0 ? 0 : 1,
                           .sampling = o->s,
                           .on_token = on_token,
                           .u = r};
    r->streaming = o->n_prompts == 1 && !o->json;
    r->stream.tk = r->g->tk;
    if (!rc)
        rc = gpt2_generate(r->g->m, prompts, lens, o->n_prompts, &gen, &r->out, err);
    if (!rc && r->err) { /* the callback's failure (decoding) */
        *err = r->err;
        r->err = NULL;
        rc = pgd_error_get_code(*err);
    }
    free(prompts);
    free(lens);
    return rc;
}

/* The new text of sequence b (the end-of-text token left out). */
static char *new_text(gen_run *r, int b, size_t *len, pgd_error **err)
{
    const int32_t *ids = r->out.ids + (size_t)b * r->o->max_new;
    size_t n = (size_t)r->out.n[b];
    if (n && !strcmp(r->seqs[b].why, "eos"))
        n--;
    char *text = NULL;
    if (tokenizer_decode(r->g->tk, ids, n, 0, &text, len, err))
        return NULL;
    return text;
}

static double tokens_per_s(const gen_run *r)
{
    long total = 0;
    for (int b = 0; b < r->o->n_prompts; b++)
        total += r->out.n[b];
    double ms = r->out.prefill_ms + r->out.decode_ms;
    return ms > 0 ? total * 1000.0 / ms : 0;
}

static json_t *ids_json(const int32_t *ids, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_integer(ids[i]));
    return a;
}

static int print_json(gen_run *r, pgd_ctx *ctx, pgd_error **err)
{
    const gen_opts *o = r->o;
    json_t *seqs = json_array();
    for (int b = 0; b < o->n_prompts; b++) {
        size_t len = 0;
        char *text = new_text(r, b, &len, err);
        if (!text) {
            json_decref(seqs);
            return EXIT_RUNTIME;
        }
        seq *s = &r->seqs[b];
        json_array_append_new(
            seqs, json_pack("{s:o, s:o, s:o, s:o, s:s}", "prompt", app_json_text(o->prompts[b]),
                            "prompt_ids", ids_json(s->prompt, s->n_prompt), "ids",
                            ids_json(r->out.ids + (size_t)b * o->max_new, (size_t)r->out.n[b]),
                            "text", app_json_text(text), "ended", s->why));
        free(text);
    }
    const gpt2_config *c = &r->g->cfg;
    json_t *sampling = o->s.greedy
                           ? json_pack("{s:s}", "mode", "greedy")
                           : json_pack("{s:s, s:i, s:f, s:f, s:I}", "mode", "sample", "top_k",
                                       o->s.top_k, "top_p", (double)o->s.top_p, "temperature",
                                       (double)o->s.temperature, "seed", (json_int_t)o->s.seed);
    json_t *doc = json_pack(
        "{s:s, s:o, s:b, s:{s:i, s:i, s:i, s:i, s:i}, s:o, s:o, s:i, s:f, s:f, s:i, s:f}", "model",
        "gpt2", "weights", app_json_text(r->g->label), "random_weights", r->g->random, "config",
        "n_embd", c->dim, "n_head", c->heads, "n_layer", c->layers, "vocab", c->vocab,
        "n_positions", c->positions, "sampling", sampling, "sequences", seqs, "prompt_tokens",
        r->out.prompt_len, "prefill_ms", r->out.prefill_ms, "decode_ms", r->out.decode_ms, "steps",
        r->out.steps, "tokens_per_s", tokens_per_s(r));
    if (doc && r->g->cfg.assumed.n)
        json_object_set_new(doc, "assumed", app_assumed_json(&r->g->cfg.assumed));
    if (doc)
        json_object_set_new(doc, "device", app_device_json(pgd_ctx_get_device(ctx)));
    return app_print_json(doc);
}

static int print_text(gen_run *r, pgd_error **err)
{
    const gen_opts *o = r->o;
    if (r->streaming) {
        const char *s;
        size_t len;
        const int32_t *ids = r->out.ids;
        size_t n = (size_t)r->out.n[0] - (r->seqs[0].why && !strcmp(r->seqs[0].why, "eos"));
        if (gpt2_stream_next(&r->stream, ids, n, 1, &s, &len, err))
            return EXIT_RUNTIME;
        put_text(s, len);
        fputc('\n', stdout);
    } else {
        for (int b = 0; b < o->n_prompts; b++) {
            size_t len = 0;
            char *text = new_text(r, b, &len, err);
            if (!text)
                return EXIT_RUNTIME;
            printf("[%d] ", b + 1);
            put_text(o->prompts[b], strlen(o->prompts[b]));
            put_text(text, len);
            fputc('\n', stdout);
            free(text);
        }
    }
    fflush(stdout); /* the text before the summary on a shared terminal */
    fprintf(stderr,
            "pagoda: %d prompt token%s, %d new in %.1f ms (prefill %.1f ms): %.1f "
            "tokens/s\n",
            r->out.prompt_len, r->out.prompt_len == 1 ? "" : "s", r->out.n[0],
            r->out.prefill_ms + r->out.decode_ms, r->out.prefill_ms, tokens_per_s(r));
    return EXIT_OK;
}

/* ---- --attention-map ---- */

/* A list option ("all", "last" for layers, or indices below n) as flags in pick[n]. */
static int pick_list(const char *arg, const char *option, int n, int last_default, int *pick,
                     pgd_error **err)
{
    memset(pick, 0, (size_t)n * sizeof *pick);
    if (!arg)
        arg = last_default ? "last" : "all";
    if (!strcmp(arg, "all") || (last_default && !strcmp(arg, "last"))) {
        for (int i = 0; i < n; i++)
            pick[i] = arg[0] == 'a' || i == n - 1;
        return PGD_OK;
    }
    int64_t v[256];
    int count = 0;
    if (pgd_parse_int64_list(arg, ',', 0, n - 1, v, 1, 256, &count))
        return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT,
                             "%s '%s': expected 'all'%s or indices 0 .. %d separated by commas",
                             option, arg, last_default ? ", 'last'" : "", n - 1);
    for (int i = 0; i < count; i++)
        pick[v[i]] = 1;
    return PGD_OK;
}

/* Each token of ids[0..n) as its own text, for the labels. */
static char **token_labels(const tokenizer *tk, const int32_t *ids, int n, pgd_error **err)
{
    char **l = calloc((size_t)n, sizeof *l);
    for (int i = 0; l && i < n; i++) {
        size_t len;
        if (tokenizer_decode(tk, ids + i, 1, 0, &l[i], &len, err)) {
            for (int k = 0; k < i; k++)
                free(l[k]);
            free(l);
            return NULL;
        }
    }
    if (!l)
        pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "attention map: labels");
    return l;
}

/* Runs the first prompt and its new tokens again (one pass, no cache before it) with the
 * probabilities of the chosen layers, [heads, n, n] each, into probs[l]. */
static int map_pass(gen_run *r, const int32_t *ids, int n, float **probs, pgd_error **err)
{
    gpt2_state *st = NULL;
    const gpt2_config *c = &r->g->cfg;
    float *logits = malloc((size_t)c->vocab * sizeof *logits);
    int rc = logits ? gpt2_state_create(r->g->m, 1, n, &st, err)
                    : pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "attention map");
    if (!rc) {
        gpt2_set_probs(st, probs);
        rc = gpt2_append(r->g->m, st, ids, NULL, n, 0, logits, err);
    }
    gpt2_state_free(st);
    free(logits);
    return rc;
}

typedef struct map_parts {
    int *layers, *heads;
    float **probs, *tiles;
    char **titles, **labels;
} map_parts;

static int map_draw(gen_run *r, map_parts *p, int n, pgd_error **err)
{
    const gpt2_config *c = &r->g->cfg;
    int count = 0;
    size_t nn = (size_t)n * n;
    for (int l = 0; l < c->layers; l++)
        for (int h = 0; p->layers[l] && h < c->heads; h++)
            if (p->heads[h] && count < 256) {
                memcpy(p->tiles + count * nn, p->probs[l] + h * nn, nn * sizeof *p->tiles);
                p->titles[count] = malloc(48);
                if (p->titles[count])
                    snprintf(p->titles[count], 48, "layer %d head %d", l, h);
                count++;
            }
    for (int k = 0; k < count; k++)
        if (!p->titles[k])
            return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "attention map");
    pgd_outfile *f = NULL;
    int rc = pgd_outfile_open(r->o->map_path, &f, err);
    if (!rc)
        rc = text_map_write_png(f, p->tiles, count, n, (const char *const *)p->titles,
                                (const char *const *)p->labels, err);
    if (rc)
        pgd_outfile_abort(f);
    else
        rc = pgd_outfile_commit(f, err);
    return rc;
}

static int gen_attention_map(gen_run *r, pgd_error **err)
{
    const gpt2_config *c = &r->g->cfg;
    const seq *s = &r->seqs[0];
    int n = (int)s->n_prompt + r->out.n[0];
    if (n > 512)
        return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT,
                             "--attention-map: %d tokens (the prompt and the new ones): at most "
                             "512 are drawn",
                             n);
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    map_parts p = {calloc((size_t)c->layers, sizeof *p.layers),
                   calloc((size_t)c->heads, sizeof *p.heads),
                   calloc((size_t)c->layers, sizeof *p.probs),
                   malloc((size_t)256 * n * n * sizeof *p.tiles),
                   calloc(256, sizeof *p.titles),
                   NULL};
    int rc = PGD_OK;
    if (!ids || !p.layers || !p.heads || !p.probs || !p.tiles || !p.titles)
        rc = pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "attention map");
    if (!rc) {
        memcpy(ids, s->prompt, s->n_prompt * sizeof *ids);
        memcpy(ids + s->n_prompt, r->out.ids, (size_t)r->out.n[0] * sizeof *ids);
        rc = pick_list(r->o->map_layers, "--map-layers", c->layers, 1, p.layers, err);
    }
    if (!rc)
        rc = pick_list(r->o->map_heads, "--map-heads", c->heads, 0, p.heads, err);
    for (int l = 0; !rc && l < c->layers; l++)
        if (p.layers[l] && !(p.probs[l] = malloc((size_t)c->heads * n * n * sizeof **p.probs)))
            rc = pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "attention map");
    if (!rc)
        rc = map_pass(r, ids, n, p.probs, err);
    if (!rc && !(p.labels = token_labels(r->g->tk, ids, n, err)))
        rc = pgd_error_get_code(*err);
    if (!rc)
        rc = map_draw(r, &p, n, err);
    for (int l = 0; p.probs && l < c->layers; l++)
        free(p.probs[l]);
    for (int k = 0; p.titles && k < 256; k++)
        free(p.titles[k]);
    for (int i = 0; p.labels && i < n; i++)
        free(p.labels[i]);
    free(p.labels), free(p.titles), free(p.tiles), free(p.probs), free(p.heads), free(p.layers);
    free(ids);
    return rc;
}

int cmd_generate(int argc, char **argv)
{
    gen_opts o;
    int rc = parse(argc, argv, &o);
    if (rc)
        return rc < 0 ? EXIT_OK : rc;
    pgd_ctx *ctx = NULL;
    if ((rc = app_ctx_open(o.device, &ctx)))
        return rc;
    gen_model g;
    memset(&g, 0, sizeof g);
    gen_run r = {.o = &o, .g = &g};
    pgd_error *err = NULL;
    int fail = open_model(&o, ctx, &g, &err);
    if (!fail) {
        r.eos = g.cfg.eos >= 0 ? g.cfg.eos : tokenizer_id(g.tk, "<|endoftext|>", 13);
        fail = run_generation(&r, &err);
    }
    if (!fail && o.map_path)
        fail = gen_attention_map(&r, &err);
    if (!fail)
        rc = o.json ? print_json(&r, ctx, &err) : print_text(&r, &err);
    if (fail || (rc && err)) {
        if (r.streaming && r.out.n && r.out.n[0])
            fputc('\n', stdout);
        rc = app_fail(err);
    }
    for (int b = 0; r.seqs && b < o.n_prompts; b++)
        free(r.seqs[b].prompt);
    free(r.seqs);
    gpt2_generated_free(&r.out);
    gpt2_stream_free(&r.stream);
    pgd_error_destroy(r.err);
    close_model(&g);
    pgd_ctx_destroy(ctx);
    return rc;
}
