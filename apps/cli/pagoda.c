/* pagoda.c — the command-line tool: dispatches subcommands. */
#include <locale.h>
#include <stdio.h>
#include <string.h>

#include "app.h"
#include "bench_cmd.h"
#include "commands.h"

#if !PGD_HAVE_SERVE
/* Built without libmicrohttpd: the command is known, and says what it needs. */
int cmd_serve(int argc, char **argv)
{
    (void)argc, (void)argv;
    fprintf(stderr, "pagoda: error: 'pagoda serve' is not in this build: libmicrohttpd was not "
                    "found when it was configured (apt-get install libmicrohttpd-dev, then "
                    "meson setup --reconfigure)\n");
    return EXIT_RUNTIME;
}
#endif

static const char usage[] =
    "usage: pagoda <command> [options]\n"
    "\n"
    "Pagoda runs OpenCL C kernels and vision pipelines on any OpenCL device.\n"
    "\n"
    "Commands:\n"
    "  devices    list OpenCL devices and their capabilities\n"
    "  demo       list devices and run a checked end-to-end example\n"
    "  pull       download a model from the Hugging Face hub into its cache; then give it\n"
    "             to any command as --weights hf:ORG/NAME ('pull --list': which ones)\n"
    "  bench      time kernels and program builds; compare saved results\n"
    "  tune       search the device's kernel parameters and store them\n"
    "  classify   classify with any model family, detected from the checkpoint\n"
    "  eval       the accuracy of a classifier over a labelled image folder or list\n"
    "  vit        classify with a Vision Transformer\n"
    "  nonlocal   classify with a ResNet carrying non-local blocks\n"
    "  embed      features of many images from a self-supervised ViT (DINO)\n"
    "  similar    the nearest images of an embedded index\n"
    "  detect     object detection with DETR: boxes, labels, attention per object\n"
    "  gat        classify the nodes of a graph with a graph attention network\n"
    "  memnet     answer questions about a story with a memory network, hop by hop\n"
    "  run        run an ONNX model (inputs from .npy, an image or random data)\n"
    "  info       what an ONNX model holds, what fuses, what Pagoda cannot run\n"
    "  tokenize   text to token ids and back (BERT's WordPiece, GPT-2's byte-level BPE)\n"
    "  fill-mask  the masked words of a text, by a BERT-family masked language model\n"
    "  embed-text sentence embeddings from a BERT-family encoder (mean or [CLS] pooling)\n"
    "  generate   text from GPT-2 with a KV cache, greedy or sampled, streamed\n"
    "  serve      a local web page: drop an image, see classes, attention maps, boxes\n"
    "  version    print the version ('version --features': which decoder serves each image\n"
    "             format)\n"
    "  help       show this help\n"
    "\n"
    "Run 'pagoda <command> --help' for a command's options.\n"
    "\n"
    "Environment:\n"
    "  PAGODA_DEVICE=SEL     default device selector (see 'pagoda devices --help')\n"
    "  PAGODA_CACHE_DIR=DIR  kernel binary cache (default $XDG_CACHE_HOME/pagoda or\n"
    "                        ~/.cache/pagoda); 'off' disables it\n"
    "  PAGODA_CL_DIR=DIR     read kernel sources from DIR instead of the embedded copies\n"
    "  PAGODA_PROFILE=1      print per-kernel timings\n"
    "  PAGODA_KERNEL_PARAMS=P  GEMM kernel parameters instead of the tuned ones ('pagoda tune')\n"
    "  PAGODA_MAX_BATCH=N    run batches as passes of at most N images\n"
    "  HF_ENDPOINT, HF_TOKEN, HF_HOME, HF_HUB_CACHE, HF_HUB_OFFLINE: the hub and its cache\n"
    "                        for 'pagoda pull' and --weights hf:ORG/NAME (as huggingface_hub)\n"
    "  PAGODA_GEMM, PAGODA_CONV, PAGODA_ATTENTION, ...: back ends and variants (README,\n"
    "                        'Environment'; pgd_ctx_options and its knobs in pagoda.h)\n"
    "\n"
    "Exit status: 0 success, 1 runtime failure, 2 usage error (a bad PAGODA_* value too).\n";

