/* memnet_cmd.c — `pagoda memnet`: answers the questions of a bAbI-style story with an end-to-end
 * memory network and shows, hop by hop, the sentences it attended to. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "commands.h"
#include "memnet.h"

static const char usage[] =
    "usage: pagoda memnet --weights MEMNET.safetensors [--device SEL] [--top N] [--summary]\n"
    "                     [--json] STORY.txt\n"
    "\n"
    "Answers each question of a story file with an end-to-end memory network (Sukhbaatar et\n"
    "al. 2015) and prints, for each hop, the sentences it attended to with their weights: the\n"
    "question's embedding u reads the memory (p = softmax(u.m_i)), takes o = sum p_i c_i, and\n"
    "becomes u + o for the next hop; the last u picks the answer word.\n"
    "\n"
    "STORY.txt is in bAbI's format: numbered lines, 1 starting a new story; a question line is\n"
    "'N question?<TAB>answer<TAB>supporting line ids' (answer and ids optional). Each question\n"
    "sees the sentences of its story before it (the last memory_size of them). With answers in\n"
    "the file the accuracy is printed. tools/golden/train-memnet.py trains a model on generated "
    "stories\n"
    "(people moving between rooms, picking up and dropping objects) and writes a test file.\n"
    "\n"
    "Options:\n"
    "  --weights F    the model (tools/golden/train-memnet.py's memnet.safetensors; required)\n"
    "  --device SEL   the device (see 'pagoda devices --help')\n"
    "  --top N        sentences shown per hop (default 3; 0: all)\n"
    "  --summary      only the accuracy (for a whole test file)\n"
    "  --json         everything as JSON: per question the answer, its probability and every\n"
    "                 hop's weights over the sentences\n"
    "  -h, --help     show this help\n";

typedef struct memnet_opts {
    const char *weights, *device, *story;
    int json, summary;
    int64_t top;
} memnet_opts;

static int parse(int argc, char **argv, memnet_opts *o)
{
    static const struct option opts[] = {{"weights", required_argument, 0, 'w'},
                                         {"device", required_argument, 0, 'd'},
                                         {"top", required_argument, 0, 't'},
                                         {"summary", no_argument, 0, 's'},
                                         {"json", no_argument, 0, 'j'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    int c;
    o->top = 3;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == 'w')
            o->weights = optarg;
        else if (c == 'd')
            o->device = optarg;
        else if (c == 't') {
            if (pgd_parse_int64(optarg, 0, 1000000, &o->top))
                return app_usage_error("memnet ", "--top wants 0..1000000, got '%s'", optarg);
        } else if (c == 's')
            o->summary = 1;
        else if (c == 'j')
            o->json = 1;
        else if (c == 'h') {
            fputs(usage, stdout);
            return -1;
        } else
            return app_usage_error("memnet ", "bad option");
    }
    if (!o->weights)
        return app_usage_error("memnet ", "--weights is required");
    if (optind != argc - 1)
        return app_usage_error("memnet ", "give one story file");
    o->story = argv[optind];
    return EXIT_OK;
}

/* The answer of question b: its word index and softmax probability. */
static int answer_of(const memnet_model *m, const float *logits, int b, double *prob)
{
    const float *row = logits + (int64_t)b * m->vocab;
    int best = 1;
    for (int v = 1; v < m->vocab; v++)
        best = row[v] > row[best] ? v : best;
    double sum = 0;
    for (int v = 0; v < m->vocab; v++)
        sum += exp((double)row[v] - row[best]);
    *prob = 1.0 / sum;
    return best;
}

/* Fact order of one hop by weight, largest first (insertion sort: a few dozen facts). */
static void by_weight(const float *w, int n, int *order)
{
    for (int i = 0; i < n; i++) {
        int j = i;
        while (j > 0 && w[order[j - 1]] < w[i]) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = i;
    }
}

static void print_question(const memnet_opts *o, const memnet_model *m, const memnet_question *q,
                           const float *att, int ans, double prob)
{
    char buf[512], buf2[512];
    printf("line %d: %s\n", q->line, app_term_text(q->text, buf, sizeof buf));
    printf("  answer  %s (%.2f)", app_term_text(m->words[ans], buf, sizeof buf), prob);
    if (q->answer)
        printf("   expected %s: %s", app_term_text(q->answer, buf2, sizeof buf2),
               strcmp(q->answer, m->words[ans]) ? "WRONG" : "right");
    printf("\n");
    int order[4096];
    int n = q->n_facts < 4096 ? q->n_facts : 4096;
    int show = o->top == 0 || o->top > n ? n : (int)o->top;
    for (int k = 0; k < m->hops; k++) {
        const float *w = att + (int64_t)k * m->memory;
        by_weight(w, n, order);
        char hop[16];
        snprintf(hop, sizeof hop, "hop %d", k + 1);
        for (int r = 0; r < show; r++)
            printf("  %-6s  %.2f  line %-3d %s\n", r == 0 ? hop : "", (double)w[order[r]],
                   q->fact_line[order[r]], app_term_text(q->fact[order[r]], buf, sizeof buf));
    }
}

