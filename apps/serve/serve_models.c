/* serve_models.c — the models `pagoda serve` offers (--models): hf:ORG/NAME (from the hub
 * cache, pulled on first use as --weights hf: is), a .safetensors or .onnx file (a DETR
 * checkpoint is recognised by its names, any other goes through the family table's one rule,
 * pgd_model_load; a ViT without a classifier is a DINO, serve_dino.c), or random:NAME (seeded
 * random weights: pgd_model_random's names, random:detr or random:dino). Each is named on the page
 * and in requests by its entry as given (a file by its base name): a request names a model, never a
 * path. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "commands.h"
#include "detr.h"
#include "serve.h"

/* Without --models: seeded random weights of the four families the page shows best. */
static const char default_models[] = "random:vit_ti16,random:resnet50-nl,random:detr,random:dino";

static int detr_open(serve_weights *w, pgd_ctx *ctx, const char *path, serve_model *m,
                     pgd_error **err)
{
    model_source *src = calloc(1, sizeof *src);
    detr_config cfg;
    if (!src)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "pagoda serve: DETR");
    w->detr_src = src;
    int rc;
    if (path) {
        pgd_weights *f = NULL;
        if ((rc = pgd_weights_open(path, &f, err)))
            return rc;
        w->detr_file = f;
        model_weights_source(src, f, path);
    } else if ((rc = detr_random_source(src, 50, 1, err))) {
        return rc;
    }
    if ((rc = detr_detect(src, NULL, &cfg, err)) || (rc = detr_load(ctx, src, &cfg, &w->detr, err)))
        return rc;
    snprintf(m->family, sizeof m->family, "detr");
    snprintf(m->description, sizeof m->description,
             "DETR (ResNet-%d backbone), %lld queries, "
             "%lld classes",
             cfg.backbone.depth, (long long)cfg.queries, (long long)cfg.classes - 1);
    m->tasks = SERVE_DETECT;
    m->classes = (int)cfg.classes - 1;
    return PGD_OK;
}

/* Whether the file at path is a DETR checkpoint (its names say so). */
static int is_detr(const char *path)
{
    model_source src;
    detr_config cfg;
    if (model_source_open(&src, path, NULL))
        return 0;
    int yes = detr_detect(&src, NULL, &cfg, NULL) == PGD_OK;
    model_source_free(&src);
    return yes;
}

static void describe(serve_model *m, const pgd_model *pm)
{
    pgd_model_info info;
    pgd_model_get_info(pm, &info);
    snprintf(m->family, sizeof m->family, "%s", info.family_name);
    snprintf(m->description, sizeof m->description, "%s", info.description);
    m->classes = info.classes;
    m->tasks = info.headless ? 0 : SERVE_CLASSIFY;
    m->tasks |= info.has_attention_maps ? SERVE_MAPS : 0;
    m->tasks |= info.has_affinity ? SERVE_AFFINITY : 0;
}

/* One entry of --models into m (its weights in w). */
static int load_one(serve_app *app, serve_model *m, serve_weights *w, pgd_ctx *ctx,
                    const char *entry, pgd_error **err)
{
    char *resolved = NULL;
    const char *path = entry;
    int rc = PGD_OK;
    if (!strncmp(entry, "random:", 7)) {
        m->random = 1;
        if (!strcmp(entry + 7, "detr"))
            return detr_open(w, ctx, NULL, m, err);
        if (!strcmp(entry + 7, "dino"))
            return serve_dino_open(w, app, ctx, NULL, m, err);
        if ((rc = pgd_model_random(ctx, entry + 7, &w->pm, err)))
            return rc;
        describe(m, w->pm);
        return PGD_OK;
    }
    if (!strncmp(entry, "hf:", 3)) {
        if (pull_resolve_spec(entry + 3, &resolved))
            return pgd_error_set(err, PGD_ERR_NOT_FOUND, "--models: %s could not be had", entry);
        path = resolved;
    }
    if (is_detr(path))
        rc = detr_open(w, ctx, path, m, err);
    else if (serve_dino_is(path))
        rc = serve_dino_open(w, app, ctx, path, m, err);
    else if (!(rc = pgd_model_load(ctx, path, NULL, &w->pm, err)))
        describe(m, w->pm);
    pgd_free(resolved);
    return rc;
}

/* The entry's name on the page: a file by its base name, the rest as given. */
static void entry_name(const char *entry, char *name, size_t size)
{
    const char *slash = strrchr(entry, '/');
    int file = strncmp(entry, "hf:", 3) && strncmp(entry, "random:", 7);
    snprintf(name, size, "%s", file && slash ? slash + 1 : entry);
}

static int add_model(serve_app *app, pgd_ctx *const *ctx, const char *entry, int detr_side)
{
    char name[160];
    entry_name(entry, name, sizeof name);
    if (!*name || serve_model_find(app, name))
        return app_usage_error("serve ", "--models: '%s' is %s", entry,
                               *name ? "given twice (or two files of the same name)"
                                     : "not a model");
    serve_model *m = &app->models[app->nmodels++];
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "%s", name);
    for (int d = 0; d < app->ndevices; d++) { /* the same model on each device */
        serve_weights *w = calloc(1, sizeof *w);
        if (!w)
            return app_usage_error("serve ", "out of memory");
        m->handle[d] = w;
        w->detr_side = detr_side;
        fprintf(stderr, "pagoda: serve: loading %s on %s\n", entry, app->device[d]);
        pgd_error *err = NULL;
        if (load_one(app, m, w, ctx[d], entry, &err))
            return app_fail_in(entry, err);
    }
    if (!m->tasks)
        return app_usage_error("serve ",
                               "--models: %s has no classifier: give a DINO as its "
                               "file or as random:dino",
                               entry);
    return EXIT_OK;
}

int serve_models_load(serve_app *app, pgd_ctx *const *ctx, const char *list, int detr_side)
{
    char *copy = strdup(list && *list ? list : default_models);
    size_t n = 1;
    for (const char *p = copy; p && *p; p++)
        n += *p == ',';
    app->models = calloc(n, sizeof *app->models);
    if (!copy || !app->models) {
        free(copy);
        return app_usage_error("serve ", "out of memory");
    }
    int rc = EXIT_OK;
    char *save = NULL;
    for (char *e = strtok_r(copy, ",", &save); e && !rc; e = strtok_r(NULL, ",", &save))
        rc = add_model(app, ctx, e, detr_side);
    if (!rc && !app->nmodels)
        rc = app_usage_error("serve ", "--models lists no model");
    free(copy);
    return rc;
}

void serve_models_free(serve_app *app)
{
    for (int i = 0; i < app->nmodels * SERVE_MAX_DEVICES; i++) {
        serve_weights *w = app->models[i / SERVE_MAX_DEVICES].handle[i % SERVE_MAX_DEVICES];
        if (!w)
            continue;
        pgd_model_destroy(w->pm);
        detr_free(w->detr);
        model_source_free(w->detr_src);
        free(w->detr_src);
        pgd_weights_destroy(w->detr_file);
        serve_dino_free(w->dino);
        free(w);
    }
    free(app->models);
    app->models = NULL;
    app->nmodels = 0;
}
