/* The Triton backend's batches in flight (serving/triton/pipeline.c): jobs run one at a time in
 * the order submitted; with two slots a second batch is taken while one runs, and an execute
 * call's wait for a free slot lasts until a run ends; with one slot the next take waits for the
 * run; freeing the pipeline runs what was submitted. With a finish stage, the next job runs
 * while the last is finished, jobs finish in order and after their runs, a slot is free only
 * once its job is finished, and freeing the pipeline finishes every job. A run is held at a
 * gate the test opens, so that "still waiting" is seen while the run provably has not ended. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "harness.h"
#include "pipeline.h"

typedef struct runs {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int order[64]; /* the jobs' numbers, in the order run */
    int count;
    int running; /* runs in progress: never above 1 */
    int gate;    /* runs may end while set (the test holds them until it opens it) */
} runs;

static void run(void *job, void *user) {
    runs *r = user;
    pthread_mutex_lock(&r->lock);
    ck_assert_int_eq(r->running++, 0);
    while (!r->gate) pthread_cond_wait(&r->changed, &r->lock);
    r->order[r->count++] = (int)(size_t)job;
    r->running--;
    pthread_cond_broadcast(&r->changed);
    pthread_mutex_unlock(&r->lock);
}

static void runs_init(runs *r, int gate) {
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->changed, NULL);
    r->gate = gate;
}

static void open_gate(runs *r) {
    pthread_mutex_lock(&r->lock);
    r->gate = 1;
    pthread_cond_broadcast(&r->changed);
    pthread_mutex_unlock(&r->lock);
}

static int ran(runs *r) {
    pthread_mutex_lock(&r->lock);
    int n = r->count;
    pthread_mutex_unlock(&r->lock);
    return n;
}

typedef struct waiter {
    tct_pipeline *p;
    int take; /* take a slot (else wait for a free one) */
    atomic_int done;
    int slot;
} waiter;

static void *wait_main(void *arg) {
    waiter *w = arg;
    if (w->take) w->slot = tct_pipeline_take(w->p);
    else tct_pipeline_wait_free(w->p);
    atomic_store(&w->done, 1);
    return NULL;
}

/* Starts w on thread t and sees it still waiting 50 ms later. */
static void start_blocked(waiter *w, pthread_t *t) {
    ck_assert_int_eq(pthread_create(t, NULL, wait_main, w), 0);
    struct timespec pause = {0, 50 * 1000000L};
    nanosleep(&pause, NULL);
    ck_assert_int_eq(atomic_load(&w->done), 0);
}

START_TEST(test_two_slots_overlap) {
    runs r;
    runs_init(&r, 0);
    tct_pipeline *p;
    ck_assert_int_eq(tct_pipeline_create(2, run, NULL, &r, &p), 0);
    int a = tct_pipeline_take(p);
    tct_pipeline_submit(p, a, (void *)1); /* runs, held at the gate */
    int b = tct_pipeline_take(p);         /* the other slot, at once: gathered meanwhile */
    ck_assert_int_ne(a, b);
    tct_pipeline_submit(p, b, (void *)2);
    /* both slots held: the execute call's wait for a free one lasts until a run ends */
    waiter w = {.p = p};
    pthread_t t;
    start_blocked(&w, &t);
    ck_assert_int_eq(ran(&r), 0);
    open_gate(&r);
    pthread_join(t, NULL);
    ck_assert_int_eq(atomic_load(&w.done), 1);
    /* many more, in order, one run at a time */
    for (int j = 3; j <= 40; j++) tct_pipeline_submit(p, tct_pipeline_take(p), (void *)(size_t)j);
    tct_pipeline_free(p); /* runs what is submitted */
    ck_assert_int_eq(r.count, 40);
    for (int j = 0; j < 40; j++) ck_assert_int_eq(r.order[j], j + 1);
}
END_TEST

START_TEST(test_one_slot_waits_for_the_run) {
    runs r;
    runs_init(&r, 0);
    tct_pipeline *p;
    ck_assert_int_eq(tct_pipeline_create(1, run, NULL, &r, &p), 0);
    int a = tct_pipeline_take(p);
    ck_assert_int_eq(a, 0);
    tct_pipeline_submit(p, a, (void *)1);
    waiter w = {.p = p, .take = 1};
    pthread_t t;
    start_blocked(&w, &t); /* the next batch waits for the run */
    open_gate(&r);
    pthread_join(t, NULL);
    ck_assert_int_eq(ran(&r), 1);
    ck_assert_int_eq(w.slot, 0);
    /* a slot given back (its gather failed) is free again, and nothing runs for it */
    tct_pipeline_give_back(p, w.slot);
    tct_pipeline_wait_free(p);
    tct_pipeline_submit(p, tct_pipeline_take(p), (void *)2);
    tct_pipeline_free(p);
    ck_assert_int_eq(r.count, 2);
    ck_assert_int_eq(r.order[1], 2);
}
END_TEST

