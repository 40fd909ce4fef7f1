/* tokenizer_wordpiece.c — BERT's tokenizer as the tokenizers package runs it: BertNormalizer
 * (clean text, pad CJK ideographs with spaces, strip accents by NFD and dropping nonspacing
 * marks, lower-case), BertPreTokenizer (split at white space, punctuation on its own), then
 * WordPiece (greedy longest match, "##" continuations, [UNK] for a word with any unknown
 * piece or longer than max_input_chars_per_word). */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_parts.h"

/* A growable buffer of code points. */
typedef struct cps {
    uint32_t *v;
    size_t n, cap;
} cps;

static int cps_room(cps *c, size_t more)
{
    if (c->n + more <= c->cap)
        return PGD_OK;
    size_t cap = (c->n + more) * 2;
    uint32_t *v = realloc(c->v, cap * sizeof *v);
    if (!v)
        return PGD_ERR_OUT_OF_HOST_MEMORY;
    c->v = v, c->cap = cap;
    return PGD_OK;
}

/* clean_text and handle_chinese_chars: controls, NUL and U+FFFD dropped, white space made ' ',
 * CJK ideographs padded with spaces. */
static int clean(const tokenizer *t, const char *s, size_t n, cps *out)
{
    if (cps_room(out, n * 3 + 1))
        return PGD_ERR_OUT_OF_HOST_MEMORY;
    for (size_t i = 0; i < n;) {
        int used;
        uint32_t cp = tok_utf8_next(s + i, &used);
        i += (size_t)used;
        if (t->clean_text) {
            unsigned c = tok_uclass(cp);
            if (cp == 0 || cp == 0xFFFD || (c & TOK_CONTROL))
                continue;
            if (c & TOK_CLEAN_WS)
                cp = ' ';
        }
        if (t->handle_cjk && tok_is_cjk(cp)) {
            out->v[out->n++] = ' ';
            out->v[out->n++] = cp;
            out->v[out->n++] = ' ';
        } else {
            out->v[out->n++] = cp;
        }
    }
    return PGD_OK;
}

/* Sorts a run of combining marks by canonical combining class, stably (NFD's canonical
 * order): insertion for short runs, by counting for long ones (a hostile text of many marks
 * must not cost the square of its length). */
static int order_marks(uint32_t *v, size_t n)
{
    if (n <= 16) {
        for (size_t i = 1; i < n; i++) {
            uint32_t x = v[i];
            int c = tok_ccc(x);
            size_t j = i;
            for (; j > 0 && tok_ccc(v[j - 1]) > c; j--)
                v[j] = v[j - 1];
            v[j] = x;
        }
        return PGD_OK;
    }
    size_t count[257] = {0};
    uint32_t *tmp = malloc(n * sizeof *tmp);
    if (!tmp)
        return PGD_ERR_OUT_OF_HOST_MEMORY;
    for (size_t i = 0; i < n; i++)
        count[tok_ccc(v[i]) + 1]++;
    for (int c = 1; c < 257; c++)
        count[c] += count[c - 1];
    for (size_t i = 0; i < n; i++)
        tmp[count[tok_ccc(v[i])]++] = v[i];
    memcpy(v, tmp, n * sizeof *v);
    free(tmp);
    return PGD_OK;
}

/* NFD (decomposition, then each run of combining marks in canonical order), then the
 * nonspacing marks (Mn) dropped. */
static int strip_accents(const cps *in, cps *out)
{
    if (cps_room(out, in->n * 4 + 1))
        return PGD_ERR_OUT_OF_HOST_MEMORY;
    for (size_t i = 0; i < in->n; i++)
        out->n += (size_t)tok_nfd(in->v[i], out->v + out->n);
    for (size_t i = 0; i < out->n;) {
        size_t j = i;
        while (j < out->n && tok_ccc(out->v[j]))
            j++;
        if (j - i > 1 && order_marks(out->v + i, j - i))
            return PGD_ERR_OUT_OF_HOST_MEMORY;
        i = j > i ? j : i + 1;
    }
    size_t w = 0;
    for (size_t i = 0; i < out->n; i++)
        if (!(tok_uclass(out->v[i]) & TOK_MN))
            out->v[w++] = out->v[i];
    out->n = w;
    return PGD_OK;
}

static int lower(const cps *in, cps *out)
{
    if (cps_room(out, in->n * 2 + 1))
        return PGD_ERR_OUT_OF_HOST_MEMORY;
    for (size_t i = 0; i < in->n; i++) {
        uint32_t l[3];
        int k = tok_lower(in->v[i], l);
        for (int j = 0; j < k; j++)
            out->v[out->n++] = l[j];
    }
    return PGD_OK;
}

