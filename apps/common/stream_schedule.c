/* stream_schedule.c — which batches a rank runs and writes: the local-to-global batch
 * mapping, --mpi-schedule dynamic (rank 0 hands batches out on request) and the writer's
 * position (stream_mpi.c carries the messages). */
#include <limits.h>
#include <pthread.h>
#include <unistd.h>

#include "stream_mpi.h"
#include "stream_state.h"

/* The global batch of local batch k, and its first image in work[]. */
long stream_global_batch(const stream *s, long k)
{
    return s->dynamic ? s->assigned[k] : k * s->ranks + s->rank;
}

/* ---- --mpi-schedule dynamic ---- */

/* Records global batch j (or the end, j < 0) as this rank's next local batch (the lock held). */
static void take_assignment(stream *s, long j)
{
    if (j < 0) {
        s->nlocal = s->avail;
    } else {
        s->assigned[s->avail++] = j;
    }
    pthread_cond_broadcast(&s->cv);
}

/* Rank 0: the next global batch for `rank` (-1 when none is left). */
static long hand_out(stream *s, int rank)
{
    if (s->next_global >= s->nbatch)
        return -1;
    long j = s->next_global++;
    s->owner[j] = rank;
    if (rank == 0)
        s->local_of[j] = s->avail;
    return j;
}

/* Keeps two batches assigned beyond those the devices have taken (the lock held), so that a
 * slow rank holds little: rank 0 takes its own and answers the other ranks' requests; another
 * rank asks rank 0. Nonzero on an MPI failure. */
int stream_schedule(stream *s)
{
    if (!s->dynamic)
        return 0;
    int want = s->nlocal == LONG_MAX && s->avail - s->taken < 2;
    if (s->rank == 0) {
        int src;
        while ((src = stream_mpi_poll_request()) > 0) {
            long j = hand_out(s, src);
            s->ended += j < 0;
            if (stream_mpi_assign(src, j))
                return -1;
        }
        if (src < 0)
            return -1;
        if (want)
            take_assignment(s, hand_out(s, 0));
        return 0;
    }
    if (!want)
        return 0;
    long j;
    pthread_mutex_unlock(&s->mu);
    int rc = stream_mpi_request(&j);
    pthread_mutex_lock(&s->mu);
    if (!rc)
        take_assignment(s, j);
    return rc;
}

/* Rank 0 after its last batch: the remaining requests answered "none left". */
void stream_schedule_end(stream *s)
{
    while (s->dynamic && s->rank == 0 && s->ended < s->ranks - 1) {
        int src = stream_mpi_poll_request();
        if (src < 0 || (src > 0 && stream_mpi_assign(src, -1)))
            return;
        s->ended += src > 0;
        if (!src)
            usleep(1000);
    }
}

/* What the writer's position `pos` stands for: global batch *j (-1: not handed out yet), its
 * local index *k on its rank *src. 0 when the writer is done. */
int stream_where(const stream *s, long pos, long *j, long *k, int *src)
{
    if (s->rank == 0) {
        if (pos >= s->nbatch)
            return 0;
        *j = pos;
        if (s->dynamic && pos >= s->next_global) {
            *j = -1;
            return 1;
        }
        *src = s->dynamic ? s->owner[pos] : (int)(pos % s->ranks);
        *k = s->dynamic ? s->local_of[pos] : pos / s->ranks;
        return 1;
    }
    if (pos >= s->nlocal)
        return 0;
    *j = pos < s->avail ? stream_global_batch(s, pos) : -1;
    *k = pos, *src = s->rank;
    return 1;
}
