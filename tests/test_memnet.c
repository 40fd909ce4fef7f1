/* test_memnet.c — the end-to-end memory network (apps/models/memnet.c) against the PyTorch model
 * of tools/golden/train-memnet.py --golden on every device: the logits of every test question
 * within 1e-4, the same answers (so the same accuracy), each hop's attention over the sentences;
 * and model and story files that must be refused, the error naming the tensor, line or word. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "craft.h"
#include "harness.h"
#include "memnet.h"

static void data_path(char *buf, size_t size, const char *file)
{
    const char *dir = getenv("PAGODA_TEST_DATA");
    ck_assert_msg(dir && *dir, "PAGODA_TEST_DATA is not set (meson test sets it to tests/data)");
    snprintf(buf, size, "%s/%s", dir, file);
}

static int load(pgd_ctx *ctx, const char *path, memnet_model **m, pgd_error **err)
{
    model_source src;
    int rc = model_source_open(&src, path, err);
    if (!rc)
        rc = memnet_load(ctx, &src, m, err);
    model_source_free(&src);
    return rc;
}

START_TEST(golden_pytorch)
{
    char mp[4096], sp[4096], ep[4096];
    data_path(mp, sizeof mp, "memnet.safetensors");
    data_path(sp, sizeof sp, "memnet-test.txt");
    data_path(ep, sizeof ep, "memnet-expected.safetensors");
    pgd_error *err = NULL;
    pgd_weights *ew = NULL;
    PGD_CHECK_OK(pgd_weights_open(ep, &ew, &err), &err);
    pgd_weight_info li, ai;
    ck_assert_int_eq(pgd_weights_find(ew, "logits", &li), PGD_OK);
    ck_assert_int_eq(pgd_weights_find(ew, "attention", &ai), PGD_OK);
    int64_t Q = li.shape[0], V = li.shape[1], K = ai.shape[1], M = ai.shape[2];
    float *wl = malloc((size_t)(Q * V) * sizeof *wl),
          *wa = malloc((size_t)(Q * K * M) * sizeof *wa);
    int64_t *pred = malloc((size_t)Q * sizeof *pred);
    PGD_CHECK_OK(pgd_weights_to_float(ew, "logits", wl, &err), &err);
    PGD_CHECK_OK(pgd_weights_to_float(ew, "attention", wa, &err), &err);
    PGD_CHECK_OK(pgd_weights_read(ew, "pred", pred, &err), &err);
    pgd_weights_destroy(ew);
    double *dl = malloc((size_t)(Q * V) * sizeof *dl),
           *da = malloc((size_t)(Q * K * M) * sizeof *da);
    for (int64_t i = 0; i < Q * V; i++)
        dl[i] = wl[i];
    for (int64_t i = 0; i < Q * K * M; i++)
        da[i] = wa[i];

    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    for (size_t di = 0; di < n; di++) {
        pgd_ctx *ctx = pgd_test_ctx(&d[di]);
        memnet_model *m = NULL;
        memnet_story s;
        PGD_CHECK_OK(load(ctx, mp, &m, &err), &err);
        ck_assert_int_eq(m->hops, K);
        ck_assert_int_eq(m->memory, M);
        ck_assert_int_eq(m->vocab, V);
        PGD_CHECK_OK(memnet_story_load(m, sp, &s, &err), &err);
        ck_assert_int_eq(s.n_questions, Q);
        float *logits = malloc((size_t)(Q * V) * sizeof *logits);
        float *att = malloc((size_t)(Q * K * M) * sizeof *att);
        PGD_CHECK_OK(memnet_run(ctx, m, &s, logits, att, &err), &err);
        char what[256];
        snprintf(what, sizeof what, "memnet logits vs PyTorch on %s", d[di].name);
        ck_assert(pgd_test_allclose(logits, dl, (size_t)(Q * V), 1e-4, 1e-4, what));
        /* empty slots: PyTorch's softmax gives exactly 0 there, Pagoda's too */
        snprintf(what, sizeof what, "memnet attention vs PyTorch on %s", d[di].name);
        ck_assert(pgd_test_allclose(att, da, (size_t)(Q * K * M), 1e-4, 1e-5, what));
        int correct = 0, pyg_correct = 0, answered = 0;
        for (int64_t b = 0; b < Q; b++) {
            int64_t best = 1;
            for (int64_t v = 1; v < V; v++)
                best = logits[b * V + v] > logits[b * V + best] ? v : best;
            ck_assert_msg(best == pred[b], "%s: question %lld (line %d) answered %s, PyTorch %s",
                          d[di].name, (long long)b, s.q[b].line, m->words[best], m->words[pred[b]]);
            if (s.q[b].answer) {
                answered++;
                correct += !strcmp(s.q[b].answer, m->words[best]);
                pyg_correct += !strcmp(s.q[b].answer, m->words[pred[b]]);
            }
        }
        ck_assert_int_eq(answered, Q);
        ck_assert_int_eq(correct, pyg_correct);
        fprintf(stderr, "memnet golden on %s: %d of %d answers right, as PyTorch\n", d[di].name,
                correct, answered);
        free(logits), free(att);
        memnet_story_free(&s);
        memnet_free(m);
        pgd_ctx_destroy(ctx);
    }
    free(wl), free(wa), free(pred), free(dl), free(da);
}
END_TEST

