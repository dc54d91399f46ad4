/* The batches in flight of pipeline.h: the slots' states and the queues of submitted and of run
 * slots under one lock; a runner thread and, where a finish stage is given, a finisher thread. */
#include "pipeline.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

/* Slots in order, oldest first from head */
typedef struct {
    int slots[TCT_PIPELINE_MAX_SLOTS];
    int head, count;
} slot_queue;

struct tct_pipeline {
    pthread_mutex_t lock;
    pthread_cond_t changed; /* a job submitted, run or finished, a slot freed, or stop */
    pthread_t runner, finisher;
    tct_run_fn run, finish;
    void *user;
    int num_slots;
    int taken[TCT_PIPELINE_MAX_SLOTS]; /* from tct_pipeline_take until finished (or given back) */
    void *jobs[TCT_PIPELINE_MAX_SLOTS];
    slot_queue submitted, ran; /* for the runner; for the finisher */
    int stop, runner_done;
};

static void push(tct_pipeline *p, slot_queue *q, int slot) {
    q->slots[(q->head + q->count) % p->num_slots] = slot;
    q->count++;
}

static int pop(tct_pipeline *p, slot_queue *q) {
    int slot = q->slots[q->head];
    q->head = (q->head + 1) % p->num_slots;
    q->count--;
    return slot;
}

/* Frees slot (under p->lock). */
static void release(tct_pipeline *p, int slot) {
    p->jobs[slot] = NULL;
    p->taken[slot] = 0;
    pthread_cond_broadcast(&p->changed);
}

static void *runner_main(void *arg) {
    tct_pipeline *p = arg;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->submitted.count && !p->stop) pthread_cond_wait(&p->changed, &p->lock);
        if (!p->submitted.count) break; /* stopping, every job run */
        int slot = pop(p, &p->submitted);
        void *job = p->jobs[slot];
        pthread_mutex_unlock(&p->lock);
        p->run(job, p->user);
        pthread_mutex_lock(&p->lock);
        if (p->finish) {
            push(p, &p->ran, slot);
            pthread_cond_broadcast(&p->changed);
        } else {
            release(p, slot);
        }
    }
    p->runner_done = 1;
    pthread_cond_broadcast(&p->changed);
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

static void *finisher_main(void *arg) {
    tct_pipeline *p = arg;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->ran.count && !p->runner_done) pthread_cond_wait(&p->changed, &p->lock);
        if (!p->ran.count) break; /* the runner has stopped and every job is finished */
        int slot = pop(p, &p->ran);
        void *job = p->jobs[slot];
        pthread_mutex_unlock(&p->lock);
        p->finish(job, p->user);
        pthread_mutex_lock(&p->lock);
        release(p, slot);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

int tct_pipeline_create(int slots, tct_run_fn run, tct_run_fn finish, void *user,
                        tct_pipeline **out) {
    *out = NULL;
    if (slots < 1 || slots > TCT_PIPELINE_MAX_SLOTS || !run) return EINVAL;
    tct_pipeline *p = calloc(1, sizeof *p);
    if (!p) return ENOMEM;
    p->num_slots = slots;
    p->run = run;
    p->finish = finish;
    p->user = user;
    int e = pthread_mutex_init(&p->lock, NULL);
    if (e) goto no_lock;
    if ((e = pthread_cond_init(&p->changed, NULL))) goto no_cond;
    if (finish && (e = pthread_create(&p->finisher, NULL, finisher_main, p))) goto no_finisher;
    if ((e = pthread_create(&p->runner, NULL, runner_main, p))) goto no_runner;
    *out = p;
    return 0;
no_runner:
    if (finish) { /* nothing will run: the finisher stops at once */
        pthread_mutex_lock(&p->lock);
        p->runner_done = 1;
        pthread_cond_broadcast(&p->changed);
        pthread_mutex_unlock(&p->lock);
        pthread_join(p->finisher, NULL);
    }
no_finisher:
    pthread_cond_destroy(&p->changed);
no_cond:
    pthread_mutex_destroy(&p->lock);
no_lock:
    free(p);
    return e;
}

void tct_pipeline_free(tct_pipeline *p) {
    if (!p) return;
    pthread_mutex_lock(&p->lock);
    p->stop = 1;
    pthread_cond_broadcast(&p->changed);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->runner, NULL);
    if (p->finish) pthread_join(p->finisher, NULL);
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
    release(p, slot);
    pthread_mutex_unlock(&p->lock);
}

void tct_pipeline_submit(tct_pipeline *p, int slot, void *job) {
    pthread_mutex_lock(&p->lock);
    p->jobs[slot] = job;
    push(p, &p->submitted, slot);
    pthread_cond_broadcast(&p->changed);
    pthread_mutex_unlock(&p->lock);
}

void tct_pipeline_wait_free(tct_pipeline *p) {
    pthread_mutex_lock(&p->lock);
    free_slot(p);
    pthread_mutex_unlock(&p->lock);
}
