/* memnet.c — the end-to-end memory network of tools/golden/train-memnet.py (see memnet.h). */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memnet.h"

/* ---- loading ----------------------------------------------------------------------------------
 */

static int meta_int(const model_source *src, const char *key, int64_t lo, int64_t hi, int *out,
                    pgd_error **err)
{
    const char *v = src->meta ? src->meta(src->u, key) : NULL;
    int64_t x;
    if (!v)
        return pgd_error_set(err, PGD_ERR_FORMAT, "%s: __metadata__ has no %s", src->label, key);
    if (pgd_parse_int64(v, lo, hi, &x))
        return pgd_error_set(err, PGD_ERR_FORMAT,
                             "%s: __metadata__ %s is '%.40s', expected an integer %lld..%lld",
                             src->label, key, v, (long long)lo, (long long)hi);
    *out = (int)x;
    return PGD_OK;
}

static int by_word(const void *a, const void *b)
{
    return strcmp(((const memnet_word *)a)->word, ((const memnet_word *)b)->word);
}

/* Splits the space-separated vocabulary into m->words, and sorts it into m->sorted. */
static int split_vocab(const model_source *src, memnet_model *m, pgd_error **err)
{
    const char *v = src->meta ? src->meta(src->u, "vocab") : NULL;
    if (!v)
        return pgd_error_set(err, PGD_ERR_FORMAT, "%s: __metadata__ has no vocab", src->label);
    size_t len = strlen(v), n = 0;
    m->word_text = malloc(len + 1);
    m->words = calloc(len / 2 + 2, sizeof *m->words);
    if (!m->word_text || !m->words)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "%s: vocabulary", src->label);
    memcpy(m->word_text, v, len + 1);
    for (char *p = strtok(m->word_text, " "); p; p = strtok(NULL, " "))
        m->words[n++] = p;
    m->vocab = (int)n;
    if (n < 2 || strcmp(m->words[0], "<nil>"))
        return pgd_error_set(err, PGD_ERR_FORMAT,
                             "%s: __metadata__ vocab must start with <nil> and hold words",
                             src->label);
    /* Sorted once: duplicates are neighbours, and every lookup is a binary search (a quadratic
     * check took 100 s over 200,000 words). */
    if (!(m->sorted = malloc(n * sizeof *m->sorted)))
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "%s: vocabulary", src->label);
    for (size_t i = 0; i < n; i++)
        m->sorted[i] = (memnet_word){m->words[i], (int)i};
    qsort(m->sorted, n, sizeof *m->sorted, by_word);
    for (size_t i = 1; i < n; i++)
        if (!strcmp(m->sorted[i].word, m->sorted[i - 1].word))
            return pgd_error_set(err, PGD_ERR_FORMAT, "%s: __metadata__ vocab lists '%.40s' twice",
                                 src->label, m->sorted[i].word);
    return PGD_OK;
}

static int load_tables(const model_source *src, memnet_model *m, pgd_error **err)
{
    int K = m->hops;
    int64_t V = m->vocab, M = m->memory;
    char name[64];
    int nd;
    int64_t s[8];
    if (src->shape(src->u, "embed.0.weight", &nd, s) || nd != 2 || s[1] < 1 || s[1] > 4096)
        return pgd_error_set(err, PGD_ERR_FORMAT,
                             "%s: embed.0.weight must be [vocab, dim] with dim 1..4096",
                             src->label);
    m->dim = (int)s[1];
    int64_t d = m->dim, es[2] = {V, d}, ts[2] = {M, d};
    /* Every table's shape before any allocation: the sizes come from the metadata, and only
     * tensors the file holds bound what they may cost. */
    int rc = PGD_OK;
    for (int k = 0; !rc && k <= K; k++) {
        snprintf(name, sizeof name, "embed.%d.weight", k);
        rc = model_need(src, name, 2, es, err);
        snprintf(name, sizeof name, "temporal.%d.weight", k);
        if (!rc)
            rc = model_need(src, name, 2, ts, err);
    }
    if (rc)
        return rc;
    m->embed = malloc((size_t)((K + 1) * V * d) * sizeof *m->embed);
    m->temporal = malloc((size_t)((K + 1) * M * d) * sizeof *m->temporal);
    if (!m->embed || !m->temporal)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "%s: embeddings", src->label);
    for (int k = 0; !rc && k <= K; k++) {
        snprintf(name, sizeof name, "embed.%d.weight", k);
        rc = model_read(src, name, m->embed + k * V * d, V * d, err);
        snprintf(name, sizeof name, "temporal.%d.weight", k);
        if (!rc)
            rc = model_read(src, name, m->temporal + k * M * d, M * d, err);
    }
    return rc;
}

