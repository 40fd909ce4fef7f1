/* stream.c — the streaming classify path (see stream.h).
 *
 * The work list (every input image, less those --resume finds in the output) is cut into
 * batches of B consecutive images. A fixed set of batch buffers (two per device and two more)
 * circulates: a free buffer is given the next batch, the decoding threads fill its slots (each
 * image decoded, preprocessed and checked on its own thread), a filled buffer goes to whichever
 * device thread asks first (dynamic hand-out: a fast device takes more), and the main thread
 * writes the finished batches strictly in input order, flushing the file after each, before the
 * buffer is freed for the next batch. So at most nbuf * B preprocessed images exist at a time,
 * whatever the number of images, and the devices never wait for the decoder while it keeps up.
 * With MPI (stream_mpi.c), rank r takes the batches j with j % R == r and sends its lines to
 * rank 0, which writes every batch in order. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "csv.h"
#include "labels.h"
#include "results.h"
#include "stream.h"
#include "stream_input.h"
#include "stream_mpi.h"
#include "stream_state.h"

/* ---- a growing text buffer ---- */

typedef struct strbuf {
    char *s;
    size_t n, cap;
    int broken; /* out of memory: the text is incomplete */
} strbuf;

static void sb_add(strbuf *b, const char *s, size_t n)
{
    if (b->broken)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *p = realloc(b->s, cap);
        if (!p) {
            b->broken = 1;
            return;
        }
        b->s = p, b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}

