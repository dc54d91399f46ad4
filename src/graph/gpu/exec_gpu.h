/* The GPU executor: a logical plan made real (packed weights on the device, cuDNN and cuBLASLt
 * plans chosen by timing), and contexts that run it on a stream, captured once in a CUDA graph. */
#ifndef TCI_GRAPH_GPU_EXEC_GPU_H
#define TCI_GRAPH_GPU_EXEC_GPU_H

#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stdint.h>

#include "graph/plan.h"

typedef struct exec_gpu_engine exec_gpu_engine;
typedef struct exec_gpu_context exec_gpu_context;

/* Plans other input shapes for a context (see exec_gpu_engine_create): the optimised graph with
 * dim d of input i of built (the engine's plan, inputs in its order) set to
 * dims[i * TCI_MAX_RANK + d], and its plan, built with the options the engine's plan was. On success both pass to the
 * engine, which keeps the graph alive as long as the plan; on failure both are left NULL.
 * Called from exec_gpu_run and exec_gpu_run_device, on the thread running the context. */
typedef tci_status (*exec_gpu_replan_fn)(void *user, const plan *built, const int64_t *dims,
                                         ir_graph **out_graph, plan **out_plan);

/* TCI_OK when a CUDA GPU is usable, else TCI_ERR_NO_DEVICE (what exec_gpu_engine_create
 * returns there): lets a caller fail before planning. */
tci_status exec_gpu_check_device(void);

/* Makes a plan real on the GPU. Needs a GPU: TCI_ERR_NO_DEVICE otherwise. built (plan_build of
 * an optimised graph with fully known shapes, with options) passes to the engine, also on
 * failure; the graph it was built from must outlive the engine, and so must
 * options->fp32_layers. replan (may be NULL): with it, a context also runs inputs with dims
 * smaller than built (another batch size or sequence length; which dims may be smaller is the
 * caller's to check), planning each such set of input shapes through replan(replan_user, ...)
 * on first use while keeping the built engine's weights and library plans; replan_user must
 * outlive the engine. kernels: the families convolutions may run on (own
 * WMMA kernels against cuDNN, timed per layer, by default). timing_cache_path (may be NULL): a
 * file of earlier choices for this GPU and these library versions; layers found there are not
 * timed, the others are, and the file is rewritten with them. choices (may be NULL): the
 * kernel choices of an engine file (exec_gpu_engine_choices of an engine built on this machine),
 * used like timing-cache entries. progress (may be NULL): called with progress_user as the
 * kernel of each convolution and GEMM is chosen (tci_progress_fn's "choosing kernels"). */
tci_status exec_gpu_engine_create(plan *built, const plan_options *options, tci_kernels kernels,
                                  const char *timing_cache_path, const char *choices,
                                  exec_gpu_replan_fn replan, void *replan_user,
                                  tci_progress_fn progress, void *progress_user,
                                  exec_gpu_engine **out_engine);
void exec_gpu_engine_destroy(exec_gpu_engine *engine);
const plan *exec_gpu_engine_plan(const exec_gpu_engine *engine);
/* The kernel choice of every tuned conv and GEMM step, one timing-cache line each (malloc'd). */
tci_status exec_gpu_engine_choices(const exec_gpu_engine *engine, char **out_text);
/* What kernel choices are valid for: the GPU model and compute capability of the calling
 * thread's current device (the engine's: the api makes it current for its calls; no device
 * index, so timing caches and engine files move between devices of one model), the CUDA
 * runtime, cuDNN and cuBLASLt versions, and this build's WMMA config tables. */
tci_status exec_gpu_machine(char *buf, size_t size);
/* Conv and GEMM layers whose kernel was chosen by timing, and from the timing cache. */
void exec_gpu_engine_tuning(const exec_gpu_engine *engine, int *layers_timed, int *layers_cached);
/* What ran a plan step: the library algorithm or our kernel's name. */
const char *exec_gpu_step_kernel(const exec_gpu_engine *engine, int step);

