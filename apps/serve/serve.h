/* serve.h — `pagoda serve`, a local web page over the model families. Three layers, so that
 * everything a request can reach is testable without a socket:
 *   serve_http.c    the pure request handler: (method, path, arguments, body) -> (status,
 *                   content type, body); routing, the embedded page, the JSON API, every error,
 *                   the image decode and its limits. The fuzz target (tests/fuzz/fuzz_serve.c)
 *                   drives it directly with a stub runner.
 *   serve_run.c     the runner: preprocessing and the models' forward passes (classify, ViT
 *                   maps, ResNet-NL affinity, DETR boxes) into JSON, one run at a time;
 *   serve_dino.c    DINO's head maps and the nearest images of the gallery (--gallery).
 *   serve_models.c  the configured models (--models: hf:ORG/NAME, .safetensors or .onnx files,
 *                   random:NAME), looked up by name, never by a path from a request.
 *   serve_daemon.c  libmicrohttpd: the sockets, the per-IP rate limit, the connection limits
 *                   and time-outs, the upload limit while the body arrives.
 *   serve_cmd.c     the command: options, help, start, Ctrl-C / SIGTERM.
 * Static files (apps/serve/static) are embedded by cl/embed.c at build time (serve_assets.h). */
#ifndef PAGODA_SERVE_H
#define PAGODA_SERVE_H

#include <jansson.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "pagoda.h"
#include "pagoda_models.h"

/* The limits, each an option of `pagoda serve` (serve_cmd.c gives the defaults). */
typedef struct serve_limits {
    size_t max_upload;        /* --max-upload: request body bytes */
    int64_t max_pixels;       /* --max-pixels: width x height of a decoded image */
    unsigned max_connections; /* --max-connections: open connections in all */
    unsigned per_ip;          /* --per-ip: open connections of one address */
    unsigned timeout_s;       /* --timeout: idle seconds before a connection is closed, and the
                                 whole time a request may take to arrive */
    double rate;              /* --rate: model runs per second per address (token bucket) */
    unsigned burst;           /* --burst: runs one address may make at once before --rate */
    unsigned queue;           /* --queue: runs waiting for the device before 503 */
} serve_limits;

/* One query argument, decoded. */
typedef struct serve_arg {
    const char *key, *value;
} serve_arg;
enum { SERVE_MAX_ARGS = 16 };

typedef struct serve_request {
    const char *method; /* "GET", "POST", ... */
    const char *path;   /* without the query */
    const serve_arg *args;
    int nargs; /* more than SERVE_MAX_ARGS is refused */
    const uint8_t *body;
    size_t body_size;
    int body_too_large; /* the body passed max_upload while it arrived (413) */
} serve_request;

typedef struct serve_response {
    int status;
    const char *content_type;
    char *body; /* malloc'd when owned, else static */
    size_t size;
    int owned;
    const char *allow;    /* the Allow header of a 405, else NULL */
    unsigned retry_after; /* seconds, for 429 and 503; 0: none */
} serve_response;

/* What a model can do, as the page offers it. */
enum {
    SERVE_CLASSIFY = 1, /* top-5 classes (every classifier) */
    SERVE_MAPS = 2,     /* ViT: last block's attention and rollout */
    SERVE_AFFINITY = 4, /* ResNet with a non-local block: one query's affinity */
    SERVE_DETECT = 8,   /* DETR: boxes and each object's cross-attention */
    SERVE_HEADS = 16,   /* a self-supervised ViT (DINO): each head's attention, last block */
    SERVE_NEAREST = 32, /* the same: the nearest images of the gallery (--gallery) */
};
enum { SERVE_NTASKS = 6 };

/* One image of the gallery, read once at start and served from memory by name. */
typedef struct serve_gallery_item {
    char name[128]; /* the file's name in the folder */
    void *data;
    size_t size;
    const char *type; /* image/jpeg, ... */
} serve_gallery_item;

/* One configured model. */
typedef struct serve_model {
    char name[160];  /* what requests and the page name it by */
    char family[16]; /* "vit", "resnet", "swin", "mixer", "onnx", "detr" */
    char description[256];
    int tasks;  /* SERVE_* */
    int random; /* seeded random weights (the page says how to get real ones) */
    int classes;
    void *handle[4]; /* the runner's, one per device (serve_weights) */
} serve_model;

/* A job for the runner: one decoded image through one model. */
typedef struct serve_job {
    serve_model *model;
    int task;         /* one SERVE_* */
    double qx, qy;    /* SERVE_AFFINITY: the query in [0, 1) of the model's input */
    double threshold; /* SERVE_DETECT: the score a detection must exceed (default 0.7) */
    int device;       /* which of the app's devices (0 .. ndevices - 1) */
    const pgd_image *img;
} serve_job;

