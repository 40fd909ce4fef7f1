/* fuzz_bench_spec.c — libFuzzer target: the `pagoda bench` item specs (bench_spec_check: a suite
 * name, or an item such as gemm:M,N,K, conv:N,H,W,Cin,Cout,K,stride or vit_b16:8, with the
 * item's own validator). The input is lines, each one argument. No device is touched: only the
 * classification that decides between running an item and a usage error. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_arg(const char *arg)
{
    const bench_item *it = (const bench_item *)&it;
    int kind = bench_spec_check(arg, &it);
    switch (kind) {
    case BENCH_SPEC_SUITE:
    case BENCH_SPEC_UNKNOWN:
        if (it != NULL)
            abort();
        break;
    case BENCH_SPEC_ITEM:
    case BENCH_SPEC_BAD: {
        /* The item's prefix is the argument's name part, whole. */
        size_t n = it ? strlen(it->prefix) : 0;
        if (!it || strncmp(arg, it->prefix, n) || (arg[n] && arg[n] != ':'))
            abort();
        if (kind == BENCH_SPEC_BAD && !it->validate)
            abort();
        break;
    }
    default: abort();
    }
    /* The same answer twice: validators keep no state between calls. */
    const bench_item *again;
    if (bench_spec_check(arg, &again) != kind || again != it)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = 0;
    for (char *line = text; line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = 0;
        check_arg(line);
        line = nl ? nl + 1 : NULL;
    }
    free(text);
    return 0;
}
