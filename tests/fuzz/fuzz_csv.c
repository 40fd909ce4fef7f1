/* fuzz_csv.c — libFuzzer target: the CLI's CSV reader (csv_record, what --resume reads a results
 * CSV with) and writer (csv_field). Every record read must move the position forward, and
 * writing its fields back (csv_field, joined by commas, a line end after) must read back as the
 * same fields; an unfinished record (0) or a malformed one (-1) returns nothing. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "csv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The record of fields f[0..n) as csv_field writes it, malloc'd. */
static char *write_back(char **f, int n, size_t *len)
{
    size_t cap = 2, at = 0;
    char *out = malloc(cap);
    for (int i = 0; out && i < n; i++) {
        char *q = csv_field(f[i]);
        if (!q)
            abort(); /* a small allocation: never expected to fail here */
        size_t ql = strlen(q);
        char *grown = realloc(out, cap += ql + 1);
        if (!grown)
            abort();
        out = grown;
        if (i)
            out[at++] = ',';
        memcpy(out + at, q, ql);
        at += ql;
        free(q);
    }
    if (!out)
        abort();
    out[at++] = '\n';
    *len = at;
    return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    for (size_t pos = 0;;) {
        char **f = NULL;
        int n = -7;
        size_t before = pos;
        int got = csv_record(text, size, &pos, &f, &n);
        if (got != 1) {
            if (f || n != -7 || pos != before)
                abort(); /* nothing returned, the position kept */
            return 0;
        }
        if (pos <= before || pos > size || n < 1)
            abort();
        size_t len = 0, rpos = 0;
        char *again = write_back(f, n, &len);
        char **g = NULL;
        int m = 0;
        if (csv_record(again, len, &rpos, &g, &m) != 1 || rpos != len || m != n)
            abort();
        for (int i = 0; i < n; i++)
            if (strcmp(f[i], g[i]))
                abort();
        csv_record_free(g, m);
        csv_record_free(f, n);
        free(again);
    }
}
