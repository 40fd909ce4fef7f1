/* tokenizer_bpe.c — GPT-2's byte-level BPE as the tokenizers package runs it: the
 * pre-tokenisation regex ('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|
 * \s+(?!\S)|\s+) matched by hand on the Unicode classes, each piece's bytes mapped to GPT-2's
 * printable characters, then merges by rank (a heap over the word's symbols, as the package
 * orders them: lowest rank, then leftmost), the results cached per word. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_parts.h"

/* GPT-2's byte → character map: printable Latin-1 bytes are themselves, the other 68 (0..32,
 * 127..160, 173) are 256 + n in byte order. */
static int printable(uint32_t b)
{
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

static uint32_t byte_char(unsigned b)
{
    if (printable(b))
        return b;
    return 256 + (b <= 0x20 ? b : b <= 0xA0 ? 33 + (b - 0x7F) : 67);
}

/* The inverse: the byte of a character, or -1. */
static int char_byte(uint32_t cp)
{
    if (cp < 256)
        return printable(cp) ? (int)cp : -1;
    if (cp < 256 + 33)
        return (int)(cp - 256);
    if (cp < 256 + 67)
        return (int)(cp - 256 - 33 + 0x7F);
    return cp == 256 + 67 ? 0xAD : -1;
}

/* ---- merges ---- */

static uint32_t hash_pair(uint64_t p)
{
    p ^= p >> 33;
    p *= 0xff51afd7ed558ccdULL;
    p ^= p >> 33;
    return (uint32_t)p;
}

static const tok_merge *merge_find(const tokenizer *t, int32_t a, int32_t b)
{
    if (!t->merges)
        return NULL;
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    for (uint32_t h = hash_pair(key) & t->merge_mask;; h = (h + 1) & t->merge_mask) {
        const tok_merge *m = &t->merges[h];
        if (m->id < 0)
            return NULL;
        if (m->pair == key)
            return m;
    }
}

int tok_bpe_merges_begin(tokenizer *t, size_t count, const char *what, pgd_error **err)
{
    /* each merge makes a token: more merges than tokens allowed is no vocabulary's */
    if (count > TOKENIZER_MAX_VOCAB)
        return pgd_error_set(err, PGD_ERR_TOO_LARGE, "%s: %zu merges (at most %d)", what, count,
                             TOKENIZER_MAX_VOCAB);
    uint32_t cap = 64;
    while (cap < count * 2 + 1)
        cap *= 2;
    t->merges = malloc((size_t)cap * sizeof *t->merges);
    if (!t->merges)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "merges: out of memory");
    for (uint32_t i = 0; i < cap; i++)
        t->merges[i].id = -1;
    t->merge_mask = cap - 1;
    return PGD_OK;
}

int tok_bpe_add_merge(tokenizer *t, const char *a, size_t na, const char *b, size_t nb,
                      uint32_t rank, const char *what, pgd_error **err)
{
    int32_t ia = tok_lookup(t, a, na), ib = tok_lookup(t, b, nb);
    if (ia < 0 || ib < 0)
        return pgd_error_set(err, PGD_ERR_FORMAT,
                             "%s: merge %lu names '%.*s', not in the vocabulary", what,
                             (unsigned long)rank + 1, (int)(ia < 0 ? na : nb), ia < 0 ? a : b);
    char joined[2 * TOKENIZER_MAX_TOKEN];
    memcpy(joined, a, na);
    memcpy(joined + na, b, nb);
    int32_t id = na + nb <= TOKENIZER_MAX_TOKEN ? tok_lookup(t, joined, na + nb) : -1;
    if (id < 0)
        return pgd_error_set(err, PGD_ERR_FORMAT,
                             "%s: merge %lu ('%.*s' '%.*s') makes a token not in the vocabulary",
                             what, (unsigned long)rank + 1, (int)na, a, (int)nb, b);
    uint64_t key = ((uint64_t)(uint32_t)ia << 32) | (uint32_t)ib;
    uint32_t h = hash_pair(key) & t->merge_mask;
    for (; t->merges[h].id >= 0; h = (h + 1) & t->merge_mask)
        if (t->merges[h].pair == key)
            return pgd_error_set(err, PGD_ERR_FORMAT,
                                 "%s: merge %lu ('%.*s' '%.*s') repeats merge %lu", what,
                                 (unsigned long)rank + 1, (int)na, a, (int)nb, b,
                                 (unsigned long)t->merges[h].rank + 1);
    t->merges[h] = (tok_merge){key, rank, id};
    return PGD_OK;
}

