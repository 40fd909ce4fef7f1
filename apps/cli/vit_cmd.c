/* vit_cmd.c — `pagoda vit`: ViT classification of images or an input tensor. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "classify.h"
#include "commands.h"
#include "stream.h"
#include "vit.h"

static const char usage[] =
    "usage: pagoda vit [--device SEL] [--weights FILE | --random SIZE] [--heads H] [--topk K]\n"
    "                  [--json] [--preprocess P] [--input F.npy] [--save-input F.npy]\n"
    "                  [--save-logits F.npy] [--attention-map OUT.png] [--attention A]\n"
    "                  [--profile] [IMAGE...]\n"
    "\n"
    "Classifies images (JPEG, PNG, BMP; batched together) with a Vision Transformer. Each image\n"
    "is preprocessed as the weights were trained (--preprocess overrides), or the input is an\n"
    ".npy tensor [B, 3, H, W] of preprocessed images (H and W multiples of the patch size;\n"
    "other sizes than the trained one resample the position embeddings as the weights' library\n"
    "does: timm antialiased bicubic, torchvision align_corners, Hugging Face its scale factor).\n"
    "\n"
    "Options:\n"
    "  --device SEL        device selector (see 'pagoda devices --help')\n"
    "  --weights FILE      a .safetensors checkpoint in timm, Hugging Face or torchvision\n"
    "                      naming (depth, width, patch, grid, classes follow from it)\n"
    "                      (default: vit_b16_timm.safetensors in $PAGODA_WEIGHTS_DIR or\n"
    "                      ~/.local/share/pagoda/weights, as tools/download-weights stores it)\n"
    "  --random SIZE       without weights: seeded random weights, clearly not a trained model: ti (ViT-Ti/16),\n"
    "                      s (ViT-S/16), b (ViT-B/16, default) or tiny (2 blocks of width 32)\n"
    "  --heads H           number of attention heads (default: the standard table by width)\n"
    "  --topk K            classes to print per image (default 5)\n"
    "  --labels FILE       class names, one per line (default: ImageNet-1k for 1000 classes)\n"
    "  --json              print the results as JSON\n"
    "  --preprocess P      torchvision (shorter side 256 bilinear, crop 224, ImageNet mean/std),\n"
    "                      timm (shorter side 248 bicubic, crop 224, mean/std 0.5) or hf (resize\n"
    "                      224x224 bilinear, mean/std 0.5); default: the weights' naming\n"
    "  --input F.npy       the input tensor instead of images; with neither, one synthetic\n"
    "                      224x224 image\n"
    "  --save-input F.npy  write the preprocessed batch [B, 3, H, W]\n"
    "  --attention-map OUT.png\n"
    "                      the last block's class-token attention (mean over heads) blended\n"
    "                      over each image as OUT.png, and the attention rollout across all\n"
    "                      blocks as OUT-rollout.png (OUT-1.png, OUT-rollout-1.png, ... for\n"
    "                      several images)\n"
    "  --attention A       soft (default), topk:K (each query keeps its K highest scores, K = 1\n"
    "                      is arg-max attention) or sample:SEED (each query attends to one key\n"
    "                      drawn from its softmax, Xu et al.'s stochastic hard attention; the\n"
    "                      same SEED gives the same draws on every device), in every block\n"
    "  --save-logits F.npy write the logits [B, classes]\n"
    CLASSIFY_HELP_TAIL;

/* What `pagoda vit` adds to the shared classification options. */
typedef struct vit_cmd {
    classify_opts o;
    const char *random, *weights, *attn_png;
    int heads, preset; /* preset -1: the weights' own */
    classify_attention attention;
    char default_path[4096];
} vit_cmd;

static int parse_own(void *cmd, int c, const char *arg)
{
    vit_cmd *v = cmd;
    int64_t n;
    switch (c) {
    case 'r': v->random = arg; return 0;
    case 'w': v->weights = arg; return 0;
    case 'A': v->attn_png = arg; return 0;
    case 'T': return classify_parse_attention("vit ", arg, &v->attention);
    case 'P':
        v->preset = app_preset_parse(arg);
        if (v->preset < 0)
            return app_usage_error("vit ", "--preprocess wants torchvision, timm or hf, got '%s'",
                                   arg);
        return 0;
    case 'H':
        if (pgd_parse_int64(arg, 1, 1024, &n))
            return app_usage_error("vit ", "--heads wants a whole number from 1 to 1024, got "
                                           "'%s'", arg);
        v->heads = (int)n;
        return 0;
    default: return app_usage_error("vit ", "bad option");
    }
}

