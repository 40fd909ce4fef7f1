/* fuzz_onnx.c — libFuzzer target: an ONNX model file from arbitrary bytes.
 *
 * The bytes are written as model.onnx in a private temporary folder (external data resolves
 * there: the model file itself is the only file it can name) and loaded through pgd_graph_load (the
 * nesting guard, protobuf-c's unpack, every check of graph_load.c, the fusion pass) with no
 * context; what loads is reported (pgd_graph_report, the declared inputs and outputs) and its
 * host-evaluated nodes run without a device (pgd__graph_host_only_run: Gather, Slice, Reshape,
 * Concat, Expand, Tile, ... on the file's constants and on zero inputs of the declared shapes).
 * Every rejection must carry a message naming the file. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_file.h"
#include "runtime/graph/graph.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_error(int rc, pgd_error *err, const char *path)
{
    if (!rc)
        return;
    const char *msg = err ? pgd_error_get_message(err) : NULL;
    if (!msg || !strstr(msg, path))
        abort();
    pgd_error_destroy(err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* host tensors of at most 2^20 elements: the 2^31 cap is correct but each input near it
     * would take seconds (a clean error here instead) */
    pgd__ghost_max_elems = 1 << 20;
    if (!fuzz_dir_write("model.onnx", data, size))
        return 0;
    const char *path = fuzz_dir_file;
    pgd_graph *g = NULL;
    pgd_error *err = NULL;
    int rc = pgd_graph_load(NULL, path, &g, &err);
    check_error(rc, err, path);
    if (rc)
        return 0;
    char *report = pgd_graph_report(g);
    if (!report)
        abort();
    free(report);
    pgd_graph_io io;
    for (int i = 0; i < pgd_graph_num_inputs(g); i++)
        if (pgd_graph_get_input(g, i, &io) || !io.name)
            abort();
    for (int i = 0; i < pgd_graph_num_outputs(g); i++)
        if (pgd_graph_get_output(g, i, &io) || !io.name)
            abort();
    /* twice: the second pass replaces every host value the first one computed */
    for (int pass = 0; pass < 2; pass++) {
        err = NULL;
        rc = pgd__graph_host_only_run(g, 1 << 16, &err);
        check_error(rc, err, path);
    }
    pgd_graph_destroy(g);
    return 0;
}
