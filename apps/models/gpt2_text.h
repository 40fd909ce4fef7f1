/* gpt2_text.h — what GPT-2 needs around the model to turn text into text: the files of a
 * checkpoint folder (weights, config.json, the tokenizer), a byte-level tokenizer for seeded
 * random weights, and the new text of a growing token list, as it can be shown. */
#ifndef PAGODA_GPT2_TEXT_H
#define PAGODA_GPT2_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "tokenizer.h"

/* The files of a GPT-2 checkpoint given as a folder or as its model.safetensors: the weights,
 * config.json and the tokenizer (tokenizer.json, else vocab.json + merges.txt) beside them.
 * A path is "" when the file is not there. */
typedef struct gpt2_files {
    char weights[4096], config[4096], tokenizer_json[4096], vocab[4096], merges[4096];
} gpt2_files;
/* Fills f from `path` (a folder or a file). An error names the path when it is neither, when
 * a folder has no model.safetensors, or when there is no config.json (GPT-2's sizes are read
 * from it). A missing tokenizer is not an error here (gpt2_files_tokenizer says so). */
int gpt2_files_find(const char *path, gpt2_files *f, pgd_error **err);
/* The tokenizer of f: tokenizer.json, else vocab.json + merges.txt; an error naming the folder
 * and the files looked for when neither is there. */
int gpt2_files_tokenizer(const gpt2_files *f, tokenizer **out, pgd_error **err);

/* GPT-2's byte-level BPE with no merges: the 256 byte tokens (ids 0..255, in byte order) and
 * <|endoftext|> (256), for gpt2_random_config's model. */
int gpt2_byte_tokenizer(tokenizer **out, pgd_error **err);

/* The text of a growing list of new tokens, shown as it comes: gpt2_stream_next decodes all of
 * ids[0..n) and returns the bytes not returned before (*len of them, a pointer into s's own
 * buffer, valid until the next call), holding back a trailing U+FFFD that more bytes may yet
 * complete (a character split over tokens); with final, everything left. */
typedef struct gpt2_stream {
    const tokenizer *tk;
    char *text;
    size_t shown;
} gpt2_stream;
int gpt2_stream_next(gpt2_stream *s, const int32_t *ids, size_t n, int final, const char **out,
                     size_t *len, pgd_error **err);
void gpt2_stream_free(gpt2_stream *s);

#endif
