/* classify_cmd.c — `pagoda classify`: one command for every model family. The family comes
 * from the checkpoint's names (or --family), then the family's own command runs with the same
 * arguments: `pagoda vit` for ViT/DeiT, `pagoda nonlocal` for ResNets with or without non-local
 * blocks, and the MLP-Mixer path below, which has no command of its own. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "classify.h"
#include "mixer.h"
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
    "  MLP-Mixer (timm naming: stem.proj, blocks.N.mlp_tokens / mlp_channels, head)\n"
    "      the common options below, --preprocess, --random s16|b16|l16|tiny\n"
    "\n"
    "Options of every family:\n"
    "  --weights FILE      the .safetensors checkpoint (its family is detected)\n"
    "  --family F          vit, resnet or mixer: skip detection (needed with --random)\n"
    "  --random SIZE       seeded random weights of the family's size SIZE (not a trained\n"
    "                      model): vit ti|s|b|tiny, resnet 18|34|50|101|152, mixer\n"
    "                      s16|b16|l16|tiny\n"
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

typedef enum family { FAM_NONE, FAM_VIT, FAM_RESNET, FAM_MIXER } family;

static family family_named(const char *s)
{
    return !strcmp(s, "vit") || !strcmp(s, "deit") ? FAM_VIT
           : !strcmp(s, "resnet") || !strcmp(s, "nonlocal") ? FAM_RESNET
           : !strcmp(s, "mixer")                            ? FAM_MIXER
                                                            : FAM_NONE;
}

static int has(const model_source *src, const char *name)
{
    int nd;
    int64_t s[8];
    return src->shape(src->u, name, &nd, s) == 0;
}

/* The family of a checkpoint from its names; the ViT detector has the last word, so that a
 * file that is none of them gets its precise error. */
static int detect_family(const char *path, family *f)
{
    model_source src = {0};
    pgd_error *err = NULL;
    if (model_source_open(&src, path, &err))
        return app_fail(err);
    int rc = EXIT_OK;
    if (mixer_is(&src)) {
        *f = FAM_MIXER;
    } else if (has(&src, "layer1.0.conv1.weight") && has(&src, "conv1.weight")) {
        *f = FAM_RESNET;
    } else {
        vit_config cfg;
        if (vit_detect(&src, 0, &cfg, &err)) {
            fprintf(stderr, "pagoda: classify: %s is not a checkpoint of a family Pagoda knows "
                            "(ViT/DeiT, ResNet, MLP-Mixer); as a ViT:\n", path);
            rc = app_fail(err);
        } else {
            *f = FAM_VIT;
        }
    }
    model_source_free(&src);
    return rc;
}

/* ---- the MLP-Mixer path ---- */

typedef struct mixer_cmd {
    classify_opts o;
    const char *random, *weights;
    int preset;
} mixer_cmd;

static int mixer_own(void *cmd, int c, const char *arg)
{
    mixer_cmd *v = cmd;
    switch (c) {
    case 'r': v->random = arg; return 0;
    case 'w': v->weights = arg; return 0;
    case 'F': return 0; /* --family, read before */
    case 'P':
        v->preset = !strcmp(arg, "torchvision") ? PGD_PREPROCESS_TORCHVISION
                    : !strcmp(arg, "timm")      ? PGD_PREPROCESS_TIMM
                    : !strcmp(arg, "hf")        ? PGD_PREPROCESS_HF
                                                : -1;
        if (v->preset < 0)
            return app_usage_error("classify ",
                                   "--preprocess wants torchvision, timm or hf, got '%s'", arg);
        return 0;
    default:
        return app_usage_error("classify ", "this option is not one of the MLP-Mixer family's");
    }
}

static int diagnose_mixer(void *model, const float *image, int H, int W, model_probe *p,
                          pgd_error **err)
{
    return mixer_find_nonfinite(model, image, H, W, p, err);
}

