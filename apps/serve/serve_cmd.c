/* serve_cmd.c — `pagoda serve`: the options, the models, the device, and the server until
 * Ctrl-C or SIGTERM (serve.h). */
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "commands.h"
#include "serve.h"

static const char usage[] =
    "usage: pagoda serve [--port P] [--bind ADDR] [--device SEL] [--models LIST]\n"
    "                    [--gallery DIR] [limits]\n"
    "\n"
    "A local web page over Pagoda's models: drop, paste or pick an image, choose a model, and\n"
    "see the top-5 classes, a ViT's attention map and rollout, a non-local ResNet's affinity\n"
    "of a clicked point, DETR's boxes with each object's cross-attention, a DINO's attention\n"
    "heads and the nearest images of a gallery folder, and the device and\n"
    "the time of each stage (decode, preprocess, forward). The page and its JSON API\n"
    "(docs/serve.md) are served from this program alone: no file is read but the models'.\n"
    "Prints the page's URL on stdout; Ctrl-C or SIGTERM stops it.\n"
    "\n"
    "Options:\n"
    "  --port P            TCP port (default 8080; 0: any free port, the URL says which)\n"
    "  --bind ADDR         numeric address to listen on (default 127.0.0.1: this machine\n"
    "                      only; 0.0.0.0 or :: opens it to the network)\n"
    "  --device SEL[,SEL]  device selector (see 'pagoda devices --help'); several (at most\n"
    "                      4): each model on each, the page runs them side by side\n"
    "  --models LIST       comma-separated models, each named on the page as given:\n"
    "                        hf:ORG/NAME    from the Hugging Face cache (pulled on first use)\n"
    "                        FILE           a .safetensors (ViT, ResNet, Swin, Mixer, DETR)\n"
    "                                       or .onnx classifier, named by its base name\n"
    "                        random:NAME    seeded random weights: vit_ti16, vit_s16, vit_b16,\n"
    "                                       resnet50, resnet50-nl, swin_t, mixer_s16, detr,\n"
    "                                       dino (DINO ViT-S/16's shape), ...\n"
    "                      default: random:vit_ti16,random:resnet50-nl,random:detr,\n"
    "                      random:dino (random weights: the classes mean nothing; the page\n"
    "                      says how to get real ones)\n"
    "  --gallery DIR       images (.jpg, .png, .webp, .bmp; at most 256) that each DINO\n"
    "                      model embeds at start: the page shows an upload's nearest ones;\n"
    "                      read once, then served from memory by name\n"
    "  --detr-side N       DETR: resize images' shorter side to N (default 800, as\n"
    "                      DetrImageProcessor; smaller is faster)\n"
    "\n"
    "Limits (a request past one gets a clear error with its HTTP status; the server goes on):\n"
    "  --max-upload BYTES  largest image upload (default 16777216)\n"
    "  --max-pixels N      largest decoded image, width x height (default 36000000)\n"
    "  --max-connections N open connections in all (default 64)\n"
    "  --per-ip N          open connections from one address (default 16)\n"
    "  --timeout S         seconds a connection may stay idle, and a request may take to\n"
    "                      arrive (default 20)\n"
    "  --rate R            model runs per second from one address (default 4)\n"
    "  --burst N           runs one address may make at once before --rate applies (16)\n"
    "  --queue N           runs waiting for the device before 503 Busy (default 8)\n"
    "  -h, --help          show this help\n"
    "\n"
    "Real weights in one command: " SERVE_REAL_WEIGHTS "\n";

typedef struct opts {
    int port, detr_side;
    const char *bind, *device, *models, *gallery;
    serve_limits limits;
} opts;

/* An integer option in [lo, hi]. */
static int number(const char *name, const char *arg, long long lo, long long hi, long long *out)
{
    char *end;
    long long v = strtoll(arg, &end, 10);
    if (!*arg || *end || v < lo || v > hi)
        return app_usage_error("serve ", "--%s wants an integer in %lld..%lld, got '%s'", name, lo,
                               hi, arg);
    *out = v;
    return EXIT_OK;
}

