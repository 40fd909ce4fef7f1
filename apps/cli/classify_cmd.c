/* classify_cmd.c — `pagoda classify`: one command for every model family. The family comes
 * from the checkpoint's names (or --family), then the family's own command runs with the same
 * arguments: `pagoda vit` for ViT/DeiT, `pagoda nonlocal` for ResNets with or without non-local
 * blocks, and the MLP-Mixer path below, which has no command of its own. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "classify.h"
#include "commands.h"
#include "family.h"
#include "mixer.h"
#include "stream.h"
#include "swin.h"
#include "vit.h"

static const char usage[] =
    "usage: pagoda classify [--weights FILE | --family F --random SIZE] [options] [IMAGE...]\n"
    "\n"
    "Classifies images with whatever model the checkpoint holds: the family is detected from\n"
    "its tensor names and shapes, the family's preprocessing is used (--preprocess overrides\n"
    "where the family has presets), and the options are those of the family's command:\n"
    "\n"
    "  ViT, DeiT (timm, Hugging Face, torchvision naming)   as 'pagoda vit', including\n"
    "      --attention soft|topk:K|sample:SEED and --attention-map OUT.png\n"
    "  ResNet with or without non-local blocks (torchvision naming)\n"
    "                                                        as 'pagoda nonlocal', including\n"
    "      --affinity-map OUT.png\n"
    "  Swin Transformer V1 (torchvision, timm old and new layout, Hugging Face naming)\n"
    "      the common options below, --preprocess (default torchvision), --attention\n"
    "      soft|topk:K|sample:SEED (in every window attention), --random t|s|b|tiny\n"
    "  MLP-Mixer (timm naming: stem.proj, blocks.N.mlp_tokens / mlp_channels, head)\n"
    "      the common options below, --preprocess (default timm), --random s16|b16|l16|tiny\n"
    "\n"
    "Options of every family:\n"
    "  --weights FILE      the .safetensors checkpoint (its family is detected)\n"
    "  --family F          vit, resnet, swin or mixer: skip detection (needed with --random)\n"
    "  --random SIZE       seeded random weights of the family's size SIZE (not a trained\n"
    "                      model): vit ti|s|b|tiny, resnet 18|34|50|101|152, swin t|s|b|tiny,\n"
    "                      mixer s16|b16|l16|tiny\n"
    "  --device SEL        device selector (see 'pagoda devices --help')\n"
    "  --topk K            classes to print per image (default 5)\n"
    "  --labels FILE       class names, one per line (default: ImageNet-1k for 1000 classes)\n"
    "  --json              print the results as JSON\n"
    "  --input F.npy       a preprocessed batch [B, 3, H, W] instead of images\n"
    "  --save-input F.npy  write the preprocessed batch\n"
    "  --save-logits F.npy write the logits [B, classes]\n"
    CLASSIFY_HELP_TAIL
    "\n"
    "'pagoda vit' and 'pagoda nonlocal' remain for their families, with the same options.\n";

typedef enum family { FAM_NONE, FAM_VIT, FAM_RESNET, FAM_MIXER, FAM_SWIN } family;

static family family_named(const char *s)
{
    return !strcmp(s, "vit") || !strcmp(s, "deit") ? FAM_VIT
           : !strcmp(s, "resnet") || !strcmp(s, "nonlocal") ? FAM_RESNET
           : !strcmp(s, "mixer")                            ? FAM_MIXER
           : !strcmp(s, "swin")                             ? FAM_SWIN
                                                            : FAM_NONE;
}

/* The family of a checkpoint by the one rule of the family table (family_detect): the ViT
 * detector has the last word, so that a file that is none of them gets its precise error. */
static int detect_family(const char *path, family *f)
{
    model_source src = {0};
    pgd_error *err = NULL;
    if (model_source_open(&src, path, &err))
        return app_fail(err);
    int rc = EXIT_OK;
    const model_family *fam = NULL;
    if (family_detect(&src, NULL, &fam, &err)) {
        fprintf(stderr, "pagoda: classify: %s is not a checkpoint of a family Pagoda knows "
                        "(ViT/DeiT, ResNet, Swin, MLP-Mixer); as a ViT:\n", path);
        rc = app_fail(err);
    } else {
        *f = family_named(fam->name);
    }
    model_source_free(&src);
    return rc;
}

/* ---- the families without a command of their own: MLP-Mixer and Swin ---- */

typedef struct family_cmd {
    classify_opts o;
    family fam;
    const char *random, *weights;
    int preset;
    classify_attention attention; /* Swin */
    mixer_config mx;
    swin_config sw;
    model_assumptions assumed; /* Hugging Face's Swin: layer_norm_eps when config.json lacks it */
    void *model;
} family_cmd;