static int run_mixer(mixer_cmd *v, const model_source *src, const mixer_config *cfg,
                     classify_run *r)
{
    pgd_error *err = NULL;
    mixer_model *m = NULL;
    char shown[1024];
    if (!v->o.json) {
        if (v->weights)
            fprintf(stderr, "pagoda: %s: MLP-Mixer, width %d, depth %d, patch %d, %dx%d tokens, "
                            "token MLP %d, channel MLP %d, %d classes\n",
                    app_term_text(v->weights, shown, sizeof shown), cfg->dim, cfg->depth,
                    cfg->patch, cfg->grid_h, cfg->grid_w, cfg->tokens_hidden,
                    cfg->channels_hidden, cfg->classes);
        else
            fprintf(stderr, "pagoda: note: seeded random weights (MLP-Mixer %s, width %d, depth "
                            "%d): the classes printed are meaningless\n",
                    v->random, cfg->dim, cfg->depth);
    }
    if (mixer_load(r->ctx, src, cfg, &m, &err))
        return app_fail(err);
    int rc = classify_prepare(&v->o, r);
    double t[4];
    if (!rc && mixer_forward(m, r->x, r->B, r->H, r->W, r->logits, t, &err))
        rc = app_fail(err);
    if (!rc)
        rc = classify_check_logits(&v->o, r, diagnose_mixer, m);
    if (!rc)
        rc = classify_after_forward(&v->o, r, r->B);
    if (!rc) {
        static const classify_stage stages[4] = {
            {"embed", "embed"}, {"blocks", "blocks"}, {"head", "head"}, {"total", "total"}};
        json_t *model = v->o.json ? json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:i}", "family",
                                              "mixer", "width", cfg->dim, "depth", cfg->depth,
                                              "patch", cfg->patch, "tokens", cfg->tokens,
                                              "tokens_hidden", cfg->tokens_hidden,
                                              "channels_hidden", cfg->channels_hidden)
                                  : NULL;
        rc = classify_emit(&v->o, r, v->weights, model, stages, t, 4);
    }
    if (!rc)
        rc = classify_finish(&v->o, r);
    mixer_free(m);
    return rc;
}

static int cmd_mixer(int argc, char **argv)
{
    static const struct option own[] = {
        {"random", required_argument, 0, 'r'},     {"weights", required_argument, 0, 'w'},
        {"preprocess", required_argument, 0, 'P'}, {"family", required_argument, 0, 'F'},
        {"help", no_argument, 0, 'h'}};
    mixer_cmd v;
    memset(&v, 0, sizeof v);
    classify_opts_init(&v.o, "classify ");
    v.preset = PGD_PREPROCESS_TIMM; /* timm's mixer_*_224: bicubic, crop 0.875, mean/std 0.5 */
    int rc = classify_parse(&v.o, argc, argv, own, sizeof own / sizeof *own, usage, mixer_own,
                            &v);
    if (rc)
        return rc < 0 ? EXIT_OK : rc;
    if (v.weights && v.random)
        return app_usage_error("classify ", "give --weights or --random, not both");
    if ((rc = classify_operands(&v.o, argc, argv, NULL)))
        return rc;
    mixer_config cfg;
    model_source src = {0};
    classify_run r = {0};
    pgd_error *err = NULL;
    if (v.weights) {
        if (model_source_open(&src, v.weights, &err) || mixer_detect(&src, &cfg, &err))
            rc = app_fail(err);
    } else {
        if (!v.random)
            v.random = "b16";
        if (mixer_named_config(v.random, &cfg))
            rc = app_usage_error("classify ", "--random for mixer wants s16, b16, l16 or tiny, "
                                              "got '%s'", v.random);
        else if (mixer_random_source(&src, &cfg, 1, &err))
            rc = app_fail(err);
    }
    if (!rc)
        rc = classify_begin(&v.o, (pgd_preprocess)v.preset, cfg.patch * cfg.grid_h,
                            cfg.patch * cfg.grid_w, cfg.classes, &r);
    if (!rc)
        rc = run_mixer(&v, &src, &cfg, &r);
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
        return app_usage_error("classify ", "--family wants vit, resnet or mixer, got '%s'",
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
                               : cmd_mixer(n, args);
    free(args);
    return rc;
}
