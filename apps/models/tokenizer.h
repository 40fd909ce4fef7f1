/* tokenizer.h — text to token ids and back, identical to Hugging Face's tokenizers: BERT's
 * WordPiece (vocab.txt, with BertNormalizer and BertPreTokenizer semantics) and GPT-2's
 * byte-level BPE (vocab.json + merges.txt), or either read from a tokenizer.json.
 *
 *     tokenizer *t = NULL;
 *     int32_t *ids = NULL;
 *     size_t n = 0;
 *     int rc = tokenizer_load_json("tokenizer.json", &t, &err);
 *     if (!rc) rc = tokenizer_encode(t, text, strlen(text), 1, &ids, &n, &err);
 *     free(ids);
 *     tokenizer_free(t);
 *
 * The conventions are pagoda.h's: a pgd_status return, an optional `pgd_error **err` set at
 * most once, nothing allocated on error, free functions accept NULL. A tokenizer keeps a cache
 * of encoded words (BPE), so it is used from one thread at a time. Written against pagoda.h
 * only (errors), like the models. */
#ifndef PGD_TOKENIZER_H
#define PGD_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "pagoda.h"

/* Size caps: a file or a token beyond them is refused with an error naming the file. */
#define TOKENIZER_MAX_FILE (512u << 20) /* bytes of vocab.txt, vocab.json, merges, .json */
#define TOKENIZER_MAX_TOKEN 1024        /* bytes of one token */
#define TOKENIZER_MAX_VOCAB (1 << 22)   /* tokens */

typedef enum tokenizer_kind {
    TOKENIZER_WORDPIECE = 1, /* BERT */
    TOKENIZER_BPE = 2,       /* GPT-2's byte-level BPE */
} tokenizer_kind;

/* The public pgd_tokenizer of pagoda_models.h is this structure (api_tokenizer.c). */
typedef struct pgd_tokenizer tokenizer;

/* BERT's WordPiece from a vocab.txt (one token a line, the id its line number), as
 * transformers' BertTokenizer(vocab, do_lower_case=lowercase) builds it: lower-casing and accent
 * stripping when `lowercase`, [UNK], [CLS], [SEP], [PAD], [MASK] as special tokens (those the
 * file holds; [UNK] is required). */
int tokenizer_load_wordpiece(const char *vocab_txt, int lowercase, tokenizer **out,
                             pgd_error **err);

/* As tokenizer_load_wordpiece from the `size` bytes of a vocab.txt held in memory (`label`
 * names it in errors): a built-in vocabulary. */
int tokenizer_wordpiece_from_text(const char *text, size_t size, const char *label, int lowercase,
                                  tokenizer **out, pgd_error **err);

/* GPT-2's byte-level BPE from vocab.json and merges.txt, as transformers' GPT2TokenizerFast
 * builds it (no prefix space; <|endoftext|> a special token when the vocabulary holds it). */
int tokenizer_load_bpe(const char *vocab_json, const char *merges_txt, tokenizer **out,
                       pgd_error **err);

/* A tokenizer.json holding a WordPiece model with BertNormalizer (or none) and
 * BertPreTokenizer, or a BPE model with a ByteLevel pre-tokenizer; any other component is an
 * error naming it. */
int tokenizer_load_json(const char *path, tokenizer **out, pgd_error **err);

/* Encodes `len` bytes of UTF-8 text (invalid UTF-8: an error naming the byte offset).
 * add_special: BERT's [CLS] … [SEP] around the ids (as encode() does by default; nothing for
 * GPT-2). *ids is malloc'ed (free() it); *n may be 0. */
int tokenizer_encode(tokenizer *t, const char *text, size_t len, int add_special, int32_t **ids,
                     size_t *n, pgd_error **err);

/* The text of `n` ids as tokenizers' decode(ids, skip_special_tokens) gives it (WordPiece: the
 * pieces joined by spaces, "##" removed, its clean-up of " ." and the like; BPE: the bytes
 * back, invalid UTF-8 replaced by U+FFFD). An id out of range is an error naming it.
 * *text is malloc'ed, valid UTF-8 and NUL-terminated; *len bytes long (it may hold NUL
 * characters: the text decoded from bytes 0). */
int tokenizer_decode(const tokenizer *t, const int32_t *ids, size_t n, int skip_special,
                     char **text, size_t *len, pgd_error **err);

/* The token of an id (its bytes, *len of them; not NUL-terminated), or NULL out of range. */
const char *tokenizer_token(const tokenizer *t, int32_t id, size_t *len);
/* The id of a token, or -1. */
int32_t tokenizer_id(const tokenizer *t, const char *token, size_t len);
int32_t tokenizer_vocab_size(const tokenizer *t);
tokenizer_kind tokenizer_get_kind(const tokenizer *t);
/* 1 when the id is a special (added) token. */
int tokenizer_is_special(const tokenizer *t, int32_t id);
void tokenizer_free(tokenizer *t);

#endif
