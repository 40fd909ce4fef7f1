/* family_cmd.c — the MLP-Mixer, Swin and ONNX families on the command line (classify_family.h):
 * what `pagoda classify` runs for their checkpoints or --family mixer / swin. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "classify_family.h"
#include "mixer.h"
#include "swin.h"

/* ---- MLP-Mixer ---- */

static int mixer_open(cli_state *s)
{
    mixer_config *c = s->cfg;
    pgd_error *err = NULL;
    if (s->weights) {
        if (mixer_detect(&s->src, c, &err))
            return app_fail(err);
    } else {
        if (!s->random)
            s->random = "b16";
        if (mixer_named_config(s->random, c))
            return app_usage_error(s->o.cmd,
                                   "--random for mixer wants s16, b16, l16 or tiny, "
                                   "got '%s'",
                                   s->random);
        if (mixer_random_source(&s->src, c, 1, &err))
            return app_fail(err);
        snprintf(s->random_label, sizeof s->random_label, "%s", s->random);
    }
    /* timm's mixer_*_224: bicubic, crop 0.875, mean/std 0.5 */
    if (s->preset < 0)
        s->preset = PGD_PREPROCESS_TIMM;
    s->side_h = c->patch * c->grid_h, s->side_w = c->patch * c->grid_w;
    s->classes = c->classes;
    return EXIT_OK;
}

/* The random-weights note, and hard attention's (Swin). */
static void note_random(const cli_state *s, const char *label, const char *repo)
{
    char a[64];
    if (!s->weights) {
        fprintf(stderr,
                "pagoda: note: seeded random weights (%s %s): the classes printed are "
                "meaningless\n",
                label, s->random);
        app_note_real_weights("classify", repo);
    }
    if (s->attention.mode != PGD_ATTENTION_SOFT)
        fprintf(stderr, "pagoda: hard attention in every block: %s\n",
                classify_attention_str(&s->attention, a, sizeof a));
}

static void mixer_describe(const cli_state *s)
{
    const mixer_config *c = s->cfg;
    char shown[1024];
    if (s->o.json)
        return;
    if (s->weights)
        fprintf(stderr,
                "pagoda: %s: MLP-Mixer, width %d, depth %d, patch %d, %dx%d tokens, "
                "token MLP %d, channel MLP %d, %d classes\n",
                app_term_text(s->weights, shown, sizeof shown), c->dim, c->depth, c->patch,
                c->grid_h, c->grid_w, c->tokens_hidden, c->channels_hidden, c->classes);
    note_random(s, "MLP-Mixer", "timm/mixer_b16_224.goog_in21k_ft_in1k");
}

static void mixer_stream_label(const cli_state *s, char *buf, size_t size)
{
    char a[64];
    snprintf(buf, size, "MLP-Mixer (mixer), attention %s",
             classify_attention_str(&s->attention, a, sizeof a));
}

static json_t *mixer_json(const cli_state *s)
{
    const mixer_config *c = s->cfg;
    return json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:i}", "family", "mixer", "width", c->dim,
                     "depth", c->depth, "patch", c->patch, "tokens", c->tokens, "tokens_hidden",
                     c->tokens_hidden, "channels_hidden", c->channels_hidden);
}

/* The forward with its stage times: embed, blocks, head, total. */
static int mixer_run(cli_state *s, void *model, classify_run *r, double *t, int *split,
                     pgd_error **err)
{
    (void)s;
    *split = r->B;
    return mixer_forward(model, r->x, r->B, r->H, r->W, r->logits, t, err);
}

static const classify_stage staged[4] = {
    {"embed", "embed"}, {"blocks", "blocks"}, {"head", "head"}, {"total", "total"}};
static const int mixer_options[] = {CLI_RANDOM, CLI_WEIGHTS, CLI_PREPROCESS, 0};

const cli_family cli_mixer = {
    .family = &family_mixer,
    .names = {"mixer"},
    .cmd = "classify ",
    .label = "MLP-Mixer",
    .options = mixer_options,
    .open = mixer_open,
    .describe = mixer_describe,
    .stream_label = mixer_stream_label,
    .forward = mixer_run,
    .json = mixer_json,
    .stages = staged,
    .nstages = 4,
};

/* ---- Swin ---- */

/* What Swin adds: Hugging Face's LayerNorm epsilon when config.json lacks it. */
typedef struct swin_own {
    model_assumptions assumed;
} swin_own;

/* Hugging Face's Swin takes its LayerNorm epsilon from config.json (layer_norm_eps, 1e-5 by
 * default); timm's and torchvision's fix it in their code. */
static int swin_side_config(cli_state *s)
{
    swin_config *c = s->cfg;
    swin_own *v = s->own;
    char path[4096];
    float eps = 0.0f;
    if (c->family != SWIN_HF4 && c->family != SWIN_HF5)
        return EXIT_OK;
    int rc = app_hf_side_config(s->weights, NULL, &eps, path, sizeof path);
    if (!rc && eps > 0.0f)
        c->eps = eps;
    else if (!rc)
        model_assume(&v->assumed, "eps", "1e-05", "layer_norm_eps in config.json");
    app_note_assumed(s->weights, &v->assumed);
    return rc;
}

