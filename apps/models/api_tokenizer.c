/* api_tokenizer.c — the tokenizers of tokenizer.h behind pagoda_models.h's pgd_tokenizer_*
 * (exported by libpagoda-models; the structure is the same, these only choose the reader and
 * keep allocation and release inside the library). */
#include <stdlib.h>
#include <string.h>

#include "pagoda_models.h"
#include "tokenizer.h"

PGD_MODELS_API int pgd_tokenizer_load(const char *path, const char *merges, int lowercase,
                                      pgd_tokenizer **out, pgd_error **err)
{
    if (!out)
        return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT, "pgd_tokenizer_load: out is NULL");
    *out = NULL;
    if (!path)
        return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT, "pgd_tokenizer_load: path is NULL");
    size_t n = strlen(path);
    if (merges)
        return tokenizer_load_bpe(path, merges, out, err);
    if (n >= 5 && !strcmp(path + n - 5, ".json"))
        return tokenizer_load_json(path, out, err);
    return tokenizer_load_wordpiece(path, lowercase, out, err);
}

PGD_MODELS_API int pgd_tokenizer_encode(pgd_tokenizer *t, const char *text, size_t len,
                                        int add_special, int32_t **ids, size_t *n, pgd_error **err)
{
    if (!t || (!text && len) || !ids || !n)
        return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT,
                             "pgd_tokenizer_encode: NULL tokenizer, text or output");
    return tokenizer_encode(t, text ? text : "", len, add_special, ids, n, err);
}

PGD_MODELS_API int pgd_tokenizer_decode(const pgd_tokenizer *t, const int32_t *ids, size_t n,
                                        int skip_special, char **text, size_t *len, pgd_error **err)
{
    if (!t || (!ids && n) || !text || !len)
        return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT,
                             "pgd_tokenizer_decode: NULL tokenizer, ids or output");
    return tokenizer_decode(t, ids, n, skip_special, text, len, err);
}

PGD_MODELS_API const char *pgd_tokenizer_token(const pgd_tokenizer *t, int32_t id, size_t *len)
{
    size_t dummy;
    return tokenizer_token(t, id, len ? len : &dummy);
}

PGD_MODELS_API int32_t pgd_tokenizer_id(const pgd_tokenizer *t, const char *token, size_t len)
{
    return t && token ? tokenizer_id(t, token, len) : -1;
}

PGD_MODELS_API int32_t pgd_tokenizer_vocab_size(const pgd_tokenizer *t)
{
    return t ? tokenizer_vocab_size(t) : 0;
}

PGD_MODELS_API void pgd_tokenizer_release(void *p)
{
    free(p);
}

PGD_MODELS_API void pgd_tokenizer_free(pgd_tokenizer *t)
{
    tokenizer_free(t);
}