static const char *family_label(family f)
{
    return f == FAM_SWIN ? "Swin" : "MLP-Mixer";
}

static int family_own(void *cmd, int c, const char *arg)
{
    family_cmd *v = cmd;
    switch (c) {
    case 'r': v->random = arg; return 0;
    case 'w': v->weights = arg; return 0;
    case 'F': return 0; /* --family, read before */
    case 'T':
        if (v->fam == FAM_SWIN)
            return classify_parse_attention("classify ", arg, &v->attention);
        break;
    case 'P':
        v->preset = app_preset_parse(arg);
        if (v->preset < 0)
            return app_usage_error("classify ",
                                   "--preprocess wants torchvision, timm or hf, got '%s'", arg);
        return 0;
    default: break;
    }
    return app_usage_error("classify ", "this option is not one of the %s family's",
                           family_label(v->fam));
}

static int diagnose_family(void *cmd, const float *image, int H, int W, model_probe *p,
                           pgd_error **err)
{
    family_cmd *v = cmd;
    return v->fam == FAM_SWIN ? swin_find_nonfinite(v->model, image, H, W, p, err)
                              : mixer_find_nonfinite(v->model, image, H, W, p, err);
}

static void family_describe(const family_cmd *v)
{
    char shown[1024], a[64];
    if (v->o.json)
        return;
    const char *file = v->weights ? app_term_text(v->weights, shown, sizeof shown) : NULL;
    if (v->fam == FAM_MIXER && file)
        fprintf(stderr, "pagoda: %s: MLP-Mixer, width %d, depth %d, patch %d, %dx%d tokens, "
                        "token MLP %d, channel MLP %d, %d classes\n",
                file, v->mx.dim, v->mx.depth, v->mx.patch, v->mx.grid_h, v->mx.grid_w,
                v->mx.tokens_hidden, v->mx.channels_hidden, v->mx.classes);
    if (v->fam == FAM_SWIN && file) {
        fprintf(stderr, "pagoda: %s: %s Swin, width %d, %d stages (depths", file,
                swin_family_name(v->sw.family), v->sw.dim, v->sw.stages);
        for (int s = 0; s < v->sw.stages; s++)
            fprintf(stderr, " %d", v->sw.depth[s]);
        fprintf(stderr, "), window %d, patch %d, %d classes\n", v->sw.window[0], v->sw.patch,
                v->sw.classes);
    }
    if (!file)
        fprintf(stderr, "pagoda: note: seeded random weights (%s %s): the classes printed are "
                        "meaningless\n",
                family_label(v->fam), v->random);
    if (v->attention.mode != PGD_ATTENTION_SOFT)
        fprintf(stderr, "pagoda: hard attention in every block: %s\n",
                classify_attention_str(&v->attention, a, sizeof a));
}

static json_t *family_json(const family_cmd *v)
{
    char a[64];
    if (!v->o.json)
        return NULL;
    if (v->fam == FAM_MIXER)
        return json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:i}", "family", "mixer", "width",
                         v->mx.dim, "depth", v->mx.depth, "patch", v->mx.patch, "tokens",
                         v->mx.tokens, "tokens_hidden", v->mx.tokens_hidden, "channels_hidden",
                         v->mx.channels_hidden);
    json_t *depths = json_array();
    for (int s = 0; s < v->sw.stages; s++)
        json_array_append_new(depths, json_integer(v->sw.depth[s]));
    return json_pack("{s:s, s:s, s:i, s:o, s:i, s:i, s:s, s:o}", "family", "swin", "naming",
                     swin_family_name(v->sw.family), "width", v->sw.dim, "depths", depths,
                     "window", v->sw.window[0], "patch", v->sw.patch, "attention",
                     classify_attention_str(&v->attention, a, sizeof a), "assumed",
                     app_assumed_json(&v->assumed));
}

static int run_family(family_cmd *v, const model_source *src, classify_run *r)
{
    pgd_error *err = NULL;
    family_describe(v);
    int rc = v->fam == FAM_SWIN
                 ? swin_load(r->ctx, src, &v->sw, (swin_model **)&v->model, &err)
                 : mixer_load(r->ctx, src, &v->mx, (mixer_model **)&v->model, &err);
    if (rc)
        return app_fail(err);
    if (v->fam == FAM_SWIN)
        swin_set_attention(v->model, v->attention.mode, v->attention.topk, v->attention.seed);
    rc = classify_prepare(&v->o, r);
    double t[5];
    if (!rc && (v->fam == FAM_SWIN
                    ? swin_forward(v->model, r->x, r->B, r->H, r->W, r->logits, t, &err)
                    : mixer_forward(v->model, r->x, r->B, r->H, r->W, r->logits, t, &err)))
        rc = app_fail(err);
    if (!rc)
        rc = classify_check_logits(&v->o, r, diagnose_family, v);
    if (!rc)
        rc = classify_after_forward(&v->o, r, r->B);
    if (!rc) {
        static const classify_stage stages[4] = {
            {"embed", "embed"}, {"blocks", "blocks"}, {"head", "head"}, {"total", "total"}};
        rc = classify_emit(&v->o, r, v->weights, family_json(v), stages, t, 4);
    }
    if (!rc)
        rc = classify_finish(&v->o, r);
    if (v->fam == FAM_SWIN)
        swin_free(v->model);
    else
        mixer_free(v->model);
    v->model = NULL;
    return rc;
}

