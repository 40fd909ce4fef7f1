/* tokenizer_json.c — tokenizer.json (the tokenizers package's format) where it holds the models
 * of tokenizer_wordpiece.c and tokenizer_bpe.c: WordPiece with BertNormalizer (or none) and
 * BertPreTokenizer, or BPE with ByteLevel; post-processors that put special tokens around the
 * text (BertProcessing, RobertaProcessing, TemplateProcessing, ByteLevel); the WordPiece and
 * ByteLevel decoders; added tokens. Any other component is an error naming it. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_parts.h"

/* A boolean member (absent: `dflt`; JSON null: `null_is`); another type is an error. */
static int get_bool(json_t *obj, const char *key, int dflt, int null_is, int *out, const char *what,
                    pgd_error **err)
{
    json_t *v = json_object_get(obj, key);
    if (!v)
        *out = dflt;
    else if (json_is_null(v))
        *out = null_is;
    else if (json_is_boolean(v))
        *out = json_is_true(v);
    else
        return pgd_error_set(err, PGD_ERR_FORMAT, "%s: '%s' is not a boolean", what, key);
    return PGD_OK;
}

/* The "type" of a component, or "" when it has none. */
static const char *type_of(json_t *obj)
{
    const char *s = json_string_value(json_object_get(obj, "type"));
    return s ? s : "";
}

/* A component that must be null or absent (or one of the no-op values). */
static int unsupported(const char *what, const char *part, const char *type, const char *want,
                       pgd_error **err)
{
    return pgd_error_set(err, PGD_ERR_UNSUPPORTED, "%s: %s '%s' is not supported (%s)", what, part,
                         type, want);
}

static int read_normalizer(tokenizer *t, json_t *root, const char *what, pgd_error **err)
{
    json_t *n = json_object_get(root, "normalizer");
    if (!n || json_is_null(n))
        return PGD_OK;
    if (t->kind != TOKENIZER_WORDPIECE || strcmp(type_of(n), "BertNormalizer"))
        return unsupported(
            what, "normalizer", type_of(n),
            t->kind == TOKENIZER_WORDPIECE ? "BertNormalizer or none" : "none with BPE", err);
    t->normalizer = 1;
    int strip = -1;
    int rc = get_bool(n, "clean_text", 1, 0, &t->clean_text, what, err);
    if (!rc)
        rc = get_bool(n, "handle_chinese_chars", 1, 0, &t->handle_cjk, what, err);
    if (!rc)
        rc = get_bool(n, "lowercase", 1, 0, &t->lowercase, what, err);
    if (!rc)
        rc = get_bool(n, "strip_accents", -1, -1, &strip, what, err);
    /* strip_accents null follows lowercase, as in BertNormalizer */
    t->strip_accents = strip < 0 ? t->lowercase : strip;
    return rc;
}

static int read_pre_tokenizer(tokenizer *t, json_t *root, const char *what, pgd_error **err)
{
    json_t *p = json_object_get(root, "pre_tokenizer");
    const char *type = p && !json_is_null(p) ? type_of(p) : "null";
    if (t->kind == TOKENIZER_WORDPIECE)
        return strcmp(type, "BertPreTokenizer")
                   ? unsupported(what, "pre_tokenizer", type, "BertPreTokenizer with WordPiece",
                                 err)
                   : PGD_OK;
    if (strcmp(type, "ByteLevel"))
        return unsupported(what, "pre_tokenizer", type, "ByteLevel with BPE", err);
    int regex = 1;
    int rc = get_bool(p, "add_prefix_space", 0, 0, &t->add_prefix_space, what, err);
    if (!rc)
        rc = get_bool(p, "use_regex", 1, 1, &regex, what, err);
    if (!rc && !regex)
        rc = unsupported(what, "pre_tokenizer", "ByteLevel with use_regex false", "GPT-2's regex",
                         err);
    return rc;
}

/* The ids of a special token of TemplateProcessing's "special_tokens" map. */
static int template_ids(tokenizer *t, json_t *pp, json_t *item, int32_t *dst, int *n,
                        const char *what, pgd_error **err)
{
    const char *name = json_string_value(json_object_get(item, "id"));
    json_t *ids = json_object_get(
        json_object_get(json_object_get(pp, "special_tokens"), name ? name : ""), "ids");
    if (!name || !json_is_array(ids))
        return pgd_error_set(err, PGD_ERR_FORMAT,
                             "%s: post_processor names special token '%s' "
                             "without ids",
                             what, name ? name : "?");
    for (size_t i = 0; i < json_array_size(ids); i++) {
        json_int_t id = json_integer_value(json_array_get(ids, i));
        if (*n >= 4 || !tokenizer_token(t, (int32_t)id, &(size_t){0}) || id > INT32_MAX)
            return pgd_error_set(err, PGD_ERR_FORMAT,
                                 "%s: post_processor: special token '%s' "
                                 "has an id not in the vocabulary or more than 4 ids",
                                 what, name);
        dst[(*n)++] = (int32_t)id;
    }
    return PGD_OK;
}

