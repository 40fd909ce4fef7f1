/* test_fuzz_regress.c — every input under tests/data/fuzz-regress/ that once crashed (or hung,
 * or tripped a sanitizer in) a fuzz target, run again through the same target code
 * (tests/fuzz/fuzz_*.c, compiled here with LLVMFuzzerTestOneInput renamed). The file name's
 * prefix picks the target: safetensors-, image-, npy-, model_config-, resnet_config-, labels-,
 * bench_spec-, options-, jpeg-, png-, webp-, gat_graph-, memnet_story-, detr_config-, csv-,
 * results-, eval_lists-, http_header-, tokenizer-, onnx-, bert_config-, serve-.
 * A regression crashes
 * or aborts this test (and under tools/setup test-asan, any sanitizer report fails it). */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "runtime/io/image_decode.h" /* white-box: pgd__image_use_stb */

int pgd_fuzz_safetensors(const uint8_t *data, size_t size);
int pgd_fuzz_image(const uint8_t *data, size_t size);
int pgd_fuzz_npy(const uint8_t *data, size_t size);
int pgd_fuzz_model_config(const uint8_t *data, size_t size);
int pgd_fuzz_resnet_config(const uint8_t *data, size_t size);
int pgd_fuzz_labels(const uint8_t *data, size_t size);
int pgd_fuzz_csv(const uint8_t *data, size_t size);
int pgd_fuzz_results(const uint8_t *data, size_t size);
int pgd_fuzz_eval_lists(const uint8_t *data, size_t size);
int pgd_fuzz_bench_spec(const uint8_t *data, size_t size);
int pgd_fuzz_options(const uint8_t *data, size_t size);
int pgd_fuzz_jpeg(const uint8_t *data, size_t size);
int pgd_fuzz_png(const uint8_t *data, size_t size);
int pgd_fuzz_webp(const uint8_t *data, size_t size);
int pgd_fuzz_gat_graph(const uint8_t *data, size_t size);
int pgd_fuzz_memnet_story(const uint8_t *data, size_t size);
int pgd_fuzz_detr_config(const uint8_t *data, size_t size);
int pgd_fuzz_http_header(const uint8_t *data, size_t size);
int pgd_fuzz_tokenizer(const uint8_t *data, size_t size);
int pgd_fuzz_onnx(const uint8_t *data, size_t size);
int pgd_fuzz_bert_config(const uint8_t *data, size_t size);
int pgd_fuzz_serve(const uint8_t *data, size_t size);

static const struct {
    const char *prefix;
    int (*fn)(const uint8_t *, size_t);
} targets[] = {
    {"safetensors-", pgd_fuzz_safetensors},
    {"image-", pgd_fuzz_image},
    {"npy-", pgd_fuzz_npy},
    {"model_config-", pgd_fuzz_model_config},
    {"resnet_config-", pgd_fuzz_resnet_config},
    {"labels-", pgd_fuzz_labels},
    {"csv-", pgd_fuzz_csv},
    {"results-", pgd_fuzz_results},
    {"eval_lists-", pgd_fuzz_eval_lists},
    {"bench_spec-", pgd_fuzz_bench_spec},
    {"options-", pgd_fuzz_options},
    {"jpeg-", pgd_fuzz_jpeg},
    {"png-", pgd_fuzz_png},
    {"webp-", pgd_fuzz_webp},
    {"gat_graph-", pgd_fuzz_gat_graph},
    {"memnet_story-", pgd_fuzz_memnet_story},
    {"detr_config-", pgd_fuzz_detr_config},
    {"http_header-", pgd_fuzz_http_header},
    {"tokenizer-", pgd_fuzz_tokenizer},
    {"onnx-", pgd_fuzz_onnx},
    {"bert_config-", pgd_fuzz_bert_config},
    {"serve-", pgd_fuzz_serve},
};

START_TEST(regressions)
{
    const char *data = getenv("PAGODA_TEST_DATA");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/fuzz-regress", data ? data : "tests/data");
    DIR *d = opendir(dir);
    ck_assert_msg(d != NULL, "cannot open %s", dir);
    int run = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || !strcmp(e->d_name, "README"))
            continue;
        int (*fn)(const uint8_t *, size_t) = NULL;
        for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++)
            if (!strncmp(e->d_name, targets[i].prefix, strlen(targets[i].prefix)))
                fn = targets[i].fn;
        ck_assert_msg(fn != NULL, "%s: no fuzz target for this name prefix", e->d_name);
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unsigned char *buf = NULL;
        size_t size = 0;
        ck_assert_msg(pgd_test_read_file(path, &buf, &size) == 0, "cannot read %s", path);
        fprintf(stderr, "fuzz-regress: %s (%zu bytes)\n", e->d_name, size);
        fn(buf, size);
        /* Corruptions stb_image 2.27 mishandles inside Debian's uninstrumented shared library,
         * where no sanitizer sees them: Pagoda must reject them before decoding. */
        static const struct {
            const char *prefix, *says;
        } refused[] = {{"image-jpeg-dht", "Huffman"},
                       {"image-png-empty-idat", "corrupt PNG"},
                       {"image-bmp-", "truncated"},
                       {"image-bmpcomp-", "compression"},
                       {"image-png-corrupt-idat", "CRC"}};
        for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
            if (strncmp(e->d_name, refused[i].prefix, strlen(refused[i].prefix)))
                continue;
            /* Through stb_image (as fuzz_image decodes them), with its reason; and through the
             * build's own decoders (libjpeg, libpng where present), refused too. */
            for (int stb = 1; stb >= 0; stb--) {
                pgd_image *img = NULL;
                pgd_error *err = NULL;
                pgd__image_use_stb(stb);
                ck_assert_int_eq(pgd_image_load_memory(buf, size, e->d_name, &img, &err),
                                 PGD_ERR_FORMAT);
                pgd__image_use_stb(0);
                ck_assert_msg(!stb || strstr(pgd_error_get_message(err), refused[i].says), "%s: %s",
                              e->d_name, pgd_error_get_message(err));
                pgd_error_destroy(err);
            }
        }
        free(buf);
        run++;
    }
    closedir(d);
    ck_assert_int_gt(run, 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fuzz-regress");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, regressions);
    suite_add_tcase(s, tc);
    return pgd_test_run(s);
}
