/* fuzz_tokenizer.c — libFuzzer target: the tokenizers' readers (vocab.txt, vocab.json +
 * merges.txt, tokenizer.json) and the tokenizers on arbitrary text. The first byte picks:
 *   0: vocab.txt \0\1 text            (WordPiece; bit 2 of the byte: lower-casing)
 *   1: vocab.json \0\1 merges \0\1 text (byte-level BPE)
 *   2: tokenizer.json \0\1 text
 *   3: text, with a fixed WordPiece and a fixed byte-level BPE (all 256 bytes, a few merges)
 * What a reader refuses carries a message and gives no tokenizer; text is refused exactly when
 * it is not valid UTF-8; every id encoded is in the vocabulary; decoding gives valid UTF-8 of
 * the length it says; the fixed BPE decodes its encoding back to the text, byte for byte; any
 * ids decode without error. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_file.h"
#include "tokenizer_parts.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The next part of data (up to the separator \0\1 or the end). */
static const uint8_t *part(const uint8_t **p, const uint8_t *end, size_t *n)
{
    const uint8_t *s = *p, *q = s;
    while (q + 1 < end && !(q[0] == 0 && q[1] == 1))
        q++;
    if (q + 1 >= end)
        q = end;
    *n = (size_t)(q - s);
    *p = q == end ? end : q + 2;
    return s;
}

static void check_decode(const tokenizer *t, const int32_t *ids, size_t n, int skip)
{
    char *text = NULL;
    size_t len = 0;
    pgd_error *err = NULL;
    if (tokenizer_decode(t, ids, n, skip, &text, &len, &err) != PGD_OK || !text || text[len] != 0 ||
        tok_utf8_check(text, len) != len)
        abort();
    free(text);
}

/* Encodes text; returns the ids (NULL when refused, which must be for invalid UTF-8 only). */
static int32_t *check_encode(tokenizer *t, const uint8_t *text, size_t n, int special,
                             size_t *count)
{
    int32_t *ids = NULL;
    pgd_error *err = NULL;
    int valid = tok_utf8_check((const char *)text, n) == n;
    int rc = tokenizer_encode(t, (const char *)text, n, special, &ids, count, &err);
    if ((rc == PGD_OK) != valid || (rc && (!err || ids || !pgd_error_get_message(err)[0])))
        abort();
    pgd_error_destroy(err);
    for (size_t i = 0; ids && i < *count; i++)
        if (!tokenizer_token(t, ids[i], &(size_t){0}))
            abort();
    if (ids) {
        check_decode(t, ids, *count, 0);
        check_decode(t, ids, *count, 1);
    }
    return ids;
}

static void check_load(int rc, tokenizer *t, pgd_error *err)
{
    if (rc != PGD_OK && (t || !err || !pgd_error_get_message(err)[0]))
        abort();
    if (rc == PGD_OK && !t)
        abort();
    pgd_error_destroy(err);
}

static tokenizer *fixed_wp, *fixed_bpe;

static void write_text(const char *path, const char *s)
{
    FILE *f = fopen(path, "wb");
    if (!f || fputs(s, f) < 0 || fclose(f))
        abort();
}

/* GPT-2's byte map, written out here independently of tokenizer_bpe.c. */
static unsigned gpt2_char(unsigned b)
{
    int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
    unsigned n = 0;
    for (unsigned x = 0; x < b; x++)
        n += !((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174));
    return printable ? b : 256 + n;
}

static void make_fixed(void)
{
    char dir[] = "/tmp/pgd-fuzz-tok-XXXXXX", path[64], path2[64];
    if (!mkdtemp(dir))
        abort();
    snprintf(path, sizeof path, "%s/vocab.txt", dir);
    write_text(path, "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\nworld\n##s\n##ing\n,\n.\n!\n"
                     "a\n##a\nb\n##b\nthe\n中\né\n##é\n");
    pgd_error *err = NULL;
    if (tokenizer_load_wordpiece(path, 1, &fixed_wp, &err))
        abort();
    unlink(path);
    char json[256 * 16 + 256] = "{", *w = json + 1;
    for (unsigned b = 0; b < 256; b++)
        w += sprintf(w, "\"\\u%04X\": %u, ", gpt2_char(b), b);
    sprintf(w, "\"he\": 256, \"ll\": 257, \"hell\": 258, \"hello\": 259, \"\\u0120w\": 260, "
               "\"or\": 261, \"<|endoftext|>\": 262}");
    snprintf(path, sizeof path, "%s/vocab.json", dir);
    snprintf(path2, sizeof path2, "%s/merges.txt", dir);
    write_text(path, json);
    write_text(path2, "#version: 0.2\nh e\nl l\nhe ll\nhell o\n\xC4\xA0 w\no r\n");
    if (tokenizer_load_bpe(path, path2, &fixed_bpe, &err))
        abort();
    unlink(path), unlink(path2), rmdir(dir);
}

static void fuzz_fixed(const uint8_t *text, size_t n)
{
    if (!fixed_wp)
        make_fixed();
    size_t count = 0;
    free(check_encode(fixed_wp, text, n, 1, &count));
    int32_t *ids = check_encode(fixed_bpe, text, n, 0, &count);
    if (ids) {
        char *back = NULL;
        size_t len = 0;
        pgd_error *err = NULL;
        if (tokenizer_decode(fixed_bpe, ids, count, 0, &back, &len, &err) || len != n ||
            memcmp(back, text, n))
            abort();
        free(back);
    }
    free(ids);
    /* any ids: the text's bytes as ids of the BPE (bytes out of UTF-8 order decode to U+FFFD) */
    int32_t raw[256];
    size_t k = n < 256 ? n : 256;
    for (size_t i = 0; i < k; i++)
        raw[i] = text[i];
    check_decode(fixed_bpe, raw, k, 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const uint8_t *p = data + 1, *end = data + size;
    int mode = data[0] & 3;
    if (mode == 3) {
        fuzz_fixed(p, (size_t)(end - p));
        return 0;
    }
    size_t na, nb = 0, nt;
    const uint8_t *a = part(&p, end, &na), *b = mode == 1 ? part(&p, end, &nb) : NULL;
    const uint8_t *text = part(&p, end, &nt);
    const char *path = fuzz_file_write(a, na, mode == 0 ? ".txt" : ".json");
    const char *dir = b ? fuzz_dir_write("merges.txt", b, nb) : NULL;
    if (!path || (b && !dir))
        return 0;
    tokenizer *t = NULL;
    pgd_error *err = NULL;
    int rc = mode == 0   ? tokenizer_load_wordpiece(path, data[0] & 4, &t, &err)
             : mode == 1 ? tokenizer_load_bpe(path, fuzz_dir_file, &t, &err)
                         : tokenizer_load_json(path, &t, &err);
    check_load(rc, t, err);
    if (t) {
        size_t count = 0;
        free(check_encode(t, text, nt, 1, &count));
        free(check_encode(t, text, nt, 0, &count));
    }
    tokenizer_free(t);
    return 0;
}
