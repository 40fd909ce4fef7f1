/* tokenizer.c — what both tokenizers share: the vocabulary (ids ↔ bytes, hashed), the added
 * tokens matched before the model (as the tokenizers package's AddedVocabulary does), UTF-8,
 * files, and the public encode/decode entry points that dispatch to WordPiece or BPE. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pagoda_util.h"
#include "tokenizer_parts.h"

int tok_ids_push(tok_ids *ids, int32_t id)
{
    if (ids->n == ids->cap) {
        size_t cap = ids->cap ? ids->cap * 2 : 64;
        int32_t *v = realloc(ids->v, cap * sizeof *v);
        if (!v)
            return PGD_ERR_OUT_OF_HOST_MEMORY;
        ids->v = v, ids->cap = cap;
    }
    ids->v[ids->n++] = id;
    return PGD_OK;
}

/* ---- UTF-8 ---- */

/* The length of the valid sequence at s[0..n), or 0: the rules of Unicode's Table 3-7 (no
 * overlongs, no surrogates, nothing above U+10FFFF). */
static int utf8_valid_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    if (c < 0x80)
        return 1;
    int len = c >= 0xC2 && c <= 0xDF   ? 2
              : c >= 0xE0 && c <= 0xEF ? 3
              : c >= 0xF0 && c <= 0xF4 ? 4
                                       : 0;
    if (!len || (size_t)len > n)
        return 0;
    unsigned lo = 0x80, hi = 0xBF;
    if (c == 0xE0)
        lo = 0xA0;
    else if (c == 0xED)
        hi = 0x9F;
    else if (c == 0xF0)
        lo = 0x90;
    else if (c == 0xF4)
        hi = 0x8F;
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (int i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xBF)
            return 0;
    return len;
}

size_t tok_utf8_check(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        if (u[i] < 0x80) {
            i++;
            continue;
        }
        int len = utf8_valid_len(u + i, n - i);
        if (!len)
            return i;
        i += (size_t)len;
    }
    return n;
}

uint32_t tok_utf8_next(const char *s, int *used)
{
    const unsigned char *u = (const unsigned char *)s;
    if (u[0] < 0x80) {
        *used = 1;
        return u[0];
    }
    if (u[0] < 0xE0) {
        *used = 2;
        return ((uint32_t)(u[0] & 0x1F) << 6) | (u[1] & 0x3F);
    }
    if (u[0] < 0xF0) {
        *used = 3;
        return ((uint32_t)(u[0] & 0x0F) << 12) | ((uint32_t)(u[1] & 0x3F) << 6) | (u[2] & 0x3F);
    }
    *used = 4;
    return ((uint32_t)(u[0] & 0x07) << 18) | ((uint32_t)(u[1] & 0x3F) << 12) |
           ((uint32_t)(u[2] & 0x3F) << 6) | (u[3] & 0x3F);
}