static int read_template(tokenizer *t, json_t *pp, const char *what, pgd_error **err)
{
    json_t *single = json_object_get(pp, "single");
    if (!json_is_array(single))
        return pgd_error_set(err, PGD_ERR_FORMAT, "%s: TemplateProcessing without 'single'", what);
    int seen_seq = 0, rc = PGD_OK;
    for (size_t i = 0; i < json_array_size(single) && !rc; i++) {
        json_t *item = json_array_get(single, i), *sp = json_object_get(item, "SpecialToken");
        if (json_object_get(item, "Sequence") && !seen_seq)
            seen_seq = 1;
        else if (sp && !seen_seq)
            rc = template_ids(t, pp, sp, t->prefix, &t->n_prefix, what, err);
        else if (sp)
            rc = template_ids(t, pp, sp, t->suffix, &t->n_suffix, what, err);
        else
            rc = pgd_error_set(err, PGD_ERR_UNSUPPORTED,
                               "%s: post_processor template item %zu "
                               "is neither a SpecialToken nor the one Sequence",
                               what, i);
    }
    return rc;
}

/* BertProcessing / RobertaProcessing: "cls": [token, id], "sep": [token, id]. */
static int read_pair(tokenizer *t, json_t *pp, const char *key, int32_t *dst, int *n,
                     const char *what, pgd_error **err)
{
    json_int_t id = json_integer_value(json_array_get(json_object_get(pp, key), 1));
    if (!json_is_integer(json_array_get(json_object_get(pp, key), 1)) || id > INT32_MAX ||
        !tokenizer_token(t, (int32_t)id, &(size_t){0}))
        return pgd_error_set(err, PGD_ERR_FORMAT,
                             "%s: post_processor '%s' is not [token, id] "
                             "of the vocabulary",
                             what, key);
    dst[0] = (int32_t)id;
    *n = 1;
    return PGD_OK;
}

static int read_post_processor(tokenizer *t, json_t *root, const char *what, pgd_error **err)
{
    json_t *pp = json_object_get(root, "post_processor");
    if (!pp || json_is_null(pp) || !strcmp(type_of(pp), "ByteLevel"))
        return PGD_OK;
    const char *type = type_of(pp);
    if (!strcmp(type, "TemplateProcessing"))
        return read_template(t, pp, what, err);
    if (strcmp(type, "BertProcessing") && strcmp(type, "RobertaProcessing"))
        return unsupported(what, "post_processor", type,
                           "TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel or "
                           "none",
                           err);
    int rc = read_pair(t, pp, "cls", t->prefix, &t->n_prefix, what, err);
    return rc ? rc : read_pair(t, pp, "sep", t->suffix, &t->n_suffix, what, err);
}

static int read_decoder(tokenizer *t, json_t *root, const char *what, pgd_error **err)
{
    json_t *d = json_object_get(root, "decoder");
    if (!d || json_is_null(d))
        return PGD_OK;
    const char *type = type_of(d);
    if (t->kind == TOKENIZER_BPE) {
        if (strcmp(type, "ByteLevel"))
            return unsupported(what, "decoder", type, "ByteLevel or none with BPE", err);
        t->bl_decoder = 1;
        return PGD_OK;
    }
    if (strcmp(type, "WordPiece"))
        return unsupported(what, "decoder", type, "WordPiece or none with WordPiece", err);
    const char *prefix = json_string_value(json_object_get(d, "prefix"));
    if (prefix &&
        (strlen(prefix) != t->wp_prefix_len || memcmp(prefix, t->wp_prefix, t->wp_prefix_len)))
        return unsupported(what, "decoder", "WordPiece with another prefix than the model's",
                           "the same prefix", err);
    t->wp_decoder = 1;
    return get_bool(d, "cleanup", 1, 0, &t->decode_cleanup, what, err);
}

/* The id and content of an entry of "added_tokens". */
static int added_entry(json_t *a, int32_t *id, const char **content, size_t *len, const char *what,
                       pgd_error **err)
{
    json_t *jid = json_object_get(a, "id");
    *content = json_string_value(json_object_get(a, "content"));
    *len = json_string_length(json_object_get(a, "content"));
    if (!json_is_integer(jid) || !*content || *len == 0)
        return pgd_error_set(err, PGD_ERR_FORMAT, "%s: an added token without an id or content",
                             what);
    json_int_t v = json_integer_value(jid);
    *id = v < 0 || v > INT32_MAX ? -1 : (int32_t)v;
    return PGD_OK;
}

