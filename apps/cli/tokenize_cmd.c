/* tokenize_cmd.c — `pagoda tokenize`: text to token ids and back with BERT's WordPiece or
 * GPT-2's byte-level BPE (apps/models/tokenizer.h), to check them against Hugging Face's. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "app.h"
#include "commands.h"
#include "tokenizer.h"

static const char usage[] =
    "usage: pagoda tokenize (--vocab VOCAB.txt [--cased] | --vocab VOCAB.json --merges MERGES.txt\n"
    "                       | --tokenizer TOKENIZER.json) [--no-special] [--json] [--time]\n"
    "                       (TEXT | --file F | --decode ID...)\n"
    "\n"
    "Prints the token ids and tokens of TEXT as Hugging Face's tokenizers give them: BERT's\n"
    "WordPiece from a vocab.txt (lower-cased and accents stripped unless --cased, as\n"
    "BertTokenizer(do_lower_case)), GPT-2's byte-level BPE from vocab.json + merges.txt, or\n"
    "either from a tokenizer.json. With --decode, the text of the ids instead.\n"
    "\n"
    "Options:\n"
    "  --vocab F        vocab.txt (WordPiece) or, with --merges, vocab.json (BPE)\n"
    "  --merges F       merges.txt (BPE)\n"
    "  --tokenizer F    tokenizer.json\n"
    "  --cased          WordPiece from vocab.txt: keep case and accents\n"
    "  --no-special     no [CLS] … [SEP] around the ids; with --decode: skip special tokens\n"
    "  --file F         the text of file F (UTF-8) instead of TEXT\n"
    "  --decode         the arguments are ids (also comma-separated): print their text\n"
    "  --json           {\"ids\": [...], \"tokens\": [...]} (with --decode: {\"text\": ...})\n"
    "  --lines          each line of --file is a text: one JSON object a line, {\"ids\": [...],\n"
    "                   \"decoded\": the ids' text, special tokens skipped} or {\"error\": ...}\n"
    "  --time           also the encoding speed in MB/s (stderr; the text encoded repeatedly\n"
    "                   for at least a second, one thread)\n"
    "  -h, --help       show this help\n";

typedef struct tok_opts {
    const char *vocab, *merges, *json_path, *file;
    int cased, no_special, decode, json, time, lines;
} tok_opts;

static int parse(int argc, char **argv, tok_opts *o)
{
    static const struct option opts[] = {{"vocab", required_argument, 0, 'v'},
                                         {"merges", required_argument, 0, 'm'},
                                         {"tokenizer", required_argument, 0, 't'},
                                         {"file", required_argument, 0, 'f'},
                                         {"cased", no_argument, 0, 'c'},
                                         {"no-special", no_argument, 0, 'n'},
                                         {"decode", no_argument, 0, 'd'},
                                         {"json", no_argument, 0, 'j'},
                                         {"time", no_argument, 0, 'T'},
                                         {"lines", no_argument, 0, 'l'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'v': o->vocab = optarg; break;
        case 'm': o->merges = optarg; break;
        case 't': o->json_path = optarg; break;
        case 'f': o->file = optarg; break;
        case 'c': o->cased = 1; break;
        case 'n': o->no_special = 1; break;
        case 'd': o->decode = 1; break;
        case 'j': o->json = 1; break;
        case 'T': o->time = 1; break;
        case 'l': o->lines = 1; break;
        case 'h': fputs(usage, stdout); return -1;
        default: return app_usage_error("tokenize ", "bad option");
        }
    }
    if (!o->vocab == !o->json_path)
        return app_usage_error("tokenize ", "give --vocab or --tokenizer (one of them)");
    if (o->lines && !o->file)
        return app_usage_error("tokenize ", "--lines goes with --file");
    if (o->merges && !o->vocab)
        return app_usage_error("tokenize ", "--merges goes with --vocab VOCAB.json");
    if (o->decode ? (o->file || optind >= argc) : (o->file ? optind != argc : optind != argc - 1))
        return app_usage_error("tokenize ", o->decode ? "--decode wants ids as arguments"
                                                      : "give one TEXT or --file F");
    return EXIT_OK;
}

static int load(const tok_opts *o, tokenizer **t, pgd_error **err)
{
    if (o->json_path)
        return tokenizer_load_json(o->json_path, t, err);
    if (o->merges)
        return tokenizer_load_bpe(o->vocab, o->merges, t, err);
    return tokenizer_load_wordpiece(o->vocab, !o->cased, t, err);
}

static char *token_text(const tokenizer *t, int32_t id)
{
    size_t len = 0;
    const char *s = tokenizer_token(t, id, &len);
    char *copy = malloc(len + 1);
    if (copy) {
        memcpy(copy, s, len);
        copy[len] = 0;
    }
    return copy;
}

static int print_ids(const tokenizer *t, const int32_t *ids, size_t n, int json)
{
    if (json) {
        json_t *jid = json_array(), *jtok = json_array();
        for (size_t i = 0; i < n; i++) {
            char *s = token_text(t, ids[i]);
            json_array_append_new(jid, json_integer(ids[i]));
            json_array_append_new(jtok, s ? app_json_text(s) : NULL);
            free(s);
        }
        return app_print_json(json_pack("{s:o, s:o}", "ids", jid, "tokens", jtok));
    }
    fputs("ids:", stdout);
    for (size_t i = 0; i < n; i++)
        printf(" %ld", (long)ids[i]);
    fputs("\ntokens:", stdout);
    for (size_t i = 0; i < n; i++) {
        char *s = token_text(t, ids[i]), buf[4 * TOKENIZER_MAX_TOKEN + 8];
        printf(" %s", s ? app_term_text(s, buf, sizeof buf) : "?");
        free(s);
    }
    putchar('\n');
    return EXIT_OK;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Encodes the text again and again for at least a second: MB/s on stderr. */