/* The options; -1 when --help printed the usage, else EXIT_OK or EXIT_USAGE. */
static int parse(vit_cmd *v, int argc, char **argv)
{
    static const struct option own[] = {
        {"random", required_argument, 0, 'r'},     {"weights", required_argument, 0, 'w'},
        {"preprocess", required_argument, 0, 'P'}, {"attention-map", required_argument, 0, 'A'},
        {"heads", required_argument, 0, 'H'},      {"attention", required_argument, 0, 'T'},
        {"help", no_argument, 0, 'h'}};
    memset(v, 0, sizeof *v);
    classify_opts_init(&v->o, "vit ");
    v->preset = -1;
    int rc = classify_parse(&v->o, argc, argv, own, sizeof own / sizeof own[0], usage,
                            parse_own, v);
    if (rc)
        return rc;
    if (v->weights && v->random)
        return app_usage_error("vit ", "give --weights or --random, not both");
    return classify_operands(&v->o, argc, argv, v->attn_png ? "--attention-map" : NULL);
}

/* The weights (a file, the default file, or seeded random ones) and their configuration. */
static int open_model(vit_cmd *v, model_source *src, vit_config *cfg)
{
    pgd_error *err = NULL;
    if (!v->random && app_weights_or_default(&v->weights, "vit_b16_timm.safetensors",
                                             v->default_path, sizeof v->default_path))
        return EXIT_USAGE;
    if (v->weights) {
        if (model_source_open(src, v->weights, &err))
            return app_fail(err);
        int rc = app_vit_detect(src, v->weights, v->heads, cfg);
        if (rc)
            return rc;
        if (cfg->headless) {
            char shown[1024];
            fprintf(stderr, "pagoda: error: %s has no classifier ('head.weight' or the naming's "
                            "equivalent): a feature model such as DINO; 'pagoda embed' computes "
                            "its features\n", app_term_text(v->weights, shown, sizeof shown));
            return EXIT_RUNTIME;
        }
        return EXIT_OK;
    }
    if (!v->random)
        v->random = "b";
    if (vit_named_config(v->random, cfg) != 0)
        return app_usage_error("vit ", "--random wants ti, s, b or tiny, got '%s'", v->random);
    if (v->heads)
        cfg->heads = v->heads;
    if (cfg->dim % cfg->heads)
        return app_usage_error("vit ", "width %d is not divisible by %d heads", cfg->dim,
                               cfg->heads);
    pgd_error *rerr = NULL;
    return vit_random_source(src, cfg, 1, &rerr) ? app_fail(rerr) : EXIT_OK;
}

static void describe(const vit_cmd *v, const vit_config *cfg)
{
    if (v->o.json)
        return;
    char shown[1024];
    if (!v->weights)
        fprintf(stderr, "pagoda: note: seeded random weights (%s, width %d, depth %d, %d heads): "
                        "the classes printed are meaningless\n",
                v->random, cfg->dim, cfg->depth, cfg->heads);
    else
        fprintf(stderr, "pagoda: %s: %s ViT, width %d, depth %d, %d heads, patch %d, %dx%d grid, "
                        "%d classes\n",
                app_term_text(v->weights, shown, sizeof shown), vit_family_name(cfg->family),
                cfg->dim, cfg->depth, cfg->heads,
                cfg->patch, cfg->grid_h, cfg->grid_w, cfg->classes);
    char a[64];
    if (v->attention.mode != PGD_ATTENTION_SOFT)
        fprintf(stderr, "pagoda: hard attention in every block: %s\n",
                classify_attention_str(&v->attention, a, sizeof a));
}

/* The model's non-finite diagnosis, in the classify path's form. */
static int diagnose(void *model, const float *image, int H, int W, model_probe *p, pgd_error **err)
{
    return vit_find_nonfinite(model, image, H, W, p, err);
}

static int report(const vit_cmd *v, classify_run *r, const vit_config *cfg, const double t[4])
{
    static const classify_stage stages[4] = {
        {"embed", "embed"}, {"blocks", "blocks"}, {"head", "head"}, {"total", "total"}};
    char a[64];
    json_t *model = v->o.json ? json_pack("{s:s, s:i, s:i, s:i, s:i, s:s}", "family",
                                          vit_family_name(cfg->family), "width", cfg->dim,
                                          "depth", cfg->depth, "heads", cfg->heads, "patch",
                                          cfg->patch, "attention",
                                          classify_attention_str(&v->attention, a, sizeof a))
                              : NULL;
    if (model)
        json_object_set_new(model, "assumed", app_assumed_json(&cfg->assumed));
    return classify_emit(&v->o, r, v->weights, model, stages, t, 4);
}

