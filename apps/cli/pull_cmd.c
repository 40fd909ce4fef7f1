/* pull_cmd.c — `pagoda pull` (a model repository of the Hugging Face hub into the cache that
 * huggingface_hub, timm and transformers share) and the one resolver of `--weights hf:ORG/NAME`
 * for every command. The protocol and the cache layout are the library's (pgd_hub_file); this
 * file decides which files make a model (config.json, then model.safetensors or the shards of
 * model.safetensors.index.json), draws the progress bar and keeps the curated list. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "app.h"
#include "commands.h"

static const char usage[] =
    "usage: pagoda pull [--file F]... [--retries N] [--quiet] ORG/NAME[@REVISION]\n"
    "       pagoda pull --list\n"
    "\n"
    "Downloads a model repository's weights (model.safetensors, or the shards its\n"
    "model.safetensors.index.json lists) and config.json (labels, heads, sizes), with a text\n"
    "model's tokenizer files (tokenizer.json, vocab.json, merges.txt, vocab.txt), from the\n"
    "Hugging Face hub into its cache ($HF_HUB_CACHE, else $HF_HOME/hub, else\n"
    "~/.cache/huggingface/hub), in the layout huggingface_hub writes: files it, timm or\n"
    "transformers downloaded are found without a download, and ours are found by them.\n"
    "Downloads resume where an earlier one stopped and are checked against the hub's SHA-256\n"
    "before they are moved into place. Prints the local path of each file on stdout.\n"
    "Afterwards every command takes the model as --weights hf:ORG/NAME[@REVISION]; the\n"
    "first use of one not yet pulled pulls it (said on stderr).\n"
    "\n"
    "Options:\n"
    "  --file F       pull file F of the repository instead (repeatable)\n"
    "  --list         the hub's checkpoints whose naming Pagoda's loaders read, by family\n"
    "  --retries N    tries after a 429, a 5xx, a timeout or a dropped connection\n"
    "                 (default 4)\n"
    "  --quiet        no progress bar (there is none when stderr is not a terminal)\n"
    "  -h, --help     show this help\n"
    "\n"
    "Environment (huggingface_hub's): HF_ENDPOINT (a mirror; default https://huggingface.co),\n"
    "HF_TOKEN (gated or private repositories), HF_HUB_CACHE, HF_HOME, HF_HUB_OFFLINE=1 (the\n"
    "cache only), HF_HUB_DOWNLOAD_TIMEOUT (seconds without data before giving up; default 10).\n";

/* ---- the curated list -------------------------------------------------------------------- */

/* Checkpoints in a naming a loader of apps/models reads (the detection rules of vit.c,
 * vit_hf.c, swin.c, mixer.c, resnet_random.c, detr_config.c), with model.safetensors on the
 * hub. Labels: where the class names come from. */