void memnet_free(memnet_model *m)
{
    if (!m)
        return;
    free(m->words), free(m->word_text), free(m->embed), free(m->temporal), free(m->pe);
    free(m->sorted);
    pgd_tensor_destroy(m->answer);
    free(m);
}

int memnet_load(pgd_ctx *ctx, const model_source *src0, memnet_model **out, pgd_error **err)
{
    *out = NULL;
    memnet_model *m = calloc(1, sizeof *m);
    if (!m)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "memory network");
    model_source s = *src0, *src = &s;
    int rc = model_track_begin(src, err);
    const char *fmt = src->meta ? src->meta(src->u, "format") : NULL;
    if (!rc && (!fmt || strcmp(fmt, "pagoda-memn2n")))
        rc = pgd_error_set(err, PGD_ERR_FORMAT,
                           "%s: not a memory network (__metadata__ format is '%.40s', expected "
                           "pagoda-memn2n; tools/golden/train-memnet.py writes one)",
                           src->label, fmt ? fmt : "absent");
    if (!rc)
        rc = meta_int(src, "hops", 1, 16, &m->hops, err);
    if (!rc)
        rc = meta_int(src, "memory_size", 1, 100000, &m->memory, err);
    if (!rc)
        rc = meta_int(src, "sentence_size", 1, 1000, &m->sent, err);
    if (!rc)
        rc = split_vocab(src, m, err);
    if (!rc)
        rc = load_tables(src, m, err);
    if (!rc)
        rc = model_check_consumed(src, NULL, 0, err);
    model_track_end(src);
    if (!rc) {
        /* l_kj = (1 - j/J) - (k/d)(1 - 2j/J), j and k from 1 */
        int J = m->sent, d = m->dim;
        m->pe = malloc((size_t)(J * d) * sizeof *m->pe);
        if (!m->pe)
            rc = pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "position encoding");
        for (int j = 1; !rc && j <= J; j++)
            for (int k = 1; k <= d; k++)
                m->pe[(j - 1) * d + (k - 1)] =
                    (1.0f - (float)j / (float)J) -
                    ((float)k / (float)d) * (1.0f - 2.0f * (float)j / (float)J);
    }
    if (!rc) {
        int64_t as[2] = {m->vocab, m->dim};
        rc = model_upload(ctx, m->embed + (int64_t)m->hops * m->vocab * m->dim, 2, as, &m->answer,
                          err);
    }
    if (rc) {
        memnet_free(m);
        return rc;
    }
    *out = m;
    return PGD_OK;
}

/* ---- stories ----------------------------------------------------------------------------------
 */

void memnet_story_free(memnet_story *s)
{
    for (int i = 0; i < s->n_questions; i++) {
        free(s->q[i].fact_line);
        free(s->q[i].fact);
    }
    free(s->q);
    pgd_free(s->text); /* pgd_file_read's */
    memset(s, 0, sizeof *s);
}

/* The index of word w in the vocabulary, or -1 (also for the empty word, <nil>). */
static int word_index(const memnet_model *m, const char *w)
{
    memnet_word key = {w, 0};
    const memnet_word *hit = bsearch(&key, m->sorted, (size_t)m->vocab, sizeof *m->sorted, by_word);
    return hit && hit->index > 0 ? hit->index : -1;
}

/* The word indices of `text` (lower-cased runs of letters, as the trainer splits) into idx
 * [sent]; the rest 0. PGD_ERR_FORMAT naming the line and the word when it is unknown or the
 * sentence is too long. */
static int encode(const memnet_model *m, const char *path, int line, const char *text, int *idx,
                  pgd_error **err)
{
    int n = 0;
    for (int j = 0; j < m->sent; j++)
        idx[j] = 0;
    for (const char *p = text; *p;) {
        if (!isalpha((unsigned char)*p)) {
            p++;
            continue;
        }
        char w[64];
        size_t len = 0;
        while (isalpha((unsigned char)*p)) {
            if (len < sizeof w - 1)
                w[len++] = (char)tolower((unsigned char)*p);
            p++;
        }
        w[len] = '\0';
        int k = word_index(m, w);
        if (k < 0)
            return pgd_error_set(err, PGD_ERR_FORMAT,
                                 "%s:%d: the word '%s' is not in the model's vocabulary", path,
                                 line, w);
        if (n == m->sent)
            return pgd_error_set(err, PGD_ERR_FORMAT,
                                 "%s:%d: more than the model's %d words in a sentence", path, line,
                                 m->sent);
        idx[n++] = k;
    }
    return PGD_OK;
}

/* Question s->q[s->n_questions] from line i (body, and the answer after `tab` when not NULL),
 * seeing the story's facts[0..nf) (line indices; their text in lines[]). */