/* One entry of "added_tokens", now in the vocabulary: it must have its id there. */
static int read_added_one(tokenizer *t, json_t *a, const char *what, pgd_error **err)
{
    int32_t id;
    const char *content;
    size_t len;
    int rc = added_entry(a, &id, &content, &len, what, err);
    if (rc)
        return rc;
    int32_t have = tok_lookup(t, content, len);
    if (have != id)
        return pgd_error_set(err, PGD_ERR_FORMAT,
                             "%s: added token '%.*s' has id %ld, the "
                             "vocabulary %ld",
                             what, (int)len, content, (long)id, (long)have);
    tok_added how = {0};
    int single = 0;
    rc = get_bool(a, "special", 0, 0, &how.special, what, err);
    if (!rc)
        rc = get_bool(a, "normalized", 1, 1, &how.normalized, what, err);
    if (!rc)
        rc = get_bool(a, "lstrip", 0, 0, &how.lstrip, what, err);
    if (!rc)
        rc = get_bool(a, "rstrip", 0, 0, &how.rstrip, what, err);
    if (!rc)
        rc = get_bool(a, "single_word", 0, 0, &single, what, err);
    if (!rc && single)
        rc = unsupported(what, "added token", "single_word", "single_word false", err);
    return rc ? rc : tok_add_special(t, content, len, &how, what, err);
}

/* The added tokens: those the model's vocabulary lacks are added to it first (one index for
 * all of them), then each is marked as matched before the model. */
static int read_added(tokenizer *t, json_t *root, const char *what, pgd_error **err)
{
    json_t *added = json_object_get(root, "added_tokens");
    if (!added || json_is_null(added))
        return PGD_OK;
    if (!json_is_array(added))
        return pgd_error_set(err, PGD_ERR_FORMAT, "%s: 'added_tokens' is not an array", what);
    if (json_array_size(added) > 1024)
        return pgd_error_set(err, PGD_ERR_TOO_LARGE, "%s: more than 1024 added tokens", what);
    int rc = PGD_OK, new_tokens = 0;
    for (size_t i = 0; i < json_array_size(added) && !rc; i++) {
        int32_t id;
        const char *content;
        size_t len;
        rc = added_entry(json_array_get(added, i), &id, &content, &len, what, err);
        if (!rc && tok_lookup(t, content, len) < 0) {
            rc = tok_add_token(t, id, content, len, what, err);
            new_tokens = 1;
        }
    }
    if (!rc && new_tokens)
        rc = tok_index(t, what, err);
    for (size_t i = 0; i < json_array_size(added) && !rc; i++)
        rc = read_added_one(t, json_array_get(added, i), what, err);
    return rc;
}

static int read_wordpiece(tokenizer *t, json_t *model, const char *what, pgd_error **err)
{
    const char *unk = json_string_value(json_object_get(model, "unk_token"));
    const char *prefix = json_string_value(json_object_get(model, "continuing_subword_prefix"));
    json_t *max = json_object_get(model, "max_input_chars_per_word");
    t->unk = unk ? tok_lookup(t, unk, strlen(unk)) : -1;
    if (t->unk < 0)
        return pgd_error_set(err, PGD_ERR_FORMAT,
                             "%s: model's unk_token '%s' is not in the "
                             "vocabulary",
                             what, unk ? unk : "(none)");
    if (prefix) {
        if (strlen(prefix) >= sizeof t->wp_prefix)
            return pgd_error_set(err, PGD_ERR_FORMAT,
                                 "%s: continuing_subword_prefix longer "
                                 "than %zu bytes",
                                 what, sizeof t->wp_prefix - 1);
        t->wp_prefix_len = strlen(prefix);
        memcpy(t->wp_prefix, prefix, t->wp_prefix_len + 1);
    }
    if (max &&
        (!json_is_integer(max) || json_integer_value(max) < 1 || json_integer_value(max) > 1000000))
        return pgd_error_set(err, PGD_ERR_FORMAT,
                             "%s: max_input_chars_per_word is not an "
                             "integer in 1..1000000",
                             what);
    if (max)
        t->max_chars = (int)json_integer_value(max);
    return PGD_OK;
}

/* One merge: "a b" (one space) or ["a", "b"]. */
static int read_merge(tokenizer *t, json_t *m, uint32_t rank, const char *what, pgd_error **err)
{
    const char *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    if (json_is_string(m)) {
        const char *s = json_string_value(m);
        size_t n = json_string_length(m);
        const char *sp = memchr(s, ' ', n);
        if (sp && sp > s && sp < s + n - 1 && !memchr(sp + 1, ' ', (size_t)(s + n - sp - 1)))
            a = s, na = (size_t)(sp - s), b = sp + 1, nb = (size_t)(s + n - sp - 1);
    } else if (json_is_array(m) && json_array_size(m) == 2 &&
               json_is_string(json_array_get(m, 0)) && json_is_string(json_array_get(m, 1))) {
        a = json_string_value(json_array_get(m, 0)), na = json_string_length(json_array_get(m, 0));
        b = json_string_value(json_array_get(m, 1)), nb = json_string_length(json_array_get(m, 1));
    }
    if (!a || !na || !nb)
        return pgd_error_set(err, PGD_ERR_FORMAT, "%s: merge %lu is not \"a b\" or [\"a\", \"b\"]",
                             what, (unsigned long)rank + 1);
    return tok_bpe_add_merge(t, a, na, b, nb, rank, what, err);
}

