/* stream_mpi.c — the MPI side of the stream (see stream_mpi.h); built with -Dmpi=enabled only.
 * Every MPI call is made by the main thread (MPI_THREAD_FUNNELED): the decoding and device
 * threads of each rank never touch MPI. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app.h"
#include "stream_mpi.h"

enum { TAG_LINES = 1, TAG_REQUEST = 2, TAG_ASSIGN = 3 };

static int started;

int stream_mpi_launched(void)
{
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK");
}

static int mpi_fail(const char *what, int code)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(code, msg, &len) != MPI_SUCCESS)
        snprintf(msg, sizeof msg, "error %d", code);
    fprintf(stderr, "pagoda: error: MPI: %s: %s\n", what, msg);
    return EXIT_RUNTIME;
}

int stream_mpi_begin(int *rank, int *ranks)
{
    *rank = 0, *ranks = 1;
    if (!stream_mpi_launched())
        return EXIT_OK;
    int provided = 0, rc = MPI_SUCCESS;
    if (!started) {
        rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
        if (rc != MPI_SUCCESS)
            return mpi_fail("MPI_Init_thread", rc);
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        started = 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, ranks);
    return EXIT_OK;
}

int stream_mpi_local_rank(void)
{
    if (!started)
        return 0;
    MPI_Comm local;
    int r = 0;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local) ==
        MPI_SUCCESS) {
        MPI_Comm_rank(local, &r);
        MPI_Comm_free(&local);
    }
    return r;
}

int stream_mpi_share_list(int *rc, char ***paths, int *n, unsigned char **done)
{
    int rank = 0, e;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if ((e = MPI_Bcast(rc, 1, MPI_INT, 0, MPI_COMM_WORLD)) != MPI_SUCCESS)
        return mpi_fail("sharing the input list", e);
    if (*rc)
        return 0;
    /* the paths as one block of NUL-terminated strings, then the done[] flags */
    int64_t head[2] = {*n, 0};
    if (rank == 0)
        for (int i = 0; i < *n; i++)
            head[1] += (int64_t)strlen((*paths)[i]) + 1;
    if ((e = MPI_Bcast(head, 2, MPI_INT64_T, 0, MPI_COMM_WORLD)) != MPI_SUCCESS)
        return mpi_fail("sharing the input list", e);
    if (head[1] > INT32_MAX || head[0] > INT32_MAX) {
        fprintf(stderr, "pagoda: error: MPI: the input list is over 2 GiB\n");
        return *rc = EXIT_RUNTIME;
    }
    char *block = malloc((size_t)head[1] + 1);
    unsigned char *flags = rank == 0 ? *done : malloc((size_t)head[0] + 1);
    if (!block || !flags) {
        fprintf(stderr, "pagoda: error: out of host memory for the input list\n");
        MPI_Abort(MPI_COMM_WORLD, EXIT_RUNTIME);
    }
    if (rank == 0)
        for (int i = 0, at = 0; i < *n; i++) {
            size_t len = strlen((*paths)[i]) + 1;
            memcpy(block + at, (*paths)[i], len);
            at += (int)len;
        }
    if ((e = MPI_Bcast(block, (int)head[1], MPI_CHAR, 0, MPI_COMM_WORLD)) != MPI_SUCCESS ||
        (e = MPI_Bcast(flags, (int)head[0], MPI_UNSIGNED_CHAR, 0, MPI_COMM_WORLD)) != MPI_SUCCESS)
        return mpi_fail("sharing the input list", e);
    if (rank != 0) {
        /* this rank's list (empty so far) becomes rank 0's */
        char **p = malloc(((size_t)head[0] + 1) * sizeof *p);
        if (!p) {
            fprintf(stderr, "pagoda: error: out of host memory for the input list\n");
            MPI_Abort(MPI_COMM_WORLD, EXIT_RUNTIME);
        }
        for (int64_t i = 0, at = 0; i < head[0]; i++) {
            p[i] = strdup(block + at);
            if (!p[i]) {
                fprintf(stderr, "pagoda: error: out of host memory for the input list\n");
                MPI_Abort(MPI_COMM_WORLD, EXIT_RUNTIME);
            }
            at += (int64_t)strlen(block + at) + 1;
        }
        free(*paths);
        free(*done);
        *paths = p;
        *n = (int)head[0];
        *done = flags;
    }
    free(block);
    return 0;
}

int stream_mpi_agree(int rc)
{
    int worst = rc;
    if (started)
        MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return worst;
}

