/* vit_cmd.c — the ViT family on the command line (classify_family.h): `pagoda vit`, and what
 * `pagoda classify` runs for a ViT/DeiT checkpoint. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "classify_family.h"
#include "commands.h"
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
    "                      ~/.local/share/pagoda/weights, where tools/user/download-weights\n"
    "                      stores it)\n"
    "  --random SIZE       without weights: seeded random weights, clearly not a trained model: ti "
    "(ViT-Ti/16),\n"
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
    "  --save-logits F.npy write the logits [B, classes]\n" CLASSIFY_HELP_TAIL;

/* What the ViT adds to the shared state. */
typedef struct vit_own {
    const char *attn_png;
    int heads;
    float *map, *roll; /* the maps of one batch */
} vit_own;

static int vit_option(cli_state *s, int c, const char *arg)
{
    vit_own *v = s->own;
    int64_t n;
    if (c == CLI_ATTENTION_MAP) {
        v->attn_png = arg;
        return EXIT_OK;
    }
    if (pgd_parse_int64(arg, 1, 1024, &n)) /* CLI_HEADS */
        return app_usage_error(s->o.cmd,
                               "--heads wants a whole number from 1 to 1024, got "
                               "'%s'",
                               arg);
    v->heads = (int)n;
    return EXIT_OK;
}

static int vit_check(cli_state *s)
{
    vit_own *v = s->own;
    s->o.map_option = "--attention-map", s->o.map_png = v->attn_png;
    s->o.map_tags[0] = "", s->o.map_tags[1] = "-rollout";
    return EXIT_OK;
}

/* The weights (a file, the default file, or seeded random ones) and their configuration. */
static int vit_open(cli_state *s)
{
    vit_own *v = s->own;
    vit_config *cfg = s->cfg;
    pgd_error *err = NULL;
    if (s->weights) {
        int rc = app_vit_detect(&s->src, s->weights, v->heads, cfg);
        if (rc)
            return rc;
        if (cfg->headless) {
            char shown[1024];
            fprintf(stderr,
                    "pagoda: error: %s has no classifier ('head.weight' or the naming's "
                    "equivalent): a feature model such as DINO; 'pagoda embed' computes "
                    "its features\n",
                    app_term_text(s->weights, shown, sizeof shown));
            return EXIT_RUNTIME;
        }
    } else {
        if (!s->random)
            s->random = "b";
        if (vit_named_config(s->random, cfg) != 0)
            return app_usage_error(s->o.cmd, "--random wants ti, s, b or tiny, got '%s'",
                                   s->random);
        if (v->heads)
            cfg->heads = v->heads;
        if (cfg->dim % cfg->heads)
            return app_usage_error(s->o.cmd, "width %d is not divisible by %d heads", cfg->dim,
                                   cfg->heads);
        if (vit_random_source(&s->src, cfg, 1, &err))
            return app_fail(err);
        snprintf(s->random_label, sizeof s->random_label, "%s", s->random);
    }
    if (s->preset < 0)
        s->preset = cfg->family == VIT_HF            ? PGD_PREPROCESS_HF
                    : cfg->family == VIT_TORCHVISION ? PGD_PREPROCESS_TORCHVISION
                                                     : PGD_PREPROCESS_TIMM;
    s->side_h = cfg->patch * cfg->grid_h, s->side_w = cfg->patch * cfg->grid_w;
    s->classes = cfg->classes;
    return EXIT_OK;
}

static void vit_describe(const cli_state *s)
{
    const vit_config *cfg = s->cfg;
    if (s->o.json)
        return;
    char shown[1024];
    if (!s->weights) {
        fprintf(stderr,
                "pagoda: note: seeded random weights (%s, width %d, depth %d, %d heads): "
                "the classes printed are meaningless\n",
                s->random, cfg->dim, cfg->depth, cfg->heads);
        app_note_real_weights("vit", "timm/vit_base_patch16_224.augreg2_in21k_ft_in1k");
    } else
        fprintf(stderr,
                "pagoda: %s: %s ViT, width %d, depth %d, %d heads, patch %d, %dx%d grid, "
                "%d classes\n",
                app_term_text(s->weights, shown, sizeof shown), vit_family_name(cfg->family),
                cfg->dim, cfg->depth, cfg->heads, cfg->patch, cfg->grid_h, cfg->grid_w,
                cfg->classes);
    char a[64];
    if (s->attention.mode != PGD_ATTENTION_SOFT)
        fprintf(stderr, "pagoda: hard attention in every block: %s\n",
                classify_attention_str(&s->attention, a, sizeof a));
}