int tok_bpe_finish(tokenizer *t, pgd_error **err)
{
    for (unsigned b = 0; b < 256; b++) {
        char u[4];
        int n = tok_utf8_put(u, byte_char(b));
        t->byte_id[b] = tok_lookup(t, u, (size_t)n);
    }
    t->cache = calloc(TOK_CACHE_SLOTS, sizeof *t->cache);
    if (!t->cache)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "tokenizer: out of memory");
    return PGD_OK;
}

/* ---- one word ---- */

typedef struct heap_item {
    uint32_t rank;
    int32_t pos, id;
} heap_item;

static int before(const heap_item *a, const heap_item *b)
{
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static void heap_push(heap_item *h, size_t *n, heap_item x)
{
    size_t i = (*n)++;
    while (i > 0 && before(&x, &h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = x;
}

static heap_item heap_pop(heap_item *h, size_t *n)
{
    heap_item top = h[0], x = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && before(&h[c + 1], &h[c]))
            c++;
        if (!before(&h[c], &x))
            break;
        h[i] = h[c];
        i = c;
    }
    if (*n)
        h[i] = x;
    return top;
}

static void push_pair(const tokenizer *t, const int32_t *id, int32_t l, int32_t r, heap_item *h,
                      size_t *nh)
{
    const tok_merge *m = merge_find(t, id[l], id[r]);
    if (m)
        heap_push(h, nh, (heap_item){m->rank, l, m->id});
}

/* The symbols of a word merged by rank; the surviving ids appended to `ids`. sym holds
 * 4 arrays of n (id, prev, next, alive) and heap room for 2n + n merges. */
static int merge_word(const tokenizer *t, int32_t *sym, int32_t n, heap_item *heap, tok_ids *ids)
{
    int32_t *id = sym, *prev = sym + n, *next = sym + 2 * n, *alive = sym + 3 * n;
    size_t nh = 0;
    for (int32_t i = 0; i < n; i++)
        prev[i] = i - 1, next[i] = i + 1 < n ? i + 1 : -1, alive[i] = 1;
    for (int32_t i = 0; i + 1 < n; i++)
        push_pair(t, id, i, i + 1, heap, &nh);
    while (nh) {
        heap_item top = heap_pop(heap, &nh);
        int32_t p = top.pos, r = next[p];
        if (!alive[p] || r < 0)
            continue;
        /* an expired entry: the pair at p is no longer one that makes top.id */
        const tok_merge *m = merge_find(t, id[p], id[r]);
        if (!m || m->id != top.id)
            continue;
        id[p] = top.id;
        alive[r] = 0;
        next[p] = next[r];
        if (next[r] >= 0)
            prev[next[r]] = p;
        if (prev[p] >= 0)
            push_pair(t, id, prev[p], p, heap, &nh);
        if (next[p] >= 0)
            push_pair(t, id, p, next[p], heap, &nh);
    }
    for (int32_t i = 0; i < n; i++)
        if (alive[i] && tok_ids_push(ids, id[i]))
            return PGD_ERR_OUT_OF_HOST_MEMORY;
    return PGD_OK;
}

/* The ids of one pre-tokenized piece (raw bytes w[0..n)). */
static int bpe_piece(const tokenizer *t, const char *w, size_t n, tok_ids *ids)
{
    if (t->ignore_merges && n <= TOKENIZER_MAX_TOKEN / 2) {
        char mapped[TOKENIZER_MAX_TOKEN];
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            m += (size_t)tok_utf8_put(mapped + m, byte_char((unsigned char)w[i]));
        int32_t whole = tok_lookup(t, mapped, m);
        if (whole >= 0)
            return tok_ids_push(ids, whole);
    }
    if (n > INT32_MAX / 8)
        return PGD_ERR_OUT_OF_HOST_MEMORY;
    /* most pieces are short: their arrays on the stack */
    int32_t sym_small[4 * 64];
    heap_item heap_small[3 * 64];
    int small = n <= 64;
    int32_t *sym = small ? sym_small : malloc(n * 4 * sizeof *sym);
    heap_item *heap = small ? heap_small : malloc(n * 3 * sizeof *heap + sizeof *heap);
    int rc = sym && heap ? PGD_OK : PGD_ERR_OUT_OF_HOST_MEMORY;
    int32_t k = 0;
    for (size_t i = 0; !rc && i < n; i++)
        if (t->byte_id[(unsigned char)w[i]] >= 0) /* a byte the vocabulary lacks is dropped */
            sym[k++] = t->byte_id[(unsigned char)w[i]];
    if (!rc && k) /* merge_word lays its 4 arrays out for k symbols inside sym's 4n */
        rc = merge_word(t, sym, k, heap, ids);
    if (!small)
        free(sym), free(heap);
    return rc;
}

static uint32_t hash_word(const char *s, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

/* bpe_piece through the cache (short words only; a collision replaces the entry). */
static int bpe_cached(tokenizer *t, const char *w, size_t n, tok_ids *ids)
{
    if (n > TOK_CACHE_MAX_WORD)
        return bpe_piece(t, w, n, ids);
    tok_cache_entry *e = &t->cache[hash_word(w, n) & (TOK_CACHE_SLOTS - 1)];
    if (e->word && e->len == n && !memcmp(e->word, w, n)) {
        for (int i = 0; i < e->n; i++)
            if (tok_ids_push(ids, e->ids[i]))
                return PGD_ERR_OUT_OF_HOST_MEMORY;
        return PGD_OK;
    }
    size_t first = ids->n;
    int rc = bpe_piece(t, w, n, ids);
    if (rc)
        return rc;
    char *word = malloc(n);
    int32_t *copy = malloc((ids->n - first) * sizeof *copy + sizeof *copy);
    if (!word || !copy) {
        free(word), free(copy);
        return PGD_OK; /* not cached: the result stands */
    }
    memcpy(word, w, n);
    memcpy(copy, ids->v + first, (ids->n - first) * sizeof *copy);
    free(e->word), free(e->ids);
    *e = (tok_cache_entry){word, n, copy, (int)(ids->n - first)};
    return PGD_OK;
}

/* ---- the pre-tokenisation regex ---- */

enum { K_L, K_N, K_S, K_O };

static int kind_at(const char *s, size_t i, int *used)
{
    unsigned char c = (unsigned char)s[i];
    if (c < 0x80) {
        *used = 1;
        if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z')
            return K_L;
        if (c >= '0' && c <= '9')
            return K_N;
    }
    unsigned u = tok_uclass(tok_utf8_next(s + i, used));
    return u & TOK_L ? K_L : u & TOK_N ? K_N : u & TOK_S ? K_S : K_O;
}

/* The end of the run of characters of kind k from i. */
static size_t run_end(const char *s, size_t n, size_t i, int k)
{
    while (i < n) {
        int used;
        if (kind_at(s, i, &used) != k)
            break;
        i += (size_t)used;
    }
    return i;
}

/* The length of 's 't 're 've 'm 'll 'd at s[i] (an apostrophe), or 0. */
static size_t contraction(const char *s, size_t n, size_t i)
{
    if (i + 1 >= n)
        return 0;
    char c = s[i + 1];
    if (c == 's' || c == 't' || c == 'm' || c == 'd')
        return 2;
    if (i + 2 < n && ((c == 'r' && s[i + 2] == 'e') || (c == 'v' && s[i + 2] == 'e') ||
                      (c == 'l' && s[i + 2] == 'l')))
        return 3;
    return 0;
}

/* The end of the regex's match at i. */
static size_t match_end(const char *s, size_t n, size_t i)
{
    int used;
    int k = kind_at(s, i, &used);
    if (s[i] == '\'') {
        size_t c = contraction(s, n, i);
        if (c)
            return i + c;
    }
    if (s[i] == ' ' && i + 1 < n) {
        int used2;
        int k2 = kind_at(s, i + 1, &used2);
        if (k2 != K_S)
            return run_end(s, n, i + 1, k2);
    }
    if (k != K_S)
        return run_end(s, n, i, k);
    /* \s+(?!\S) keeps the last white space for the next word unless the run ends the text or
     * is a single character (then \s+ takes it) */
    size_t end = i, last = i;
    while (end < n) {
        int u;
        if (kind_at(s, end, &u) != K_S)
            break;
        last = end;
        end += (size_t)u;
    }
    return end == n || last == i ? end : last;
}

int tok_bpe_encode(tokenizer *t, const char *s, size_t n, tok_ids *ids, pgd_error **err)
{
    char *spaced = NULL;
    if (t->add_prefix_space && n && s[0] != ' ') {
        spaced = malloc(n + 1);
        if (!spaced)
            return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "text: out of memory");
        spaced[0] = ' ';
        memcpy(spaced + 1, s, n);
        s = spaced, n++;
    }
    int rc = PGD_OK;
    for (size_t i = 0; i < n && !rc;) {
        size_t end = match_end(s, n, i);
        rc = bpe_cached(t, s + i, end - i, ids);
        i = end;
    }
    free(spaced);
    if (rc)
        return pgd_error_set(err, rc, "text: out of memory encoding it");
    return PGD_OK;
}

/* ---- decode ---- */

/* How many bytes at u[0..n) one U+FFFD replaces (the maximal start of a valid sequence, at
 * least 1), as Rust's String::from_utf8_lossy counts them. */
static size_t invalid_len(const unsigned char *u, size_t n)
{
    unsigned c = u[0];
    size_t len = c >= 0xC2 && c <= 0xDF   ? 2
                 : c >= 0xE0 && c <= 0xEF ? 3
                 : c >= 0xF0 && c <= 0xF4 ? 4
                                          : 0;
    if (!len || n < 2)
        return 1;
    unsigned lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80;
    unsigned hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
    if (u[1] < lo || u[1] > hi)
        return 1;
    size_t i = 2;
    while (i < len && i < n && u[i] >= 0x80 && u[i] <= 0xBF)
        i++;
    return i;
}

static char *lossy(const unsigned char *u, size_t n, size_t *len)
{
    char *out = malloc(n * 3 + 1);
    if (!out)
        return NULL;
    size_t w = 0;
    for (size_t i = 0; i < n;) {
        size_t ok = tok_utf8_check((const char *)u + i, n - i);
        memcpy(out + w, u + i, ok);
        w += ok, i += ok;
        if (i < n) {
            i += invalid_len(u + i, n - i);
            memcpy(out + w, "\xEF\xBF\xBD", 3);
            w += 3;
        }
    }
    out[w] = 0;
    *len = w;
    return out;
}

int tok_bpe_decode(const tokenizer *t, const int32_t *ids, size_t n, int skip_special, char **text,
                   size_t *text_len, pgd_error **err)
{
    size_t cap = 1, w = 0;
    for (size_t i = 0; i < n; i++)
        cap += t->len[ids[i]] + 1;
    unsigned char *bytes = malloc(cap);
    if (!bytes)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "decode: out of memory");
    for (size_t i = 0; i < n; i++) {
        if (skip_special && tokenizer_is_special(t, ids[i]))
            continue;
        size_t len;
        const char *tok = tokenizer_token(t, ids[i], &len);
        if (!t->bl_decoder) { /* no decoder: the tokens joined by spaces */
            if (w)
                bytes[w++] = ' ';
            memcpy(bytes + w, tok, len);
            w += len;
            continue;
        }
        /* a token whose characters are all in the byte map gives those bytes, else itself */
        size_t start = w;
        for (size_t j = 0; j < len;) {
            int used, b = char_byte(tok_utf8_next(tok + j, &used));
            if (b < 0) {
                w = start;
                memcpy(bytes + w, tok, len);
                w += len;
                break;
            }
            bytes[w++] = (unsigned char)b;
            j += (size_t)used;
        }
    }
    *text = lossy(bytes, w, text_len);
    free(bytes);
    if (!*text)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "decode: out of memory");
    return PGD_OK;
}

