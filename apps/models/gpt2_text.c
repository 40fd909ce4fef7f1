/* gpt2_text.c — a GPT-2 checkpoint's files, the byte tokenizer of the random model, and the
 * streamed text of new tokens (gpt2_text.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gpt2_text.h"
#include "tokenizer_parts.h"

static int is_file(const char *p)
{
    struct stat s;
    return !stat(p, &s) && S_ISREG(s.st_mode);
}

/* dir/name into out when it is a regular file, else "". */
static void beside(const char *dir, const char *name, char *out, size_t size)
{
    int n = snprintf(out, size, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= size || !is_file(out))
        out[0] = '\0';
}

int gpt2_files_find(const char *path, gpt2_files *f, pgd_error **err)
{
    memset(f, 0, sizeof *f);
    struct stat s;
    char dir[4096];
    if (stat(path, &s))
        return pgd_error_set(err, PGD_ERR_NOT_FOUND, "%s: no such file or folder", path);
    if (strlen(path) >= sizeof dir)
        return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT, "%.64s...: path too long", path);
    if (S_ISDIR(s.st_mode)) {
        snprintf(dir, sizeof dir, "%s", path);
        beside(dir, "model.safetensors", f->weights, sizeof f->weights);
        if (!f->weights[0])
            return pgd_error_set(err, PGD_ERR_NOT_FOUND,
                                 "%s: the folder has no "
                                 "model.safetensors",
                                 path);
    } else {
        snprintf(f->weights, sizeof f->weights, "%s", path);
        snprintf(dir, sizeof dir, "%s", path);
        char *slash = strrchr(dir, '/');
        if (slash)
            *slash = '\0';
        else
            snprintf(dir, sizeof dir, ".");
    }
    beside(dir, "config.json", f->config, sizeof f->config);
    beside(dir, "tokenizer.json", f->tokenizer_json, sizeof f->tokenizer_json);
    beside(dir, "vocab.json", f->vocab, sizeof f->vocab);
    beside(dir, "merges.txt", f->merges, sizeof f->merges);
    if (!f->config[0])
        return pgd_error_set(err, PGD_ERR_NOT_FOUND,
                             "%s: no config.json beside the weights (GPT-2's n_embd and n_head "
                             "are read from it)",
                             dir);
    return PGD_OK;
}

int gpt2_files_tokenizer(const gpt2_files *f, tokenizer **out, pgd_error **err)
{
    if (f->tokenizer_json[0])
        return tokenizer_load_json(f->tokenizer_json, out, err);
    if (f->vocab[0] && f->merges[0])
        return tokenizer_load_bpe(f->vocab, f->merges, out, err);
    *out = NULL;
    return pgd_error_set(err, PGD_ERR_NOT_FOUND,
                         "%s: no tokenizer beside the weights (tokenizer.json, or vocab.json + "
                         "merges.txt; or give --tokenizer)",
                         f->weights);
}

/* GPT-2's byte → character map (printable Latin-1 bytes are themselves, the other 68 are
 * 256 + n in byte order), as tokenizer_bpe.c reads it. */
static uint32_t byte_char(unsigned b)
{
    int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    if (printable)
        return b;
    return 256 + (b <= 0x20 ? b : b <= 0xA0 ? 33 + (b - 0x7F) : 67);
}

int gpt2_byte_tokenizer(tokenizer **out, pgd_error **err)
{
    static const char what[] = "the byte tokenizer";
    tokenizer *t = NULL;
    int rc = tok_create(TOKENIZER_BPE, 300, &t, err);
    for (unsigned b = 0; !rc && b < 256; b++) {
        char u[4];
        int n = tok_utf8_put(u, byte_char(b));
        rc = tok_add_token(t, (int32_t)b, u, (size_t)n, what, err);
    }
    if (!rc)
        rc = tok_add_token(t, 256, "<|endoftext|>", 13, what, err);
    if (!rc)
        rc = tok_index(t, what, err);
    if (!rc)
        rc = tok_bpe_merges_begin(t, 1, what, err);
    if (!rc)
        rc = tok_bpe_finish(t, err);
    if (!rc)
        rc = tok_add_special(t, "<|endoftext|>", 13, &(tok_added){.special = 1}, what, err);
    if (rc) {
        tokenizer_free(t);
        *out = NULL;
        return rc;
    }
    t->bl_decoder = 1;
    *out = t;
    return PGD_OK;
}

int gpt2_stream_next(gpt2_stream *s, const int32_t *ids, size_t n, int final, const char **out,
                     size_t *len, pgd_error **err)
{
    char *text = NULL;
    size_t tl = 0;
    int rc = tokenizer_decode(s->tk, ids, n, 0, &text, &tl, err);
    if (rc)
        return rc;
    free(s->text);
    s->text = text;
    size_t end = tl;
    /* a trailing replacement character may be a character whose bytes have not all come */
    if (!final && end >= 3 && !memcmp(text + end - 3, "\xEF\xBF\xBD", 3))
        end -= 3;
    if (end < s->shown) /* the held-back bytes decoded otherwise: nothing new yet */
        end = s->shown;
    *out = text + s->shown;
    *len = end - s->shown;
    s->shown = end;
    return PGD_OK;
}

void gpt2_stream_free(gpt2_stream *s)
{
    free(s->text);
    s->text = NULL;
}