static int read_bpe(tokenizer *t, json_t *model, const char *what, pgd_error **err)
{
    static const char *const must_be_null[] = {"dropout", "unk_token"};
    static const char *const null_or_empty[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 2; i++) {
        json_t *v = json_object_get(model, must_be_null[i]);
        if (v && !json_is_null(v))
            return unsupported(what, "BPE option", must_be_null[i], "null", err);
        v = json_object_get(model, null_or_empty[i]);
        if (v && !json_is_null(v) && !(json_is_string(v) && !json_string_length(v)))
            return unsupported(what, "BPE option", null_or_empty[i], "null or empty", err);
    }
    int fuse = 0, fallback = 0;
    int rc = get_bool(model, "fuse_unk", 0, 0, &fuse, what, err);
    if (!rc)
        rc = get_bool(model, "byte_fallback", 0, 0, &fallback, what, err);
    if (!rc)
        rc = get_bool(model, "ignore_merges", 0, 0, &t->ignore_merges, what, err);
    if (!rc && (fuse || fallback))
        rc = unsupported(what, "BPE option", fuse ? "fuse_unk" : "byte_fallback", "false", err);
    json_t *merges = json_object_get(model, "merges");
    if (!rc && !json_is_array(merges))
        rc = pgd_error_set(err, PGD_ERR_FORMAT, "%s: model has no 'merges' array", what);
    if (!rc)
        rc = tok_bpe_merges_begin(t, json_array_size(merges), what, err);
    for (size_t i = 0; !rc && i < json_array_size(merges); i++)
        rc = read_merge(t, json_array_get(merges, i), (uint32_t)i, what, err);
    return rc ? rc : tok_bpe_finish(t, err);
}

static int read_root(json_t *root, const char *what, tokenizer **out, pgd_error **err)
{
    static const char *const must_be_null[] = {"truncation", "padding"};
    for (int i = 0; i < 2; i++) {
        json_t *v = json_object_get(root, must_be_null[i]);
        if (v && !json_is_null(v))
            return unsupported(what, must_be_null[i], "set", "null", err);
    }
    json_t *model = json_object_get(root, "model");
    const char *type = type_of(model);
    tokenizer_kind kind = !strcmp(type, "WordPiece") ? TOKENIZER_WORDPIECE
                          : !strcmp(type, "BPE")     ? TOKENIZER_BPE
                                                     : 0;
    if (!kind)
        return unsupported(what, "model", json_is_object(model) ? type : "(none)",
                           "WordPiece or BPE", err);
    tokenizer *t = NULL;
    json_t *vocab = json_object_get(model, "vocab");
    int rc = tok_create(kind, json_object_size(vocab), &t, err);
    if (!rc)
        rc = tok_vocab_from_json(t, vocab, what, err);
    if (!rc)
        rc = kind == TOKENIZER_WORDPIECE ? read_wordpiece(t, model, what, err)
                                         : read_bpe(t, model, what, err);
    if (!rc)
        rc = read_normalizer(t, root, what, err);
    if (!rc)
        rc = read_pre_tokenizer(t, root, what, err);
    if (!rc)
        rc = read_added(t, root, what, err);
    if (!rc)
        rc = read_post_processor(t, root, what, err);
    if (!rc)
        rc = read_decoder(t, root, what, err);
    if (rc) {
        tokenizer_free(t);
        return rc;
    }
    *out = t;
    return PGD_OK;
}

int tokenizer_load_json(const char *path, tokenizer **out, pgd_error **err)
{
    *out = NULL;
    char *data = NULL;
    size_t size = 0;
    int rc = tok_read_file(path, &data, &size, err);
    if (rc)
        return rc;
    json_error_t jerr;
    json_t *root = json_loadb(data, size, JSON_REJECT_DUPLICATES, &jerr);
    free(data);
    if (!root)
        return pgd_error_set(err, PGD_ERR_FORMAT, "%s: line %d: %s", path, jerr.line, jerr.text);
    if (json_is_object(root))
        rc = read_root(root, path, out, err);
    else
        rc = pgd_error_set(err, PGD_ERR_FORMAT, "%s: not a JSON object", path);
    json_decref(root);
    return rc;
}