/* The runner. run fills *out (a JSON object: the task's results and "timings" with
 * "preprocess" and "forward" in ms) or returns an HTTP status (>= 400) with a message in
 * msg[size]. */
typedef struct serve_runner {
    void *u;
    int (*run)(void *u, const serve_job *job, json_t **out, char *msg, size_t size);
} serve_runner;

typedef struct serve_app {
    serve_limits limits;
    serve_model *models;
    int nmodels;
    char device[4][300]; /* the devices' names (--device SEL[,SEL...]), for the page */
    int ndevices;
    serve_gallery_item *gallery; /* --gallery's images, sorted by name */
    int ngallery;
    serve_runner runner;
    pthread_mutex_t lock; /* the runs waiting and the one running */
    unsigned waiting;     /* runs queued or running (limits.queue) */
} serve_app;

/* The pure handler: fills *res (serve_response_free releases it). Never fails: every error is
 * a response (JSON under /api/, an HTML page elsewhere). */
void serve_handle(serve_app *app, const serve_request *req, serve_response *res);
void serve_response_free(serve_response *res);
/* An error response: status, message (formatted), JSON when `json`, else an HTML page. */
void serve_error(serve_response *res, int json, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The default limits. */
void serve_limits_default(serve_limits *l);

/* The page's and --help's hint when a model has random weights: one command. */
#define SERVE_REAL_WEIGHTS                                                                         \
    "pagoda serve --models hf:timm/vit_base_patch16_224.augreg2_in21k_ft_in1k,"                    \
    "hf:facebook/detr-resnet-50,hf:timm/vit_small_patch16_224.dino (each pulled from the "         \
    "Hugging Face hub on first use; 'pagoda pull --list' shows more)"

/* What serve_models.c loaded for one model on one device and serve_run.c runs
 * (serve_model.handle[device]). */
struct detr_model;
typedef struct serve_weights {
    pgd_model *pm;           /* a classifier (pgd_model_*), or NULL */
    struct detr_model *detr; /* a DETR, or NULL */
    void *detr_src;          /* its model_source (kept while it lives) */
    void *detr_file;         /* its pgd_weights file, or NULL (random) */
    void *dino;              /* a self-supervised ViT (serve_dino.c), or NULL */
    int detr_side;           /* DETR: the shorter side images are resized to */
} serve_weights;

/* ---- serve_dino.c ---- */
/* Whether the file at path is a ViT without a classifier (DINO, DINOv2). */
int serve_dino_is(const char *path);
/* Loads one (path NULL: seeded random weights of DINO ViT-S/16's shape) into w->dino and
 * embeds the gallery; describes it in m. */
int serve_dino_open(serve_weights *w, const serve_app *app, pgd_ctx *ctx, const char *path,
                    serve_model *m, pgd_error **err);
void serve_dino_free(void *dino);
/* SERVE_HEADS or SERVE_NEAREST into doc; 0 or an HTTP status with msg set. */
int serve_dino_run(serve_weights *w, const serve_app *app, const serve_job *job, json_t *doc,
                   char *msg, size_t size);
/* Reads the images of dir (.jpg, .jpeg, .png, .webp, .bmp; at most 256, each at most
 * --max-upload) into app->gallery. EXIT_OK or the exit status with the error printed. */
int serve_gallery_load(serve_app *app, const char *dir);
void serve_gallery_free(serve_app *app);

/* ---- serve_models.c ---- */
enum { SERVE_MAX_DEVICES = 4 };
/* Loads the models of `list` (comma-separated; NULL: the seeded random defaults) on each of the
 * app->ndevices contexts into app->models. Prints errors; EXIT_OK or the exit status. */
int serve_models_load(serve_app *app, pgd_ctx *const *ctx, const char *list, int detr_side);
void serve_models_free(serve_app *app);
serve_model *serve_model_find(serve_app *app, const char *name);

/* ---- serve_run.c ---- */
/* The runner over the models of serve_models_load (u: the serve_app). */
int serve_run_job(void *u, const serve_job *job, json_t **out, char *msg, size_t size);
/* A map of w x h floats as {"w", "h", "data": [0..255]}, min-max scaled. */
json_t *serve_map_json(const float *map, int w, int h);

/* ---- serve_daemon.c ---- */
/* Serves app on bind_addr:port until SIGINT or SIGTERM. Prints the URL on stdout. EXIT_OK or
 * the exit status. */
int serve_daemon_run(serve_app *app, const char *bind_addr, int port);

#endif