static const struct {
    const char *repo, *family, *naming, *labels, *cmd;
} curated[] = {
    {"timm/vit_base_patch16_224.augreg2_in21k_ft_in1k", "ViT-B/16", "timm", "ImageNet-1k",
     "classify"},
    {"timm/vit_small_patch16_224.augreg_in21k_ft_in1k", "ViT-S/16", "timm", "ImageNet-1k",
     "classify"},
    {"timm/vit_tiny_patch16_224.augreg_in21k_ft_in1k", "ViT-Ti/16", "timm", "ImageNet-1k",
     "classify"},
    {"google/vit-base-patch16-224", "ViT-B/16", "Hugging Face", "config.json (ImageNet-1k)",
     "classify"},
    {"timm/deit_small_patch16_224.fb_in1k", "DeiT-S/16", "timm", "ImageNet-1k", "classify"},
    {"timm/deit_tiny_patch16_224.fb_in1k", "DeiT-Ti/16", "timm", "ImageNet-1k", "classify"},
    {"facebook/deit-base-patch16-224", "DeiT-B/16", "Hugging Face", "config.json (ImageNet-1k)",
     "classify"},
    {"timm/vit_small_patch16_224.dino", "DINO ViT-S/16", "timm", "none (features)", "embed"},
    {"facebook/dino-vits16", "DINO ViT-S/16", "Hugging Face", "none (features)", "embed"},
    {"timm/vit_small_patch14_dinov2.lvd142m", "DINOv2 ViT-S/14", "timm", "none (features)",
     "embed"},
    {"timm/vit_small_patch14_reg4_dinov2.lvd142m", "DINOv2 ViT-S/14 + 4 registers", "timm",
     "none (features)", "embed"},
    {"facebook/dinov2-small", "DINOv2 ViT-S/14", "Hugging Face", "none (features)", "embed"},
    {"timm/swin_tiny_patch4_window7_224.ms_in1k", "Swin-T", "timm", "ImageNet-1k", "classify"},
    {"microsoft/swin-tiny-patch4-window7-224", "Swin-T", "Hugging Face",
     "config.json (ImageNet-1k)", "classify"},
    {"timm/mixer_b16_224.goog_in21k_ft_in1k", "MLP-Mixer-B/16", "timm", "ImageNet-1k", "classify"},
    {"timm/resnet50.tv_in1k", "ResNet-50", "torchvision (in timm)", "ImageNet-1k", "nonlocal"},
    {"timm/resnet50.a1_in1k", "ResNet-50", "timm (= torchvision)", "ImageNet-1k", "nonlocal"},
    {"facebook/detr-resnet-50", "DETR R50", "Hugging Face", "config.json (COCO)", "detect"},
    {"facebook/detr-resnet-101", "DETR R101", "Hugging Face", "config.json (COCO)", "detect"},
    {"openai-community/gpt2", "GPT-2 small (text)", "Hugging Face", "none (vocab.json)",
     "generate"},
    {"distilbert/distilgpt2", "DistilGPT-2 (text)", "Hugging Face", "none (vocab.json)",
     "generate"},
};

static void print_list(void)
{
    printf("%-48s %-30s %-22s %s\n", "REPOSITORY", "FAMILY", "NAMING", "LABELS");
    for (size_t i = 0; i < sizeof curated / sizeof curated[0]; i++)
        printf("%-48s %-30s %-22s %s\n", curated[i].repo, curated[i].family, curated[i].naming,
               curated[i].labels);
    printf("\nThen, for example:\n  pagoda pull %s\n  pagoda %s --weights hf:%s IMAGE\n",
           curated[0].repo, curated[0].cmd, curated[0].repo);
}

/* ---- progress ------------------------------------------------------------------------------ */

typedef struct bar {
    double last, start;
    uint64_t shown; /* the bytes last drawn */
    int drawn;
} bar;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* One line on stderr, redrawn at most ten times a second and when the file is complete. */
static void draw(void *user, const char *file, uint64_t done, uint64_t total)
{
    bar *b = user;
    double t = now_s();
    if (!b->start)
        b->start = t;
    if ((t - b->last < 0.1 && done != total) || (b->drawn && done == b->shown))
        return;
    b->last = t;
    b->shown = done;
    char shown[64];
    enum { width = 30 };
    int fill = total ? (int)((double)done / (double)total * width) : 0;
    char line[width + 1];
    for (int i = 0; i < width; i++)
        line[i] = i < fill ? '#' : '.';
    line[width] = 0;
    fprintf(stderr, "\r  %-28.28s [%s] %7.1f / %.1f MB", app_term_text(file, shown, sizeof shown),
            line, (double)done / 1e6, (double)total / 1e6);
    b->drawn = 1;
}

static void bar_end(bar *b)
{
    if (b->drawn)
        fputc('\n', stderr);
    memset(b, 0, sizeof *b);
}

/* ---- pulling -------------------------------------------------------------------------------- */

/* Prints err; a name refused before any request (a bad repository, revision or file) is a usage
 * error (2), anything else a runtime failure (1). */
static int pull_fail(pgd_error *err)
{
    int bad_name = pgd_error_get_code(err) == PGD_ERR_INVALID_ARGUMENT;
    int rc = app_fail(err);
    return bad_name ? EXIT_USAGE : rc;
}

typedef struct puller {
    pgd_hub_options o;
    bar bar;
    char repo[256];
    const char *rev; /* NULL: main */
    int quiet;
} puller;

