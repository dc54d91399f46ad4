/* Parallel host copies for the Triton backend's batch gather: the requests' input buffers are
 * copied into one batch by the instance's thread and a few workers, each taking an equal range
 * of the bytes. One thread copies about 10 GB/s, so ResNet-50's 45 rows of 602 KB took 2.9 ms of
 * an execution on the H200 (docs/serving.md); the gather is the server's largest cost after
 * the engine. Independent of Triton's API, so that it is tested on its own. */
#ifndef TCT_GATHER_H
#define TCT_GATHER_H

#include <stddef.h>

typedef struct tct_copy {
    void *dst;
    const void *src;
    size_t bytes;
} tct_copy;

/* An instance's copy workers, owned by the instance (one instance's thread uses it at a time). */
typedef struct tct_copier tct_copier;

/* Starts `workers` threads (1 to 64). Returns 0, or an errno value (nothing started). */
int tct_copier_create(int workers, tct_copier **out);
/* Stops and joins the workers; NULL is a no-op. */
void tct_copier_free(tct_copier *copier);
/* Performs the n copies (none overlapping), returning when all are done. Batches below
 * TCT_COPY_PARALLEL_MIN bytes in all, or a NULL copier, are copied by the calling thread alone. */
void tct_copier_run(tct_copier *copier, const tct_copy *copies, size_t n);

#define TCT_COPY_PARALLEL_MIN ((size_t)1 << 20)

#endif
