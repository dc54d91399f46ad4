/* The copy workers of gather.h: each run splits the concatenated bytes of its copies into one
 * equal range per thread (the caller's included), cut at cache-line multiples. */
#include "gather.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct tct_copier {
    pthread_mutex_t lock;
    pthread_cond_t work; /* a new job, or stop */
    pthread_cond_t done; /* the last worker finished its range */
    pthread_t *threads;
    int workers;
    /* the job, set under lock by tct_copier_run and stable until pending is 0 */
    const tct_copy *copies;
    size_t n, total;
    unsigned long generation;
    int next_slot; /* the range the next waking worker takes (slot 0 is the caller's) */
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
    tct_copier *c = arg;
    unsigned long seen = 0;
    pthread_mutex_lock(&c->lock);
    for (;;) {
        while (!c->stop && c->generation == seen) pthread_cond_wait(&c->work, &c->lock);
        if (c->stop) break;
        seen = c->generation;
        int slot = c->next_slot++;
        const tct_copy *copies = c->copies;
        size_t n = c->n, from, to;
        slot_range(c->total, c->workers + 1, slot, &from, &to);
        pthread_mutex_unlock(&c->lock);
        copy_range(copies, n, from, to);
        pthread_mutex_lock(&c->lock);
        if (--c->pending == 0) pthread_cond_signal(&c->done);
    }
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

int tct_copier_create(int workers, tct_copier **out) {
    *out = NULL;
    if (workers < 1 || workers > 64) return EINVAL;
    tct_copier *c = calloc(1, sizeof *c);
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
        tct_copier_free(c);
        return e;
    }
    *out = c;
    return 0;
}

void tct_copier_free(tct_copier *c) {
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

void tct_copier_run(tct_copier *c, const tct_copy *copies, size_t n) {
    size_t total = 0;
    for (size_t i = 0; i < n; i++) total += copies[i].bytes;
    if (!c || total < TCT_COPY_PARALLEL_MIN) {
        copy_range(copies, n, 0, total);
        return;
    }
    size_t from, to;
    pthread_mutex_lock(&c->lock);
    c->copies = copies;
    c->n = n;
    c->total = total;
    c->next_slot = 1;
    c->pending = c->workers;
    c->generation++;
    pthread_cond_broadcast(&c->work);
    pthread_mutex_unlock(&c->lock);
    slot_range(total, c->workers + 1, 0, &from, &to);
    copy_range(copies, n, from, to);
    pthread_mutex_lock(&c->lock);
    while (c->pending) pthread_cond_wait(&c->done, &c->lock);
    pthread_mutex_unlock(&c->lock);
}