/* ORG/NAME[@REVISION] into p->repo and p->rev. EXIT_OK or a usage error. */
static int parse_spec(puller *p, const char *spec, const char *cmd)
{
    const char *at = strchr(spec, '@');
    size_t n = at ? (size_t)(at - spec) : strlen(spec);
    if (n == 0 || n >= sizeof p->repo || (at && !at[1]))
        return app_usage_error(cmd, "'%s' is not ORG/NAME[@REVISION]", spec);
    memcpy(p->repo, spec, n);
    p->repo[n] = 0;
    p->rev = at ? at + 1 : NULL;
    return EXIT_OK;
}

static int puller_init(puller *p, int quiet)
{
    memset(p, 0, sizeof *p);
    pgd_error *err = NULL;
    if (pgd_hub_options_from_env(&p->o, &err)) {
        app_fail(err);
        return EXIT_USAGE;
    }
    p->quiet = quiet;
    if (!quiet && isatty(STDERR_FILENO)) {
        p->o.progress = draw;
        p->o.progress_user = &p->bar;
    }
    return EXIT_OK;
}

/* One file; *path malloc'd. A missing file is PGD_ERR_NOT_FOUND in *err for the caller. */
static int pull_file(puller *p, const char *file, unsigned flags, char **path, int *how,
                     pgd_error **err)
{
    int rc = pgd_hub_file(&p->o, p->repo, p->rev, file, flags, path, how, err);
    bar_end(&p->bar);
    if (!rc && *how == PGD_HUB_UNREACHABLE)
        p->o.offline = 1; /* the other files from the cache too, without waiting again */
    if (!rc && *how == PGD_HUB_UNREACHABLE && !p->quiet) {
        char shown[1024];
        fprintf(stderr,
                "pagoda: note: the hub could not be reached: the cached %s of %s is "
                "used\n",
                app_term_text(file, shown, sizeof shown), p->repo);
    }
    return rc;
}

/* The shards model.safetensors.index.json names (its weight_map's values, each once). */
static int pull_shards(puller *p, const char *index, FILE *out)
{
    json_error_t je;
    json_t *doc = json_load_file(index, JSON_REJECT_DUPLICATES, &je);
    json_t *map = json_object_get(doc, "weight_map");
    char shown[1024];
    if (!json_is_object(map)) {
        fprintf(stderr, "pagoda: error: %s: not a safetensors index (no weight_map object)\n",
                app_term_text(index, shown, sizeof shown));
        json_decref(doc);
        return EXIT_RUNTIME;
    }
    json_t *done = json_object();
    const char *key;
    json_t *v;
    int rc = EXIT_OK;
    json_object_foreach(map, key, v)
    {
        const char *shard = json_string_value(v);
        if (rc || (shard && json_object_get(done, shard)))
            continue;
        char *path = NULL;
        int how;
        pgd_error *err = NULL;
        if (!shard)
            rc = app_usage_error(NULL, "%s: weight_map['%s'] is not a file name",
                                 app_term_text(index, shown, sizeof shown), key);
        else if (pull_file(p, shard, 0, &path, &how, &err))
            rc = pull_fail(err);
        else
            fprintf(out, "%s\n", path), json_object_set_new(done, shard, json_true());
        pgd_free(path);
    }
    json_decref(done);
    json_decref(doc);
    return rc;
}

/* The tokenizer files of a text model (config.json's model_type one of Hugging Face's text
 * families): tokenizer.json, vocab.json + merges.txt (GPT-2's BPE) and vocab.txt (BERT's
 * WordPiece), each where the repository has it. Image models ask for none of them. */
/* A text model's tokenizer files (those the repository has), after its config.json when that
 * names a text model_type: the text commands read them beside the weights. */
