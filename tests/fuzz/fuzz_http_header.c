/* fuzz_http_header.c — libFuzzer target: the hub client's response-header parser
 * (runtime/io/http.c) on arbitrary bytes cut into lines as libcurl hands them over, each in a
 * buffer of exactly its size. Every field must stay NUL-terminated within its array, the status
 * 0 or 100..599, the numbers -1 or non-negative. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/io/http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const pgd__http_head *h)
{
    if (h->status != 0 && (h->status < 100 || h->status > 599))
        abort();
    if (h->size < -1 || h->range_start < -1)
        abort();
    if (!memchr(h->commit, 0, sizeof h->commit) || !memchr(h->etag, 0, sizeof h->etag) ||
        !memchr(h->location, 0, sizeof h->location) ||
        !memchr(h->error_code, 0, sizeof h->error_code) ||
        !memchr(h->error_message, 0, sizeof h->error_message))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pgd__http_head h;
    pgd__http_head_reset(&h);
    for (size_t at = 0; at < size;) {
        const uint8_t *nl = memchr(data + at, '\n', size - at);
        size_t n = nl ? (size_t)(nl - (data + at)) + 1 : size - at;
        char *line = malloc(n ? n : 1);
        if (!line)
            return 0;
        memcpy(line, data + at, n);
        pgd__http_header_line(&h, line, n);
        free(line);
        check(&h);
        at += n;
    }
    return 0;
}