/* Writes text to dir/name and returns the path (static buffer). */
static const char *write_story(const char *dir, const char *name, const char *text)
{
    static char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    return path;
}

START_TEST(strict_files)
{
    if (!pgd_test_primary())
        return;
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    pgd_ctx *ctx = pgd_test_ctx(&d[0]);
    char mp[4096], out[4200];
    data_path(mp, sizeof mp, "memnet.safetensors");
    char *dir = pgd_test_tempdir("memnet");
    snprintf(out, sizeof out, "%s/crafted.safetensors", dir);
    pgd_error *err = NULL;
    struct {
        craft_edit e;
        int code;
        const char *named;
    } models[] = {
        {{CRAFT_COPY, "embed.0.weight", 0, {0}, "embed.9.weight", 0, 0},
         PGD_ERR_FORMAT,
         "embed.9.weight"},
        {{CRAFT_DROP, "temporal.2.weight", 0, {0}, NULL, 0, 0},
         PGD_ERR_NOT_FOUND,
         "temporal.2.weight"},
        {{CRAFT_POKE, "embed.1.weight", 0, {0}, NULL, 20, NAN}, PGD_ERR_FORMAT, "embed.1.weight"},
    };
    for (size_t i = 0; i < sizeof models / sizeof *models; i++) {
        craft_safetensors(mp, out, &models[i].e, 1);
        memnet_model *m = (memnet_model *)&err;
        int rc = load(ctx, out, &m, &err);
        ck_assert_msg(rc == models[i].code, "variant %zu: got %s (%s)", i, pgd_status_name(rc),
                      err ? pgd_error_get_message(err) : "no error");
        ck_assert_ptr_null(m);
        ck_assert_msg(strstr(pgd_error_get_message(err), models[i].named), "variant %zu: %s", i,
                      pgd_error_get_message(err));
        pgd_error_destroy(err);
        err = NULL;
    }
    memnet_model *m = NULL;
    PGD_CHECK_OK(load(ctx, mp, &m, &err), &err);
    struct {
        const char *text, *named;
    } stories[] = {
        {"1 Mary went to the moon.\n2 Where is Mary?\tmoon\t1\n", ":1: the word 'moon'"},
        {"1 Mary went to the kitchen.\nWhere is Mary?\n", ":2: expected 'N sentence'"},
        {"1 Where is Mary?\tkitchen\t1\n", ":1: a question before any sentence"},
        {"1 Mary went to the kitchen.\n2 Where is Mary?\tplanet\t1\n", "'planet'"},
        {"1 Mary went to the kitchen.\n", "no question"},
        {"1 Mary went to the kitchen the kitchen the kitchen.\n2 Where is Mary?\n",
         "words in a sentence"},
    };
    for (size_t i = 0; i < sizeof stories / sizeof *stories; i++) {
        memnet_story s;
        const char *p = write_story(dir, "story.txt", stories[i].text);
        ck_assert_int_eq(memnet_story_load(m, p, &s, &err), PGD_ERR_FORMAT);
        ck_assert_msg(strstr(pgd_error_get_message(err), stories[i].named), "story %zu: %s", i,
                      pgd_error_get_message(err));
        pgd_error_destroy(err);
        err = NULL;
    }
    /* A new story (line 1) forgets the sentences before it. */
    memnet_story s;
    const char *p = write_story(dir, "two.txt",
                                "1 Mary went to the kitchen.\n2 John went to the garden.\n"
                                "1 Sandra went to the office.\n2 Where is Sandra?\toffice\t1\n");
    PGD_CHECK_OK(memnet_story_load(m, p, &s, &err), &err);
    ck_assert_int_eq(s.n_questions, 1);
    ck_assert_int_eq(s.q[0].n_facts, 1);
    ck_assert_int_eq(s.q[0].fact_line[0], 3);
    ck_assert_str_eq(s.q[0].answer, "office");
    memnet_story_free(&s);
    memnet_free(m);
    pgd_test_rmtree(dir);
    free(dir);
    pgd_ctx_destroy(ctx);
}
END_TEST