static int add_question(const memnet_model *m, const char *path, int i, char *body, char *tab,
                        char **lines, const int *facts, int nf, memnet_story *s, pgd_error **err)
{
    memnet_question *q = &s->q[s->n_questions];
    q->line = i + 1;
    q->text = body;
    if (tab) {
        char *a = tab + 1, *t2 = strchr(a, '\t');
        if (t2)
            *t2 = '\0';
        q->answer = *a ? a : NULL;
        if (q->answer && word_index(m, q->answer) < 0)
            return pgd_error_set(err, PGD_ERR_FORMAT,
                                 "%s:%d: the answer '%.40s' is not in the model's vocabulary", path,
                                 i + 1, q->answer);
    }
    if (nf == 0)
        return pgd_error_set(err, PGD_ERR_FORMAT, "%s:%d: a question before any sentence", path,
                             i + 1);
    q->n_facts = nf < m->memory ? nf : m->memory;
    q->fact_line = malloc((size_t)q->n_facts * sizeof *q->fact_line);
    q->fact = malloc((size_t)q->n_facts * sizeof *q->fact);
    s->n_questions++;
    if (!q->fact_line || !q->fact)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "%s", path);
    for (int k = 0; k < q->n_facts; k++) {
        q->fact_line[k] = facts[nf - 1 - k] + 1;
        q->fact[k] = lines[facts[nf - 1 - k]];
    }
    return PGD_OK;
}

int memnet_story_load(const memnet_model *m, const char *path, memnet_story *s, pgd_error **err)
{
    memset(s, 0, sizeof *s);
    void *data = NULL;
    size_t size = 0;
    int rc = pgd_file_read(path, (uint64_t)64 << 20, &data, &size, err);
    if (rc)
        return rc;
    s->text = data;
    /* The lines below are C strings: a NUL would end one early and drop the rest unseen. */
    const char *nul = memchr(s->text, '\0', size);
    if (nul) {
        size_t at = (size_t)(nul - s->text), line = 1;
        for (size_t i = 0; i < at; i++)
            line += s->text[i] == '\n';
        memnet_story_free(s);
        return pgd_error_set(err, PGD_ERR_FORMAT,
                             "%s:%zu: a NUL byte at byte offset %zu: a story is text", path, line,
                             at);
    }
    /* Lines, in place. */
    int n_lines = 1;
    for (size_t i = 0; i < size; i++)
        n_lines += s->text[i] == '\n';
    char **lines = calloc((size_t)n_lines, sizeof *lines);
    int *facts = malloc((size_t)n_lines * sizeof *facts); /* line indices of the story's facts */
    int *idx = malloc((size_t)m->sent * sizeof *idx);
    s->q = calloc((size_t)n_lines, sizeof *s->q);
    if (!lines || !facts || !idx || !s->q)
        rc = pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "%s", path);
    int nl = 0, nf = 0;
    for (char *p = s->text; !rc && p && nl < n_lines;) {
        char *e = strchr(p, '\n');
        if (e)
            *e = '\0';
        lines[nl++] = p;
        p = e ? e + 1 : NULL;
    }
    for (int i = 0; !rc && i < nl; i++) {
        char *t = lines[i];
        size_t len = strlen(t);
        if (len && t[len - 1] == '\r')
            t[--len] = '\0';
        if (!len)
            continue;
        char *sp = t;
        while (isdigit((unsigned char)*sp))
            sp++;
        if (sp == t || *sp != ' ') {
            rc = pgd_error_set(err, PGD_ERR_FORMAT,
                               "%s:%d: expected 'N sentence' (bAbI's format: a line number, a "
                               "space, the text)",
                               path, i + 1);
            break;
        }
        if (sp - t == 1 && t[0] == '1')
            nf = 0; /* a new story */
        char *body = sp + 1, *tab = strchr(body, '\t');
        if (tab)
            *tab = '\0';
        rc = encode(m, path, i + 1, body, idx, err);
        if (rc)
            break;
        lines[i] = body;
        if (!tab && !strchr(body, '?')) {
            facts[nf++] = i;
            continue;
        }
        rc = add_question(m, path, i, body, tab, lines, facts, nf, s, err);
    }
    if (!rc && s->n_questions == 0)
        rc = pgd_error_set(err, PGD_ERR_FORMAT, "%s: no question (a line with '?')", path);
    free(lines), free(facts), free(idx);
    if (rc)
        memnet_story_free(s);
    return rc;
}

/* ---- running ----------------------------------------------------------------------------------
 */

