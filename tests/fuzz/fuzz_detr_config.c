/* fuzz_detr_config.c — libFuzzer target: the side JSON file of `pagoda detect`, the config.json
 * that Hugging Face's save_pretrained writes beside DETR weights (heads, dilation, id2label),
 * read by detect_cmd.c's read_config exactly as the command reads it (the file compiled in
 * here, its statics reachable), then every label looked up as the output does. Whatever it
 * accepts must leave id2label an object or nothing and heads that are not negative; no input
 * may crash, leak or read out of bounds. */
#include <stdint.h>
#include <stdlib.h>

#include "detect_cmd.c"
#include "fuzz_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *dir = fuzz_dir_write("config.json", data, size);
    if (!dir)
        return 0;
    char weights[4200];
    snprintf(weights, sizeof weights, "%s/detr.safetensors", dir); /* need not exist */
    run r;
    memset(&r, 0, sizeof r);
    r.o.weights = weights;
    detr_options dopt;
    memset(&dopt, 0, sizeof dopt);
    (void)read_config(&r, &dopt); /* an error is printed and returned (or, once, ignored) */
    if (r.id2label && !json_is_object(r.id2label))
        abort();
    char buf[64];
    for (int classes = 0; classes <= 92; classes += 92) {
        r.cfg.classes = classes;
        for (int id = -1; id <= 100; id++) {
            const char *l = label_of(&r, id, buf, sizeof buf);
            if (!l || (l == buf && !memchr(buf, 0, sizeof buf)))
                abort();
        }
    }
    json_decref(r.id2label);
    return 0;
}