/* ---- files ---- */

int tok_vocab_from_json(tokenizer *t, json_t *obj, const char *what, pgd_error **err)
{
    if (!json_is_object(obj))
        return pgd_error_set(err, PGD_ERR_FORMAT, "%s: the vocabulary is not a JSON object", what);
    if (json_object_size(obj) == 0 || json_object_size(obj) > TOKENIZER_MAX_VOCAB)
        return pgd_error_set(err, PGD_ERR_FORMAT, "%s: %zu tokens (1..%d allowed)", what,
                             json_object_size(obj), TOKENIZER_MAX_VOCAB);
    for (void *it = json_object_iter(obj); it; it = json_object_iter_next(obj, it)) {
        const char *key = json_object_iter_key(it);
        size_t klen = json_object_iter_key_len(it);
        json_t *v = json_object_iter_value(it);
        if (!json_is_integer(v))
            return pgd_error_set(err, PGD_ERR_FORMAT,
                                 "%s: the id of token '%.*s' is not an integer", what,
                                 (int)(klen > 64 ? 64 : klen), key);
        json_int_t id = json_integer_value(v);
        int rc =
            tok_add_token(t, id < 0 || id > INT32_MAX ? -1 : (int32_t)id, key, klen, what, err);
        if (rc)
            return rc;
    }
    return tok_index(t, what, err);
}