/* dst [d] = Σ_j pe_j ⊙ E[idx_j] (+ T when T is not NULL). */
static void bag(const memnet_model *m, const float *E, const int *idx, const float *T, float *dst)
{
    int d = m->dim;
    for (int c = 0; c < d; c++)
        dst[c] = T ? T[c] : 0.0f;
    for (int j = 0; j < m->sent; j++)
        if (idx[j])
            for (int c = 0; c < d; c++)
                dst[c] += m->pe[j * d + c] * E[(int64_t)idx[j] * d + c];
}

int memnet_run(pgd_ctx *ctx, const memnet_model *m, const memnet_story *s, float *logits,
               float *attention, pgd_error **err)
{
    int K = m->hops, M = m->memory, d = m->dim, Q = s->n_questions;
    int64_t V = m->vocab, slots = (int64_t)Q * M * d;
    /* Q questions x M slots grow with the story and the metadata: checked before calloc. */
    if (model_check_alloc(NULL, 1, model_mul(model_mul(slots, K + 1), 4),
                          "memory network: the memory slots of every question", err))
        return PGD_ERR_TOO_LARGE;
    float *G = calloc((size_t)((K + 1) * slots), sizeof *G);
    float *u0 = calloc((size_t)Q * d, sizeof *u0), *mask = malloc((size_t)Q * M * sizeof *mask);
    float *p = malloc((size_t)Q * M * sizeof *p);
    int *idx = malloc((size_t)m->sent * sizeof *idx);
    int rc = G && u0 && mask && p && idx
                 ? PGD_OK
                 : pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "memory network inputs");
    /* The bags of words of every memory slot under each of the K + 1 embeddings. */
    for (int b = 0; !rc && b < Q; b++) {
        const memnet_question *q = &s->q[b];
        rc = encode(m, "question", q->line, q->text, idx, err);
        if (!rc)
            bag(m, m->embed, idx, NULL, u0 + (int64_t)b * d);
        for (int i = 0; i < M; i++)
            mask[(int64_t)b * M + i] = i < q->n_facts ? 0.0f : -INFINITY;
        for (int i = 0; !rc && i < q->n_facts; i++) {
            rc = encode(m, "fact", q->fact_line[i], q->fact[i], idx, err);
            for (int t = 0; !rc && t <= K; t++)
                bag(m, m->embed + t * V * d, idx, m->temporal + ((int64_t)t * M + i) * d,
                    G + t * slots + ((int64_t)b * M + i) * d);
        }
    }
    pgd_tensor *g[17] = {0}, *u = NULL, *sc = NULL, *mk = NULL, *lg = NULL;
    int64_t gs[3] = {Q, M, d}, us[3] = {Q, 1, d}, ss[3] = {Q, 1, M};
    for (int t = 0; !rc && t <= K; t++)
        rc = model_upload(ctx, G + t * slots, 3, gs, &g[t], err);
    if (!rc)
        rc = model_upload(ctx, u0, 3, us, &u, err);
    if (!rc)
        rc = model_upload(ctx, mask, 3, ss, &mk, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 3, ss, &sc, err);
    for (int k = 0; !rc && k < K; k++) {
        /* scores = u·mᵀ + mask; p = softmax; u = p·c + u */
        pgd_gemm_args a = {0, 1, 1.0f, 0.0f, NULL, PGD_ACT_NONE, NULL};
        rc = pgd_gemm(ctx, &a, u, g[k], sc, err);
        if (!rc)
            rc = pgd_add(ctx, sc, mk, sc, err);
        if (!rc)
            rc = pgd_softmax(ctx, sc, 1.0f, sc, err);
        if (!rc && attention) {
            rc = pgd_tensor_download(sc, p, err);
            for (int b = 0; !rc && b < Q; b++)
                memcpy(attention + ((int64_t)b * K + k) * M, p + (int64_t)b * M,
                       (size_t)M * sizeof *p);
        }
        pgd_gemm_args r = {0, 0, 1.0f, 0.0f, NULL, PGD_ACT_NONE, u};
        if (!rc)
            rc = pgd_gemm(ctx, &r, sc, g[k + 1], u, err);
    }
    int64_t u2[2] = {Q, d}, ls[2] = {Q, V};
    if (!rc)
        rc = pgd_tensor_reshape(u, 2, u2, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 2, ls, &lg, err);
    if (!rc) {
        pgd_gemm_args a = {0, 1, 1.0f, 0.0f, NULL, PGD_ACT_NONE, NULL};
        rc = pgd_gemm(ctx, &a, u, m->answer, lg, err);
    }
    if (!rc)
        rc = pgd_tensor_download(lg, logits, err);
    for (int t = 0; t <= K; t++)
        pgd_tensor_destroy(g[t]);
    pgd_tensor_destroy(u), pgd_tensor_destroy(sc), pgd_tensor_destroy(mk);
    pgd_tensor_destroy(lg);
    free(G), free(u0), free(mask), free(p), free(idx);
    return rc;
}
