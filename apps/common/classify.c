/* classify.c — the path every classification command shares (see classify.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "classify.h"
#include "maps.h"
#include "vit.h" /* model_shape_str */

static const struct option classify_options[CLASSIFY_OPTION_COUNT] = {
    {"device", required_argument, 0, 'd'},
    {"input", required_argument, 0, 'i'},
    {"save-input", required_argument, 0, 'S'},
    {"save-logits", required_argument, 0, 's'},
    {"labels", required_argument, 0, 'L'},
    {"topk", required_argument, 0, 'k'},
    {"json", no_argument, 0, 'j'},
    {"profile", no_argument, 0, 'p'},
    {"allow-nonfinite", no_argument, 0, 'N'},
    {"fast-decode", no_argument, 0, 'F'},
    {"exif-rotate", no_argument, 0, 'E'},
    {"weights-dtype", required_argument, 0, 'W' + 256},
    /* streaming (stream.c): codes above the characters, clear of every command's own */
    {"output", required_argument, 0, 0x100},
    {"list", required_argument, 0, 0x101},
    {"resume", no_argument, 0, 0x102},
    {"recursive", no_argument, 0, 0x103},
    {"jobs", required_argument, 0, 0x104},
    {"batch", required_argument, 0, 0x105},
    {"strict", no_argument, 0, 0x106},
    {"quiet", no_argument, 0, 0x107},
    {"device-per-rank", no_argument, 0, 0x108},
    {"mpi-schedule", required_argument, 0, 0x109},
    {"precision", required_argument, 0, 'P' + 256},
};

int classify_parse_attention(const char *cmd, const char *arg, classify_attention *a)
{
    int64_t v;
    memset(a, 0, sizeof *a);
    if (!strcmp(arg, "soft"))
        return EXIT_OK;
    if (!strncmp(arg, "topk:", 5) && !pgd_parse_int64(arg + 5, 1, INT32_MAX, &v)) {
        a->mode = PGD_ATTENTION_TOPK;
        a->topk = v;
        return EXIT_OK;
    }
    if (!strncmp(arg, "sample:", 7) && !pgd_parse_int64(arg + 7, 0, INT64_MAX, &v)) {
        a->mode = PGD_ATTENTION_SAMPLE;
        a->seed = (uint64_t)v;
        return EXIT_OK;
    }
    return app_usage_error(cmd,
                           "--attention wants soft, topk:K (K >= 1) or sample:SEED "
                           "(a whole number), got '%s'",
                           arg);
}

const char *classify_attention_str(const classify_attention *a, char *buf, size_t size)
{
    if (a->mode == PGD_ATTENTION_TOPK)
        snprintf(buf, size, "topk:%lld", (long long)a->topk);
    else if (a->mode == PGD_ATTENTION_SAMPLE)
        snprintf(buf, size, "sample:%llu", (unsigned long long)a->seed);
    else
        snprintf(buf, size, "soft");
    return buf;
}

void classify_opts_init(classify_opts *o, const char *cmd)
{
    memset(o, 0, sizeof *o);
    o->cmd = cmd;
    o->topk = 5;
}

static int classify_option(classify_opts *o, int c, const char *arg)
{
    int64_t v;
    switch (c) {
    case 'd': o->device = arg; return 1;
    case 'i': o->input = arg; return 1;
    case 'S': o->save_input = arg; return 1;
    case 's': o->save_logits = arg; return 1;
    case 'L': o->labels_path = arg; return 1;
    case 'j': o->json = 1; return 1;
    case 'p': o->profile = 1; return 1;
    case 'N': o->allow_nonfinite = 1; return 1;
    case 'F': o->fast_decode = 1; return 1;
    case 'E': o->exif_rotate = 1; return 1;
    case 'W' + 256: return app_set_weights_dtype(o->cmd, arg) ? -1 : 1;
    case 'P' + 256: return app_set_precision(o->cmd, arg) ? -1 : 1;
    case 0x100: o->output = arg; return 1;
    case 0x101: o->list = arg; return 1;
    case 0x102: o->resume = 1; return 1;
    case 0x103: o->recursive = 1; return 1;
    case 0x106: o->strict = 1; return 1;
    case 0x107: o->quiet = 1; return 1;
    case 0x108: o->device_per_rank = 1; return 1;
    case 0x109:
        if (strcmp(arg, "static") && strcmp(arg, "dynamic")) {
            app_usage_error(o->cmd, "--mpi-schedule wants static or dynamic, got '%s'", arg);
            return -1;
        }
        o->mpi_dynamic = !strcmp(arg, "dynamic");
        return 1;
    case 0x104:
    case 0x105:
        if (pgd_parse_int64(arg, 1, c == 0x104 ? 256 : 4096, &v)) {
            app_usage_error(o->cmd, "%s wants a whole number from 1 to %d, got '%s'",
                            c == 0x104 ? "--jobs" : "--batch", c == 0x104 ? 256 : 4096, arg);
            return -1;
        }
        *(c == 0x104 ? &o->jobs : &o->batch) = (int)v;
        return 1;
    case 'k':
        if (pgd_parse_int64(arg, 1, 100000, &v)) {
            app_usage_error(o->cmd, "--topk wants a whole number from 1 to 100000, got '%s'", arg);
            return -1;
        }
        o->topk = (int)v;
        return 1;
    default: return 0;
    }
}