/* A source of a memory network with a vocabulary of `words` four-letter words (aaaa, aaab, …;
 * the last one repeated when `dup`), 1 hop, embeddings of width 4, all zero: made by hand,
 * so that a vocabulary of any size costs no file. */
typedef struct big_vocab {
    char *vocab;
    int words;
} big_vocab;

static int bv_shape(void *u, const char *name, int *ndim, int64_t s[8])
{
    const big_vocab *b = u;
    *ndim = 2;
    s[1] = 4;
    if (!strcmp(name, "embed.0.weight") || !strcmp(name, "embed.1.weight"))
        s[0] = b->words + 1;
    else if (!strcmp(name, "temporal.0.weight") || !strcmp(name, "temporal.1.weight"))
        s[0] = 10;
    else
        return -1;
    return 0;
}

static int bv_read(void *u, const char *name, float *dst, pgd_error **err)
{
    int nd;
    int64_t s[8] = {0};
    if (bv_shape(u, name, &nd, s))
        return pgd_error_set(err, PGD_ERR_NOT_FOUND, "no tensor '%s'", name);
    memset(dst, 0, (size_t)(s[0] * s[1]) * sizeof *dst);
    return PGD_OK;
}

static const char *bv_meta(void *u, const char *key)
{
    const big_vocab *b = u;
    return !strcmp(key, "format")          ? "pagoda-memn2n"
           : !strcmp(key, "hops")          ? "1"
           : !strcmp(key, "memory_size")   ? "10"
           : !strcmp(key, "sentence_size") ? "6"
           : !strcmp(key, "vocab")         ? b->vocab
                                           : NULL;
}

static const char *bv_name_at(void *u, size_t i)
{
    (void)u;
    static const char *const names[] = {"embed.0.weight", "embed.1.weight", "temporal.0.weight",
                                        "temporal.1.weight"};
    return i < 4 ? names[i] : NULL;
}

static void big_vocab_make(big_vocab *b, int words, int dup)
{
    b->words = words;
    b->vocab = malloc((size_t)words * 5 + 16);
    char *p = b->vocab + sprintf(b->vocab, "<nil>");
    for (int i = 0; i < words; i++) {
        int v = dup && i == words - 1 ? i - 1 : i;
        *p++ = ' ';
        for (int k = 3; k >= 0; k--, v /= 26)
            p[k] = (char)('a' + v % 26);
        p += 4;
    }
    *p = '\0';
}

/* 200,000 words: the duplicate check and the lookups took 100 s (quadratic); sorted, well under
 * a second. A duplicate at the very end is still found, and the last word is still known. */
