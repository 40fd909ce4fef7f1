/* serve_dino.c — the self-supervised ViTs of `pagoda serve` (DINO, DINOv2: a ViT without a
 * classifier): every head's class-token attention in the last block (the DINO figure), and the
 * nearest images of the gallery (--gallery DIR: its images read once at start, embedded by each
 * such model, then served from memory by name: a request never names a path). */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "serve.h"
#include "vit.h"

enum { SIDE = PGD_PREPROCESS_SIZE, GALLERY_MAX = 256, NEAREST = 5 };

typedef struct serve_dino {
    vit_model *m;
    model_source src;
    vit_config cfg;
    float *feats; /* [gallery, dim], unit length */
} serve_dino;

int serve_dino_is(const char *path)
{
    model_source src;
    vit_config cfg;
    if (model_source_open(&src, path, NULL))
        return 0;
    int yes = !vit_source_adapt(&src, NULL) && !vit_detect(&src, 0, &cfg, NULL) && cfg.headless;
    model_source_free(&src);
    return yes;
}

/* The features of one image into f [dim], scaled to unit length; its last block's head maps
 * into maps [heads, grid, grid] when maps is not NULL. */
static int features(serve_dino *d, const pgd_image *img, float *f, float *maps, pgd_error **err)
{
    float *x = malloc(sizeof *x * 3 * SIDE * SIDE);
    if (!x)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "an image's input");
    int rc = pgd_image_preprocess(img, PGD_PREPROCESS_TORCHVISION, x, err);
    vit_set_head_maps(d->m, maps);
    if (!rc)
        rc = vit_forward(d->m, x, 1, SIDE, SIDE, f, NULL, NULL, NULL, err);
    vit_set_head_maps(d->m, NULL);
    free(x);
    double s = 0;
    for (int i = 0; !rc && i < d->cfg.dim; i++)
        s += (double)f[i] * f[i];
    for (int i = 0; !rc && i < d->cfg.dim; i++)
        f[i] = s > 0 ? (float)(f[i] / sqrt(s)) : 0.0f;
    if (!rc && !(s > 0 && isfinite(s)))
        rc = pgd_error_set(err, PGD_ERR_INTERNAL, "the features are zero or not finite");
    return rc;
}

/* Every gallery image's features by this model. */
static int embed_gallery(serve_dino *d, const serve_app *app, pgd_error **err)
{
    if (!app->ngallery)
        return PGD_OK;
    d->feats = calloc((size_t)app->ngallery * d->cfg.dim, sizeof *d->feats);
    if (!d->feats)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "the gallery's features");
    for (int i = 0; i < app->ngallery; i++) {
        const serve_gallery_item *g = &app->gallery[i];
        pgd_image *img = NULL;
        int rc = pgd_image_load_memory(g->data, g->size, g->name, &img, err);
        if (!rc)
            rc = features(d, img, d->feats + (size_t)i * d->cfg.dim, NULL, err);
        pgd_image_destroy(img);
        if (rc)
            return rc;
    }
    return PGD_OK;
}

int serve_dino_open(serve_weights *w, const serve_app *app, pgd_ctx *ctx, const char *path,
                    serve_model *m, pgd_error **err)
{
    serve_dino *d = calloc(1, sizeof *d);
    if (!d)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "a DINO model");
    w->dino = d;
    int rc;
    if (path) {
        if ((rc = model_source_open(&d->src, path, err)) || (rc = vit_source_adapt(&d->src, err)) ||
            (rc = vit_detect(&d->src, 0, &d->cfg, err)))
            return rc;
    } else { /* DINO ViT-S/16's shape, as `pagoda embed --random s` */
        vit_named_config("s", &d->cfg);
        d->cfg.headless = 1;
        d->cfg.classes = d->cfg.dim;
        if ((rc = vit_random_source(&d->src, &d->cfg, 1, err)))
            return rc;
    }
    if ((rc = vit_load(ctx, &d->src, &d->cfg, &d->m, err)) || (rc = embed_gallery(d, app, err)))
        return rc;
    snprintf(m->family, sizeof m->family, "dino");
    snprintf(m->description, sizeof m->description,
             "self-supervised ViT (no classifier): width %d, depth %d, %d heads, patch %d",
             d->cfg.dim, d->cfg.depth, d->cfg.heads, d->cfg.patch);
    m->tasks = SERVE_HEADS | (app->ngallery ? SERVE_NEAREST : 0);
    return PGD_OK;
}

void serve_dino_free(void *p)
{
    serve_dino *d = p;
    if (!d)
        return;
    vit_free(d->m);
    model_source_free(&d->src);
    free(d->feats);
    free(d);
}