/* The family's model on each device of a stream. */
typedef struct family_stream {
    family_cmd *v;
    const model_source *src;
} family_stream;

static int family_stream_load(void *cmd, pgd_ctx *ctx, void **model)
{
    family_stream *fs = cmd;
    family_cmd *v = fs->v;
    pgd_error *err = NULL;
    if (v->fam == FAM_SWIN) {
        if (swin_load(ctx, fs->src, &v->sw, (swin_model **)model, &err))
            return app_fail(err);
        swin_set_attention(*model, v->attention.mode, v->attention.topk, v->attention.seed);
    } else if (mixer_load(ctx, fs->src, &v->mx, (mixer_model **)model, &err)) {
        return app_fail(err);
    }
    return EXIT_OK;
}

static int swin_stream_forward(void *model, const float *x, int B, int H, int W, float *logits,
                               pgd_error **err)
{
    double t[5];
    return swin_forward(model, x, B, H, W, logits, t, err);
}

static int mixer_stream_forward(void *model, const float *x, int B, int H, int W, float *logits,
                                pgd_error **err)
{
    double t[5];
    return mixer_forward(model, x, B, H, W, logits, t, err);
}

static void swin_stream_release(void *model)
{
    swin_free(model);
}

static void mixer_stream_release(void *model)
{
    mixer_free(model);
}

static int family_stream_run(family_cmd *v, const model_source *src, int classes)
{
    int rc = classify_stream_check(&v->o, NULL);
    if (rc)
        return rc;
    family_describe(v);
    family_stream fs = {v, src};
    classify_model m = {&fs, family_stream_load,
                        v->fam == FAM_SWIN ? swin_stream_forward : mixer_stream_forward,
                        v->fam == FAM_SWIN ? swin_stream_release : mixer_stream_release,
                        v->weights, v->random, ""};
    char a[64];
    snprintf(m.family, sizeof m.family, "%s (%s), attention %s", family_label(v->fam),
             v->fam == FAM_SWIN ? swin_family_name(v->sw.family) : "mixer",
             classify_attention_str(&v->attention, a, sizeof a));
    return classify_stream(&v->o, (pgd_preprocess)v->preset, classes, &m);
}

/* Hugging Face's Swin takes its LayerNorm epsilon from config.json (layer_norm_eps, 1e-5 by
 * default); timm's and torchvision's fix it in their code. */
static int swin_side_config(family_cmd *v)
{
    char path[4096];
    float eps = 0.0f;
    if (v->sw.family != SWIN_HF4 && v->sw.family != SWIN_HF5)
        return EXIT_OK;
    int rc = app_hf_side_config(v->weights, NULL, &eps, path, sizeof path);
    if (!rc && eps > 0.0f)
        v->sw.eps = eps;
    else if (!rc)
        model_assume(&v->assumed, "eps", "1e-05", "layer_norm_eps in config.json");
    app_note_assumed(v->weights, &v->assumed);
    return rc;
}

/* The weights (a file or seeded random ones of a named size) and the input side they want. */
static int family_open(family_cmd *v, model_source *src, int *side_h, int *side_w,
                       int *classes)
{
    pgd_error *err = NULL;
    if (v->weights) {
        if (model_source_open(src, v->weights, &err) ||
            (v->fam == FAM_SWIN ? swin_detect(src, &v->sw, &err)
                                : mixer_detect(src, &v->mx, &err)))
            return app_fail(err);
        int rc = v->fam == FAM_SWIN ? swin_side_config(v) : EXIT_OK;
        if (rc)
            return rc;
    } else if (v->fam == FAM_SWIN) {
        if (!v->random)
            v->random = "t";
        if (swin_named_config(v->random, &v->sw))
            return app_usage_error("classify ", "--random for swin wants t, s, b or tiny, got "
                                                "'%s'", v->random);
        if (swin_random_source(src, &v->sw, 1, &err))
            return app_fail(err);
    } else {
        if (!v->random)
            v->random = "b16";
        if (mixer_named_config(v->random, &v->mx))
            return app_usage_error("classify ", "--random for mixer wants s16, b16, l16 or tiny, "
                                                "got '%s'", v->random);
        if (mixer_random_source(src, &v->mx, 1, &err))
            return app_fail(err);
    }
    if (v->fam == FAM_SWIN) {
        /* 224 x 224 for the standard models, 40 x 40 for the tiny one. */
        *side_h = *side_w = v->sw.dim <= 16 ? 40 : 224;
        *classes = v->sw.classes;
    } else {
        *side_h = v->mx.patch * v->mx.grid_h;
        *side_w = v->mx.patch * v->mx.grid_w;
        *classes = v->mx.classes;
    }
    return EXIT_OK;
}