static int option(opts *o, const char *name, const char *arg)
{
    long long v = 0;
    serve_limits *l = &o->limits;
    int rc = EXIT_OK;
    if (!strcmp(name, "port") && !(rc = number(name, arg, 0, 65535, &v)))
        o->port = (int)v;
    else if (!strcmp(name, "detr-side") && !(rc = number(name, arg, 32, 1333, &v)))
        o->detr_side = (int)v;
    else if (!strcmp(name, "max-upload") && !(rc = number(name, arg, 1, 1LL << 30, &v)))
        l->max_upload = (size_t)v;
    else if (!strcmp(name, "max-pixels") && !(rc = number(name, arg, 1, PGD_IMAGE_MAX_PIXELS, &v)))
        l->max_pixels = v;
    else if (!strcmp(name, "max-connections") && !(rc = number(name, arg, 1, 1024, &v)))
        l->max_connections = (unsigned)v;
    else if (!strcmp(name, "per-ip") && !(rc = number(name, arg, 1, 1024, &v)))
        l->per_ip = (unsigned)v;
    else if (!strcmp(name, "timeout") && !(rc = number(name, arg, 1, 3600, &v)))
        l->timeout_s = (unsigned)v;
    else if (!strcmp(name, "rate") && !(rc = number(name, arg, 1, 100000, &v)))
        l->rate = (double)v;
    else if (!strcmp(name, "burst") && !(rc = number(name, arg, 1, 100000, &v)))
        l->burst = (unsigned)v;
    else if (!strcmp(name, "queue") && !(rc = number(name, arg, 1, 1024, &v)))
        l->queue = (unsigned)v;
    return rc;
}

static int parse(int argc, char **argv, opts *o)
{
    static const struct option longs[] = {
        {"port", required_argument, 0, 1},       {"bind", required_argument, 0, 2},
        {"device", required_argument, 0, 3},     {"models", required_argument, 0, 4},
        {"detr-side", required_argument, 0, 1},  {"max-upload", required_argument, 0, 1},
        {"max-pixels", required_argument, 0, 1}, {"max-connections", required_argument, 0, 1},
        {"per-ip", required_argument, 0, 1},     {"timeout", required_argument, 0, 1},
        {"rate", required_argument, 0, 1},       {"burst", required_argument, 0, 1},
        {"queue", required_argument, 0, 1},      {"help", no_argument, 0, 'h'},
        {"gallery", required_argument, 0, 5},    {0, 0, 0, 0}};
    int c, idx = 0, rc;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":h", longs, &idx)) != -1) {
        if (c == 'h') {
            fputs(usage, stdout);
            return -1;
        }
        if (c == '?' || c == ':')
            return app_usage_error("serve ", "%s '%s'",
                                   c == ':' ? "missing value for" : "unknown option",
                                   argv[optind - 1]);
        if (c == 2)
            o->bind = optarg;
        else if (c == 3)
            o->device = optarg;
        else if (c == 4)
            o->models = optarg;
        else if (c == 5)
            o->gallery = optarg;
        else if ((rc = option(o, longs[idx].name, optarg)))
            return rc;
    }
    if (optind < argc)
        return app_usage_error("serve ", "unexpected argument '%s'", argv[optind]);
    return EXIT_OK;
}

/* --device SEL[,SEL...]: a context on each (NULL: the default device), named in app. */
static int open_devices(serve_app *app, const char *list, pgd_ctx **ctx)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", list ? list : "");
    char *save = NULL, *sel = list ? strtok_r(buf, ",", &save) : NULL;
    int rc = EXIT_OK;
    do {
        if (app->ndevices == SERVE_MAX_DEVICES)
            return app_usage_error("serve ", "--device names more than %d devices",
                                   SERVE_MAX_DEVICES);
        rc = app_ctx_open(sel, &ctx[app->ndevices]);
        if (!rc)
            snprintf(app->device[app->ndevices], sizeof app->device[0], "%s",
                     pgd_ctx_get_device(ctx[app->ndevices])->name);
        app->ndevices += !rc;
    } while (!rc && sel && (sel = strtok_r(NULL, ",", &save)));
    return rc;
}

int cmd_serve(int argc, char **argv)
{
    opts o = {.port = 8080, .detr_side = 800, .bind = "127.0.0.1"};
    serve_limits_default(&o.limits);
    int rc = parse(argc, argv, &o);
    if (rc)
        return rc < 0 ? EXIT_OK : rc;
    signal(SIGPIPE, SIG_IGN); /* a client gone mid-answer is MHD's to handle, not a death */
    serve_app app;
    memset(&app, 0, sizeof app);
    app.limits = o.limits;
    pthread_mutex_init(&app.lock, NULL);
    app.runner = (serve_runner){&app, serve_run_job};
    pgd_ctx *ctx[SERVE_MAX_DEVICES] = {NULL};
    rc = o.gallery ? serve_gallery_load(&app, o.gallery) : EXIT_OK;
    if (!rc)
        rc = open_devices(&app, o.device, ctx);
    if (!rc)
        rc = serve_models_load(&app, ctx, o.models, o.detr_side);
    if (!rc)
        rc = serve_daemon_run(&app, o.bind, o.port);
    serve_models_free(&app);
    serve_gallery_free(&app);
    for (int d = 0; d < SERVE_MAX_DEVICES; d++)
        pgd_ctx_destroy(ctx[d]);
    pthread_mutex_destroy(&app.lock);
    return rc;
}
