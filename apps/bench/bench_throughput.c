/* bench_throughput.c — `pagoda bench throughput:MODEL,B`: images per second of the streaming
 * classify path (apps/common/stream.c) over a stream of real JPEG decodes: the demo's sample image
 * (Chelsea, 451 x 300) decoded and preprocessed afresh for every image on the decoding threads
 * (one per core) while the device runs batches of B. Compared with the model item MODEL:B (the
 * same forward on a ready batch), it says how much of the decoder the pipeline hides. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "bench.h"
#include "family.h"
#include "stream.h"

/* The models, by their pgd_model_random names (seeded random weights): ViT sizes (timm
 * preset) and ResNet-50 (torchvision preset). */
static const struct {
    const char *name;
    const model_family *family;
    pgd_preprocess preset;
} models[] = {{"vit_ti16", &family_vit, PGD_PREPROCESS_TIMM},
              {"vit_s16", &family_vit, PGD_PREPROCESS_TIMM},
              {"vit_b16", &family_vit, PGD_PREPROCESS_TIMM},
              {"resnet50", &family_resnet, PGD_PREPROCESS_TORCHVISION}};

/* "throughput:MODEL,B" into the model's row and B; -1 when it does not parse. */
static int parse(const char *spec, int *model, int *batch)
{
    const char *p = spec + strlen("throughput");
    if (*p++ != ':')
        return -1;
    const char *comma = strchr(p, ',');
    for (size_t i = 0; comma && i < sizeof models / sizeof *models; i++) {
        int64_t b;
        if (strlen(models[i].name) == (size_t)(comma - p) &&
            !strncmp(p, models[i].name, (size_t)(comma - p)) &&
            !pgd_parse_int64(comma + 1, 1, 256, &b)) {
            *model = (int)i;
            *batch = (int)b;
            return 0;
        }
    }
    return -1;
}

static int validate(const char *spec)
{
    int m, b;
    return parse(spec, &m, &b);
}

static int run(pgd_ctx *ctx, const char *spec, const bench_opts *o, bench_result *res, int *nres,
               int cap, pgd_error **err)
{
    int row = 0, batch = 1;
    (void)cap;
    if (parse(spec, &row, &batch))
        return EXIT_USAGE;
    char image[4096];
    if (app_sample_image(image, sizeof image) != 1)
        return pgd_error_set(err, PGD_ERR_IO,
                             "throughput: the sample image (chelsea.jpg) is not "
                             "found: set PAGODA_SAMPLE_IMAGE");
    const model_family *fam = models[row].family;
    model_source src = {0};
    void *cfg = calloc(1, fam->cfg_size);
    int rc = cfg ? fam->random(models[row].name, cfg, &src, err)
                 : pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "throughput");
    if (rc) {
        model_source_free(&src);
        free(cfg);
        return rc;
    }
    /* A stream of 8 batches (at least 32 images), on this context's device. */
    int n = batch * 8 < 32 ? 32 : batch * 8;
    char **paths = malloc((size_t)n * sizeof *paths);
    if (!paths) {
        model_source_free(&src);
        free(cfg);
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "throughput");
    }
    for (int i = 0; i < n; i++)
        paths[i] = image;
    const pgd_device_info *d = pgd_ctx_get_device(ctx);
    char sel[32];
    snprintf(sel, sizeof sel, "%d:%d", d->platform_index, d->device_index);
    classify_opts co;
    classify_opts_init(&co, "bench ");
    co.device = sel, co.images = paths, co.nimages = n, co.batch = batch, co.quiet = 1;
    stream_model m = {fam, cfg, &src, {PGD_ATTENTION_SOFT, 0, 0}, NULL, NULL, ""};
    pgd_preprocess preset = models[row].preset;
    int reps = o->repeat < 0 ? 3 : o->repeat < 1 ? 1 : o->repeat;
    int warm = o->warmup < 0 ? 1 : o->warmup;
    double *ms = calloc((size_t)reps, sizeof *ms), busy = 0;
    if (!ms)
        rc = pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "throughput");
    for (int r = -warm; !rc && r < reps; r++) {
        bench_progress("%s: stream %d of %d", spec, r + warm + 1, reps + warm);
        classify_stream_stats st;
        if (classify_stream_timed(&co, preset, 1000, &m, &st) || st.images != n) {
            rc =
                pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT, "%s: the stream failed (above)", spec);
            break;
        }
        if (r >= 0) {
            ms[r] = 1000.0 * st.seconds * batch / (double)n; /* per batch */
            busy += st.busy_s / st.seconds / reps;
        }
    }
    if (!rc) {
        bench_result *b = &res[0];
        memset(b, 0, sizeof *b);
        snprintf(b->name, sizeof b->name, "throughput:%s,%d", models[row].name, batch);
        bench_stats(ms, reps, &b->median_ms, &b->p90_ms, &b->min_ms);
        b->repeat = reps, b->warmup = warm;
        snprintf(b->extra_key, sizeof b->extra_key, "images_per_s");
        b->extra = b->median_ms > 0 ? 1000.0 * batch / b->median_ms : 0;
        snprintf(b->params, sizeof b->params,
                 "{\"model\":\"%s\",\"batch\":%d,\"images\":%d,\"device_busy\":%.3f}",
                 models[row].name, batch, n, busy);
        *nres = 1;
    }
    free(ms);
    free(paths);
    model_source_free(&src);
    free(cfg);
    return rc;
}

const bench_item bench_item_throughput = {
    "throughput", "throughput:MODEL,B",
    "images/s streaming real JPEG decodes (decoding threads + device), batch B; MODEL vit_ti16, "
    "vit_s16, vit_b16 or resnet50. Time per batch; compare with MODEL:B",
    validate, run};
