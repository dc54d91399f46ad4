/* A few worker threads beside an instance's thread, for the Triton backend's two per-request
 * loops (docs/serving.md): the batch gather, whose requests' input buffers are copied into one
 * batch by the caller and the workers, each taking an equal range of the bytes (one thread
 * copies about 10 GB/s: ResNet-50's 45 rows of 602 KB took 2.9 ms of an execution on the H200),
 * and the answers, each request's response made and sent by one of them (30-70 us a request
 * in Triton: with one thread, a request of a batch of 20-44 waited 0.7 ms on average for its
 * answer). Independent of Triton's API, so that it is tested on its own. */
#ifndef TCT_GATHER_H
#define TCT_GATHER_H

#include <stddef.h>

typedef struct tct_copy {
    void *dst;
    const void *src;
    size_t bytes;
} tct_copy;

/* Worker threads, owned by an instance; one thread uses a set at a time. */
typedef struct tct_workers tct_workers;

/* Starts `workers` threads (1 to 64). Returns 0, or an errno value (nothing started). */
int tct_workers_create(int workers, tct_workers **out);
/* Stops and joins the workers; NULL is a no-op. */
void tct_workers_free(tct_workers *workers);
/* Calls fn(arg, slot, slots) once for each slot of 0 .. slots - 1, slots being the workers
 * plus one: slot 0 on the calling thread, the others on the workers, and returns when all have
 * returned. A NULL set calls fn(arg, 0, 1) alone. */
void tct_workers_each(tct_workers *workers, void (*fn)(void *arg, int slot, int slots), void *arg);
/* Performs the n copies (none overlapping), returning when all are done. Batches below
 * TCT_COPY_PARALLEL_MIN bytes in all, or a NULL set, are copied by the calling thread alone. */
void tct_copy_run(tct_workers *workers, const tct_copy *copies, size_t n);

#define TCT_COPY_PARALLEL_MIN ((size_t)1 << 20)

#endif