int classify_parse(classify_opts *o, int argc, char **argv, const struct option *own, size_t n_own,
                   const char *usage, classify_own_fn parse_own, void *cmd)
{
    enum { MAX_OWN = 32 };
    struct option opts[MAX_OWN + CLASSIFY_OPTION_COUNT + 1];
    if (n_own > MAX_OWN)
        n_own = MAX_OWN;
    memcpy(opts, own, n_own * sizeof *own);
    memcpy(opts + n_own, classify_options, sizeof classify_options);
    memset(opts + n_own + CLASSIFY_OPTION_COUNT, 0, sizeof *opts);
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == 'h') {
            fputs(usage, stdout);
            return -1;
        }
        int shared = classify_option(o, c, optarg);
        int rc = shared < 0 ? EXIT_USAGE : shared ? EXIT_OK : parse_own(cmd, c, optarg);
        if (rc)
            return rc;
    }
    return EXIT_OK;
}

int classify_operands(classify_opts *o, int argc, char **argv, const char *map_flag)
{
    o->nimages = argc - optind;
    o->images = argv + optind;
    if (o->nimages && o->input)
        return app_usage_error(o->cmd, "give images or --input F.npy, not both");
    if (map_flag && !o->nimages)
        return app_usage_error(o->cmd, "%s needs image files to draw on", map_flag);
    return EXIT_OK;
}

/* The input batch of classify_begin. */
static int read_input(const classify_opts *o, pgd_preprocess preset, int side_h, int side_w,
                      classify_run *r, pgd_error **err)
{
    if (o->input) {
        int nd = 0;
        int64_t shape[PGD_MAX_DIMS];
        if (pgd_npy_read(o->input, &r->x, &nd, shape, err))
            return EXIT_RUNTIME;
        r->x_npy = 1;
        if (nd != 4 || shape[1] != 3) {
            char s[96];
            model_shape_str(nd, shape, s, sizeof s);
            return pgd_error_set(err, PGD_ERR_SHAPE, "%s: input must be [B, 3, H, W], not %s",
                                 o->input, s),
                   EXIT_RUNTIME;
        }
        memcpy(r->shape, shape, sizeof r->shape);
    } else if (o->nimages) {
        /* --fast-decode: JPEGs scaled in the IDCT, the shorter side kept >= the preset's resize
         * target (torchvision 256, timm 248, hf 224). */
        int min_side = !o->fast_decode                        ? 0
                       : preset == PGD_PREPROCESS_TORCHVISION ? 256
                       : preset == PGD_PREPROCESS_TIMM        ? 248
                                                              : PGD_PREPROCESS_SIZE;
        if (app_load_batch(o->images, o->nimages, preset, min_side, o->exif_rotate, &r->x,
                           &r->loaded, r->shape, err))
            return EXIT_RUNTIME;
    } else {
        r->shape[0] = 1, r->shape[1] = 3, r->shape[2] = side_h, r->shape[3] = side_w;
        int64_t n = 3 * (int64_t)side_h * side_w;
        r->x = malloc((size_t)n * sizeof *r->x);
        if (!r->x)
            return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "synthetic image"), EXIT_RUNTIME;
        for (int64_t i = 0; i < n; i++)
            r->x[i] = (float)sin(0.01 * (double)i) * 1.5f; /* a fixed, smooth synthetic image */
    }
    r->B = (int)r->shape[0], r->H = (int)r->shape[2], r->W = (int)r->shape[3];
    return EXIT_OK;
}

/* The source of image b, for messages: its file, or the --input tensor. */
static const char *source_of(const classify_opts *o, int b)
{
    return o->nimages ? o->images[b] : o->input ? o->input : "the synthetic image";
}

/* Refuses a NaN or infinite input value unless --allow-nonfinite (classify_begin). */
static int check_input(const classify_opts *o, const classify_run *r, pgd_error **err)
{
    if (o->allow_nonfinite)
        return PGD_OK;
    return app_check_finite_batch(
        r->x, r->B, r->H, r->W, o->nimages ? (const char *const *)o->images : NULL,
        o->input ? o->input : "the synthetic image", o->nimages ? " after preprocessing" : "", err);
}