static int pull_tokenizer_files(puller *p, const char *config, FILE *out)
{
    static const char *const text_types[] = {"bert",        "roberta",   "distilbert",
                                             "xlm-roberta", "camembert", "gpt2"};
    static const char *const files[] = {"tokenizer.json", "tokenizer_config.json", "vocab.txt",
                                        "vocab.json", "merges.txt"};
    json_t *cfg = json_load_file(config, 0, NULL);
    const char *type = json_string_value(json_object_get(cfg, "model_type"));
    int text = 0;
    for (size_t i = 0; type && i < sizeof text_types / sizeof *text_types; i++)
        text |= !strcmp(type, text_types[i]);
    json_decref(cfg);
    int rc = EXIT_OK;
    for (size_t i = 0; text && !rc && i < sizeof files / sizeof *files; i++) {
        char *path = NULL;
        pgd_error *err = NULL;
        int how;
        if (!pull_file(p, files[i], 0, &path, &how, &err))
            fprintf(out, "%s\n", path);
        else if (pgd_error_get_code(err) != PGD_ERR_NOT_FOUND)
            rc = pull_fail(err), err = NULL;
        pgd_error_destroy(err);
        pgd_free(path);
    }
    return rc;
}

/* A model: config.json when the repository has one, then model.safetensors, else the index
 * and its shards. *weights (may be NULL) gets the weights path (the index when sharded). */
static int pull_model(puller *p, unsigned flags, FILE *out, char **weights, int *how)
{
    char *path = NULL;
    pgd_error *err = NULL;
    int rc = pull_file(p, "model.safetensors", flags, &path, how, &err);
    int sharded = 0;
    if (rc == PGD_ERR_NOT_FOUND && !p->o.offline && strstr(pgd_error_get_message(err), "no file")) {
        pgd_error_destroy(err), err = NULL;
        rc = pull_file(p, "model.safetensors.index.json", flags, &path, how, &err);
        sharded = !rc;
    }
    if (rc == PGD_ERR_NOT_FOUND && strstr(pgd_error_get_message(err), "no file")) {
        pgd_error_destroy(err);
        fprintf(stderr,
                "pagoda: error: %s has no model.safetensors nor model.safetensors."
                "index.json at revision '%s' (a pytorch_model.bin or .pth is not read: "
                "convert it with tools/user/convert-pth)\n",
                p->repo, p->rev ? p->rev : "main");
        return EXIT_RUNTIME;
    }
    if (rc)
        return pull_fail(err);
    if (!rc) { /* config.json too, where the repository (or offline, the cache) has one */
        char *cfg = NULL;
        int h;
        if (!pull_file(p, "config.json", 0, &cfg, &h, &err)) {
            fprintf(out, "%s\n", cfg);
            rc = pull_tokenizer_files(p, cfg, out);
        } else if (pgd_error_get_code(err) != PGD_ERR_NOT_FOUND)
            rc = pull_fail(err), err = NULL;
        pgd_error_destroy(err);
        free(cfg);
    }
    if (!rc)
        fprintf(out, "%s\n", path);
    if (!rc && sharded)
        rc = pull_shards(p, path, out);
    if (!rc && weights)
        *weights = path;
    else
        pgd_free(path);
    return rc;
}

int cmd_pull(int argc, char **argv)
{
    static const struct option opts[] = {
        {"file", required_argument, 0, 'f'},    {"list", no_argument, 0, 'l'},
        {"retries", required_argument, 0, 'r'}, {"quiet", no_argument, 0, 'q'},
        {"help", no_argument, 0, 'h'},          {0, 0, 0, 0}};
    const char *files[64];
    int nfiles = 0, list = 0, quiet = 0, c;
    int64_t retries = -1;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == 'f' && nfiles < 64)
            files[nfiles++] = optarg;
        else if (c == 'f')
            return app_usage_error("pull ", "at most 64 --file options");
        else if (c == 'l')
            list = 1;
        else if (c == 'q')
            quiet = 1;
        else if (c == 'r' && pgd_parse_int64(optarg, 0, 100, &retries))
            return app_usage_error("pull ",
                                   "--retries '%s': expected a whole number from 0 "
                                   "to 100",
                                   optarg);
        else if (c == 'h') {
            fputs(usage, stdout);
            return EXIT_OK;
        } else if (c != 'r')
            return app_usage_error("pull ", "bad option");
    }
    if (list && (optind < argc || nfiles))
        return app_usage_error("pull ", "--list takes no repository or --file");
    if (list) {
        print_list();
        return EXIT_OK;
    }
    if (argc - optind != 1)
        return app_usage_error("pull ", "give one repository: ORG/NAME[@REVISION] (pagoda pull "
                                        "--list shows some)");
    puller p;
    int rc = puller_init(&p, quiet);
    if (!rc)
        rc = parse_spec(&p, argv[optind], "pull ");
    if (rc)
        return rc;
    if (retries >= 0)
        p.o.max_tries = (int)retries + 1;
    int how;
    if (!nfiles) {
        rc = pull_model(&p, 0, stdout, NULL, &how);
        if (!rc && !quiet && isatty(STDERR_FILENO)) {
            char shown[1024];
            fprintf(stderr, "pagoda: run it with: pagoda classify --weights hf:%s IMAGE\n",
                    app_term_text(argv[optind], shown, sizeof shown));
        }
        return rc;
    }
    for (int i = 0; i < nfiles && !rc; i++) {
        char *path = NULL;
        pgd_error *err = NULL;
        if (pull_file(&p, files[i], 0, &path, &how, &err))
            rc = pull_fail(err);
        else
            printf("%s\n", path);
        pgd_free(path);
    }
    return rc;
}

