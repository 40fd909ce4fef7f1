/* fuzz_labels.c — libFuzzer target: the labels file parser of the CLI (app_labels_parse, the
 * part of app_labels_load after reading the file). Whatever it accepts must be `count` names,
 * each a NUL-terminated line of the input without its line ending, none holding a NUL, a
 * control character other than a tab, or invalid UTF-8; what it refuses leaves nothing behind. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_name(const char *name, const char *text, size_t size)
{
    if (name < text || name > text + size)
        abort();
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        if ((*p < 0x20 && *p != '\t') || *p == 0x7f || *p == 0xc0 || *p == 0xc1 || *p >= 0xf5)
            abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* As pgd_file_read leaves a file: the bytes, then a NUL that size does not count. */
    unsigned char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = 0;
    size_t lines = 0;
    for (size_t i = 0; i < size; i++)
        lines += data[i] == '\n' || (i + 1 == size && data[i] != '\n');
    app_labels l;
    if (app_labels_parse(text, size, "fuzz.txt", &l) != 0) {
        if (l.names || l.text || l.count)
            abort();
        return 0;
    }
    if ((size_t)l.count != lines || l.names[l.count] != NULL || l.text != text)
        abort();
    for (int i = 0; i < l.count; i++) {
        check_name(l.names[i], (const char *)l.text, size);
        /* A name is its line: the input from its start up to '\n' (less one '\r' before it). */
        size_t n = strlen(l.names[i]), at = (size_t)(l.names[i] - (char *)l.text);
        if (at + n > size || memcmp(l.names[i], data + at, n) != 0 ||
            (at + n < size && data[at + n] != '\n' && data[at + n] != '\r'))
            abort();
    }
    app_labels_free(&l);
    return 0;
}