int tok_bert_normalize(const tokenizer *t, const char *s, size_t n, char **out, size_t *out_n,
                       pgd_error **err)
{
    *out = NULL, *out_n = 0;
    cps a = {0}, b = {0};
    int rc = clean(t, s, n, &a);
    if (!rc && t->strip_accents) {
        rc = strip_accents(&a, &b);
        cps swap = a;
        a = b, b = swap, b.n = 0;
    }
    if (!rc && t->lowercase) {
        rc = lower(&a, &b);
        cps swap = a;
        a = b, b = swap;
    }
    char *u = rc ? NULL : malloc(a.n * 4 + 1);
    if (u) {
        size_t len = 0;
        for (size_t i = 0; i < a.n; i++)
            len += (size_t)tok_utf8_put(u + len, a.v[i]);
        u[len] = 0;
        *out = u, *out_n = len;
    }
    free(a.v), free(b.v);
    if (!u)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "text: out of memory normalizing it");
    return PGD_OK;
}

/* WordPiece over one word of `chars` characters: greedy longest match from the left. */
static int wordpiece(const tokenizer *t, const char *w, size_t n, size_t chars, tok_ids *ids)
{
    if (chars > (size_t)t->max_chars)
        return tok_ids_push(ids, t->unk);
    char key[TOKENIZER_MAX_TOKEN + 16];
    size_t first = ids->n, start = 0;
    while (start < n) {
        size_t pre = start ? t->wp_prefix_len : 0;
        size_t end = pre >= t->max_token              ? start
                     : n - start + pre > t->max_token ? start + (t->max_token - pre)
                                                      : n;
        int32_t found = -1;
        memcpy(key, t->wp_prefix, pre);
        for (; end > start; end--) {
            if (end < n && ((unsigned char)w[end] & 0xC0) == 0x80)
                continue; /* not a character boundary */
            memcpy(key + pre, w + start, end - start);
            found = tok_lookup(t, key, pre + end - start);
            if (found >= 0)
                break;
        }
        if (found < 0) {
            ids->n = first;
            return tok_ids_push(ids, t->unk);
        }
        int rc = tok_ids_push(ids, found);
        if (rc)
            return rc;
        start = end;
    }
    return PGD_OK;
}

