/* An instance's batches in flight (the parameter pipeline_depth): the execute call takes a free
 * slot (waiting for one), gathers its batch into the slot's buffers and submits it; the
 * pipeline's runner thread runs the submitted jobs one at a time, in the order submitted, and
 * hands each to the finisher thread, which finishes them (answers the batch's requests) in the
 * same order and then frees the slot. With two slots the next batch is gathered while the
 * engine runs one, and the runner starts the next run while the finisher answers the last; an
 * execute call that returns only once a slot is free (tct_pipeline_wait_free) leaves Triton's
 * dynamic batcher a whole run's time to fill the next batch, and with one slot answers its
 * batch before it returns. Independent of Triton's API, so that it is tested on its own. */
#ifndef TCT_PIPELINE_H
#define TCT_PIPELINE_H

#define TCT_PIPELINE_MAX_SLOTS 3

typedef struct tct_pipeline tct_pipeline;

/* A stage of a submitted job (user: tct_pipeline_create's): run, on the runner thread; then
 * finish, on the finisher thread, once its run has returned. The job's slot is free once
 * finish returns. */
typedef void (*tct_run_fn)(void *job, void *user);

/* Starts the runner and the finisher of a pipeline of `slots` slots
 * (1..TCT_PIPELINE_MAX_SLOTS); finish NULL: none, a slot free once its run returns. Returns 0,
 * or an errno value (nothing started). */
int tct_pipeline_create(int slots, tct_run_fn run, tct_run_fn finish, void *user,
                        tct_pipeline **out);
/* Runs and finishes every job submitted, then stops and joins the threads; NULL is a no-op. */
void tct_pipeline_free(tct_pipeline *pipeline);
/* A free slot, waited for, now taken by the caller. */
int tct_pipeline_take(tct_pipeline *pipeline);
/* Frees a taken slot whose batch is not submitted (its gather failed). */
void tct_pipeline_give_back(tct_pipeline *pipeline, int slot);
/* Queues job, gathered into taken slot `slot`, for the runner. */
void tct_pipeline_submit(tct_pipeline *pipeline, int slot, void *job);
/* Returns once some slot is free. */
void tct_pipeline_wait_free(tct_pipeline *pipeline);

#endif