static int cmd_family(family fam, int argc, char **argv)
{
    static const struct option own[] = {
        {"random", required_argument, 0, 'r'},     {"weights", required_argument, 0, 'w'},
        {"preprocess", required_argument, 0, 'P'}, {"family", required_argument, 0, 'F'},
        {"attention", required_argument, 0, 'T'},  {"help", no_argument, 0, 'h'}};
    family_cmd v;
    memset(&v, 0, sizeof v);
    v.fam = fam;
    classify_opts_init(&v.o, "classify ");
    /* timm's mixer_*_224: bicubic, crop 0.875, mean/std 0.5. Swin: ImageNet mean/std; the
     * torchvision preset (256 bilinear, crop 224) is the nearest of the presets to each
     * library's own Swin transform (torchvision 232 bicubic, timm 248 bicubic). */
    v.preset = fam == FAM_SWIN ? PGD_PREPROCESS_TORCHVISION : PGD_PREPROCESS_TIMM;
    int rc = classify_parse(&v.o, argc, argv, own, sizeof own / sizeof *own, usage, family_own,
                            &v);
    if (rc)
        return rc < 0 ? EXIT_OK : rc;
    if (v.weights && v.random)
        return app_usage_error("classify ", "give --weights or --random, not both");
    if ((rc = classify_operands(&v.o, argc, argv, NULL)))
        return rc;
    model_source src = {0};
    classify_run r = {0};
    int side_h = 0, side_w = 0, classes = 0;
    rc = family_open(&v, &src, &side_h, &side_w, &classes);
    if (!rc && classify_streaming(&v.o)) {
        rc = family_stream_run(&v, &src, classes);
        model_source_free(&src);
        return rc;
    }
    if (!rc)
        rc = classify_begin(&v.o, (pgd_preprocess)v.preset, side_h, side_w, classes, &r);
    if (!rc)
        rc = run_family(&v, &src, &r);
    classify_free(&r);
    model_source_free(&src);
    return rc;
}

/* ---- dispatch ---- */

int cmd_classify(int argc, char **argv)
{
    const char *weights = NULL, *fam_name = NULL;
    int help = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--"))
            break;
        if (!strcmp(a, "-h") || !strcmp(a, "--help"))
            help = 1;
        else if (!strcmp(a, "--weights") && i + 1 < argc)
            weights = argv[++i];
        else if (!strncmp(a, "--weights=", 10))
            weights = a + 10;
        else if (!strcmp(a, "--family") && i + 1 < argc)
            fam_name = argv[++i];
        else if (!strncmp(a, "--family=", 9))
            fam_name = a + 9;
    }
    if (help && !fam_name && !weights) {
        fputs(usage, stdout);
        return EXIT_OK;
    }
    family f = FAM_NONE;
    if (fam_name && (f = family_named(fam_name)) == FAM_NONE)
        return app_usage_error("classify ", "--family wants vit, resnet, swin or mixer, got '%s'",
                               fam_name);
    if (f == FAM_NONE && !weights)
        return app_usage_error("classify ", "give --weights FILE (its family is detected), or "
                                            "--family F for seeded random weights");
    if (f == FAM_NONE) {
        int rc = detect_family(weights, &f);
        if (rc)
            return rc;
    }
    /* The family's command sees the arguments without --family. */
    char **args = calloc((size_t)argc + 1, sizeof *args);
    if (!args) {
        fprintf(stderr, "pagoda: error: out of host memory\n");
        return EXIT_RUNTIME;
    }
    int n = 0, rest = 0;
    for (int i = 0; i < argc; i++) {
        if (!rest && !strcmp(argv[i], "--"))
            rest = 1;
        if (!rest && !strcmp(argv[i], "--family") && i + 1 < argc) {
            i++;
            continue;
        }
        if (!rest && !strncmp(argv[i], "--family=", 9))
            continue;
        args[n++] = argv[i];
    }
    int rc = f == FAM_VIT      ? cmd_vit(n, args)
             : f == FAM_RESNET ? cmd_nonlocal(n, args)
                               : cmd_family(f, n, args);
    free(args);
    return rc;
}