static json_t *nearest_json(const serve_dino *d, const serve_app *app, const float *f)
{
    int best[NEAREST], n = app->ngallery < NEAREST ? app->ngallery : NEAREST;
    float score[NEAREST];
    for (int k = 0; k < n; k++) {
        best[k] = -1;
        for (int i = 0; i < app->ngallery; i++) {
            float s = 0;
            for (int j = 0; j < d->cfg.dim; j++)
                s += f[j] * d->feats[(size_t)i * d->cfg.dim + j];
            int used = 0;
            for (int q = 0; q < k; q++)
                used |= best[q] == i;
            if (!used && (best[k] < 0 || s > score[k]))
                best[k] = i, score[k] = s;
        }
    }
    json_t *list = json_array();
    for (int k = 0; k < n; k++)
        json_array_append_new(list, json_pack("{s:s,s:f}", "name", app->gallery[best[k]].name,
                                              "similarity", score[k]));
    return list;
}

int serve_dino_run(serve_weights *w, const serve_app *app, const serve_job *job, json_t *doc,
                   char *msg, size_t size)
{
    serve_dino *d = w->dino;
    int g = SIDE / d->cfg.patch, heads = d->cfg.heads;
    float *f = malloc(sizeof *f * d->cfg.dim), *maps = malloc(sizeof *maps * heads * g * g);
    pgd_error *err = NULL;
    double rect[4], t0 = model_now_ms();
    int rc = f && maps ? features(d, job->img, f, job->task == SERVE_HEADS ? maps : NULL, &err)
                       : pgd_error_set(&err, PGD_ERR_OUT_OF_HOST_MEMORY, "features");
    double t1 = model_now_ms();
    pgd_image_preprocess_view(job->img, PGD_PREPROCESS_TORCHVISION, rect);
    if (!rc && job->task == SERVE_HEADS) {
        json_t *list = json_array();
        for (int h = 0; h < heads; h++)
            json_array_append_new(list, serve_map_json(maps + (size_t)h * g * g, g, g));
        json_object_set_new(doc, "heads", list);
    } else if (!rc) {
        json_object_set_new(doc, "nearest", nearest_json(d, app, f));
    }
    if (!rc) {
        json_object_set_new(doc, "view",
                            json_pack("[f,f,f,f]", rect[0], rect[1], rect[2], rect[3]));
        /* one pass: the preprocessing is inside it */
        json_object_set_new(doc, "timings",
                            json_pack("{s:f,s:f}", "preprocess", 0.0, "forward", t1 - t0));
    } else {
        snprintf(msg, size, "%s", err ? pgd_error_get_message(err) : "out of memory");
        pgd_error_destroy(err);
    }
    free(f);
    free(maps);
    return rc ? (rc == PGD_ERR_OUT_OF_HOST_MEMORY ? 503 : 500) : 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const serve_gallery_item *)a)->name, ((const serve_gallery_item *)b)->name);
}

static const char *image_type(const char *name)
{
    static const char *const types[][2] = {{".jpg", "image/jpeg"},
                                           {".jpeg", "image/jpeg"},
                                           {".png", "image/png"},
                                           {".webp", "image/webp"},
                                           {".bmp", "image/bmp"}};
    const char *dot = strrchr(name, '.');
    for (size_t i = 0; dot && i < sizeof types / sizeof types[0]; i++)
        if (!strcasecmp(dot, types[i][0]))
            return types[i][1];
    return NULL;
}

int serve_gallery_load(serve_app *app, const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) {
        perror("pagoda: error: serve: --gallery");
        return EXIT_USAGE;
    }
    app->gallery = calloc(GALLERY_MAX, sizeof *app->gallery);
    struct dirent *e;
    int rc = app->gallery ? EXIT_OK : EXIT_RUNTIME;
    while (!rc && (e = readdir(d)) && app->ngallery < GALLERY_MAX) {
        const char *type = image_type(e->d_name);
        if (!type || e->d_name[0] == '.' || strlen(e->d_name) >= sizeof app->gallery->name)
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        serve_gallery_item *g = &app->gallery[app->ngallery];
        pgd_error *err = NULL;
        void *data = NULL;
        size_t n = 0;
        if (pgd_file_read(path, app->limits.max_upload, &data, &n, &err)) {
            rc = app_fail_in("--gallery", err);
            break;
        }
        snprintf(g->name, sizeof g->name, "%s", e->d_name);
        g->data = data, g->size = n, g->type = type;
        app->ngallery++;
    }
    closedir(d);
    if (!rc && !app->ngallery)
        rc =
            app_usage_error("serve ", "--gallery %s holds no .jpg, .png, .webp or .bmp image", dir);
    if (!rc)
        qsort(app->gallery, (size_t)app->ngallery, sizeof *app->gallery, by_name);
    return rc;
}

void serve_gallery_free(serve_app *app)
{
    for (int i = 0; i < app->ngallery; i++)
        pgd_free(app->gallery[i].data);
    free(app->gallery);
    app->gallery = NULL;
    app->ngallery = 0;
}