static const char version_usage[] =
    "usage: pagoda version [--features]\n"
    "\n"
    "Prints Pagoda's version.\n"
    "\n"
    "Options:\n"
    "  --features  also which decoder serves each image format (JPEG, PNG, WebP, BMP) and\n"
    "              whether its pixels equal Pillow's\n"
    "  -h, --help  show this help\n";

/* The image decoders of this build (meson options jpeg, png, webp): "exact" where the pixels
 * equal Pillow's convert("RGB"), i.e. a library decoder. */
static void print_features(void)
{
    static const char *const formats[] = {"JPEG", "PNG", "WebP", "BMP"};
    puts("image decoders:");
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
        const char *d = pgd_image_decoder(formats[i]);
        const char *how = !d                       ? "not read by this build"
                          : strcmp(d, "stb_image") ? "Pillow-exact"
                          : !strcmp(formats[i], "BMP")
                              ? "not compared with Pillow"
                              : "not Pillow-exact (another decoder than Pillow's)";
        printf("  %-5s %s%s%s\n", formats[i], d ? d : "-", d ? ": " : " ", how);
    }
}

int main(int argc, char **argv)
{
    /* Number formatting in JSON, build options and messages must not depend on the locale. */
    setlocale(LC_ALL, "C");
    if (argc < 2) {
        fputs(usage, stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        fputs(usage, stdout);
        return EXIT_OK;
    }
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
        /* --help here as in every other command: the help on stdout, exit 0. */
        if (argc == 3 && (!strcmp(argv[2], "--help") || !strcmp(argv[2], "-h"))) {
            fputs(version_usage, stdout);
            return EXIT_OK;
        }
        if (argc > 3 || (argc == 3 && strcmp(argv[2], "--features")))
            return app_usage_error(NULL, "usage: pagoda version [--features]");
        printf("pagoda %s\n", PGD_VERSION_STRING);
        if (argc == 3)
            print_features();
        return EXIT_OK;
    }
    if (!strcmp(cmd, "pull"))
        return cmd_pull(argc - 1, argv + 1);
    /* --weights hf:ORG/NAME becomes the cached file's path here, for every command at once. */
    int rc = pull_resolve_weights(argc - 1, argv + 1);
    if (rc)
        return rc;
    if (!strcmp(cmd, "devices"))
        return cmd_devices(argc - 1, argv + 1);
    if (!strcmp(cmd, "classify"))
        return cmd_classify(argc - 1, argv + 1);
    if (!strcmp(cmd, "eval"))
        return cmd_eval(argc - 1, argv + 1);
    if (!strcmp(cmd, "embed"))
        return cmd_embed(argc - 1, argv + 1);
    if (!strcmp(cmd, "similar"))
        return cmd_similar(argc - 1, argv + 1);
    if (!strcmp(cmd, "detect"))
        return cmd_detect(argc - 1, argv + 1);
    if (!strcmp(cmd, "vit"))
        return cmd_vit(argc - 1, argv + 1);
    if (!strcmp(cmd, "nonlocal"))
        return cmd_nonlocal(argc - 1, argv + 1);
    if (!strcmp(cmd, "memnet"))
        return cmd_memnet(argc - 1, argv + 1);
    if (!strcmp(cmd, "run"))
        return cmd_run(argc - 1, argv + 1);
    if (!strcmp(cmd, "info"))
        return cmd_info(argc - 1, argv + 1);
    if (!strcmp(cmd, "gat"))
        return cmd_gat(argc - 1, argv + 1);
    if (!strcmp(cmd, "tokenize"))
        return cmd_tokenize(argc - 1, argv + 1);
    if (!strcmp(cmd, "fill-mask"))
        return cmd_fill_mask(argc - 1, argv + 1);
    if (!strcmp(cmd, "embed-text"))
        return cmd_embed_text(argc - 1, argv + 1);
    if (!strcmp(cmd, "generate"))
        return cmd_generate(argc - 1, argv + 1);
    if (!strcmp(cmd, "bench"))
        return cmd_bench(argc - 1, argv + 1);
    if (!strcmp(cmd, "tune"))
        return cmd_tune(argc - 1, argv + 1);
    if (!strcmp(cmd, "serve"))
        return cmd_serve(argc - 1, argv + 1);
    if (!strcmp(cmd, "demo"))
        return cmd_demo(argc - 1, argv + 1);
    return app_usage_error(NULL, "unknown command '%s'", cmd);
}