static json_t *question_json(const memnet_model *m, const memnet_question *q, const float *att,
                             int ans, double prob)
{
    json_t *hops = json_array();
    for (int k = 0; hops && k < m->hops; k++) {
        json_t *h = json_array();
        for (int i = 0; h && i < q->n_facts; i++)
            json_array_append_new(h, json_pack("{s:i, s:o, s:f}", "line", q->fact_line[i],
                                               "sentence", app_json_text(q->fact[i]), "weight",
                                               (double)att[(int64_t)k * m->memory + i]));
        json_array_append_new(hops, h);
    }
    json_t *j =
        json_pack("{s:i, s:o, s:o, s:f, s:o}", "line", q->line, "question", app_json_text(q->text),
                  "answer", app_json_text(m->words[ans]), "probability", prob, "hops", hops);
    if (j && q->answer) {
        json_object_set_new(j, "expected", app_json_text(q->answer));
        json_object_set_new(j, "correct", json_boolean(!strcmp(q->answer, m->words[ans])));
    }
    return j;
}

static int report(const memnet_opts *o, pgd_ctx *ctx, const memnet_model *m, const memnet_story *s,
                  const float *logits, const float *att)
{
    int answered = 0, correct = 0;
    json_t *qs = o->json ? json_array() : NULL;
    for (int b = 0; b < s->n_questions; b++) {
        const memnet_question *q = &s->q[b];
        double prob;
        int ans = answer_of(m, logits, b, &prob);
        const float *a = att + (int64_t)b * m->hops * m->memory;
        if (q->answer)
            answered++, correct += !strcmp(q->answer, m->words[ans]);
        if (qs)
            json_array_append_new(qs, question_json(m, q, a, ans, prob));
        else if (!o->summary)
            print_question(o, m, q, a, ans, prob);
    }
    if (qs) {
        json_t *doc = json_pack("{s:o, s:o, s:i, s:i, s:o}", "device",
                                app_json_text(pgd_ctx_get_device(ctx)->name), "story",
                                app_json_text(o->story), "hops", m->hops, "questions",
                                s->n_questions, "answers", qs);
        if (doc && answered) {
            json_object_set_new(doc, "accuracy", json_real((double)correct / answered));
            json_object_set_new(doc, "correct", json_integer(correct));
            json_object_set_new(doc, "answered", json_integer(answered));
        }
        return app_print_json(doc);
    }
    if (answered)
        printf("%saccuracy %.4f (%d of %d questions)\n", o->summary ? "" : "\n",
               (double)correct / answered, correct, answered);
    return EXIT_OK;
}

int cmd_memnet(int argc, char **argv)
{
    memnet_opts o;
    memset(&o, 0, sizeof o);
    int rc = parse(argc, argv, &o);
    if (rc)
        return rc < 0 ? EXIT_OK : rc;
    pgd_ctx *ctx = NULL;
    if ((rc = app_ctx_open(o.device, &ctx)))
        return rc;
    pgd_error *err = NULL;
    model_source src;
    memnet_model *m = NULL;
    memnet_story s;
    memset(&s, 0, sizeof s);
    float *logits = NULL, *att = NULL;
    rc = model_source_open(&src, o.weights, &err);
    if (!rc)
        rc = memnet_load(ctx, &src, &m, &err);
    model_source_free(&src);
    if (!rc)
        rc = memnet_story_load(m, o.story, &s, &err);
    if (!rc) {
        logits = malloc((size_t)s.n_questions * (size_t)m->vocab * sizeof *logits);
        att = malloc((size_t)s.n_questions * (size_t)(m->hops * m->memory) * sizeof *att);
        if (!logits || !att)
            rc = pgd_error_set(&err, PGD_ERR_OUT_OF_HOST_MEMORY, "answers");
    }
    if (!rc)
        rc = memnet_run(ctx, m, &s, logits, att, &err);
    rc = rc ? app_fail(err) : report(&o, ctx, m, &s, logits, att);
    free(logits);
    free(att);
    memnet_story_free(&s);
    memnet_free(m);
    pgd_ctx_destroy(ctx);
    return rc;
}
