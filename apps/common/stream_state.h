/* stream_state.h — the stream's state, shared by the files that make up the stream: stream.c
 * (the pipeline: threads, devices, the writer), stream_schedule.c (which batches a rank runs)
 * and stream_eval.c (pagoda eval's counts and report). Private to them: stream.h is the
 * stream's interface. */
#ifndef PAGODA_STREAM_STATE_H
#define PAGODA_STREAM_STATE_H

#include <pthread.h>

#include "results.h"
#include "stream.h"
#include "stream_input.h"

enum { B_FREE, B_FILLING, B_READY, B_RUNNING, B_DONE };

typedef struct sbatch {
    int state;
    long k;       /* the local batch number */
    int first, n; /* its images: work[first .. first + n) */
    int claimed, decoded;
    float *x;      /* [B, 3, H, W] */
    float *logits; /* [B, classes] */
    char **err;    /* per image: why it has no result, or NULL */
} sbatch;

typedef struct sdevice {
    pgd_ctx *ctx;
    void *model;
    pthread_t thread;
    int started;
    long images;
    double busy_s;
} sdevice;

typedef struct stream {
    const classify_opts *o;
    const stream_model *m;
    pgd_preprocess preset;
    int H, W, classes, B, min_side, csv;
    results_file rf; /* --output (rank 0); fd -1 without */
    app_labels labels;
    char **paths; /* every input */
    int npaths;
    int *work; /* the inputs this run computes (indices into paths) */
    int nwork;
    long nbatch;     /* global batches: ceil(nwork / B) */
    int rank, ranks; /* MPI; 0 and 1 without */
    long nlocal;     /* the batches of this rank (dynamic: LONG_MAX until all are handed out) */
    long avail;      /* the local batches known so far (static: nlocal) */
    /* --mpi-schedule dynamic: rank 0 hands out batches on request */
    int dynamic, ended; /* ended (rank 0): ranks told that the work is out */
    long *assigned;     /* local batch k -> global batch */
    long next_global;   /* rank 0: the next global batch to hand out */
    int *owner;         /* rank 0: the rank of each handed-out global batch */
    long *local_of;     /* rank 0: its local index of each of its own global batches */
    sbatch *bufs;
    int nbuf;
    long next_fill, next_write;
    long taken; /* local batches a device has taken */
    int stop;   /* SIGINT, a fatal error, or the end */
    int fatal;  /* the exit status of a fatal error (its message printed) */
    sdevice *dev;
    int ndev;
    pthread_t *workers;
    int nworkers;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    long written, errors; /* images written (this run), of which without a result */
    /* pagoda eval */
    const int *truth; /* the class of each input */
    eval_names en;
    long *conf; /* [true][predicted] counts (classes <= 2048) */
    long *cls_n, *cls_top1, *cls_top5;
    long top1, top5, evaluated;
} stream;

/* stream_schedule.c: the global batch of local batch k. */
long stream_global_batch(const stream *s, long k);
/* Keeps two batches assigned beyond those the devices have taken (--mpi-schedule dynamic; the
 * lock held). Nonzero on an MPI failure. */
int stream_schedule(stream *s);
/* Rank 0 after its last batch: the remaining requests answered "none left". */
void stream_schedule_end(stream *s);
/* What the writer's position `pos` stands for: global batch *j (-1: not handed out yet), its
 * local index *k on its rank *src. 0 when the writer is done. */
int stream_where(const stream *s, long pos, long *j, long *k, int *src);

/* stream_eval.c: counts one image's result against its true class t. */
void eval_count(stream *s, const float *l, int t);

/* top-1 and top-5 accuracy, per-class accuracy, the 10 most frequent confusions: printed, or
 * with --json one document on stdout. EXIT_OK, or an exit status. */
int eval_report(stream *s);

#endif