/* ---- --weights hf:ORG/NAME ---------------------------------------------------------------- */

/* The weights file of hf:SPEC from the cache, pulled first when the cache lacks it. */
static int resolve_hf(const char *spec, char **path)
{
    puller p;
    int rc = puller_init(&p, 0);
    if (!rc)
        rc = parse_spec(&p, spec, NULL);
    if (rc)
        return rc;
    char *found = NULL;
    pgd_error *err = NULL;
    int how;
    /* Asked of the cache alone first: a pulled model runs without the network. */
    if (!pgd_hub_file(&p.o, p.repo, p.rev, "model.safetensors", PGD_HUB_CACHE_FIRST, &found, &how,
                      &err) &&
        how == PGD_HUB_CACHE_ONLY) {
        *path = found;
        return EXIT_OK;
    }
    pgd_error_destroy(err);
    free(found);
    if (!p.o.offline)
        fprintf(stderr,
                "pagoda: note: hf:%s is not in the hub cache yet: pulling it once "
                "(pagoda pull %s)\n",
                spec, spec);
    rc = pull_model(&p, 0, stderr, path, &how);
    if (!rc && strstr(*path, ".index.json")) {
        fprintf(stderr,
                "pagoda: error: hf:%s is sharded (%s): the loaders read one "
                ".safetensors file\n",
                spec, *path);
        free(*path), *path = NULL;
        rc = EXIT_RUNTIME;
    }
    return rc;
}

int pull_resolve_spec(const char *spec, char **path)
{
    *path = NULL;
    return resolve_hf(spec, path);
}

char *pull_cached_weights(const char *repo)
{
    puller p;
    char *path = NULL;
    int how;
    if (puller_init(&p, 1) || parse_spec(&p, repo, NULL))
        return NULL;
    p.o.offline = 1;
    if (pgd_hub_file(&p.o, p.repo, p.rev, "model.safetensors", 0, &path, &how, NULL))
        return NULL;
    return path;
}

/* The paths put into argv, reachable until exit as argv's own strings are. */
static char *kept[16];
static size_t nkept;

int pull_resolve_weights(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--"))
            break;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
            return EXIT_OK; /* the help needs no weights */
    }
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--"))
            break;
        int joined = !strncmp(argv[i], "--weights=", 10);
        const char *v = joined                                          ? argv[i] + 10
                        : !strcmp(argv[i], "--weights") && i + 1 < argc ? argv[++i]
                                                                        : NULL;
        if (!v || strncmp(v, "hf:", 3))
            continue;
        char *path = NULL;
        int rc = resolve_hf(v + 3, &path);
        if (rc)
            return rc;
        if (joined) {
            size_t n = strlen(path) + 11;
            char *arg = malloc(n);
            if (arg)
                snprintf(arg, n, "--weights=%s", path);
            pgd_free(path);
            path = arg;
        }
        if (!path)
            return app_usage_error(NULL, "out of memory");
        if (nkept < sizeof kept / sizeof kept[0])
            kept[nkept++] = path;
        argv[i] = path;
    }
    return EXIT_OK;
}
