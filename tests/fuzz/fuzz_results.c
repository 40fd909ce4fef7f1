/* fuzz_results.c — libFuzzer target: `--resume` over a results file (apps/common/results.c), as
 * JSON lines or CSV (the first input byte picks which; the rest is the file): the model record
 * must equal a fixed identity, every complete line must be a result of a fixed list of three
 * images, an unfinished last line is cut. Whatever it accepts must mark only images of the list
 * and count them right; whatever it refuses says so; nothing may crash, leak or read out of
 * bounds, and the file is never changed by a run that writes nothing. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_file.h"
#include "results.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int csv = data[0] & 1;
    const char *path = fuzz_file_write(data + 1, size - 1, ".out");
    if (!path)
        return 0;
    json_t *identity = json_pack("{s:s, s:i, s:i}", "model", "vit", "topk", 5, "classes", 3);
    char *paths[3] = {"a.png", "b,\"c\".png", "d\ne.png"};
    unsigned char done[3] = {0, 0, 0};
    int ndone = 0;
    results_file rf;
    memset(&rf, 0, sizeof rf);
    int rc = results_open(&rf, path, csv, 1, identity, 6, paths, 3, done, &ndone);
    int marked = done[0] + done[1] + done[2];
    if (rc == EXIT_OK && (ndone != marked || ndone < 0 || ndone > 3))
        abort();
    if (rc == EXIT_OK)
        results_close(&rf, 0, EXIT_OK); /* wrote nothing: the file stays as it was */
    json_decref(identity);
    return 0;
}