static int time_encode(tokenizer *t, const char *text, size_t len, int special)
{
    double start = now(), t1 = start;
    long reps = 0;
    pgd_error *err = NULL;
    while (t1 - start < 1.0) {
        int32_t *ids = NULL;
        size_t n = 0;
        if (tokenizer_encode(t, text, len, special, &ids, &n, &err))
            return app_fail(err);
        free(ids);
        reps++;
        t1 = now();
    }
    fprintf(stderr, "encode: %.2f MB/s (%zu bytes x %ld in %.3f s)\n",
            (double)len * (double)reps / (t1 - start) / 1e6, len, reps, t1 - start);
    return EXIT_OK;
}

static int decode_args(const tokenizer *t, char **args, int n_args, const tok_opts *o)
{
    int32_t *ids = calloc(1, sizeof *ids);
    size_t n = 0;
    for (int a = 0; a < n_args && ids; a++) {
        for (char *p = args[a]; *p;) {
            char *end;
            long v = strtol(p, &end, 10);
            if (end == p || v < 0 || v > INT32_MAX || (*end && *end != ',')) {
                free(ids);
                return app_usage_error("tokenize ", "--decode: '%s' is not a list of ids", args[a]);
            }
            int32_t *more = realloc(ids, (n + 1) * sizeof *ids);
            if (!more)
                break;
            ids = more;
            ids[n++] = (int32_t)v;
            p = *end ? end + 1 : end;
        }
    }
    char *text = NULL;
    size_t len = 0;
    pgd_error *err = NULL;
    int rc = ids ? tokenizer_decode(t, ids, n, o->no_special, &text, &len, &err)
                 : pgd_error_set(&err, PGD_ERR_OUT_OF_HOST_MEMORY, "out of memory");
    free(ids);
    if (rc)
        return app_fail(err);
    if (o->json)
        rc = app_print_json(json_pack("{s:o}", "text", json_stringn(text, len)));
    else
        fwrite(text, 1, len, stdout), putchar('\n');
    free(text);
    return rc;
}

/* --lines: each line encoded, then decoded (special tokens skipped), one JSON line each. */
static int encode_lines(tokenizer *t, const char *data, size_t len, int special)
{
    for (size_t i = 0; i < len;) {
        const char *nl = memchr(data + i, '\n', len - i);
        size_t end = nl ? (size_t)(nl - data) : len;
        int32_t *ids = NULL;
        size_t n = 0;
        char *text = NULL;
        size_t text_len = 0;
        pgd_error *err = NULL;
        json_t *j;
        if (tokenizer_encode(t, data + i, end - i, special, &ids, &n, &err) ||
            tokenizer_decode(t, ids, n, 1, &text, &text_len, &err)) {
            j = json_pack("{s:o}", "error", app_json_text(pgd_error_get_message(err)));
        } else {
            json_t *a = json_array();
            for (size_t k = 0; k < n; k++)
                json_array_append_new(a, json_integer(ids[k]));
            /* the decoded text is valid UTF-8 but may hold NUL characters */
            j = json_pack("{s:o, s:o}", "ids", a, "decoded", json_stringn(text, text_len));
        }
        char *line = j ? json_dumps(j, JSON_COMPACT) : NULL;
        if (line)
            puts(line);
        free(line), free(ids), free(text);
        json_decref(j);
        pgd_error_destroy(err);
        if (!line)
            return app_fail(NULL);
        i = end + 1;
    }
    return EXIT_OK;
}

int cmd_tokenize(int argc, char **argv)
{
    tok_opts o = {0};
    int rc = parse(argc, argv, &o);
    if (rc)
        return rc < 0 ? EXIT_OK : rc;
    tokenizer *t = NULL;
    pgd_error *err = NULL;
    if (load(&o, &t, &err))
        return app_fail(err);
    if (o.decode) {
        rc = decode_args(t, argv + optind, argc - optind, &o);
        tokenizer_free(t);
        return rc;
    }
    char *data = NULL;
    size_t len = 0;
    if (o.file) {
        void *p = NULL;
        rc = pgd_file_read(o.file, (uint64_t)1 << 30, &p, &len, &err);
        data = p;
    }
    const char *text = o.file ? data : argv[optind];
    if (!rc)
        len = o.file ? len : strlen(text);
    int32_t *ids = NULL;
    size_t n = 0;
    if (!rc && o.lines) {
        rc = encode_lines(t, text, len, !o.no_special);
        free(data);
        tokenizer_free(t);
        return rc;
    }
    if (!rc)
        rc = tokenizer_encode(t, text, len, !o.no_special, &ids, &n, &err);
    rc = rc ? app_fail_in(o.file, err) : print_ids(t, ids, n, o.json);
    if (!rc && o.time)
        rc = time_encode(t, text, len, !o.no_special);
    free(ids), free(data);
    tokenizer_free(t);
    return rc;
}