static int swin_open(cli_state *s)
{
    swin_config *c = s->cfg;
    pgd_error *err = NULL;
    if (s->weights) {
        if (swin_detect(&s->src, c, &err))
            return app_fail(err);
        int rc = swin_side_config(s);
        if (rc)
            return rc;
    } else {
        if (!s->random)
            s->random = "t";
        if (swin_named_config(s->random, c))
            return app_usage_error(s->o.cmd, "--random for swin wants t, s, b or tiny, got '%s'",
                                   s->random);
        if (swin_random_source(&s->src, c, 1, &err))
            return app_fail(err);
        snprintf(s->random_label, sizeof s->random_label, "%s", s->random);
    }
    /* ImageNet mean/std; the torchvision preset (256 bilinear, crop 224) is the nearest of the
     * presets to each library's own Swin transform (torchvision 232 bicubic, timm 248 bicubic) */
    if (s->preset < 0)
        s->preset = PGD_PREPROCESS_TORCHVISION;
    /* 224 x 224 for the standard models, 40 x 40 for the tiny one */
    s->side_h = s->side_w = c->dim <= 16 ? 40 : 224;
    s->classes = c->classes;
    return EXIT_OK;
}

static void swin_describe(const cli_state *s)
{
    const swin_config *c = s->cfg;
    char shown[1024];
    if (s->o.json)
        return;
    if (s->weights) {
        fprintf(stderr, "pagoda: %s: %s Swin, width %d, %d stages (depths",
                app_term_text(s->weights, shown, sizeof shown), swin_family_name(c->family), c->dim,
                c->stages);
        for (int i = 0; i < c->stages; i++)
            fprintf(stderr, " %d", c->depth[i]);
        fprintf(stderr, "), window %d, patch %d, %d classes\n", c->window[0], c->patch, c->classes);
    }
    note_random(s, "Swin", "timm/swin_tiny_patch4_window7_224.ms_in1k");
}

static void swin_stream_label(const cli_state *s, char *buf, size_t size)
{
    const swin_config *c = s->cfg;
    char a[64];
    snprintf(buf, size, "Swin (%s), attention %s", swin_family_name(c->family),
             classify_attention_str(&s->attention, a, sizeof a));
}

static json_t *swin_json(const cli_state *s)
{
    const swin_config *c = s->cfg;
    const swin_own *v = s->own;
    char a[64];
    json_t *depths = json_array();
    for (int i = 0; i < c->stages; i++)
        json_array_append_new(depths, json_integer(c->depth[i]));
    return json_pack("{s:s, s:s, s:i, s:o, s:i, s:i, s:s, s:o}", "family", "swin", "naming",
                     swin_family_name(c->family), "width", c->dim, "depths", depths, "window",
                     c->window[0], "patch", c->patch, "attention",
                     classify_attention_str(&s->attention, a, sizeof a), "assumed",
                     app_assumed_json(&v->assumed));
}

static int swin_run(cli_state *s, void *model, classify_run *r, double *t, int *split,
                    pgd_error **err)
{
    (void)s;
    *split = r->B;
    return swin_forward(model, r->x, r->B, r->H, r->W, r->logits, t, err);
}

static const int swin_options[] = {CLI_RANDOM, CLI_WEIGHTS, CLI_PREPROCESS, CLI_ATTENTION, 0};

const cli_family cli_swin = {
    .family = &family_swin,
    .names = {"swin"},
    .cmd = "classify ",
    .label = "Swin",
    .options = swin_options,
    .own_size = sizeof(swin_own),
    .open = swin_open,
    .describe = swin_describe,
    .stream_label = swin_stream_label,
    .forward = swin_run,
    .json = swin_json,
    .stages = staged,
    .nstages = 4,
};

/* ---- ONNX image classifiers (--weights MODEL.onnx) ---- */

static int onnx_open(cli_state *s)
{
    pgd_error *err = NULL;
    if (!s->weights)
        return app_usage_error(s->o.cmd, "an ONNX model needs --weights MODEL.onnx");
    if (family_onnx.detect(&s->src, NULL, s->cfg, &err))
        return app_fail(err);
    pgd_model_info info;
    memset(&info, 0, sizeof info);
    family_onnx.info(s->cfg, s->weights, &info);
    if (s->preset < 0)
        s->preset = PGD_PREPROCESS_TORCHVISION;
    s->side_h = info.input_h, s->side_w = info.input_w;
    s->classes = info.classes;
    return EXIT_OK;
}

static void onnx_describe(const cli_state *s)
{
    pgd_model_info info;
    char shown[1024];
    if (s->o.json)
        return;
    memset(&info, 0, sizeof info);
    family_onnx.info(s->cfg, s->weights, &info);
    fprintf(stderr, "pagoda: %s: %s (preprocessing %s; --preprocess to change it)\n",
            app_term_text(s->weights, shown, sizeof shown), info.description,
            app_preset_name((pgd_preprocess)s->preset));
}

static void onnx_stream_label(const cli_state *s, char *buf, size_t size)
{
    snprintf(buf, size, "ONNX graph (onnx), preprocessing %s",
             app_preset_name((pgd_preprocess)s->preset));
}

static json_t *onnx_json(const cli_state *s)
{
    pgd_model_info info;
    memset(&info, 0, sizeof info);
    family_onnx.info(s->cfg, s->weights, &info);
    return json_pack("{s:s, s:i, s:i, s:i}", "family", "onnx", "classes", info.classes, "input_h",
                     info.input_h, "input_w", info.input_w);
}

static const classify_stage onnx_stages[1] = {{"total", "total"}};
static const int onnx_options[] = {CLI_WEIGHTS, CLI_PREPROCESS, 0};

const cli_family cli_onnx = {
    .family = &family_onnx,
    .names = {"onnx"},
    .cmd = "classify ",
    .label = "ONNX",
    .options = onnx_options,
    .open = onnx_open,
    .describe = onnx_describe,
    .stream_label = onnx_stream_label,
    .json = onnx_json,
    .stages = onnx_stages,
    .nstages = 1,
};
