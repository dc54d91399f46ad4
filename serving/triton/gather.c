/* The workers of gather.h, and the copies: each copy run splits the concatenated bytes of its
 * copies into one equal range per slot (the caller's included), cut at cache-line multiples. */
#include "gather.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct tct_workers {
    pthread_mutex_t lock;
    pthread_cond_t work; /* a new job, or stop */
    pthread_cond_t done; /* the last worker finished its slot */
    pthread_t *threads;
    int workers;
    /* the job, set under lock by tct_workers_each and stable until pending is 0 */
    void (*fn)(void *arg, int slot, int slots);
    void *arg;
    unsigned long generation;
    int next_slot; /* the slot the next waking worker takes (slot 0 is the caller's) */
    int pending;   /* workers not done with this job */
    int stop;
};

/* Copies bytes [from, to) of the concatenation of copies[0..n). */
static void copy_range(const tct_copy *copies, size_t n, size_t from, size_t to) {
    size_t at = 0;
    for (size_t i = 0; i < n && at < to; i++) {
        size_t start = at, end = at + copies[i].bytes;
        at = end;
        if (end <= from) continue;
        size_t lo = from > start ? from - start : 0, hi = (to < end ? to : end) - start;
        if (hi > lo)
            memcpy((char *)copies[i].dst + lo, (const char *)copies[i].src + lo, hi - lo);
    }
}

/* Slot k's range of total bytes split over parts, cut at 64-byte multiples. */
static void slot_range(size_t total, int parts, int k, size_t *from, size_t *to) {
    size_t step = (total / (size_t)parts + 63) & ~(size_t)63;
    *from = step * (size_t)k < total ? step * (size_t)k : total;
    *to = k == parts - 1 || step * (size_t)(k + 1) > total ? total : step * (size_t)(k + 1);
}

static void *worker(void *arg) {
    tct_workers *c = arg;
    unsigned long seen = 0;
    pthread_mutex_lock(&c->lock);
    for (;;) {
        while (!c->stop && c->generation == seen) pthread_cond_wait(&c->work, &c->lock);
        if (c->stop) break;
        seen = c->generation;
        int slot = c->next_slot++;
        void (*fn)(void *, int, int) = c->fn;
        void *job = c->arg;
        pthread_mutex_unlock(&c->lock);
        fn(job, slot, c->workers + 1);
        pthread_mutex_lock(&c->lock);
        if (--c->pending == 0) pthread_cond_signal(&c->done);
    }
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

int tct_workers_create(int workers, tct_workers **out) {
    *out = NULL;
    if (workers < 1 || workers > 64) return EINVAL;
    tct_workers *c = calloc(1, sizeof *c);
    if (!c) return ENOMEM;
    c->threads = calloc((size_t)workers, sizeof *c->threads);
    if (!c->threads) {
        free(c);
        return ENOMEM;
    }
    int e = pthread_mutex_init(&c->lock, NULL);
    if (e) {
        free(c->threads);
        free(c);
        return e;
    }
    pthread_cond_init(&c->work, NULL);
    pthread_cond_init(&c->done, NULL);
    for (int i = 0; i < workers; i++) {
        e = pthread_create(&c->threads[i], NULL, worker, c);
        if (e) break;
        c->workers++;
    }
    if (e) {
        tct_workers_free(c);
        return e;
    }
    *out = c;
    return 0;
}

void tct_workers_free(tct_workers *c) {
    if (!c) return;
    pthread_mutex_lock(&c->lock);
    c->stop = 1;
    pthread_cond_broadcast(&c->work);
    pthread_mutex_unlock(&c->lock);
    for (int i = 0; i < c->workers; i++) pthread_join(c->threads[i], NULL);
    pthread_cond_destroy(&c->work);
    pthread_cond_destroy(&c->done);
    pthread_mutex_destroy(&c->lock);
    free(c->threads);
    free(c);
}

void tct_workers_each(tct_workers *c, void (*fn)(void *arg, int slot, int slots), void *arg) {
    if (!c) {
        fn(arg, 0, 1);
        return;
    }
    pthread_mutex_lock(&c->lock);
    c->fn = fn;
    c->arg = arg;
    c->next_slot = 1;
    c->pending = c->workers;
    c->generation++;
    pthread_cond_broadcast(&c->work);
    pthread_mutex_unlock(&c->lock);
    fn(arg, 0, c->workers + 1);
    pthread_mutex_lock(&c->lock);
    while (c->pending) pthread_cond_wait(&c->done, &c->lock);
    pthread_mutex_unlock(&c->lock);
}

typedef struct {
    const tct_copy *copies;
    size_t n, total;
} copy_job;

static void copy_slot(void *arg, int slot, int slots) {
    const copy_job *job = arg;
    size_t from, to;
    slot_range(job->total, slots, slot, &from, &to);
    copy_range(job->copies, job->n, from, to);
}

void tct_copy_run(tct_workers *c, const tct_copy *copies, size_t n) {
    copy_job job = {copies, n, 0};
    for (size_t i = 0; i < n; i++) job.total += copies[i].bytes;
    if (job.total < TCT_COPY_PARALLEL_MIN) c = NULL;
    tct_workers_each(c, copy_slot, &job);
}