/* The outputs of classify_begin's run, claimed (checked, clashes refused) before any work. */
static int claim_outputs(const classify_opts *o, classify_run *r)
{
    int rc = EXIT_OK;
    if (o->save_input)
        rc = outset_claim(&r->outputs, "--save-input", o->save_input);
    if (!rc && o->save_logits)
        rc = outset_claim(&r->outputs, "--save-logits", o->save_logits);
    if (!rc && o->map_png)
        rc = outset_check_given(o->map_option, o->map_png);
    for (int t = 0; !rc && o->map_png && t < 2 && o->map_tags[t]; t++)
        for (int b = 0; !rc && b < o->nimages; b++) {
            char *path = app_numbered_path(o->map_png, o->map_tags[t], b, o->nimages);
            rc = path ? outset_claim(&r->outputs, o->map_option, path) : EXIT_RUNTIME;
            if (!path)
                fprintf(stderr, "pagoda: error: out of host memory\n");
            free(path);
        }
    return rc;
}

/* Without --labels a model of 1000 classes is shown with ImageNet-1k's names: an assumption,
 * said on stderr and in the JSON. */
static int labels_assumed(const classify_opts *o, const classify_run *r)
{
    return !o->labels_path && r->classes == 1000;
}

int classify_begin(const classify_opts *o, pgd_preprocess preset, int side_h, int side_w,
                   int classes, classify_run *r)
{
    memset(r, 0, sizeof *r);
    r->classes = classes;
    pgd_error *err = NULL;
    int rc = claim_outputs(o, r);
    if (rc)
        return rc;
    if (o->labels_path && app_labels_load(o->labels_path, &r->labels))
        return EXIT_RUNTIME;
    if (r->labels.names && r->labels.count < classes) {
        char shown[1024];
        fprintf(stderr, "pagoda: error: %s has %d labels but the model has %d classes\n",
                app_term_text(o->labels_path, shown, sizeof shown), r->labels.count, classes);
        return EXIT_RUNTIME;
    }
    if (labels_assumed(o, r)) {
        fprintf(stderr, "pagoda: note: labels not given: assumed ImageNet-1k's class names for "
                        "the 1000 classes (--labels FILE)\n");
    }
    if (read_input(o, preset, side_h, side_w, r, &err) || check_input(o, r, &err))
        return app_fail(err);
    rc = app_ctx_open(o->device, &r->ctx);
    if (rc)
        return rc;
    if (o->profile)
        pgd_ctx_set_profiling(r->ctx, 1);
    return EXIT_OK;
}

/* ---- the output set: every file of a run appears at its end, together, or none does ---- */

int classify_output_open(classify_run *r, const char *option, const char *path, const char *note,
                         pgd_outfile **f)
{
    return outset_open(&r->outputs, option, path, note, f);
}

/* Finishes the file the last classify_output_open gave (its descriptor is released; the
 * temporary file waits for classify_finish), or reports `err` from writing it. */
static int output_staged(classify_run *r, pgd_outfile *f, int write_rc, pgd_error *err)
{
    return outset_staged(&r->outputs, f, write_rc, err);
}

int classify_prepare(const classify_opts *o, classify_run *r)
{
    pgd_error *err = NULL;
    pgd_outfile *f = NULL;
    if (o->save_input) {
        int rc = classify_output_open(r, "--save-input", o->save_input, NULL, &f);
        if (rc)
            return rc;
        rc = output_staged(r, f, pgd_npy_write_to(f, r->x, 4, r->shape, &err), err);
        if (rc)
            return rc;
    }
    r->logits = malloc((size_t)r->B * (size_t)r->classes * sizeof *r->logits);
    if (!r->logits) {
        fprintf(stderr, "pagoda: error: out of host memory for %d x %d logits\n", r->B, r->classes);
        return EXIT_RUNTIME;
    }
    return EXIT_OK;
}

int classify_check_logits(const classify_opts *o, classify_run *r, classify_diagnose_fn diagnose,
                          void *model)
{
    int64_t bad =
        o->allow_nonfinite ? -1 : model_first_nonfinite(r->logits, (int64_t)r->B * r->classes);
    if (bad < 0)
        return EXIT_OK;
    int b = (int)(bad / r->classes), k = (int)(bad % r->classes);
    /* Only now is any stage checked: the image again, alone, with every stage's output looked at.
     */
    model_probe p;
    pgd_error *err = NULL;
    size_t per = (size_t)3 * (size_t)r->H * (size_t)r->W;
    if (diagnose(model, r->x + (size_t)b * per, r->H, r->W, &p, &err))
        return app_fail(err);
    fprintf(stderr,
            "pagoda: error: %s: the logits are not finite (%g for class %d of image %d); "
            "non-finite values first appear after %s (--allow-nonfinite prints them anyway)\n",
            source_of(o, b), isnan(r->logits[bad]) ? (double)NAN : (double)r->logits[bad], k, b,
            p.stage[0] ? p.stage : "no stage when the image is run alone (a batching effect?)");
    return EXIT_RUNTIME;
}

