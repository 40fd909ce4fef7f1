/* stream_mpi.h — the MPI side of the stream (stream_mpi.c, built with -Dmpi=enabled): ranks
 * share the work list that rank 0 made, each computes the batches j with j % R == rank, and
 * sends its lines, batch by batch in order, to rank 0, which writes every batch in input order.
 * Without the MPI build these are stubs: one process, rank 0 of 1, and no MPI code at all. */
#ifndef PAGODA_STREAM_MPI_H
#define PAGODA_STREAM_MPI_H

#include <stddef.h>

#include <jansson.h>

#ifdef PGD_HAVE_MPI
/* 1 when the process was started by mpirun (Open MPI's or PMI's environment). */
int stream_mpi_launched(void);
/* Initialises MPI when launched (once); *rank and *ranks, 0 and 1 otherwise. Exit status. */
int stream_mpi_begin(int *rank, int *ranks);
/* The rank among those of this host (for --device-per-rank); 0 without MPI. */
int stream_mpi_local_rank(void);
/* Rank 0's status *rc, its paths and done[] flags to every rank (the others' are replaced).
 * Nonzero when the transfer failed. */
int stream_mpi_share_list(int *rc, char ***paths, int *n, unsigned char **done);
/* The worst exit status of all ranks. */
int stream_mpi_agree(int rc);
/* Rank 0: the next batch's lines from rank `src` if they arrived (1), not yet (0), or -1 on a
 * failure (printed). *text is malloc'd. */
int stream_mpi_recv_lines(int src, char **text, size_t *n, long *errors);
/* Another rank: its next batch's lines to rank 0. Nonzero on failure (printed). */
int stream_mpi_send_lines(const char *text, size_t n, long errors);
/* --mpi-schedule dynamic. Rank 0: the rank of a pending request for work (consumed), 0 if
 * none, -1 on failure; its answer, global batch j or -1 for "none left". Another rank: asks
 * rank 0 and waits for the answer in *j. Nonzero on failure (printed). */
int stream_mpi_poll_request(void);
int stream_mpi_assign(int dest, long j);
int stream_mpi_request(long *j);
/* pagoda bench --mpi: each rank's `runs` (a JSON array) tagged with "rank" and gathered into
 * rank 0's, in rank order. Nonzero on failure (printed). */
int stream_mpi_gather_runs(json_t *runs);
/* Finalises MPI when it was initialised; returns the exit status to use (rc, made the worst of
 * all ranks' so that mpirun reports a failure of any). */
int stream_mpi_end(int rc);
#else
static inline int stream_mpi_launched(void)
{
    return 0;
}
static inline int stream_mpi_begin(int *rank, int *ranks)
{
    *rank = 0, *ranks = 1;
    return 0;
}
static inline int stream_mpi_local_rank(void)
{
    return 0;
}
static inline int stream_mpi_share_list(int *rc, char ***paths, int *n, unsigned char **done)
{
    (void)rc, (void)paths, (void)n, (void)done;
    return 0;
}
static inline int stream_mpi_agree(int rc)
{
    return rc;
}
static inline int stream_mpi_recv_lines(int src, char **text, size_t *n, long *errors)
{
    (void)src, (void)text, (void)n, (void)errors;
    return -1;
}
static inline int stream_mpi_send_lines(const char *text, size_t n, long errors)
{
    (void)text, (void)n, (void)errors;
    return -1;
}
static inline int stream_mpi_poll_request(void)
{
    return 0;
}
static inline int stream_mpi_assign(int dest, long j)
{
    (void)dest, (void)j;
    return -1;
}
static inline int stream_mpi_request(long *j)
{
    *j = -1;
    return -1;
}
static inline int stream_mpi_gather_runs(json_t *runs)
{
    (void)runs;
    return 0;
}
static inline int stream_mpi_end(int rc)
{
    return rc;
}
#endif

#endif
