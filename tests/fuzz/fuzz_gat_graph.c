/* fuzz_gat_graph.c — libFuzzer target: the graph files of `pagoda gat` (gat_graph_load: a
 * safetensors file of x [N, F], edge_index [2, E] and optional y, test_mask, train_mask,
 * val_mask). Whatever it accepts must be what gat_model_run relies on: N, F >= 1, E >= 0,
 * every x finite, labels in 0..2^31-1, masks 0 or 1; what it refuses carries a message and
 * leaves the structure empty. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_file.h"
#include "gat.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file_write(data, size, ".safetensors");
    if (!path)
        return 0;
    gat_graph_file g;
    pgd_error *err = NULL;
    if (gat_graph_load(path, &g, &err) != PGD_OK) {
        if (!err || !pgd_error_get_message(err)[0] || g.x || g.edge_index || g.y || g.test_mask ||
            g.n || g.e)
            abort();
        pgd_error_destroy(err);
        return 0;
    }
    pgd_error_destroy(err);
    if (g.n < 1 || g.f < 1 || g.e < 0 || !g.x || !g.edge_index)
        abort();
    for (int64_t i = 0; i < g.n * g.f; i++)
        if (!isfinite(g.x[i]))
            abort();
    /* Every index readable (the graph builder checks them against N; any int64 may be here). */
    volatile uint64_t sum = 0;
    for (int64_t i = 0; i < 2 * g.e; i++)
        sum += (uint64_t)g.edge_index[i];
    for (int64_t i = 0; g.y && i < g.n; i++)
        if (g.y[i] < 0 || g.y[i] > INT32_MAX)
            abort();
    for (int64_t i = 0; g.test_mask && i < g.n; i++)
        if (g.test_mask[i] > 1)
            abort();
    gat_graph_free(&g);
    return 0;
}