START_TEST(large_vocabulary)
{
    if (!pgd_test_primary())
        return;
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    pgd_ctx *ctx = pgd_test_ctx(&d[0]);
    pgd_error *err = NULL;
    big_vocab b;
    big_vocab_make(&b, 200000, 0);
    model_source src = {.u = &b,
                        .label = "big-vocab",
                        .shape = bv_shape,
                        .read = bv_read,
                        .meta = bv_meta,
                        .name_at = bv_name_at};
    double t0 = model_now_ms();
    memnet_model *m = NULL;
    PGD_CHECK_OK(memnet_load(ctx, &src, &m, &err), &err);
    char *dir = pgd_test_tempdir("memnet-vocab");
    /* The last word, 199999 in base 26: ljwh. */
    const char *p = write_story(dir, "story.txt", "1 aaab ljwh.\n2 aaaa ljwh?\tljwh\t1\n");
    memnet_story s;
    PGD_CHECK_OK(memnet_story_load(m, p, &s, &err), &err);
    ck_assert_int_eq(s.n_questions, 1);
    double ms = model_now_ms() - t0;
    printf("200,000-word vocabulary: loaded and a story read in %.0f ms\n", ms);
    ck_assert_msg(ms < 10000, "a 200,000-word vocabulary took %.0f ms", ms);
    memnet_story_free(&s);
    memnet_free(m);
    free(b.vocab);
    big_vocab_make(&b, 200000, 1);
    m = (memnet_model *)&err;
    ck_assert_int_eq(memnet_load(ctx, &src, &m, &err), PGD_ERR_FORMAT);
    ck_assert_ptr_null(m);
    ck_assert_msg(strstr(pgd_error_get_message(err), "lists 'ljwg' twice"), "%s",
                  pgd_error_get_message(err));
    pgd_error_destroy(err);
    err = NULL;
    free(b.vocab);
    /* The empty word is a word too: listed again, it is a duplicate. */
    b.vocab = strdup("<nil> aaaa <nil>");
    b.words = 2;
    m = (memnet_model *)&err;
    ck_assert_int_eq(memnet_load(ctx, &src, &m, &err), PGD_ERR_FORMAT);
    ck_assert_ptr_null(m);
    ck_assert_msg(strstr(pgd_error_get_message(err), "lists '<nil>' twice"), "%s",
                  pgd_error_get_message(err));
    pgd_error_destroy(err);
    free(b.vocab);
    pgd_test_rmtree(dir);
    free(dir);
    pgd_ctx_destroy(ctx);
}
END_TEST

/* A NUL byte in a story ended its line early and silently dropped everything after it. */
START_TEST(nul_byte)
{
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    pgd_ctx *ctx = pgd_test_ctx(&d[0]);
    char mp[4096], path[4200];
    data_path(mp, sizeof mp, "memnet.safetensors");
    pgd_error *err = NULL;
    memnet_model *m = NULL;
    PGD_CHECK_OK(load(ctx, mp, &m, &err), &err);
    char *dir = pgd_test_tempdir("memnet-nul");
    static const char head[] = "1 Mary went to the kitchen.\n2 Where is Mary?\tkitchen\t1\n";
    static const char tail[] = "3 John went to the garden.\n4 Where is John?\tgarden\t3\n";
    snprintf(path, sizeof path, "%s/nul.txt", dir);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fwrite(head, 1, strlen(head), f);
    fputc('\0', f);
    fwrite(tail, 1, strlen(tail), f);
    ck_assert_int_eq(fclose(f), 0);
    memnet_story s;
    ck_assert_int_eq(memnet_story_load(m, path, &s, &err), PGD_ERR_FORMAT);
    char want[64];
    snprintf(want, sizeof want, ":3: a NUL byte at byte offset %zu", strlen(head));
    ck_assert_msg(strstr(pgd_error_get_message(err), want), "%s", pgd_error_get_message(err));
    pgd_error_destroy(err);
    memnet_free(m);
    pgd_test_rmtree(dir);
    free(dir);
    pgd_ctx_destroy(ctx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("memnet");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, strict_files);
    tcase_add_test(tc, golden_pytorch);
    suite_add_tcase(s, tc);
    /* Hostile inputs alone: CK_RUN_CASE=hostile runs them without the goldens. */
    TCase *th = tcase_create("hostile");
    tcase_set_timeout(th, 600);
    tcase_add_test(th, large_vocabulary);
    tcase_add_test(th, nul_byte);
    suite_add_tcase(s, th);
    return pgd_test_run(s);
}