static void sb_printf(strbuf *b, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    sb_add(b, tmp, n < 0 ? 0 : (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

int classify_streaming(const classify_opts *o)
{
    if (o->output || o->list || o->batch || o->jobs || o->resume || o->recursive || o->strict ||
        o->device_per_rank || (o->device && (strchr(o->device, ',') || !strcmp(o->device, "all"))))
        return 1;
    if (stream_mpi_launched() || eval_mode.on)
        return 1;
    for (int i = 0; i < o->nimages; i++) {
        struct stat st;
        const char *a = o->images[i];
        if (stat(a, &st) == 0 ? S_ISDIR(st.st_mode) : (lstat(a, &st) != 0 && strpbrk(a, "*?[")))
            return 1;
    }
    return 0;
}

int classify_stream_check(const classify_opts *o, const char *map_flag)
{
    const char *bad = o->input         ? "--input"
                      : o->save_input  ? "--save-input"
                      : o->save_logits ? "--save-logits"
                      : o->profile     ? "--profile"
                                       : map_flag;
    if (bad)
        return app_usage_error(o->cmd,
                               "%s goes with a single batch of images, not with "
                               "streaming (--output, --list, --batch, a directory, ...)",
                               bad);
    if (o->resume && !o->output)
        return app_usage_error(o->cmd, "--resume needs --output FILE");
    if (!o->nimages && !o->list)
        return app_usage_error(o->cmd, "nothing to stream: give images, directories or --list");
    return EXIT_OK;
}

/* ---- the output file ---- */

static int is_csv(const char *path)
{
    const char *dot = path ? strrchr(path, '.') : NULL;
    return dot && !strcasecmp(dot, ".csv");
}

/* ---- the pipeline ---- */

static volatile sig_atomic_t interrupted;
/* classify_stream_timed: no output, the timing wanted here */
static classify_stream_stats *timed;

static void on_sigint(int sig)
{
    (void)sig;
    interrupted = 1;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Fails the whole stream with exit status rc (the message was printed). */
static void fail_locked(stream *s, int rc)
{
    if (!s->fatal)
        s->fatal = rc;
    s->stop = 1;
    pthread_cond_broadcast(&s->cv);
}

static char *errdup(pgd_error *err, const char *fallback)
{
    const char *m = err ? pgd_error_get_message(err) : NULL;
    char *out = strdup(m && *m ? m : fallback);
    pgd_error_destroy(err);
    return out ? out : strdup("out of host memory");
}

/* One image into slot i of b: decoded, preprocessed, checked. */
static void decode_one(stream *s, sbatch *b, int i)
{
    const classify_opts *o = s->o;
    const char *path = s->paths[s->work[b->first + i]];
    size_t per = (size_t)3 * (size_t)s->H * (size_t)s->W;
    float *x = b->x + (size_t)i * per;
    pgd_error *err = NULL;
    pgd_image *img = NULL;
    int rc = app_load_image(path, s->min_side, o->exif_rotate, &img, &err);
    if (!rc)
        rc = pgd_image_preprocess(img, s->preset, x, &err);
    pgd_image_destroy(img);
    if (rc) {
        b->err[i] = errdup(err, "cannot read the image");
        return;
    }
    if (!o->allow_nonfinite && model_first_nonfinite(x, (int64_t)per) >= 0)
        b->err[i] = strdup("the input holds a non-finite value after preprocessing "
                           "(--allow-nonfinite runs it anyway)");
}

/* The lowest-numbered buffer in `state`, or NULL. */
static sbatch *lowest(stream *s, int state)
{
    sbatch *best = NULL;
    for (int i = 0; i < s->nbuf; i++)
        if (s->bufs[i].state == state && (!best || s->bufs[i].k < best->k))
            best = &s->bufs[i];
    return best;
}

static void *worker_main(void *arg)
{
    stream *s = arg;
    pthread_mutex_lock(&s->mu);
    while (!s->stop) {
        /* the slot needed soonest: the lowest batch being filled with an unclaimed image */
        sbatch *b = NULL;
        for (int i = 0; i < s->nbuf; i++) {
            sbatch *c = &s->bufs[i];
            if (c->state == B_FILLING && c->claimed < c->n && (!b || c->k < b->k))
                b = c;
        }
        if (b) {
            int i = b->claimed++;
            pthread_mutex_unlock(&s->mu);
            decode_one(s, b, i);
            pthread_mutex_lock(&s->mu);
            if (b->err[i] && s->o->strict && !s->fatal) {
                char shown[1024];
                fprintf(stderr, "pagoda: error: %s (--strict)\n",
                        app_term_text(b->err[i], shown, sizeof shown));
                fail_locked(s, EXIT_RUNTIME);
            }
            if (++b->decoded == b->n) {
                b->state = B_READY;
                pthread_cond_broadcast(&s->cv);
            }
            continue;
        }
        sbatch *f = s->next_fill < s->avail ? lowest(s, B_FREE) : NULL;
        if (f) {
            long j = stream_global_batch(s, s->next_fill);
            f->k = s->next_fill++;
            f->first = (int)(j * s->B);
            f->n = s->nwork - f->first < s->B ? s->nwork - f->first : s->B;
            f->claimed = f->decoded = 0;
            memset(f->err, 0, (size_t)s->B * sizeof *f->err);
            f->state = B_FILLING;
            continue;
        }
        if (s->next_fill >= s->nlocal)
            break; /* every batch is handed out */
        pthread_cond_wait(&s->cv, &s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* Runs the images of b that decoded (moved to the front of the buffer, then their logits back
 * to their slots). */
static int run_batch(stream *s, sdevice *d, sbatch *b, pgd_error **err)
{
    size_t per = (size_t)3 * (size_t)s->H * (size_t)s->W, C = (size_t)s->classes;
    int ok[4096], nok = 0;
    for (int i = 0; i < b->n; i++)
        if (!b->err[i]) {
            if (nok != i)
                memcpy(b->x + (size_t)nok * per, b->x + (size_t)i * per, per * sizeof *b->x);
            ok[nok++] = i;
        }
    if (!nok)
        return PGD_OK;
    int rc = s->m->family->forward(d->model, b->x, nok, s->H, s->W, b->logits, NULL, err);
    if (rc)
        return rc;
    for (int t = nok - 1; t >= 0; t--) {
        if (ok[t] != t)
            memcpy(b->logits + (size_t)ok[t] * C, b->logits + (size_t)t * C, C * sizeof *b->logits);
        if (!s->o->allow_nonfinite &&
            model_first_nonfinite(b->logits + (size_t)ok[t] * C, (int64_t)C) >= 0)
            b->err[ok[t]] = strdup("the logits are not finite (--allow-nonfinite prints them "
                                   "anyway; the one-batch path names the stage)");
    }
    return PGD_OK;
}

typedef struct device_arg {
    stream *s;
    sdevice *d;
} device_arg;

static void *device_loop(void *arg)
{
    device_arg *a = arg;
    stream *s = a->s;
    sdevice *d = a->d;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        sbatch *b = s->stop ? NULL : lowest(s, B_READY);
        if (b) {
            b->state = B_RUNNING;
            s->taken++;
            pthread_cond_broadcast(&s->cv); /* a dynamic schedule asks for the next */
            pthread_mutex_unlock(&s->mu);
            pgd_error *err = NULL;
            double t0 = now_s();
            int rc = run_batch(s, d, b, &err);
            double t1 = now_s();
            pthread_mutex_lock(&s->mu);
            d->busy_s += t1 - t0;
            if (rc) {
                char shown[1024];
                fprintf(stderr, "pagoda: error: on %s: %s\n", pgd_ctx_get_device(d->ctx)->name,
                        app_term_text(pgd_error_get_message(err), shown, sizeof shown));
                pgd_error_destroy(err);
                fail_locked(s, EXIT_RUNTIME);
                break;
            }
            d->images += b->n;
            b->state = B_DONE;
            pthread_cond_broadcast(&s->cv);
            continue;
        }
        int pending = s->next_fill < s->nlocal || lowest(s, B_FILLING) || lowest(s, B_READY);
        if (s->stop || !pending)
            break;
        pthread_cond_wait(&s->cv, &s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ---- the lines ---- */

/* Appends text s as one CSV field (csv.h: quoted as RFC 4180 wants). */
static void sb_field(strbuf *b, const char *s)
{
    char *f = csv_field(s ? s : "");
    if (!f)
        b->broken = 1;
    else
        sb_add(b, f, strlen(f));
    free(f);
}

/* The lines of batch b into out. */
static void format_batch(stream *s, sbatch *b, strbuf *out, long *errors)
{
    for (int i = 0; i < b->n; i++) {
        int idx = s->work[b->first + i];
        const char *path = s->paths[idx];
        if (b->err[i])
            (*errors)++;
        if (s->csv) {
            sb_printf(out, "%d,", idx);
            json_t *src = app_json_text(path);
            sb_field(out, src ? json_string_value(src) : "");
            json_decref(src);
            sb_add(out, ",", 1);
            if (b->err[i]) {
                sb_field(out, b->err[i]);
                for (int k = 0; k < s->o->topk && k < s->classes; k++)
                    sb_add(out, ",,,", 3);
                sb_add(out, "\n", 1);
                continue;
            }
        }
        json_t *line = NULL;
        if (b->err[i]) {
            line = json_pack("{s:i, s:o, s:o}", "image", idx, "source", app_json_text(path),
                             "error", app_json_text(b->err[i]));
        } else {
            json_t *all = app_report_topk(b->logits + (size_t)i * (size_t)s->classes, 1, s->classes,
                                          s->o->topk, &s->labels, (char **)&path, NULL, 1);
            line = all ? json_incref(json_array_get(all, 0)) : NULL;
            json_decref(all);
            if (line)
                json_object_set_new(line, "image", json_integer(idx));
            if (line && s->truth) {
                json_object_set_new(line, "label", json_integer(s->truth[idx]));
                eval_count(s, b->logits + (size_t)i * (size_t)s->classes, s->truth[idx]);
            }
        }
        if (!line) {
            out->broken = 1;
            return;
        }
        if (s->csv) {
            json_t *top = json_object_get(line, "top");
            size_t k;
            json_t *e;
            json_array_foreach(top, k, e)
            {
                json_t *p = json_object_get(e, "probability");
                sb_printf(out, ",%d,", (int)json_integer_value(json_object_get(e, "index")));
                sb_field(out, json_string_value(json_object_get(e, "label")));
                if (json_is_real(p))
                    sb_printf(out, ",%.17g", json_real_value(p));
                else
                    sb_add(out, ",nan", 4);
            }
            sb_add(out, "\n", 1);
        } else {
            char *text = json_dumps(line, JSON_COMPACT | JSON_ENSURE_ASCII);
            if (!text)
                out->broken = 1;
            else {
                sb_add(out, text, strlen(text));
                sb_add(out, "\n", 1);
            }
            free(text);
        }
        json_decref(line);
    }
}

/* ---- progress ---- */

typedef struct progress {
    int on;
    double t0, last;
    long done0; /* images done before this run (--resume) */
} progress;

static void progress_show(stream *s, progress *p, long done, int final)
{
    double t = now_s();
    if (!p->on || (!final && t - p->last < 0.5))
        return;
    p->last = t;
    double el = t - p->t0, rate = el > 0 ? (double)done / el : 0;
    long total = s->nwork, left = total - done;
    double busy = 0;
    for (int i = 0; i < s->ndev; i++)
        busy += s->dev[i].busy_s;
    fprintf(stderr, "\r%ld/%ld images, %.1f img/s, ETA %.0f s, devices busy %.0f %%   ",
            done + p->done0, total + p->done0, rate, rate > 0 ? (double)left / rate : 0.0,
            el > 0 && s->ndev ? 100.0 * busy / (el * s->ndev) : 0.0);
    if (final)
        fputc('\n', stderr);
    fflush(stderr);
}

/* ---- devices ---- */

/* The model on one device's context: the family's load, then its hard attention where it has
 * one. Prints the error and returns an exit status on failure. */
static int stream_load(const stream_model *m, pgd_ctx *ctx, void **model)
{
    pgd_error *err = NULL;
    if (m->family->load(ctx, m->src, m->cfg, model, &err))
        return app_fail(err);
    if (m->family->set_attention)
        m->family->set_attention(*model, m->attention.mode, m->attention.topk, m->attention.seed);
    return EXIT_OK;
}

/* The selectors of --device: NULL (the default), one, a comma list, or "all". */
static int open_devices(stream *s)
{
    const char *sel = s->o->device;
    path_list sels = {0};
    int rc = EXIT_OK;
    if (sel && !strcmp(sel, "all")) {
        pgd_device_info *list = NULL;
        size_t count = 0;
        pgd_error *err = NULL;
        if (pgd_devices_list(&list, &count, &err))
            return app_fail(err);
        for (size_t i = 0; !rc && i < count; i++) {
            char p[32];
            snprintf(p, sizeof p, "%d:%d", list[i].platform_index, list[i].device_index);
            if (list_add(&sels, p))
                rc = oom();
        }
        pgd_free(list);
    } else if (sel && strchr(sel, ',')) {
        char *copy = strdup(sel);
        if (!copy)
            return oom();
        for (char *save = NULL, *t = strtok_r(copy, ",", &save); !rc && t;
             t = strtok_r(NULL, ",", &save))
            if (list_add(&sels, t))
                rc = oom();
        free(copy);
    } else {
        rc = list_add(&sels, sel ? sel : "") ? oom() : EXIT_OK;
    }
    /* --device-per-rank: this rank's one device of the list, by its local rank */
    if (!rc && s->o->device_per_rank && sels.n > 1) {
        int pick = stream_mpi_local_rank() % sels.n;
        char *keep = sels.p[pick];
        sels.p[pick] = sels.p[0];
        sels.p[0] = keep;
        for (int i = 1; i < sels.n; i++)
            free(sels.p[i]);
        sels.n = 1;
    }
    if (!rc && !(s->dev = calloc((size_t)sels.n, sizeof *s->dev)))
        rc = oom();
    for (int i = 0; !rc && i < sels.n; i++) {
        rc = app_ctx_open(*sels.p[i] ? sels.p[i] : NULL, &s->dev[i].ctx);
        if (!rc)
            s->ndev++;
        if (!rc)
            rc = stream_load(s->m, s->dev[i].ctx, &s->dev[i].model);
    }
    list_free(&sels);
    return rc;
}

/* ---- the run ---- */

/* Writes (rank 0: to the file, else to rank 0) the finished batches in order until the end, an
 * interrupt or a fatal error. */
/* Waits on the stream's condition at most `ms` milliseconds (the lock held), then updates the
 * progress line. */
static void wait_tick(stream *s, progress *pg, long done, long ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += ms * 1000000;
    ts.tv_sec += ts.tv_nsec / 1000000000;
    ts.tv_nsec %= 1000000000;
    pthread_cond_timedwait(&s->cv, &s->mu, &ts);
    pthread_mutex_unlock(&s->mu);
    progress_show(s, pg, done, 0);
    pthread_mutex_lock(&s->mu);
}

/* The lines of finished local batch b (the lock held; the buffer is free again after). */
static void take_batch(stream *s, sbatch *b, strbuf *text, long *errors)
{
    pthread_mutex_unlock(&s->mu);
    format_batch(s, b, text, errors);
    pthread_mutex_lock(&s->mu);
    b->state = B_FREE;
    for (int i = 0; i < b->n; i++) {
        free(b->err[i]);
        b->err[i] = NULL;
    }
    pthread_cond_broadcast(&s->cv);
}

/* One batch's lines: written and flushed (rank 0), or sent to rank 0. */
static int emit(stream *s, FILE *out, const strbuf *text, long errors)
{
    if (text->broken)
        return oom();
    if (s->rank != 0)
        return stream_mpi_send_lines(text->s ? text->s : "", text->n, errors) ? EXIT_RUNTIME
                                                                              : EXIT_OK;
    if (text->n && s->rf.fd >= 0)
        return results_write(&s->rf, text->s, text->n);
    if (text->n && out && (fwrite(text->s, 1, text->n, out) != text->n || fflush(out))) {
        fprintf(stderr, "pagoda: error: writing the results: %s\n", strerror(errno));
        return EXIT_RUNTIME;
    }
    return EXIT_OK;
}

/* 1 while local batch k still runs on a device (after SIGINT it finishes and is written). */
static int running(const stream *s, long k)
{
    for (int i = 0; i < s->nbuf; i++)
        if (s->bufs[i].state == B_RUNNING && s->bufs[i].k == k)
            return 1;
    return 0;
}

/* Writes (rank 0: to the file, else to rank 0) the finished batches in order until the end, an
 * interrupt or a fatal error. */
static int write_loop(stream *s, FILE *out, progress *pg)
{
    int rc = EXIT_OK;
    long done = 0;
    pthread_mutex_lock(&s->mu);
    /* pos: the global batch on rank 0 (it writes them all), the local one elsewhere */
    for (long pos = 0;;) {
        if (interrupted && !s->stop) {
            s->stop = 1;
            pthread_cond_broadcast(&s->cv);
        }
        if (stream_schedule(s)) {
            fail_locked(s, EXIT_RUNTIME);
            break;
        }
        long j, k;
        int src;
        if (!stream_where(s, pos, &j, &k, &src))
            break;
        if (j < 0) { /* not handed out yet */
            wait_tick(s, pg, done, 2);
            continue;
        }
        int mine = src == s->rank;
        sbatch *b = NULL;
        for (int i = 0; mine && i < s->nbuf; i++)
            if (s->bufs[i].state == B_DONE && s->bufs[i].k == k)
                b = &s->bufs[i];
        strbuf text = {0};
        long errors = 0;
        if (b) {
            take_batch(s, b, &text, &errors);
        } else if (!mine && !s->stop) { /* rank 0: the next batch is another rank's */
            pthread_mutex_unlock(&s->mu);
            int got = stream_mpi_recv_lines(src, &text.s, &text.n, &errors);
            pthread_mutex_lock(&s->mu);
            if (got < 0) {
                fail_locked(s, EXIT_RUNTIME);
                break;
            }
            if (!got) {
                wait_tick(s, pg, done, 2);
                continue;
            }
        } else {
            if (s->stop && (s->fatal || !mine || !running(s, k)))
                break;
            wait_tick(s, pg, done, s->dynamic ? 2 : 200);
            continue;
        }
        pthread_mutex_unlock(&s->mu);
        rc = emit(s, out, &text, errors);
        free(text.s);
        long n = j * s->B + s->B > s->nwork ? s->nwork - j * s->B : s->B;
        done += n;
        s->written += n;
        s->errors += errors;
        if (s->rank == 0)
            progress_show(s, pg, done, 0);
        pthread_mutex_lock(&s->mu);
        if (rc) {
            fail_locked(s, rc);
            break;
        }
        pos++;
    }
    if (!rc && !s->fatal)
        stream_schedule_end(s);
    s->stop = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

static void stream_free(stream *s)
{
    for (int i = 0; s->dev && i < s->ndev; i++) {
        if (s->dev[i].model)
            s->m->family->free(s->dev[i].model);
        pgd_ctx_destroy(s->dev[i].ctx);
    }
    free(s->dev);
    for (int i = 0; s->bufs && i < s->nbuf; i++) {
        for (int k = 0; s->bufs[i].err && k < s->B; k++)
            free(s->bufs[i].err[k]);
        free(s->bufs[i].err);
        free(s->bufs[i].x);
        free(s->bufs[i].logits);
    }
    free(s->bufs);
    free(s->work);
    free(s->assigned);
    free(s->owner);
    free(s->local_of);
    free(s->conf);
    free(s->cls_n);
    free(s->cls_top1);
    free(s->cls_top5);
    list_free(&s->en.map);
    list_free(&s->en.names);
    app_labels_free(&s->labels);
}

/* The work list, broadcast from rank 0 under MPI: every path, and which are to be computed. */
static int plan(stream *s, path_list *in)
{
    const classify_opts *o = s->o;
    int rc = EXIT_OK;
    unsigned char *done = NULL;
    int ndone = 0;
    if (s->rank == 0) {
        rc = eval_mode.on ? gather_eval(o, in, &s->en, s->classes) : gather_inputs(o, in);
        s->truth = in->truth;
        if (!rc && !(done = calloc((size_t)in->n, 1)))
            rc = oom();
        /* opened and locked now, before any model loads; written from the first lines on */
        json_t *id = !rc && o->output ? results_identity(o, s->m, s->preset, s->classes) : NULL;
        if (!rc && o->output)
            rc = id ? results_open(&s->rf, o->output, s->csv, o->resume, id,
                                   o->topk < s->classes ? o->topk : s->classes, in->p, in->n, done,
                                   &ndone)
                    : EXIT_RUNTIME;
        json_decref(id);
        if (!rc && ndone)
            fprintf(stderr, "pagoda: --resume: %d of %d images are in %s already\n", ndone, in->n,
                    o->output);
    }
    if (s->ranks > 1 && stream_mpi_share_list(&rc, &in->p, &in->n, &done))
        rc = rc ? rc : EXIT_RUNTIME;
    if (!rc && !(s->work = malloc((size_t)in->n * sizeof *s->work)))
        rc = oom();
    for (int i = 0; !rc && i < in->n; i++)
        if (!done[i])
            s->work[s->nwork++] = i;
    free(done);
    s->paths = in->p;
    s->npaths = in->n;
    return rc;
}

static int start(stream *s)
{
    const classify_opts *o = s->o;
    s->nbatch = (s->nwork + s->B - 1) / s->B;
    s->nlocal = s->nbatch > s->rank ? (s->nbatch - s->rank + s->ranks - 1) / s->ranks : 0;
    s->avail = s->nlocal;
    s->dynamic = s->ranks > 1 && o->mpi_dynamic;
    if (s->dynamic) {
        s->nlocal = LONG_MAX, s->avail = 0;
        s->assigned = malloc(((size_t)s->nbatch + 1) * sizeof *s->assigned);
        s->owner = malloc(((size_t)s->nbatch + 1) * sizeof *s->owner);
        s->local_of = malloc(((size_t)s->nbatch + 1) * sizeof *s->local_of);
        if (!s->assigned || !s->owner || !s->local_of)
            return oom();
    }
    s->nbuf = 2 * s->ndev + 2;
    if (!(s->bufs = calloc((size_t)s->nbuf, sizeof *s->bufs)))
        return oom();
    size_t per = (size_t)3 * (size_t)s->H * (size_t)s->W;
    for (int i = 0; i < s->nbuf; i++) {
        sbatch *b = &s->bufs[i];
        b->x = malloc((size_t)s->B * per * sizeof *b->x);
        b->logits = malloc((size_t)s->B * (size_t)s->classes * sizeof *b->logits);
        b->err = calloc((size_t)s->B, sizeof *b->err);
        if (!b->x || !b->logits || !b->err) {
            fprintf(stderr,
                    "pagoda: error: out of host memory for %d batch buffers of %d "
                    "images\n",
                    s->nbuf, s->B);
            return EXIT_RUNTIME;
        }
    }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    s->nworkers = o->jobs ? o->jobs : cores > 0 ? (int)(cores < 64 ? cores : 64) : 1;
    if (!(s->workers = calloc((size_t)s->nworkers, sizeof *s->workers)))
        return oom();
    return EXIT_OK;
}

/* The summary on stderr: images, errors, time, and each device's share. */
static void summary(stream *s, double el)
{
    if (s->o->quiet && !s->errors)
        return;
    char shown[1024];
    fprintf(stderr, "pagoda: %ld image(s) in %.2f s (%.1f img/s)", s->written, el,
            el > 0 ? (double)s->written / el : 0.0);
    if (s->errors)
        fprintf(stderr, ", %ld of them unreadable or without a result (their lines say why)",
                s->errors);
    fputc('\n', stderr);
    for (int i = 0; i < s->ndev && (s->ndev > 1 || s->ranks > 1); i++)
        fprintf(stderr, "pagoda:   rank %d, %s: %ld images, %.1f img/s while busy\n", s->rank,
                app_term_text(pgd_ctx_get_device(s->dev[i].ctx)->name, shown, sizeof shown),
                s->dev[i].images, s->dev[i].busy_s > 0 ? s->dev[i].images / s->dev[i].busy_s : 0);
}

/* Everything before the threads start: labels, the work list and output, the eval counters,
 * the devices with their models, the buffers. */
static int prepare(stream *s, path_list *in, FILE **out)
{
    const classify_opts *o = s->o;
    int rc = EXIT_OK;
    if (o->labels_path && app_labels_load(o->labels_path, &s->labels))
        rc = EXIT_RUNTIME;
    if (!rc && s->labels.names && s->labels.count < s->classes) {
        fprintf(stderr, "pagoda: error: %s has %d labels but the model has %d classes\n",
                o->labels_path, s->labels.count, s->classes);
        rc = EXIT_RUNTIME;
    }
    if (!rc)
        rc = plan(s, in);
    if (!rc && !o->output && s->rank == 0 && !eval_mode.on && !timed)
        *out = stdout;
    if (!rc && eval_mode.on && s->ranks > 1) {
        fprintf(stderr, "pagoda: error: pagoda eval runs in one process (not under mpirun)\n");
        rc = EXIT_USAGE;
    }
    if (!rc && eval_mode.on) {
        size_t C = (size_t)s->classes;
        s->cls_n = calloc(C, sizeof *s->cls_n);
        s->cls_top1 = calloc(C, sizeof *s->cls_top1);
        s->cls_top5 = calloc(C, sizeof *s->cls_top5);
        s->conf = C <= 2048 ? calloc(C * C, sizeof *s->conf) : NULL;
        if (!s->cls_n || !s->cls_top1 || !s->cls_top5 || (C <= 2048 && !s->conf))
            rc = oom();
    }
    if (!rc)
        rc = open_devices(s);
    if (!rc)
        rc = start(s);
    return s->ranks > 1 ? stream_mpi_agree(rc) : rc;
}

/* Starts the decoding and device threads, writes until the end, joins them. */
static int run_threads(stream *s, FILE *out, progress *pg)
{
    int rc = EXIT_OK, nstarted = 0;
    device_arg *args = calloc((size_t)s->ndev, sizeof *args);
    if (!args)
        return oom();
    for (int i = 0; i < s->nworkers; i++)
        if (pthread_create(&s->workers[i], NULL, worker_main, s) == 0)
            nstarted++;
    for (int i = 0; i < s->ndev; i++) {
        args[i] = (device_arg){s, &s->dev[i]};
        s->dev[i].started = pthread_create(&s->dev[i].thread, NULL, device_loop, &args[i]) == 0;
    }
    if (!nstarted) {
        fprintf(stderr, "pagoda: error: cannot start a decoding thread\n");
        rc = EXIT_RUNTIME;
    }
    if (!rc)
        rc = write_loop(s, out, pg);
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < nstarted; i++)
        pthread_join(s->workers[i], NULL);
    for (int i = 0; i < s->ndev; i++)
        if (s->dev[i].started)
            pthread_join(s->dev[i].thread, NULL);
    free(args);
    return rc ? rc : s->fatal;
}

/* After the threads: the results file closed (stdout was flushed after each batch), the
 * summary, the eval report, the timing. */
static int conclude(stream *s, int rc, double t0)
{
    const classify_opts *o = s->o;
    rc = results_close(&s->rf, !rc && !interrupted, rc);
    if (!rc && s->nwork == 0 && s->rank == 0)
        fprintf(stderr, "pagoda: every image is in %s already\n", o->output);
    else if ((!rc || interrupted) && !timed)
        summary(s, now_s() - t0);
    if (!rc && eval_mode.on && !interrupted)
        rc = eval_report(s);
    if (timed) {
        timed->images = s->written;
        timed->seconds = now_s() - t0;
        for (int i = 0; i < s->ndev; i++)
            timed->busy_s += s->dev[i].busy_s;
    }
    if (!rc && interrupted) {
        fprintf(stderr, "pagoda: interrupted: the finished batches are written%s\n",
                o->output ? " (--resume continues)" : "");
        rc = 130;
    }
    return rc;
}

int classify_stream(const classify_opts *o, pgd_preprocess preset, int classes,
                    const stream_model *model)
{
    stream s;
    memset(&s, 0, sizeof s);
    s.rf.fd = -1;
    s.o = o, s.m = model, s.preset = preset, s.classes = classes;
    s.H = s.W = PGD_PREPROCESS_SIZE;
    s.B = o->batch ? o->batch : 8;
    s.csv = is_csv(o->output);
    s.min_side = !o->fast_decode                        ? 0
                 : preset == PGD_PREPROCESS_TORCHVISION ? 256
                 : preset == PGD_PREPROCESS_TIMM        ? 248
                                                        : PGD_PREPROCESS_SIZE;
    s.ranks = 1;
    int rc = stream_mpi_begin(&s.rank, &s.ranks);
    if (rc)
        return rc;
    pthread_mutex_init(&s.mu, NULL);
    pthread_cond_init(&s.cv, NULL);
    path_list in = {0};
    FILE *out = NULL;
    rc = prepare(&s, &in, &out);
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    interrupted = 0;
    sigaction(SIGINT, &sa, &old);
    progress pg = {isatty(STDERR_FILENO) && !o->quiet && s.rank == 0 && s.nwork > 0, now_s(), 0,
                   s.npaths - s.nwork};
    double t0 = now_s();
    if (!rc)
        rc = run_threads(&s, out, &pg);
    free(s.workers);
    sigaction(SIGINT, &old, NULL);
    if (pg.on)
        progress_show(&s, &pg, s.written, 1);
    rc = conclude(&s, rc, t0);
    stream_free(&s);
    list_free(&in);
    pthread_cond_destroy(&s.cv);
    pthread_mutex_destroy(&s.mu);
    return stream_mpi_end(rc);
}

int classify_stream_timed(const classify_opts *o, pgd_preprocess preset, int classes,
                          const stream_model *model, classify_stream_stats *st)
{
    memset(st, 0, sizeof *st);
    timed = st;
    int rc = classify_stream(o, preset, classes, model);
    timed = NULL;
    return rc;
}