int stream_mpi_recv_lines(int src, char **text, size_t *n, long *errors)
{
    int flag = 0, count = 0, e;
    MPI_Status st;
    *text = NULL, *n = 0, *errors = 0;
    if ((e = MPI_Iprobe(src, TAG_LINES, MPI_COMM_WORLD, &flag, &st)) != MPI_SUCCESS)
        return mpi_fail("waiting for results", e), -1;
    if (!flag)
        return 0;
    MPI_Get_count(&st, MPI_CHAR, &count);
    char *buf = malloc((size_t)count + 1);
    if (!buf) {
        fprintf(stderr, "pagoda: error: out of host memory for rank %d's results\n", src);
        return -1;
    }
    if ((e = MPI_Recv(buf, count, MPI_CHAR, src, TAG_LINES, MPI_COMM_WORLD, MPI_STATUS_IGNORE)) !=
        MPI_SUCCESS) {
        free(buf);
        return mpi_fail("receiving results", e), -1;
    }
    int64_t errs = 0;
    if (count < (int)sizeof errs) {
        free(buf);
        fprintf(stderr, "pagoda: error: MPI: a short message from rank %d\n", src);
        return -1;
    }
    memcpy(&errs, buf, sizeof errs);
    *errors = (long)errs;
    *n = (size_t)count - sizeof errs;
    memmove(buf, buf + sizeof errs, *n);
    buf[*n] = 0;
    *text = buf;
    return 1;
}

int stream_mpi_send_lines(const char *text, size_t n, long errors)
{
    if (n > (size_t)INT32_MAX - 16) {
        fprintf(stderr, "pagoda: error: MPI: a batch's results are over 2 GiB\n");
        return -1;
    }
    char *buf = malloc(n + sizeof(int64_t));
    if (!buf) {
        fprintf(stderr, "pagoda: error: out of host memory\n");
        return -1;
    }
    int64_t errs = errors;
    memcpy(buf, &errs, sizeof errs);
    memcpy(buf + sizeof errs, text, n);
    int e = MPI_Send(buf, (int)(n + sizeof errs), MPI_CHAR, 0, TAG_LINES, MPI_COMM_WORLD);
    free(buf);
    return e == MPI_SUCCESS ? 0 : (mpi_fail("sending results", e), -1);
}

int stream_mpi_poll_request(void)
{
    int flag = 0, e, dummy;
    MPI_Status st;
    if ((e = MPI_Iprobe(MPI_ANY_SOURCE, TAG_REQUEST, MPI_COMM_WORLD, &flag, &st)) != MPI_SUCCESS)
        return mpi_fail("waiting for requests", e), -1;
    if (!flag)
        return 0;
    if ((e = MPI_Recv(&dummy, 1, MPI_INT, st.MPI_SOURCE, TAG_REQUEST, MPI_COMM_WORLD,
                      MPI_STATUS_IGNORE)) != MPI_SUCCESS)
        return mpi_fail("receiving a request", e), -1;
    return st.MPI_SOURCE;
}

int stream_mpi_assign(int dest, long j)
{
    int64_t v = j;
    int e = MPI_Send(&v, 1, MPI_INT64_T, dest, TAG_ASSIGN, MPI_COMM_WORLD);
    return e == MPI_SUCCESS ? 0 : (mpi_fail("handing out work", e), -1);
}

int stream_mpi_request(long *j)
{
    int one = 1, e;
    int64_t v = -1;
    if ((e = MPI_Send(&one, 1, MPI_INT, 0, TAG_REQUEST, MPI_COMM_WORLD)) != MPI_SUCCESS ||
        (e = MPI_Recv(&v, 1, MPI_INT64_T, 0, TAG_ASSIGN, MPI_COMM_WORLD, MPI_STATUS_IGNORE)) !=
            MPI_SUCCESS)
        return mpi_fail("asking for work", e), -1;
    *j = (long)v;
    return 0;
}

int stream_mpi_gather_runs(json_t *runs)
{
    int rank = 0, ranks = 1;
    if (started) {
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    }
    size_t i;
    json_t *run;
    json_array_foreach(runs, i, run) json_object_set_new(run, "rank", json_integer(rank));
    if (ranks == 1)
        return 0;
    if (rank != 0) {
        char *text = json_dumps(runs, JSON_COMPACT);
        int rc = text ? stream_mpi_send_lines(text, strlen(text), 0) : -1;
        free(text);
        return rc;
    }
    for (int r = 1; r < ranks; r++) {
        char *text = NULL;
        size_t n = 0;
        long unused;
        int got;
        while ((got = stream_mpi_recv_lines(r, &text, &n, &unused)) == 0)
            usleep(2000);
        if (got < 0)
            return -1;
        json_t *theirs = json_loadb(text, n, 0, NULL);
        free(text);
        if (!json_is_array(theirs)) {
            json_decref(theirs);
            fprintf(stderr, "pagoda: error: MPI: rank %d sent no bench runs\n", r);
            return -1;
        }
        json_array_extend(runs, theirs);
        json_decref(theirs);
    }
    return 0;
}

int stream_mpi_end(int rc)
{
    if (!started)
        return rc;
    /* A failed rank may leave others blocked in a transfer: end them all at once. */
    if (rc && rc != 130)
        MPI_Abort(MPI_COMM_WORLD, rc);
    MPI_Finalize();
    started = 0;
    return rc;
}