static int read_merges_txt(tokenizer *t, const char *path, const char *data, size_t size,
                           pgd_error **err)
{
    size_t lines = 1;
    for (size_t i = 0; i < size; i++)
        lines += data[i] == '\n';
    int rc = tok_bpe_merges_begin(t, lines, path, err);
    uint32_t rank = 0;
    size_t line = 0;
    for (size_t i = 0; i < size && !rc;) {
        const char *nl = memchr(data + i, '\n', size - i);
        size_t end = nl ? (size_t)(nl - data) : size, len = end - i;
        line++;
        if (len && data[end - 1] == '\r')
            len--;
        const char *l = data + i;
        i = end + 1;
        if (len >= 8 && !memcmp(l, "#version", 8))
            continue;
        const char *sp = memchr(l, ' ', len);
        if (!sp || sp == l || sp == l + len - 1 || memchr(sp + 1, ' ', (size_t)(l + len - sp - 1)))
            return pgd_error_set(err, PGD_ERR_FORMAT,
                                 "%s: line %zu is not two tokens separated by one space", path,
                                 line);
        rc = tok_bpe_add_merge(t, l, (size_t)(sp - l), sp + 1, (size_t)(l + len - sp - 1), rank++,
                               path, err);
    }
    return rc;
}

int tokenizer_load_bpe(const char *vocab_json, const char *merges_txt, tokenizer **out,
                       pgd_error **err)
{
    *out = NULL;
    char *data = NULL;
    size_t size = 0;
    tokenizer *t = NULL;
    int rc = tok_read_file(vocab_json, &data, &size, err);
    if (!rc)
        rc = tok_create(TOKENIZER_BPE, size / 8, &t, err);
    if (!rc) {
        json_error_t jerr;
        json_t *root = json_loadb(data, size, JSON_REJECT_DUPLICATES, &jerr);
        if (!root)
            rc = pgd_error_set(err, PGD_ERR_FORMAT, "%s: line %d: %s", vocab_json, jerr.line,
                               jerr.text);
        else
            rc = tok_vocab_from_json(t, root, vocab_json, err);
        json_decref(root);
    }
    free(data);
    data = NULL;
    if (!rc)
        rc = tok_read_file(merges_txt, &data, &size, err);
    if (!rc)
        rc = read_merges_txt(t, merges_txt, data, size, err);
    free(data);
    if (!rc)
        rc = tok_bpe_finish(t, err);
    if (!rc && tok_lookup(t, "<|endoftext|>", 13) >= 0)
        rc = tok_add_special(t, "<|endoftext|>", 13, &(tok_added){.special = 1}, vocab_json, err);
    if (rc) {
        tokenizer_free(t);
        return rc;
    }
    t->bl_decoder = 1;
    *out = t;
    return PGD_OK;
}
