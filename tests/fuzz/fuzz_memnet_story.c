/* fuzz_memnet_story.c — libFuzzer target: bAbI story files as `pagoda memnet` reads them
 * (memnet_story_load) against a small fixed vocabulary. Whatever it accepts must hold at least
 * one question, each with 1..memory facts that are lines of the file before it, text inside
 * the file's buffer and an answer in the vocabulary; what it refuses carries a message and
 * leaves the story empty. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_file.h"
#include "memnet.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *words[] = {"<nil>", "mary", "john",  "went", "to", "the", "kitchen", "garden",
                        "where", "is",   "moved", "back", "a",  "yes", "no"};

#define N_WORDS ((int)(sizeof words / sizeof words[0]))

/* The lookup table memnet_model_load builds (memnet_model.sorted): the words sorted by strcmp. */
static memnet_word sorted[N_WORDS];

static int by_word(const void *a, const void *b)
{
    return strcmp(((const memnet_word *)a)->word, ((const memnet_word *)b)->word);
}

static int in_text(const memnet_story *s, const char *p, size_t size)
{
    return p >= s->text && p <= s->text + size;
}

static void check(const memnet_model *m, const memnet_story *s, size_t size)
{
    if (s->n_questions < 1 || !s->q)
        abort();
    int prev = 0;
    for (int i = 0; i < s->n_questions; i++) {
        const memnet_question *q = &s->q[i];
        if (q->line <= prev || !in_text(s, q->text, size) || q->n_facts < 1 ||
            q->n_facts > m->memory)
            abort();
        prev = q->line;
        if (q->answer) {
            int known = 0;
            for (int w = 1; w < m->vocab; w++)
                known |= !strcmp(q->answer, m->words[w]);
            if (!known || !in_text(s, q->answer, size))
                abort();
        }
        for (int k = 0; k < q->n_facts; k++)
            if (q->fact_line[k] < 1 || q->fact_line[k] >= q->line ||
                (k && q->fact_line[k] >= q->fact_line[k - 1]) || !in_text(s, q->fact[k], size))
                abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file_write(data, size, ".txt");
    if (!path)
        return 0;
    /* memnet_story_load reads the vocabulary, sentence length and memory size only. */
    memnet_model m;
    memset(&m, 0, sizeof m);
    m.hops = 1, m.memory = 3, m.sent = 4, m.dim = 2;
    m.vocab = N_WORDS;
    m.words = words;
    for (int i = 0; i < N_WORDS; i++)
        sorted[i] = (memnet_word){words[i], i};
    qsort(sorted, N_WORDS, sizeof sorted[0], by_word);
    m.sorted = sorted;
    memnet_story s;
    pgd_error *err = NULL;
    if (memnet_story_load(&m, path, &s, &err) != PGD_OK) {
        if (!err || !pgd_error_get_message(err)[0] || s.q || s.text || s.n_questions)
            abort();
        pgd_error_destroy(err);
        return 0;
    }
    pgd_error_destroy(err);
    check(&m, &s, size);
    memnet_story_free(&s);
    return 0;
}
