/* text_files.h — the files of a Hugging Face text model as save_pretrained and the hub lay them
 * out: the weights (a folder or its model.safetensors), config.json beside them, and the
 * tokenizer beside them (tokenizer.json, else vocab.txt with tokenizer_config.json's
 * do_lower_case, else vocab.json + merges.txt). Shared by the text commands. */
#ifndef PAGODA_TEXT_FILES_H
#define PAGODA_TEXT_FILES_H

#include <stddef.h>

#include "tokenizer.h"

typedef struct text_files {
    char weights[4096];   /* the .safetensors file */
    char dir[4096];       /* its folder ("." for a bare file name) */
    char tokenizer[4400]; /* the tokenizer file read ("" until text_load_tokenizer) */
    int lower_assumed;    /* vocab.txt without tokenizer_config.json: lower-casing assumed */
} text_files;

/* `weights` is a folder (its model.safetensors) or a file. PGD_ERR_NOT_FOUND naming the path
 * when neither exists; a path too long is PGD_ERR_INVALID_ARGUMENT. */
int text_files_find(const char *weights, text_files *f, pgd_error **err);
/* Reads file `name` beside the weights (at most 1 MiB) into *text (malloc'd, NUL-terminated,
 * *n bytes). PGD_ERR_NOT_FOUND, without touching *text, when there is none. */
int text_read_beside(const text_files *f, const char *name, char **text, size_t *n,
                     pgd_error **err);
/* The tokenizer: `path` when not NULL (a tokenizer.json, or a vocab.txt), else the first
 * beside the weights of tokenizer.json, vocab.txt, vocab.json + merges.txt. PGD_ERR_NOT_FOUND
 * naming the folder and the files looked for when there is none. */
int text_load_tokenizer(text_files *f, const char *path, tokenizer **t, pgd_error **err);

#endif