/* BertPreTokenizer then WordPiece over normalized text. */
static int pre_tokenize(const tokenizer *t, const char *s, size_t n, tok_ids *ids)
{
    size_t w = 0, chars = 0;
    for (size_t i = 0; i < n;) {
        int used;
        uint32_t cp = tok_utf8_next(s + i, &used);
        unsigned c =
            cp < 0x80 && cp > ' ' && (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z' ? 0 : tok_uclass(cp);
        if (c & (TOK_PRE_WS | TOK_PUNCT)) {
            int rc = chars ? wordpiece(t, s + w, i - w, chars, ids) : PGD_OK;
            if (!rc && (c & TOK_PUNCT))
                rc = wordpiece(t, s + i, (size_t)used, 1, ids);
            if (rc)
                return rc;
            chars = 0;
            w = i + (size_t)used;
        } else {
            chars++;
        }
        i += (size_t)used;
    }
    return chars ? wordpiece(t, s + w, n - w, chars, ids) : PGD_OK;
}

int tok_wordpiece_encode(tokenizer *t, const char *s, size_t n, int normalized, tok_ids *ids,
                         pgd_error **err)
{
    char *norm = NULL;
    size_t nn = n;
    if (t->normalizer && !normalized) {
        int rc = tok_bert_normalize(t, s, n, &norm, &nn, err);
        if (rc)
            return rc;
        s = norm;
    }
    int rc = pre_tokenize(t, s, nn, ids);
    free(norm);
    if (rc)
        return pgd_error_set(err, rc, "text: out of memory encoding it");
    return PGD_OK;
}

/* ---- decode ---- */

typedef struct buf {
    char *p;
    size_t n, cap;
} buf;

static int buf_put(buf *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        size_t cap = (b->n + n + 1) * 2;
        char *p = realloc(b->p, cap);
        if (!p)
            return PGD_ERR_OUT_OF_HOST_MEMORY;
        b->p = p, b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return PGD_OK;
}

/* Replaces every `from` in s[0..*n) by the no longer `to`, in place. */
static void replace_all(char *s, size_t *n, const char *from, const char *to)
{
    size_t lf = strlen(from), lt = strlen(to), w = 0;
    for (size_t r = 0; r < *n;) {
        if (r + lf <= *n && !memcmp(s + r, from, lf)) {
            memcpy(s + w, to, lt);
            w += lt, r += lf;
        } else {
            s[w++] = s[r++];
        }
    }
    *n = w;
    s[w] = 0;
}

/* The WordPiece decoder's clean-up, token by token, in its order. */
static void cleanup(char *s, size_t *n)
{
    static const char *const pairs[][2] = {
        {" .", "."},   {" ?", "?"},     {" !", "!"},     {" ,", ","},
        {" ' ", "'"},  {" n't", "n't"}, {" 'm", "'m"},   {" do not", " don't"},
        {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
        replace_all(s, n, pairs[i][0], pairs[i][1]);
}

int tok_wordpiece_decode(const tokenizer *t, const int32_t *ids, size_t n, int skip_special,
                         char **text, size_t *len_out, pgd_error **err)
{
    buf out = {0};
    char piece[TOKENIZER_MAX_TOKEN + 2];
    int rc = buf_put(&out, "", 0), first = 1;
    for (size_t i = 0; i < n && !rc; i++) {
        if (skip_special && tokenizer_is_special(t, ids[i]))
            continue;
        size_t len = 0, pn = 0;
        const char *tok = tokenizer_token(t, ids[i], &len);
        if (!first && t->wp_decoder && len >= t->wp_prefix_len &&
            !memcmp(tok, t->wp_prefix, t->wp_prefix_len)) {
            tok += t->wp_prefix_len, len -= t->wp_prefix_len;
        } else if (!first) {
            piece[pn++] = ' ';
        }
        memcpy(piece + pn, tok, len);
        pn += len;
        piece[pn] = 0;
        if (t->wp_decoder && t->decode_cleanup)
            cleanup(piece, &pn);
        rc = buf_put(&out, piece, pn);
        first = 0;
    }
    if (rc) {
        free(out.p);
        return pgd_error_set(err, rc, "decode: out of memory");
    }
    *text = out.p, *len_out = out.n;
    return PGD_OK;
}

/* ---- vocab.txt ---- */

static int read_vocab_txt(tokenizer *t, const char *path, char *data, size_t size, pgd_error **err)
{
    int32_t id = 0;
    for (size_t i = 0; i < size; id++) {
        char *nl = memchr(data + i, '\n', size - i);
        size_t end = nl ? (size_t)(nl - data) : size, len = end - i;
        if (len && data[end - 1] == '\r')
            len--;
        if (!len)
            return pgd_error_set(err, PGD_ERR_FORMAT, "%s: line %ld is empty (one token a line)",
                                 path, (long)id + 1);
        if (len > TOKENIZER_MAX_TOKEN)
            return pgd_error_set(err, PGD_ERR_FORMAT,
                                 "%s: line %ld is %zu bytes (tokens of at most %d)", path,
                                 (long)id + 1, len, TOKENIZER_MAX_TOKEN);
        if (id >= TOKENIZER_MAX_VOCAB)
            return pgd_error_set(err, PGD_ERR_TOO_LARGE, "%s: more than %d tokens", path,
                                 TOKENIZER_MAX_VOCAB);
        int rc = tok_add_token(t, id, data + i, len, path, err);
        if (rc)
            return rc;
        i = end + 1;
    }
    if (id == 0)
        return pgd_error_set(err, PGD_ERR_FORMAT, "%s: no tokens", path);
    return tok_index(t, path, err);
}

/* BERT's special tokens: matched in the raw text; [CLS] … [SEP] around encode(add_special). */
int tok_bert_specials(tokenizer *t, const char *what, pgd_error **err)
{
    static const char *const names[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
    tok_added how = {.special = 1};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (tok_lookup(t, names[i], strlen(names[i])) < 0)
            continue;
        int rc = tok_add_special(t, names[i], strlen(names[i]), &how, what, err);
        if (rc)
            return rc;
    }
    int32_t cls = tok_lookup(t, "[CLS]", 5), sep = tok_lookup(t, "[SEP]", 5);
    if (cls >= 0 && sep >= 0) {
        t->prefix[0] = cls, t->suffix[0] = sep;
        t->n_prefix = t->n_suffix = 1;
    }
    return PGD_OK;
}

int tokenizer_load_wordpiece(const char *vocab_txt, int lowercase, tokenizer **out, pgd_error **err)
{
    *out = NULL;
    char *data = NULL;
    size_t size = 0;
    int rc = tok_read_file(vocab_txt, &data, &size, err);
    if (!rc)
        rc = tokenizer_wordpiece_from_text(data, size, vocab_txt, lowercase, out, err);
    free(data);
    return rc;
}

int tokenizer_wordpiece_from_text(const char *text, size_t size, const char *label, int lowercase,
                                  tokenizer **out, pgd_error **err)
{
    *out = NULL;
    tokenizer *t = NULL;
    char *data = malloc(size + 1); /* read_vocab_txt reads a writable copy */
    int rc = data ? PGD_OK : pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "%s", label);
    if (!rc) {
        memcpy(data, text, size);
        data[size] = 0;
        rc = tok_create(TOKENIZER_WORDPIECE, size / 6, &t, err);
    }
    if (!rc)
        rc = read_vocab_txt(t, label, data, size, err);
    free(data);
    if (!rc) {
        t->normalizer = t->clean_text = t->handle_cjk = 1;
        t->strip_accents = t->lowercase = lowercase != 0;
        t->wp_decoder = t->decode_cleanup = 1;
        t->unk = tok_lookup(t, "[UNK]", 5);
        if (t->unk < 0)
            rc = pgd_error_set(err, PGD_ERR_FORMAT, "%s: no [UNK] token", label);
    }
    if (!rc)
        rc = tok_bert_specials(t, label, err);
    if (rc) {
        tokenizer_free(t);
        return rc;
    }
    *out = t;
    return PGD_OK;
}