/* The finish stage: its own gate, and the order in which jobs finished */
typedef struct finishes {
    runs *ran; /* the run stage's record: a job finishes only after its run */
    runs done; /* order: the jobs finished; gate: finishes may end */
} finishes;

static void finish(void *job, void *user) {
    finishes *f = user;
    pthread_mutex_lock(&f->ran->lock);
    int was_run = 0;
    for (int i = 0; i < f->ran->count; i++) was_run |= f->ran->order[i] == (int)(size_t)job;
    pthread_mutex_unlock(&f->ran->lock);
    ck_assert_msg(was_run, "job %d finished before its run", (int)(size_t)job);
    run(job, &f->done);
}

static void run_then_count(void *job, void *user) { run(job, ((finishes *)user)->ran); }

START_TEST(test_finish_overlaps_the_next_run) {
    runs r;
    finishes f = {.ran = &r};
    runs_init(&r, 1);
    runs_init(&f.done, 0); /* finishes held */
    tct_pipeline *p;
    ck_assert_int_eq(tct_pipeline_create(2, run_then_count, finish, &f, &p), 0);
    tct_pipeline_submit(p, tct_pipeline_take(p), (void *)1);
    tct_pipeline_submit(p, tct_pipeline_take(p), (void *)2);
    /* job 1 is being finished (held) while job 2 runs: both run, neither finished */
    struct timespec pause = {0, 1000000L};
    for (int i = 0; i < 5000 && ran(&r) < 2; i++) nanosleep(&pause, NULL);
    ck_assert_int_eq(ran(&r), 2);
    ck_assert_int_eq(ran(&f.done), 0);
    /* no slot is free until a job is finished */
    waiter w = {.p = p, .take = 1};
    pthread_t t;
    start_blocked(&w, &t);
    open_gate(&f.done);
    pthread_join(t, NULL);
    tct_pipeline_submit(p, w.slot, (void *)3);
    for (int j = 4; j <= 30; j++) tct_pipeline_submit(p, tct_pipeline_take(p), (void *)(size_t)j);
    tct_pipeline_free(p); /* runs and finishes what is submitted */
    ck_assert_int_eq(r.count, 30);
    ck_assert_int_eq(f.done.count, 30);
    for (int j = 0; j < 30; j++) {
        ck_assert_int_eq(r.order[j], j + 1);
        ck_assert_int_eq(f.done.order[j], j + 1);
    }
}
END_TEST

/* Three slots: three batches in flight, the fourth take waits */
START_TEST(test_three_slots) {
    runs r;
    finishes f = {.ran = &r};
    runs_init(&r, 0);
    runs_init(&f.done, 1);
    tct_pipeline *p;
    ck_assert_int_eq(tct_pipeline_create(3, run_then_count, finish, &f, &p), 0);
    int seen = 0;
    for (int j = 1; j <= 3; j++) {
        int slot = tct_pipeline_take(p);
        ck_assert_int_eq(seen & (1 << slot), 0);
        seen |= 1 << slot;
        tct_pipeline_submit(p, slot, (void *)(size_t)j);
    }
    waiter w = {.p = p, .take = 1};
    pthread_t t;
    start_blocked(&w, &t);
    open_gate(&r);
    pthread_join(t, NULL);
    tct_pipeline_give_back(p, w.slot);
    tct_pipeline_free(p);
    ck_assert_int_eq(f.done.count, 3);
}
END_TEST

START_TEST(test_bad_arguments) {
    runs r;
    runs_init(&r, 1);
    tct_pipeline *p = (tct_pipeline *)1;
    ck_assert_int_eq(tct_pipeline_create(0, run, NULL, &r, &p), EINVAL);
    ck_assert_ptr_null(p);
    ck_assert_int_eq(tct_pipeline_create(TCT_PIPELINE_MAX_SLOTS + 1, run, NULL, &r, &p), EINVAL);
    ck_assert_int_eq(tct_pipeline_create(1, NULL, run, &r, &p), EINVAL);
    tct_pipeline_free(NULL);
    ck_assert_int_eq(tct_pipeline_create(2, run, NULL, &r, &p), 0);
    tct_pipeline_free(p); /* nothing submitted */
    ck_assert_int_eq(r.count, 0);
}
END_TEST

int main(void) {
    Suite *s = suite_create("pipeline");
    TCase *tc = tcase_create("pipeline");
    tcase_add_test(tc, test_two_slots_overlap);
    tcase_add_test(tc, test_one_slot_waits_for_the_run);
    tcase_add_test(tc, test_finish_overlaps_the_next_run);
    tcase_add_test(tc, test_three_slots);
    tcase_add_test(tc, test_bad_arguments);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