/* Loads the model, runs the batch, draws the maps, reports. */
static int run(vit_cmd *v, const model_source *src, const vit_config *cfg, classify_run *r)
{
    pgd_error *err = NULL;
    vit_model *m = NULL;
    float *map = NULL, *roll = NULL;
    int mh = r->H / cfg->patch, mw = r->W / cfg->patch, rc = EXIT_OK;
    describe(v, cfg);
    if (vit_load(r->ctx, src, cfg, &m, &err))
        return app_fail(err);
    vit_set_attention(m, v->attention.mode, v->attention.topk, v->attention.seed);
    rc = classify_prepare(&v->o, r);
    size_t cells = (size_t)r->B * (size_t)mh * (size_t)mw;
    if (!rc && v->attn_png && (!(map = malloc(cells * sizeof *map)) ||
                               !(roll = malloc(cells * sizeof *roll)))) {
        fprintf(stderr, "pagoda: error: out of host memory for the attention maps\n");
        rc = EXIT_RUNTIME;
    }
    double t[4];
    if (!rc && vit_forward(m, r->x, r->B, r->H, r->W, r->logits, map, roll, t, &err))
        rc = app_fail(err);
    if (!rc)
        rc = classify_check_logits(&v->o, r, diagnose, m);
    if (!rc)
        rc = classify_after_forward(&v->o, r, vit_last_split(m));
    if (!rc && map)
        rc = classify_draw_maps(&v->o, r, v->attn_png, "", map, mw, mh, v->preset,
                                "last-layer attention");
    if (!rc && roll)
        rc = classify_draw_maps(&v->o, r, v->attn_png, "-rollout", roll, mw, mh, v->preset,
                                "attention rollout");
    if (!rc)
        rc = report(v, r, cfg, t);
    if (!rc)
        rc = classify_finish(&v->o, r);
    vit_free(m);
    free(map);
    free(roll);
    return rc;
}

/* The model on each device of a stream. */
typedef struct vit_stream {
    const vit_cmd *v;
    const model_source *src;
    const vit_config *cfg;
} vit_stream;

static int stream_load(void *cmd, pgd_ctx *ctx, void **model)
{
    vit_stream *vs = cmd;
    pgd_error *err = NULL;
    vit_model *m = NULL;
    if (vit_load(ctx, vs->src, vs->cfg, &m, &err))
        return app_fail(err);
    vit_set_attention(m, vs->v->attention.mode, vs->v->attention.topk, vs->v->attention.seed);
    *model = m;
    return EXIT_OK;
}

static int stream_forward(void *model, const float *x, int B, int H, int W, float *logits,
                          pgd_error **err)
{
    double t[4];
    return vit_forward(model, x, B, H, W, logits, NULL, NULL, t, err);
}

static void stream_release(void *model)
{
    vit_free(model);
}

static int run_stream(vit_cmd *v, const model_source *src, const vit_config *cfg)
{
    int rc = classify_stream_check(&v->o, v->attn_png ? "--attention-map" : NULL);
    if (rc)
        return rc;
    describe(v, cfg);
    vit_stream vs = {v, src, cfg};
    classify_model m = {&vs, stream_load, stream_forward, stream_release, v->weights, v->random,
                        ""};
    char a[64];
    snprintf(m.family, sizeof m.family, "ViT (%s), %d heads, attention %s",
             vit_family_name(cfg->family), cfg->heads,
             classify_attention_str(&v->attention, a, sizeof a));
    return classify_stream(&v->o, (pgd_preprocess)v->preset, cfg->classes, &m);
}

int cmd_vit(int argc, char **argv)
{
    vit_cmd v;
    int rc = parse(&v, argc, argv);
    if (rc)
        return rc < 0 ? EXIT_OK : rc;
    vit_config cfg;
    model_source src = {0};
    classify_run r = {0};
    rc = open_model(&v, &src, &cfg);
    if (!rc && v.preset < 0)
        v.preset = cfg.family == VIT_HF            ? PGD_PREPROCESS_HF
                   : cfg.family == VIT_TORCHVISION ? PGD_PREPROCESS_TORCHVISION
                                                   : PGD_PREPROCESS_TIMM;
    if (!rc && classify_streaming(&v.o)) {
        rc = run_stream(&v, &src, &cfg);
        model_source_free(&src);
        return rc;
    }
    v.o.map_option = "--attention-map", v.o.map_png = v.attn_png;
    v.o.map_tags[0] = "", v.o.map_tags[1] = "-rollout";
    if (!rc)
        rc = classify_begin(&v.o, (pgd_preprocess)v.preset, cfg.patch * cfg.grid_h,
                            cfg.patch * cfg.grid_w, cfg.classes, &r);
    if (!rc)
        rc = run(&v, &src, &cfg, &r);
    classify_free(&r);
    model_source_free(&src);
    return rc;
}
