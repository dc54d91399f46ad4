/* The batches in flight of pipeline.h: the slots' states and the queue of submitted slots under
 * one lock, one runner thread. */
#include "pipeline.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

struct tct_pipeline {
    pthread_mutex_t lock;
    pthread_cond_t changed; /* a job submitted, a slot freed, or stop */
    pthread_t runner;
    tct_run_fn run;
    void *user;
    int num_slots;
    int taken[TCT_PIPELINE_MAX_SLOTS]; /* from tct_pipeline_take until run (or given back) */
    void *jobs[TCT_PIPELINE_MAX_SLOTS];
    int queue[TCT_PIPELINE_MAX_SLOTS]; /* submitted slots, oldest first, from head on */
    int head, queued;
    int stop;
};

static void *runner_main(void *arg) {
    tct_pipeline *p = arg;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->queued && !p->stop) pthread_cond_wait(&p->changed, &p->lock);
        if (!p->queued) break; /* stopping, every job run */
        int slot = p->queue[p->head];
        p->head = (p->head + 1) % p->num_slots;
        p->queued--;
        void *job = p->jobs[slot];
        pthread_mutex_unlock(&p->lock);
        p->run(job, p->user);
        pthread_mutex_lock(&p->lock);
        p->jobs[slot] = NULL;
        p->taken[slot] = 0;
        pthread_cond_broadcast(&p->changed);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

int tct_pipeline_create(int slots, tct_run_fn run, void *user, tct_pipeline **out) {
    *out = NULL;
    if (slots < 1 || slots > TCT_PIPELINE_MAX_SLOTS || !run) return EINVAL;
    tct_pipeline *p = calloc(1, sizeof *p);
    if (!p) return ENOMEM;
    p->num_slots = slots;
    p->run = run;
    p->user = user;
    int e = pthread_mutex_init(&p->lock, NULL);
    if (!e && (e = pthread_cond_init(&p->changed, NULL))) pthread_mutex_destroy(&p->lock);
    if (!e && (e = pthread_create(&p->runner, NULL, runner_main, p))) {
        pthread_cond_destroy(&p->changed);
        pthread_mutex_destroy(&p->lock);
    }
    if (e) {
        free(p);
        return e;
    }
    *out = p;
    return 0;
}

void tct_pipeline_free(tct_pipeline *p) {
    if (!p) return;
    pthread_mutex_lock(&p->lock);
    p->stop = 1;
    pthread_cond_broadcast(&p->changed);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->runner, NULL);
    pthread_cond_destroy(&p->changed);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

/* The first free slot, waited for (under p->lock). */
static int free_slot(tct_pipeline *p) {
    for (;;) {
        for (int s = 0; s < p->num_slots; s++)
            if (!p->taken[s]) return s;
        pthread_cond_wait(&p->changed, &p->lock);
    }
}

int tct_pipeline_take(tct_pipeline *p) {
    pthread_mutex_lock(&p->lock);
    int s = free_slot(p);
    p->taken[s] = 1;
    pthread_mutex_unlock(&p->lock);
    return s;
}

void tct_pipeline_give_back(tct_pipeline *p, int slot) {
    pthread_mutex_lock(&p->lock);
    p->taken[slot] = 0;
    pthread_cond_broadcast(&p->changed);
    pthread_mutex_unlock(&p->lock);
}

void tct_pipeline_submit(tct_pipeline *p, int slot, void *job) {
    pthread_mutex_lock(&p->lock);
    p->jobs[slot] = job;
    p->queue[(p->head + p->queued) % p->num_slots] = slot;
    p->queued++;
    pthread_cond_broadcast(&p->changed);
    pthread_mutex_unlock(&p->lock);
}

void tct_pipeline_wait_free(tct_pipeline *p) {
    pthread_mutex_lock(&p->lock);
    free_slot(p);
    pthread_mutex_unlock(&p->lock);
}
