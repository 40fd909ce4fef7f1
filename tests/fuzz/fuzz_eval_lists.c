/* fuzz_eval_lists.c — libFuzzer target: what `pagoda eval` parses besides images
 * (apps/common/stream_input.c): a --labels-map file (NAME INDEX lines: each name once, at least
 * one line) when the first input byte is even, else a labelled --list (PATH LABEL lines, ends
 * trimmed), over 10 classes. Whatever it accepts must give every image a class in 0..9; nothing
 * may crash, leak or read out of bounds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_file.h"
#include "stream_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const char *path = fuzz_file_write(data + 1, size - 1, ".txt");
    if (!path)
        return 0;
    classify_opts o;
    classify_opts_init(&o, "eval");
    int map = !(data[0] & 1);
    eval_mode.on = 1;
    eval_mode.labels_map = map ? path : NULL;
    o.list = map ? NULL : path;
    path_list l;
    eval_names en;
    memset(&l, 0, sizeof l);
    memset(&en, 0, sizeof en);
    int rc = gather_eval(&o, &l, &en, 10);
    for (int i = 0; rc == EXIT_OK && i < l.n; i++)
        if (l.truth[i] < 0 || l.truth[i] >= 10)
            abort();
    list_free(&l);
    list_free(&en.map);
    list_free(&en.names);
    eval_mode.on = 0;
    eval_mode.labels_map = NULL;
    return 0;
}
