/* tokenizer_parts.h — the inside of a tokenizer, shared by tokenizer*.c only: the vocabulary
 * (ids ↔ bytes), the added tokens, the WordPiece and BPE settings, the Unicode classes. */
#ifndef PGD_TOKENIZER_PARTS_H
#define PGD_TOKENIZER_PARTS_H

#include <stddef.h>
#include <stdint.h>

#include "tokenizer.h"

/* A token added on top of the model (special tokens such as [CLS] or <|endoftext|>): matched in
 * the text before the model sees it, as the tokenizers package's AddedVocabulary does. */
typedef struct tok_added {
    int32_t id;
    int special;    /* skipped by decode(skip_special) */
    int normalized; /* matched in the normalized text (else in the raw text) */
    int lstrip, rstrip;
} tok_added;

/* A merge of BPE: the pair (a, b) → its rank and the merged token. */
typedef struct tok_merge {
    uint64_t pair; /* (a << 32) | b, ids */
    uint32_t rank;
    int32_t id;
} tok_merge;

/* The BPE cache: a word's bytes → its ids, one entry a slot, overwritten on collision. */
typedef struct tok_cache_entry {
    char *word;
    size_t len;
    int32_t *ids;
    int n;
} tok_cache_entry;

#define TOK_CACHE_SLOTS 4096
#define TOK_CACHE_MAX_WORD 256

struct pgd_tokenizer {
    tokenizer_kind kind;
    /* the vocabulary: id → bytes in `arena`; a hash of bytes → id */
    char *arena;
    size_t arena_len, arena_cap;
    uint32_t *off; /* UINT32_MAX: no token with this id */
    uint16_t *len;
    int32_t n_ids; /* room for ids 0..n_ids-1 */
    int32_t size;  /* highest id + 1 */
    int32_t *slots;
    uint32_t mask;
    size_t max_token; /* longest token, bytes */
    tok_added *added;
    int n_added;
    /* special ids put around the text by encode(add_special) */
    int32_t prefix[4], suffix[4];
    int n_prefix, n_suffix;
    uint8_t added_first[256]; /* 1: some added token starts with this byte */
    /* WordPiece, with BertNormalizer */
    int normalizer; /* 0: none (tokenizer.json without one) */
    int clean_text, handle_cjk, strip_accents, lowercase;
    int32_t unk;
    int max_chars;
    char wp_prefix[16];
    size_t wp_prefix_len;
    int wp_decoder;     /* 1: the WordPiece decoder ("##" joined); 0: tokens joined by spaces */
    int decode_cleanup; /* the WordPiece decoder's clean-up of " ." etc. */
    /* BPE */
    tok_merge *merges;
    uint32_t merge_mask;
    int32_t byte_id[256]; /* the vocabulary's id of each byte's character, or -1 */
    int add_prefix_space, ignore_merges;
    int bl_decoder; /* 1: the ByteLevel decoder; 0: tokens joined by spaces */
    tok_cache_entry *cache;
};

/* tokenizer.c */
/* An empty tokenizer of that kind with room for about `hint` tokens. */
int tok_create(tokenizer_kind kind, size_t hint, tokenizer **out, pgd_error **err);
/* Gives `id` the bytes s[0..n); an id already given or bytes already in the vocabulary are
 * errors naming `what` (the file) and the token. */
int tok_add_token(tokenizer *t, int32_t id, const char *s, size_t n, const char *what,
                  pgd_error **err);
/* Builds the hash of bytes → id (after the last tok_add_token). */
int tok_index(tokenizer *t, const char *what, pgd_error **err);
int32_t tok_lookup(const tokenizer *t, const char *s, size_t n);
/* Marks an existing token as added (matched before the model). */
int tok_add_special(tokenizer *t, const char *s, size_t n, const tok_added *how, const char *what,
                    pgd_error **err);
/* Reads a whole regular file (at most TOKENIZER_MAX_FILE bytes), NUL-terminated. */
int tok_read_file(const char *path, char **data, size_t *size, pgd_error **err);
/* The byte offset of the first byte of invalid UTF-8 in s[0..n), or n. */
size_t tok_utf8_check(const char *s, size_t n);
/* Decodes one code point of valid UTF-8 at s (bytes used in *used). */
uint32_t tok_utf8_next(const char *s, int *used);
int tok_utf8_put(char *dst, uint32_t cp);

/* A growable array of ids. */
typedef struct tok_ids {
    int32_t *v;
    size_t n, cap;
} tok_ids;
int tok_ids_push(tok_ids *ids, int32_t id);

/* tokenizer_unicode.c: the classes of tokenizer_unicode.inc */
unsigned tok_uclass(uint32_t cp);
int tok_is_cjk(uint32_t cp);
/* The canonical decomposition (NFD) of cp into dst (at most 4 code points); returns the count. */
int tok_nfd(uint32_t cp, uint32_t dst[4]);
int tok_ccc(uint32_t cp);
/* The lower-case of cp (Rust's char::to_lowercase) into dst (at most 3); returns the count. */
int tok_lower(uint32_t cp, uint32_t dst[3]);
#define TOK_CONTROL 1
#define TOK_CLEAN_WS 2
#define TOK_PRE_WS 4
#define TOK_PUNCT 8
#define TOK_MN 16
#define TOK_L 32
#define TOK_N 64
#define TOK_S 128

/* tokenizer_wordpiece.c */
/* The ids of one stretch of text (no added tokens in it) through the normalizer (unless
 * `normalized`: it has been through it), the pre-tokenizer and WordPiece. */
int tok_wordpiece_encode(tokenizer *t, const char *s, size_t n, int normalized, tok_ids *ids,
                         pgd_error **err);
/* BertNormalizer over s[0..n): a malloc'ed UTF-8 string in *out (*out_n bytes). */
int tok_bert_normalize(const tokenizer *t, const char *s, size_t n, char **out, size_t *out_n,
                       pgd_error **err);
/* BERT's special tokens ([PAD] [UNK] [CLS] [SEP] [MASK], those in the vocabulary) as added
 * tokens, and [CLS] … [SEP] around encode(add_special). */
int tok_bert_specials(tokenizer *t, const char *what, pgd_error **err);
int tok_wordpiece_decode(const tokenizer *t, const int32_t *ids, size_t n, int skip_special,
                         char **text, size_t *len, pgd_error **err);

/* tokenizer_bpe.c */
int tok_bpe_encode(tokenizer *t, const char *s, size_t n, tok_ids *ids, pgd_error **err);
/* Adds merge number rank + 1 (from merges.txt or tokenizer.json) to the merge table: both
 * halves and their concatenation must be tokens, the pair new. */
int tok_bpe_add_merge(tokenizer *t, const char *a, size_t na, const char *b, size_t nb,
                      uint32_t rank, const char *what, pgd_error **err);
/* Room for `count` merges (at most TOKENIZER_MAX_VOCAB; `what` names the file). */
int tok_bpe_merges_begin(tokenizer *t, size_t count, const char *what, pgd_error **err);
int tok_bpe_finish(tokenizer *t, pgd_error **err);
int tok_bpe_decode(const tokenizer *t, const int32_t *ids, size_t n, int skip_special, char **text,
                   size_t *len, pgd_error **err);
/* The vocabulary of a vocab.json-shaped object (token → id). */
struct json_t;
int tok_vocab_from_json(tokenizer *t, struct json_t *obj, const char *what, pgd_error **err);

#endif