static void vit_stream_label(const cli_state *s, char *buf, size_t size)
{
    const vit_config *cfg = s->cfg;
    char a[64];
    snprintf(buf, size, "ViT (%s), %d heads, attention %s", vit_family_name(cfg->family),
             cfg->heads, classify_attention_str(&s->attention, a, sizeof a));
}

/* The forward with the last block's attention and the rollout when --attention-map asks. */
static int vit_run(cli_state *s, void *model, classify_run *r, double *t, int *split,
                   pgd_error **err)
{
    vit_own *v = s->own;
    const vit_config *cfg = s->cfg;
    size_t cells = (size_t)r->B * (size_t)(r->H / cfg->patch) * (size_t)(r->W / cfg->patch);
    if (v->attn_png && (!(v->map = malloc(cells * sizeof *v->map)) ||
                        !(v->roll = malloc(cells * sizeof *v->roll))))
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY,
                             "out of host memory for the attention maps");
    int rc = vit_forward(model, r->x, r->B, r->H, r->W, r->logits, v->map, v->roll, t, err);
    *split = vit_last_split(model);
    return rc;
}

static int vit_draw(cli_state *s, classify_run *r)
{
    vit_own *v = s->own;
    const vit_config *cfg = s->cfg;
    int mh = r->H / cfg->patch, mw = r->W / cfg->patch, rc = EXIT_OK;
    if (v->map)
        rc = classify_draw_maps(&s->o, r, v->attn_png, "", v->map, mw, mh,
                                (pgd_preprocess)s->preset, "last-layer attention");
    if (!rc && v->roll)
        rc = classify_draw_maps(&s->o, r, v->attn_png, "-rollout", v->roll, mw, mh,
                                (pgd_preprocess)s->preset, "attention rollout");
    return rc;
}

static json_t *vit_json(const cli_state *s)
{
    const vit_config *cfg = s->cfg;
    char a[64];
    json_t *model =
        json_pack("{s:s, s:i, s:i, s:i, s:i, s:s}", "family", vit_family_name(cfg->family), "width",
                  cfg->dim, "depth", cfg->depth, "heads", cfg->heads, "patch", cfg->patch,
                  "attention", classify_attention_str(&s->attention, a, sizeof a));
    if (model)
        json_object_set_new(model, "assumed", app_assumed_json(&cfg->assumed));
    return model;
}

static void vit_release(cli_state *s)
{
    vit_own *v = s->own;
    if (v) {
        free(v->map);
        free(v->roll);
    }
}

static const int vit_options[] = {
    CLI_RANDOM, CLI_WEIGHTS, CLI_PREPROCESS, CLI_ATTENTION, CLI_ATTENTION_MAP, CLI_HEADS, 0};
static const classify_stage vit_stages[4] = {
    {"embed", "embed"}, {"blocks", "blocks"}, {"head", "head"}, {"total", "total"}};

const cli_family cli_vit = {
    .family = &family_vit,
    .names = {"vit", "deit"},
    .cmd = "vit ",
    .label = "ViT",
    .default_weights = "vit_b16_timm.safetensors",
    .options = vit_options,
    .own_size = sizeof(vit_own),
    .option = vit_option,
    .check = vit_check,
    .open = vit_open,
    .describe = vit_describe,
    .stream_label = vit_stream_label,
    .forward = vit_run,
    .draw = vit_draw,
    .json = vit_json,
    .stages = vit_stages,
    .nstages = 4,
    .release = vit_release,
};

int cmd_vit(int argc, char **argv)
{
    return classify_family_main(&cli_vit, usage, argc, argv);
}