/* Sticky CUDA errors (a kernel fault, an illegal address) break the process's CUDA context for
 * good. exec_gpu_guard takes the status a call on context c returned (c may be NULL for calls
 * that make one): a TCI_ERR_CUDA that left such an error marks c lost and becomes
 * TCI_ERR_DEVICE_LOST, naming the error and what failed (the step and node where a launch
 * failed); anything else passes through. exec_gpu_check_lost is TCI_ERR_DEVICE_LOST at once,
 * without any CUDA call, once c is lost, else TCI_OK. */
tci_status exec_gpu_guard(exec_gpu_context *c, tci_status st);
tci_status exec_gpu_check_lost(const exec_gpu_context *c);

/* use_graph: capture the plan in a CUDA graph on the first run and replay it afterwards. */
tci_status exec_gpu_context_create(const exec_gpu_engine *engine, bool use_graph,
                                   exec_gpu_context **out_context);
void exec_gpu_context_destroy(exec_gpu_context *context);

/* Inputs in engine order (fp32 NCHW for float inputs: the host's, or with device_inputs,
 * dense buffers in the memory of the engine's device) -> outputs on the host (fp32 for float
 * outputs), valid until the next run. Each input has the built rank and dims from 1 up to
 * the built ones (smaller ones re-plan: see exec_gpu_engine_create); the outputs then have the
 * shapes of that variant. A context keeps up to EXEC_GPU_MAX_VARIANTS shape variants besides
 * the built one, each with its own CUDA graph; a new one past that replaces the one used least
 * recently (planned again if its shapes come back). */
enum { EXEC_GPU_MAX_VARIANTS = 16 };
tci_status exec_gpu_run(exec_gpu_context *context, const tci_tensor *inputs, size_t num_inputs,
                        bool device_inputs);
const tci_tensor *exec_gpu_output(const exec_gpu_context *context, size_t index);
/* Output index of the last exec_gpu_run in the device's memory (dense, the host dtype: what
 * exec_gpu_output holds on the host), valid until the next run; *out gets exec_gpu_output's
 * name, dtype and dims with the device pointer. After a device run, or before any run:
 * TCI_ERR_INVALID_ARGUMENT. */
tci_status exec_gpu_output_device(const exec_gpu_context *context, size_t index, tci_tensor *out);

/* The plan tensor of engine input / output index (its device dtype, layout and dims as built),
 * or NULL. */
const plan_tensor *exec_gpu_io_tensor(const exec_gpu_engine *engine, bool output, size_t index);

/* Runs on the caller's device buffers (engine inputs, then outputs; in the plan tensors'
 * dtype and layout), ordered on the caller's stream; see tci_context_run_device. */
tci_status exec_gpu_run_device(exec_gpu_context *context, const void *const *inputs,
                               void *const *outputs, const int64_t *leading_dims,
                               cudaStream_t stream);

/* NaN and +-Inf values in each output of the last run (counts[num_outputs]), counted on the
 * device as part of every run; after exec_gpu_run_device this waits for the run. */
tci_status exec_gpu_nonfinite(exec_gpu_context *context, uint64_t *counts);
/* Re-runs the last run's inputs step by step, without the CUDA graph, and finds where NaN or
 * Inf values first appear: *out_input, the engine input that already holds some, or
 * *out_step, the first step whose output does (-1 each when none; the values then came from
 * none of the steps, e.g. a run on other inputs since). */
tci_status exec_gpu_locate_nonfinite(exec_gpu_context *context, int *out_input, int *out_step);
/* The plan of the shapes the context ran last (steps as exec_gpu_locate_nonfinite numbers them). */
const plan *exec_gpu_context_plan(const exec_gpu_context *context);

/* Times `iterations` executions of the plan on the inputs of the last run (after `warmup`
 * untimed ones), each with CUDA events; times_ms has `iterations` entries. */
tci_status exec_gpu_bench(exec_gpu_context *context, int iterations, int warmup, float *times_ms);

/* Runs the plan step by step `iterations` times with events around each step; step_ms has
 * plan->num_steps entries and receives the median time of each step. */
tci_status exec_gpu_profile(exec_gpu_context *context, int iterations, float *step_ms);

#endif
