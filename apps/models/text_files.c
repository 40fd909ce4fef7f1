/* text_files.c — a text model's files beside its weights (text_files.h). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "pagoda_util.h"
#include "text_files.h"

int text_files_find(const char *weights, text_files *f, pgd_error **err)
{
    memset(f, 0, sizeof *f);
    struct stat st;
    if (stat(weights, &st))
        return pgd_error_set(err, PGD_ERR_NOT_FOUND, "%s: no such file or folder", weights);
    int dir = S_ISDIR(st.st_mode);
    const char *slash = strrchr(weights, '/');
    int n = dir     ? snprintf(f->dir, sizeof f->dir, "%s", weights)
            : slash ? snprintf(f->dir, sizeof f->dir, "%.*s", (int)(slash - weights + 1), weights)
                    : snprintf(f->dir, sizeof f->dir, ".");
    int m = dir ? snprintf(f->weights, sizeof f->weights, "%s/model.safetensors", weights)
                : snprintf(f->weights, sizeof f->weights, "%s", weights);
    if (n < 0 || m < 0 || (size_t)n >= sizeof f->dir || (size_t)m >= sizeof f->weights)
        return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT, "%.200s...: the path is too long",
                             weights);
    if (dir && stat(f->weights, &st))
        return pgd_error_set(err, PGD_ERR_NOT_FOUND,
                             "%s: the folder has no model.safetensors (a pytorch_model.bin is not "
                             "read: convert it with tools/user/convert-pth)",
                             weights);
    return PGD_OK;
}

static int beside(const text_files *f, const char *name, char *path, size_t size)
{
    size_t n = strlen(f->dir);
    int k = snprintf(path, size, "%s%s%s", f->dir, n && f->dir[n - 1] == '/' ? "" : "/", name);
    return k >= 0 && (size_t)k < size;
}

static int exists(const text_files *f, const char *name, char *path, size_t size)
{
    struct stat st;
    return beside(f, name, path, size) && !stat(path, &st);
}

int text_read_beside(const text_files *f, const char *name, char **text, size_t *n, pgd_error **err)
{
    char path[4200];
    if (!exists(f, name, path, sizeof path))
        return PGD_ERR_NOT_FOUND;
    void *data = NULL;
    size_t size = 0;
    int rc = pgd_file_read(path, UINT64_C(1) << 20, &data, &size, err);
    if (rc)
        return rc;
    char *s = malloc(size + 1);
    if (!s) {
        pgd_free(data);
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "%s", path);
    }
    memcpy(s, data, size);
    s[size] = 0;
    pgd_free(data);
    *text = s, *n = size;
    return PGD_OK;
}

/* tokenizer_config.json's do_lower_case (BertTokenizer's default, true, when it is absent). */
static int lower_case(text_files *f, pgd_error **err)
{
    char *text = NULL;
    size_t n = 0;
    int rc = text_read_beside(f, "tokenizer_config.json", &text, &n, err);
    if (rc == PGD_ERR_NOT_FOUND) {
        f->lower_assumed = 1;
        return 1;
    }
    if (rc)
        return -1;
    json_t *root = json_loadb(text, n, 0, NULL);
    json_t *v = json_object_get(root, "do_lower_case");
    int lower = !json_is_false(v);
    if (!root || (v && !json_is_boolean(v))) {
        pgd_error_set(err, PGD_ERR_FORMAT,
                      "%s/tokenizer_config.json: not JSON, or 'do_lower_case' not true or false",
                      f->dir);
        lower = -1;
    }
    json_decref(root);
    free(text);
    return lower;
}

static int load_named(text_files *f, const char *path, tokenizer **t, pgd_error **err)
{
    size_t n = strlen(path);
    snprintf(f->tokenizer, sizeof f->tokenizer, "%s", path);
    if (!f->dir[0]) { /* no weights: tokenizer_config.json beside the tokenizer itself */
        const char *slash = strrchr(path, '/');
        snprintf(f->dir, sizeof f->dir, "%.*s", slash ? (int)(slash - path + 1) : 1,
                 slash ? path : ".");
    }
    if (n >= 5 && !strcmp(path + n - 5, ".json"))
        return tokenizer_load_json(path, t, err);
    int lower = lower_case(f, err);
    return lower < 0 ? PGD_ERR_FORMAT : tokenizer_load_wordpiece(path, lower, t, err);
}

int text_load_tokenizer(text_files *f, const char *path, tokenizer **t, pgd_error **err)
{
    *t = NULL;
    if (path)
        return load_named(f, path, t, err);
    char p[4200], merges[4200];
    if (exists(f, "tokenizer.json", p, sizeof p) || exists(f, "vocab.txt", p, sizeof p))
        return load_named(f, p, t, err);
    if (exists(f, "vocab.json", p, sizeof p) && exists(f, "merges.txt", merges, sizeof merges)) {
        snprintf(f->tokenizer, sizeof f->tokenizer, "%s", p);
        return tokenizer_load_bpe(p, merges, t, err);
    }
    return pgd_error_set(err, PGD_ERR_NOT_FOUND,
                         "%s: no tokenizer beside the weights (tokenizer.json, vocab.txt, or "
                         "vocab.json + merges.txt); give one with --tokenizer FILE",
                         f->dir);
}