int tok_utf8_put(char *dst, uint32_t cp)
{
    unsigned char *d = (unsigned char *)dst;
    if (cp < 0x80) {
        d[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        d[0] = (unsigned char)(0xC0 | (cp >> 6));
        d[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        d[0] = (unsigned char)(0xE0 | (cp >> 12));
        d[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        d[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    d[0] = (unsigned char)(0xF0 | (cp >> 18));
    d[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    d[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    d[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* ---- files ---- */

int tok_read_file(const char *path, char **data, size_t *size, pgd_error **err)
{
    /* pgd_file_read: regular files only (a FIFO cannot hang the load), the cap checked first */
    void *p = NULL;
    int rc = pgd_file_read(path, TOKENIZER_MAX_FILE, &p, size, err);
    *data = p;
    return rc;
}

/* ---- the vocabulary ---- */

static uint32_t hash_bytes(const char *s, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

int tok_create(tokenizer_kind kind, size_t hint, tokenizer **out, pgd_error **err)
{
    *out = NULL;
    tokenizer *t = calloc(1, sizeof *t);
    if (!t)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "tokenizer: out of memory");
    t->kind = kind;
    t->unk = -1;
    t->max_chars = 100;
    memcpy(t->wp_prefix, "##", 3);
    t->wp_prefix_len = 2;
    for (int i = 0; i < 256; i++)
        t->byte_id[i] = -1;
    t->arena_cap = hint * 8 + 64;
    t->arena = malloc(t->arena_cap);
    if (!t->arena) {
        free(t);
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "tokenizer: out of memory");
    }
    *out = t;
    return PGD_OK;
}

/* Room for ids up to `id`. */
static int grow_ids(tokenizer *t, int32_t id)
{
    if (id < t->n_ids)
        return PGD_OK;
    int32_t n = t->n_ids ? t->n_ids : 1024;
    while (n <= id)
        n = n > TOKENIZER_MAX_VOCAB / 2 ? TOKENIZER_MAX_VOCAB : n * 2;
    uint32_t *off = realloc(t->off, (size_t)n * sizeof *off);
    if (off)
        t->off = off;
    uint16_t *len = realloc(t->len, (size_t)n * sizeof *len);
    if (len)
        t->len = len;
    if (!off || !len)
        return PGD_ERR_OUT_OF_HOST_MEMORY;
    for (int32_t i = t->n_ids; i < n; i++)
        t->off[i] = UINT32_MAX, t->len[i] = 0;
    t->n_ids = n;
    return PGD_OK;
}

int tok_add_token(tokenizer *t, int32_t id, const char *s, size_t n, const char *what,
                  pgd_error **err)
{
    if (id < 0 || id >= TOKENIZER_MAX_VOCAB)
        return pgd_error_set(err, PGD_ERR_FORMAT, "%s: id %ld of token '%.*s' outside 0..%d", what,
                             (long)id, (int)(n > 64 ? 64 : n), s, TOKENIZER_MAX_VOCAB - 1);
    if (n == 0 || n > TOKENIZER_MAX_TOKEN)
        return pgd_error_set(err, PGD_ERR_FORMAT,
                             "%s: token of id %ld is %zu bytes (1..%d allowed)", what, (long)id, n,
                             TOKENIZER_MAX_TOKEN);
    if (tok_utf8_check(s, n) != n || memchr(s, 0, n))
        return pgd_error_set(err, PGD_ERR_FORMAT,
                             "%s: token of id %ld is not valid UTF-8 "
                             "without NUL",
                             what, (long)id);
    if (t->arena_len + n > t->arena_cap) {
        char *a = realloc(t->arena, (t->arena_len + n) * 2);
        if (!a)
            return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "%s: out of memory", what);
        t->arena = a, t->arena_cap = (t->arena_len + n) * 2;
    }
    if (grow_ids(t, id))
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "%s: out of memory", what);
    if (t->off[id] != UINT32_MAX)
        return pgd_error_set(err, PGD_ERR_FORMAT, "%s: id %ld given twice ('%.*s' and '%.*s')",
                             what, (long)id, (int)t->len[id], t->arena + t->off[id],
                             (int)(n > 64 ? 64 : n), s);
    if (t->arena_len > UINT32_MAX - n)
        return pgd_error_set(err, PGD_ERR_TOO_LARGE, "%s: tokens too large", what);
    memcpy(t->arena + t->arena_len, s, n);
    t->off[id] = (uint32_t)t->arena_len;
    t->len[id] = (uint16_t)n;
    t->arena_len += n;
    if (id >= t->size)
        t->size = id + 1;
    if (n > t->max_token)
        t->max_token = n;
    return PGD_OK;
}

int32_t tok_lookup(const tokenizer *t, const char *s, size_t n)
{
    if (!t->slots)
        return -1;
    for (uint32_t h = hash_bytes(s, n) & t->mask;; h = (h + 1) & t->mask) {
        int32_t id = t->slots[h];
        if (id < 0)
            return -1;
        if (t->len[id] == n && !memcmp(t->arena + t->off[id], s, n))
            return id;
    }
}

int tok_index(tokenizer *t, const char *what, pgd_error **err)
{
    uint32_t cap = 64;
    while (cap < (uint32_t)t->n_ids * 2u)
        cap *= 2;
    free(t->slots);
    t->slots = malloc((size_t)cap * sizeof *t->slots);
    if (!t->slots)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "tokenizer: out of memory");
    memset(t->slots, 0xFF, (size_t)cap * sizeof *t->slots);
    t->mask = cap - 1;
    for (int32_t id = 0; id < t->n_ids; id++) {
        if (t->off[id] == UINT32_MAX)
            continue;
        const char *s = t->arena + t->off[id];
        int32_t other = tok_lookup(t, s, t->len[id]);
        if (other >= 0)
            return pgd_error_set(err, PGD_ERR_FORMAT, "%s: token '%.*s' has two ids (%ld and %ld)",
                                 what, (int)t->len[id], s, (long)other, (long)id);
        uint32_t h = hash_bytes(s, t->len[id]) & t->mask;
        while (t->slots[h] >= 0)
            h = (h + 1) & t->mask;
        t->slots[h] = id;
    }
    return PGD_OK;
}

int tok_add_special(tokenizer *t, const char *s, size_t n, const tok_added *how, const char *what,
                    pgd_error **err)
{
    int32_t id = tok_lookup(t, s, n);
    if (id < 0)
        return pgd_error_set(err, PGD_ERR_FORMAT, "%s: added token '%.*s' is not in the vocabulary",
                             what, (int)(n > 64 ? 64 : n), s);
    for (int i = 0; i < t->n_added; i++)
        if (t->added[i].id == id)
            return pgd_error_set(err, PGD_ERR_FORMAT, "%s: token '%.*s' added twice", what, (int)n,
                                 s);
    if (t->n_added >= 1024)
        return pgd_error_set(err, PGD_ERR_TOO_LARGE, "%s: more than 1024 added tokens", what);
    tok_added *a = realloc(t->added, (size_t)(t->n_added + 1) * sizeof *a);
    if (!a)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "%s: out of memory", what);
    t->added = a;
    a[t->n_added] = *how;
    a[t->n_added++].id = id;
    t->added_first[(unsigned char)s[0]] = 1;
    return PGD_OK;
}

/* ---- encode ---- */

/* The added token (of the set: raw ones, `normalized` 0, or normalized ones, 1) that is longest
 * at s[i..n), or -1. */
static int added_at(const tokenizer *t, const char *s, size_t n, size_t i, int normalized)
{
    int best = -1;
    size_t best_len = 0;
    for (int k = 0; k < t->n_added; k++) {
        const tok_added *a = &t->added[k];
        if ((a->normalized && t->normalizer) != normalized)
            continue;
        size_t len = t->len[a->id];
        if (len > best_len && len <= n - i && !memcmp(s + i, t->arena + t->off[a->id], len))
            best = k, best_len = len;
    }
    return best;
}

static size_t ws_len_before(const char *s, size_t start, size_t end)
{
    size_t e = end;
    while (e > start) {
        size_t b = e - 1;
        while (b > start && ((unsigned char)s[b] & 0xC0) == 0x80)
            b--;
        int used;
        if (!(tok_uclass(tok_utf8_next(s + b, &used)) & TOK_PRE_WS))
            break;
        e = b;
    }
    return end - e;
}

static size_t ws_len_after(const char *s, size_t i, size_t n)
{
    size_t e = i;
    while (e < n) {
        int used;
        if (!(tok_uclass(tok_utf8_next(s + e, &used)) & TOK_PRE_WS))
            break;
        e += (size_t)used;
    }
    return e - i;
}

static int encode_plain(tokenizer *t, const char *s, size_t n, int normalized, tok_ids *ids,
                        pgd_error **err);

/* s[0..n) split at the added tokens of one set, the stretches between them encoded. */
static int encode_split(tokenizer *t, const char *s, size_t n, int normalized, tok_ids *ids,
                        pgd_error **err)
{
    size_t start = 0, i = 0;
    while (i < n) {
        int k = t->added_first[(unsigned char)s[i]] ? added_at(t, s, n, i, normalized) : -1;
        if (k < 0) {
            i++;
            continue;
        }
        const tok_added *a = &t->added[k];
        size_t end = i + t->len[a->id], before = i;
        if (a->lstrip)
            before -= ws_len_before(s, start, i);
        if (a->rstrip)
            end += ws_len_after(s, end, n);
        int rc = encode_plain(t, s + start, before - start, normalized, ids, err);
        if (rc || (rc = tok_ids_push(ids, a->id)))
            return rc;
        start = i = end;
    }
    return encode_plain(t, s + start, n - start, normalized, ids, err);
}

/* A stretch without raw added tokens: normalized first when some added tokens are matched in
 * the normalized text, then the model. */
static int encode_plain(tokenizer *t, const char *s, size_t n, int normalized, tok_ids *ids,
                        pgd_error **err)
{
    if (n == 0)
        return PGD_OK;
    if (!normalized && t->normalizer) {
        int any = 0;
        for (int k = 0; k < t->n_added; k++)
            any |= t->added[k].normalized;
        if (any) {
            char *norm = NULL;
            size_t nn = 0;
            int rc = tok_bert_normalize(t, s, n, &norm, &nn, err);
            if (!rc)
                rc = encode_split(t, norm, nn, 1, ids, err);
            free(norm);
            return rc;
        }
    }
    if (t->kind == TOKENIZER_WORDPIECE)
        return tok_wordpiece_encode(t, s, n, normalized, ids, err);
    return tok_bpe_encode(t, s, n, ids, err);
}

int tokenizer_encode(tokenizer *t, const char *text, size_t len, int add_special, int32_t **ids,
                     size_t *n, pgd_error **err)
{
    *ids = NULL, *n = 0;
    size_t bad = tok_utf8_check(text, len);
    if (bad != len)
        return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT,
                             "text: invalid UTF-8 at byte offset %zu (byte 0x%02X)", bad,
                             (unsigned char)text[bad]);
    tok_ids v = {0};
    int rc = PGD_OK;
    for (int i = 0; add_special && !rc && i < t->n_prefix; i++)
        rc = tok_ids_push(&v, t->prefix[i]);
    if (!rc)
        rc = encode_split(t, text, len, 0, &v, err);
    for (int i = 0; add_special && !rc && i < t->n_suffix; i++)
        rc = tok_ids_push(&v, t->suffix[i]);
    if (rc) {
        free(v.v);
        return rc == PGD_ERR_OUT_OF_HOST_MEMORY
                   ? pgd_error_set(err, rc, "text: out of memory encoding %zu bytes", len)
                   : rc;
    }
    if (!v.v)
        v.v = malloc(sizeof *v.v);
    if (!v.v)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "text: out of memory");
    *ids = v.v, *n = v.n;
    return PGD_OK;
}

/* ---- the rest of the public API ---- */

int tokenizer_decode(const tokenizer *t, const int32_t *ids, size_t n, int skip_special,
                     char **text, size_t *len, pgd_error **err)
{
    *text = NULL, *len = 0;
    for (size_t i = 0; i < n; i++)
        if (!tokenizer_token(t, ids[i], &(size_t){0}))
            return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT,
                                 "decode: id %ld (position %zu) is not in the vocabulary",
                                 (long)ids[i], i);
    if (t->kind == TOKENIZER_WORDPIECE)
        return tok_wordpiece_decode(t, ids, n, skip_special, text, len, err);
    return tok_bpe_decode(t, ids, n, skip_special, text, len, err);
}

const char *tokenizer_token(const tokenizer *t, int32_t id, size_t *len)
{
    if (!t || id < 0 || id >= t->size || t->off[id] == UINT32_MAX)
        return NULL;
    *len = t->len[id];
    return t->arena + t->off[id];
}

int32_t tokenizer_id(const tokenizer *t, const char *token, size_t len)
{
    return tok_lookup(t, token, len);
}

int32_t tokenizer_vocab_size(const tokenizer *t)
{
    return t->size;
}

tokenizer_kind tokenizer_get_kind(const tokenizer *t)
{
    return t->kind;
}

int tokenizer_is_special(const tokenizer *t, int32_t id)
{
    for (int k = 0; k < t->n_added; k++)
        if (t->added[k].id == id)
            return t->added[k].special;
    return 0;
}

void tokenizer_free(tokenizer *t)
{
    if (!t)
        return;
    if (t->cache)
        for (int i = 0; i < TOK_CACHE_SLOTS; i++)
            free(t->cache[i].word), free(t->cache[i].ids);
    free(t->cache);
    free(t->merges);
    free(t->added);
    free(t->slots);
    free(t->off);
    free(t->len);
    free(t->arena);
    free(t);
}