int classify_after_forward(const classify_opts *o, classify_run *r, int split)
{
    if (split < r->B)
        fprintf(stderr,
                "pagoda: note: the batch of %d images ran as passes of at most %d (%s%s%s)\n", r->B,
                split, app_max_batch(r->ctx) ? "$PAGODA_MAX_BATCH, or " : "",
                "what fits in the memory of ", pgd_ctx_get_device(r->ctx)->name);
    if (o->save_logits) {
        pgd_error *err = NULL;
        pgd_outfile *f = NULL;
        int64_t ls[2] = {r->B, r->classes};
        int rc = classify_output_open(r, "--save-logits", o->save_logits, NULL, &f);
        if (!rc)
            rc = output_staged(r, f, pgd_npy_write_to(f, r->logits, 2, ls, &err), err);
        if (rc)
            return rc;
    }
    return EXIT_OK;
}

int classify_draw_maps(const classify_opts *o, classify_run *r, const char *png, const char *tag,
                       const float *maps, int mw, int mh, pgd_preprocess preset, const char *what)
{
    for (int b = 0; b < r->B; b++) {
        /* OUT<tag>.png; with several images OUT<tag>-1.png, ... */
        char *path = app_numbered_path(png, tag, b, r->B);
        if (!path) {
            fprintf(stderr, "pagoda: error: out of host memory\n");
            return EXIT_RUNTIME;
        }
        double view[4];
        pgd_error *err = NULL;
        pgd_outfile *f = NULL;
        pgd_image_preprocess_view(r->loaded[b], preset, view);
        size_t nlen = strlen(what) + strlen(o->images[b]) + 8;
        char *note = malloc(nlen);
        int rc = EXIT_RUNTIME;
        if (note) {
            snprintf(note, nlen, "%s of %s", what, o->images[b]);
            rc = classify_output_open(r, o->map_option ? o->map_option : "map", path, note, &f);
        } else {
            fprintf(stderr, "pagoda: error: out of host memory\n");
        }
        if (!rc)
            rc = output_staged(r, f,
                               map_write_png_view_to(f, r->loaded[b], maps + (size_t)b * mw * mh,
                                                     mw, mh, view, &err),
                               err);
        free(note);
        free(path);
        if (rc)
            return rc;
    }
    return EXIT_OK;
}

json_t *classify_report(const classify_opts *o, classify_run *r)
{
    return app_report_topk(r->logits, r->B, r->classes, o->topk, &r->labels,
                           o->nimages ? o->images : NULL,
                           o->input  ? o->input
                           : o->json ? "synthetic"
                                     : "synthetic image",
                           o->json);
}

int classify_emit(const classify_opts *o, classify_run *r, const char *weights, json_t *model,
                  const classify_stage *stages, const double *t, int n)
{
    const pgd_device_info *d = pgd_ctx_get_device(r->ctx);
    json_t *results = classify_report(o, r);
    if (!o->json) {
        json_decref(model);
        printf("%d image(s) %dx%d on %s:", r->B, r->H, r->W, d->name);
        for (int i = 0; i < n; i++)
            printf("%s %s %.1f ms", i ? "," : "", stages[i].label, t[i]);
        printf("\n");
        return EXIT_OK;
    }
    if (model && labels_assumed(o, r)) {
        json_t *as = json_object_get(model, "assumed");
        if (!json_is_object(as))
            json_object_set_new(model, "assumed", as = json_object());
        json_object_set_new(as, "labels", json_string("imagenet-1k"));
    }
    json_t *times = json_object();
    for (int i = 0; times && i < n; i++)
        json_object_set_new(times, stages[i].key, json_real(t[i]));
    json_t *doc = json_pack(
        "{s:o, s:o, s:o, s:o, s:o}", "weights", app_json_text(weights ? weights : "random"),
        "device", app_device_json(d), "model", model, "results", results, "times_ms", times);
    return app_print_json(doc);
}

int classify_finish(const classify_opts *o, classify_run *r)
{
    pgd_error *err = NULL;
    if (o->profile && pgd_profile_print(r->ctx, stdout, &err))
        return app_fail(err);
    return outset_commit(&r->outputs, o->json);
}

void classify_free(classify_run *r)
{
    outset_free(&r->outputs); /* a run that did not reach classify_finish leaves no output */
    for (int i = 0; r->loaded && i < r->B; i++)
        pgd_image_destroy(r->loaded[i]);
    free(r->loaded);
    if (r->x_npy)
        pgd_free(r->x);
    else
        free(r->x);
    free(r->logits);
    app_labels_free(&r->labels);
    pgd_ctx_destroy(r->ctx);
    memset(r, 0, sizeof *r);
}
