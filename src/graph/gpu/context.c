/* A context runs an engine on its own stream and arena: input / output conversion, the steps
 * captured in a CUDA graph per set of input shapes (shape variants), device I/O, benchmarking
 * and per-step profiling. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/gpu/gpu_internal.h"
#include "kernels/cuda_check.h"
#include "kernels/finite.h"
#include "kernels/layout.h"

/* Host dtype of an engine input/output: float stays fp32 on the host. */
static tci_dtype host_dtype(const plan_tensor *t) {
    return t->dtype == TCI_DTYPE_FLOAT16 || t->dtype == TCI_DTYPE_BFLOAT16 ? TCI_DTYPE_FLOAT
                                                                          : t->dtype;
}

/* The built input shapes as a variant's key (shape_variant.dims), malloc'd; NULL when out of
 * memory. */
static int64_t *built_dims(const plan *p) {
    int64_t *dims = calloc((size_t)p->num_inputs * TCI_MAX_RANK + 1, sizeof *dims);
    for (int i = 0; dims && i < p->num_inputs; i++) {
        const plan_tensor *t = gpu_tensor_of(p, p->input_tensors[i]);
        for (int d = 0; d < t->rank; d++) dims[(size_t)i * TCI_MAX_RANK + (size_t)d] = t->dims[d];
    }
    return dims;
}

tci_status exec_gpu_context_create(const exec_gpu_engine *e, bool use_graph,
                                   exec_gpu_context **out_context) {
    *out_context = NULL;
    const plan *p = e->plan;
    exec_gpu_context *c = calloc(1, sizeof *c);
    if (!c) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory creating a GPU context");
    c->base = e;
    c->engine = e;
    c->use_graph = use_graph;
    c->arena_bytes = p->arena_bytes;
    tci_status st = TCI_OK;
    c->variants = calloc(1, sizeof *c->variants);
    if (c->variants) {
        c->num_variants = 1;
        c->variants[0].dims = built_dims(p);
    }
    if (!c->variants || !c->variants[0].dims)
        st = status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory creating a GPU context");
    c->input_staging = calloc((size_t)p->num_inputs + 1, sizeof(void *));
    c->output_staging = calloc((size_t)p->num_outputs + 1, sizeof(void *));
    c->outputs = calloc((size_t)p->num_outputs + 1, sizeof(tci_tensor));
    c->events = calloc((size_t)p->num_steps * 2 + 2, sizeof(cudaEvent_t));
    c->device_io = calloc((size_t)(p->num_inputs + p->num_outputs) + 1, sizeof(void *));
    c->copy_output = calloc((size_t)p->num_outputs + 1, sizeof(bool));
    c->nonfinite_host = calloc((size_t)p->num_outputs + 1, sizeof(unsigned int));
    if (!c->input_staging || !c->output_staging || !c->outputs || !c->events || !c->device_io ||
        !c->copy_output || !c->nonfinite_host)
        st = status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory creating a GPU context");
#define CTX_CHECK(call)                                                                           \
    if (st == TCI_OK && (call) != 0)                                                              \
        st = status_error(TCI_ERR_CUDA, "%s failed creating a GPU context", #call);
    CTX_CHECK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    CTX_CHECK(cudnnCreate(&c->cudnn));
    CTX_CHECK(cublasLtCreate(&c->lt));
    /* device memory through gpu_malloc: running out is TCI_ERR_OUT_OF_MEMORY with the sizes, and
     * the destroy below frees what was taken */
#define CTX_ALLOC(ptr, bytes, what)                                                               \
    if (st == TCI_OK) st = gpu_malloc((void **)(ptr), (bytes), (what));
    CTX_ALLOC(&c->arena, p->arena_bytes, "the activation arena");
    CTX_ALLOC(&c->workspace, e->workspace_bytes, "the library workspace");
    if (st == TCI_OK) c->workspace_bytes = e->workspace_bytes;
    CTX_ALLOC(&c->gather_error, sizeof(int), "the index error flag");
    CTX_CHECK(cudaMemset(c->gather_error, 0, sizeof(int)));
    CTX_ALLOC(&c->nonfinite, ((size_t)p->num_outputs + 1) * sizeof(unsigned int), "NaN counters");
    for (int i = 0; i < p->num_inputs; i++) {
        const plan_tensor *t = gpu_tensor_of(p, p->input_tensors[i]);
        CTX_ALLOC(&c->input_staging[i],
                  (size_t)gpu_count_of(t) * tci_dtype_size(host_dtype(t)) + 1, "input staging");
    }
    for (int i = 0; i < p->num_outputs; i++) {
        const plan_tensor *t = gpu_tensor_of(p, p->output_tensors[i]);
        size_t bytes = (size_t)gpu_count_of(t) * tci_dtype_size(host_dtype(t));
        CTX_ALLOC(&c->output_staging[i], bytes + 1, "output staging");
        tci_tensor *o = &c->outputs[i];
        o->name = t->name;
        o->dtype = host_dtype(t);
        o->rank = t->rank;
        for (int d = 0; d < t->rank; d++) o->dims[d] = t->dims[d];
        o->data = malloc(bytes + 1);
        if (st == TCI_OK && !o->data) st = status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
    }
    for (int i = 0; i < p->num_steps * 2 + 2; i++) CTX_CHECK(cudaEventCreate(&c->events[i]));
    CTX_CHECK(cudaEventCreateWithFlags(&c->caller_ready, cudaEventDisableTiming));
    CTX_CHECK(cudaEventCreateWithFlags(&c->done, cudaEventDisableTiming));
#undef CTX_CHECK
#undef CTX_ALLOC
    if (st != TCI_OK) {
        exec_gpu_context_destroy(c);
        return st;
    }
    *out_context = c;
    return TCI_OK;
}

tci_status exec_gpu_guard(exec_gpu_context *c, tci_status st) {
    if (st != TCI_ERR_CUDA) return st;
    char broken[200];
    if (!gpu_context_broken(broken, sizeof broken)) return st;
    char text[512];
    snprintf(text, sizeof text,
             "the GPU context is lost (%s) after: %s. Every later call on this context returns "
             "this error: restart the process (a fault inside a kernel surfaces at the next "
             "synchronisation; tci_engine_options.no_cuda_graph with CUDA_LAUNCH_BLOCKING=1 "
             "names its layer)",
             broken, tci_last_error());
    if (c) {
        c->lost = true;
        snprintf(c->lost_text, sizeof c->lost_text, "%s", text);
    }
    return status_error(TCI_ERR_DEVICE_LOST, "%s", text);
}

tci_status exec_gpu_check_lost(const exec_gpu_context *c) {
    if (!c || !c->lost) return TCI_OK;
    return status_error(TCI_ERR_DEVICE_LOST, "%s", c->lost_text);
}

static void drop_graph(shape_variant *v) {
    if (v->captured) cudaGraphExecDestroy(v->graph);
    v->captured = false;
}

static void drop_graphs(exec_gpu_context *c) {
    for (int v = 0; v < c->num_variants; v++) drop_graph(&c->variants[v]);
}

/* Everything a variant holds (its key, graph, I/O record and engine); the base's engine is the
 * context's, not the variant's. */
static void free_variant(shape_variant *v) {
    drop_graph(v);
    free(v->dims);
    free(v->captured_io);
    exec_gpu_engine_destroy(v->engine);
    memset(v, 0, sizeof *v);
}

void exec_gpu_context_destroy(exec_gpu_context *c) {
    if (!c) return;
    const plan *p = c->base->plan;
    if (c->stream) cudaStreamSynchronize(c->stream);
    for (int v = 0; c->variants && v < c->num_variants; v++) free_variant(&c->variants[v]);
    for (int i = 0; c->events && i < p->num_steps * 2 + 2; i++)
        if (c->events[i]) cudaEventDestroy(c->events[i]);
    for (int i = 0; c->input_staging && i < p->num_inputs; i++) cudaFree(c->input_staging[i]);
    for (int i = 0; c->output_staging && i < p->num_outputs; i++) cudaFree(c->output_staging[i]);
    for (int i = 0; c->outputs && i < p->num_outputs; i++) free(c->outputs[i].data);
    cudaFree(c->gather_error);
    cudaFree(c->nonfinite);
    free(c->nonfinite_host);
    cudaFree(c->workspace);
    cudaFree(c->arena);
    if (c->lt) cublasLtDestroy(c->lt);
    if (c->cudnn) cudnnDestroy(c->cudnn);
    if (c->stream) cudaStreamDestroy(c->stream);
    if (c->caller_ready) cudaEventDestroy(c->caller_ready);
    if (c->done) cudaEventDestroy(c->done);
    free(c->variants);
    free(c->device_io);
    free(c->redirect);
    free(c->copy_output);
    free(c->input_staging);
    free(c->output_staging);
    free(c->outputs);
    free(c->events);
    free(c);
}

/* The caller's layout -> the plan's, for every input. */
static tci_status convert_inputs(exec_gpu_context *c) {
    const plan *p = c->engine->plan;
    for (int i = 0; i < p->num_inputs; i++) {
        const plan_tensor *t = gpu_tensor_of(p, p->input_tensors[i]);
        if (gpu_count_of(t) == 0) continue; /* no empty grids */
        void *dst = gpu_device_ptr(c->engine, c->arena, p->input_tensors[i]);
        if (host_dtype(t) == t->dtype && t->layout != PLAN_LAYOUT_NHWC8) {
            KERN_CUDA_CHECK(cudaMemcpyAsync(dst, c->input_staging[i], t->bytes,
                                            cudaMemcpyDeviceToDevice, c->stream));
        } else if (t->layout == PLAN_LAYOUT_NHWC8) {
            TRY_STATUS(kern_nchw_to_nhwc8(c->input_staging[i], TCI_DTYPE_FLOAT, dst, t->dtype,
                                       t->dims[0], t->dims[1], t->dims[2], t->dims[3], c->stream));
        } else if (t->dtype == TCI_DTYPE_BFLOAT16) {
            TRY_STATUS(kern_f32_to_bf16(c->input_staging[i], dst, gpu_count_of(t), c->stream));
        } else {
            TRY_STATUS(kern_f32_to_f16(c->input_staging[i], dst, gpu_count_of(t), c->stream));
        }
    }
    return TCI_OK;
}

static tci_status convert_outputs(exec_gpu_context *c) {
    const plan *p = c->engine->plan;
    for (int i = 0; i < p->num_outputs; i++) {
        const plan_tensor *t = gpu_tensor_of(p, p->output_tensors[i]);
        if (gpu_count_of(t) == 0) continue; /* no empty grids */
        const void *src = gpu_device_ptr(c->engine, c->arena, p->output_tensors[i]);
        if (host_dtype(t) == t->dtype && t->layout != PLAN_LAYOUT_NHWC8) {
            KERN_CUDA_CHECK(cudaMemcpyAsync(c->output_staging[i], src, t->bytes,
                                            cudaMemcpyDeviceToDevice, c->stream));
        } else if (t->layout == PLAN_LAYOUT_NHWC8) {
            TRY_STATUS(kern_nhwc8_to_nchw(src, t->dtype, c->output_staging[i], TCI_DTYPE_FLOAT,
                                       t->dims[0], t->dims[1], t->dims[2], t->dims[3], c->stream));
        } else if (t->dtype == TCI_DTYPE_BFLOAT16) {
            TRY_STATUS(kern_bf16_to_f32(src, c->output_staging[i], gpu_count_of(t), c->stream));
        } else {
            TRY_STATUS(kern_f16_to_f32(src, c->output_staging[i], gpu_count_of(t), c->stream));
        }
    }
    return TCI_OK;
}

/* Points the current engine's inputs and outputs at the caller's device buffers (io: inputs
 * then outputs), or back at the arena and staging buffers (io NULL). */
static tci_status set_device_io(exec_gpu_context *c, void *const *io) {
    const plan *p = c->engine->plan;
    if (c->redirect_count < p->num_tensors) {
        void **grown = realloc(c->redirect, (size_t)p->num_tensors * sizeof *grown);
        if (!grown) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
        c->redirect = grown;
        c->redirect_count = p->num_tensors;
    }
    memset(c->redirect, 0, (size_t)c->redirect_count * sizeof *c->redirect);
    for (int i = 0; i < p->num_inputs + p->num_outputs; i++) c->device_io[i] = io ? io[i] : NULL;
    if (!io) return TCI_OK;
    for (int i = 0; i < p->num_inputs; i++) c->redirect[p->input_tensors[i]] = io[i];
    for (int k = 0; k < p->num_outputs; k++) {
        int t = p->output_tensors[k];
        int root = p->tensors[t].alias_of >= 0 ? p->tensors[t].alias_of : t;
        /* written in place where the output owns arena storage no other output claimed; views
         * of inputs or constants, parts of a tensor and shared storage are copied at the end */
        c->copy_output[k] = p->tensors[root].memory != PLAN_MEM_ARENA || c->redirect[root] ||
                            plan_is_part(p, t);
        if (!c->copy_output[k]) c->redirect[root] = io[p->num_inputs + k];
    }
    return TCI_OK;
}

/* inputs and outputs are the caller's device buffers (all set, or none) */
static bool device_mode(const exec_gpu_context *c) {
    const plan *p = c->engine->plan;
    return p->num_inputs + p->num_outputs > 0 && c->device_io[0] != NULL;
}

/* Counts the NaN/Inf values of every output where the caller receives it: the staging
 * buffers (host runs) or the caller's device buffers (NHWC8 pads hold zeros). */
static tci_status count_nonfinite_outputs(exec_gpu_context *c, bool device) {
    const plan *p = c->engine->plan;
    if (!p->num_outputs) return TCI_OK;
    KERN_CUDA_CHECK(cudaMemsetAsync(c->nonfinite, 0, (size_t)p->num_outputs * sizeof(unsigned int),
                                    c->stream));
    for (int k = 0; k < p->num_outputs; k++) {
        const plan_tensor *t = gpu_tensor_of(p, p->output_tensors[k]);
        if (device)
            TRY_STATUS(kern_count_nonfinite(c->device_io[p->num_inputs + k], t->dtype,
                                         (int64_t)(t->bytes / tci_dtype_size(t->dtype)),
                                         &c->nonfinite[k], c->stream));
        else
            TRY_STATUS(kern_count_nonfinite(c->output_staging[k], host_dtype(t), gpu_count_of(t),
                                         &c->nonfinite[k], c->stream));
    }
    return TCI_OK;
}

/* Everything between the staging (or the caller's) buffers: what the CUDA graph captures. */
static tci_status enqueue_all(exec_gpu_context *c) {
    const exec_gpu_engine *e = c->engine;
    const plan *p = e->plan;
    bool device = device_mode(c);
    if (!device) TRY_STATUS(convert_inputs(c));
    for (int i = 0; i < p->num_steps; i++)
        TRY_STATUS(gpu_step_error(&p->steps[i], gpu_run_step(e, c, c->arena, i, c->stream)));
    if (!device) {
        TRY_STATUS(convert_outputs(c));
        return count_nonfinite_outputs(c, false);
    }
    for (int k = 0; k < p->num_outputs; k++) {
        const plan_tensor *t = gpu_tensor_of(p, p->output_tensors[k]);
        if (c->copy_output[k] && t->bytes)
            KERN_CUDA_CHECK(cudaMemcpyAsync(c->device_io[p->num_inputs + k],
                                            gpu_tensor_ptr(e, c, c->arena, p->output_tensors[k]),
                                            t->bytes, cudaMemcpyDeviceToDevice, c->stream));
    }
    return count_nonfinite_outputs(c, true);
}

static tci_status launch(exec_gpu_context *c) {
    if (!c->use_graph) return enqueue_all(c);
    shape_variant *v = &c->variants[c->current];
    size_t io_bytes = (size_t)(c->base->plan->num_inputs + c->base->plan->num_outputs) *
                      sizeof(void *);
    if (v->captured && memcmp(v->captured_io, c->device_io, io_bytes) != 0) {
        /* other device buffers than the graph was captured with */
        KERN_CUDA_CHECK(cudaStreamSynchronize(c->stream));
        cudaGraphExecDestroy(v->graph);
        v->captured = false;
    }
    if (!v->captured) {
        if (!v->captured_io) {
            v->captured_io = calloc(1, io_bytes + sizeof(void *));
            if (!v->captured_io) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
        }
        memcpy(v->captured_io, c->device_io, io_bytes);
        cudaGraph_t graph;
        KERN_CUDA_CHECK(cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal));
        tci_status st = enqueue_all(c);
        cudaError_t end = cudaStreamEndCapture(c->stream, &graph);
        if (end == cudaErrorStreamCaptureInvalidated) {
            /* Another thread's CUDA call that waits on the whole device (a cudaFree, a
             * cudaMalloc that maps memory, a context or engine being created or destroyed
             * beside this run) broke the capture: nothing was captured or run, and the error
             * is not sticky. This run launches the steps one by one; the next captures again. */
            (void)cudaGetLastError();
            return enqueue_all(c);
        }
        if (st != TCI_OK) {
            if (end == cudaSuccess) cudaGraphDestroy(graph);
            return st;
        }
        KERN_CUDA_CHECK(end);
        cudaError_t inst = cudaGraphInstantiate(&v->graph, graph, 0);
        cudaGraphDestroy(graph);
        KERN_CUDA_CHECK(inst);
        v->captured = true;
    }
    KERN_CUDA_CHECK(cudaGraphLaunch(v->graph, c->stream));
    return TCI_OK;
}

/* Replaces *buffer (*bytes) by one of need bytes when it is smaller; the captured graphs point at
 * the old one: dropped. */
static tci_status grow(exec_gpu_context *c, void **buffer, size_t *bytes, size_t need,
                       const char *what) {
    if (need <= *bytes) return TCI_OK;
    KERN_CUDA_CHECK(cudaStreamSynchronize(c->stream));
    drop_graphs(c);
    cudaFree(*buffer);
    *buffer = NULL;
    *bytes = 0;
    TRY_STATUS(gpu_malloc(buffer, need, what));
    *bytes = need;
    return TCI_OK;
}

/* The slot for a new variant: a new one while fewer than EXEC_GPU_MAX_VARIANTS are kept, else
 * that of the variant used least recently (never the base), freed once the stream has passed
 * its last run. */
static tci_status variant_slot(exec_gpu_context *c, int *out) {
    if (c->num_variants <= EXEC_GPU_MAX_VARIANTS) {
        shape_variant *grown = realloc(c->variants, (size_t)(c->num_variants + 1) * sizeof *grown);
        if (!grown) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
        c->variants = grown;
        memset(&c->variants[c->num_variants], 0, sizeof *grown);
        *out = c->num_variants++;
        return TCI_OK;
    }
    int oldest = 1;
    for (int v = 2; v < c->num_variants; v++)
        if (c->variants[v].last_used < c->variants[oldest].last_used) oldest = v;
    KERN_CUDA_CHECK(cudaStreamSynchronize(c->stream));
    free_variant(&c->variants[oldest]);
    if (c->current == oldest) {
        c->current = 0;
        c->engine = c->base;
    }
    *out = oldest;
    return TCI_OK;
}

/* Makes the variant for the input shapes dims (as exec_gpu_replan_fn takes them) current,
 * planning it on first use, and grows the arena and the library workspace when it needs more. */
static tci_status select_variant(exec_gpu_context *c, const int64_t *dims) {
    const plan *bp = c->base->plan;
    size_t dims_bytes = (size_t)bp->num_inputs * TCI_MAX_RANK * sizeof(int64_t);
    int found = -1;
    for (int v = 0; v < c->num_variants && found < 0; v++)
        if (c->variants[v].dims && memcmp(c->variants[v].dims, dims, dims_bytes) == 0) found = v;
    if (found < 0) {
        if (!c->base->replan)
            return status_error(TCI_ERR_INVALID_ARGUMENT,
                             "this GPU engine runs only the shapes it was built for (engines that "
                             "mark every layer as an output do not re-plan)");
        exec_gpu_engine *engine = NULL;
        TRY_STATUS(gpu_variant_create(c->base, dims, c->cudnn, &engine));
        int slot = 0;
        tci_status st = variant_slot(c, &slot);
        int64_t *key = st == TCI_OK ? malloc(dims_bytes + 1) : NULL;
        if (st == TCI_OK && !key) st = status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
        if (st != TCI_OK) {
            exec_gpu_engine_destroy(engine);
            return st;
        }
        memcpy(key, dims, dims_bytes);
        c->variants[slot].dims = key;
        c->variants[slot].engine = engine;
        found = slot;
    }
    const exec_gpu_engine *e = found ? c->variants[found].engine : c->base;
    TRY_STATUS(grow(c, &c->arena, &c->arena_bytes, e->plan->arena_bytes, "the activation arena"));
    TRY_STATUS(grow(c, &c->workspace, &c->workspace_bytes, e->workspace_bytes,
                    "the library workspace"));
    c->current = found;
    c->engine = e;
    c->variants[found].last_used = ++c->runs;
    return TCI_OK;
}

/* An input of exec_gpu_run with device_inputs: memory of the current device (the engine's)
 * that holds bytes from data on. */
static tci_status check_device_input(const plan_tensor *t, const void *data, size_t bytes) {
    int device = 0, owner;
    size_t room;
    KERN_CUDA_CHECK(cudaGetDevice(&device));
    if (!gpu_device_accessible(data))
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                            "input '%s' (%p) is not memory the GPU can address (a host pointer? "
                            "tci_context_run takes those)",
                            t->name, data);
    if ((owner = gpu_device_of(data)) >= 0 && owner != device)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                            "input '%s' (%p) is memory of CUDA device %d; the engine runs on "
                            "device %d",
                            t->name, data, owner, device);
    if (gpu_device_room(data, &room) && room < bytes)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                            "input '%s' has %zu bytes from its pointer to the end of its "
                            "allocation; it needs %zu",
                            t->name, room, bytes);
    return TCI_OK;
}

tci_status exec_gpu_run(exec_gpu_context *c, const tci_tensor *inputs, size_t num_inputs,
                        bool device_inputs) {
    const plan *bp = c->base->plan;
    char want[128], got[128];
    if (num_inputs != (size_t)bp->num_inputs)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "got %zu inputs, the model has %d", num_inputs,
                         bp->num_inputs);
    /* every dim as built or smaller (which ones may be is the caller's to check): other shapes */
    int64_t *dims = calloc((size_t)bp->num_inputs * TCI_MAX_RANK + 1, sizeof(int64_t));
    if (!dims) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
    tci_status st = TCI_OK;
    for (int i = 0; st == TCI_OK && i < bp->num_inputs; i++) {
        const plan_tensor *t = gpu_tensor_of(bp, bp->input_tensors[i]);
        const tci_tensor *in = &inputs[i];
        bool ok = in->dtype == host_dtype(t) && in->rank == t->rank;
        for (int d = 0; ok && d < t->rank; d++) {
            ok = in->dims[d] == t->dims[d] || (in->dims[d] >= 1 && in->dims[d] <= t->dims[d]);
            dims[(size_t)i * TCI_MAX_RANK + (size_t)d] = in->dims[d];
        }
        if (!ok)
            st = status_error(TCI_ERR_INVALID_ARGUMENT,
                           "input '%s' is %s %s; the GPU engine was built for %s %s (smaller "
                           "dims run too; rebuild with tci_engine_options.shapes for anything else)",
                           t->name, tci_dtype_name(in->dtype),
                           ir_format_dims(in->rank, in->dims, got, sizeof got),
                           tci_dtype_name(host_dtype(t)),
                           ir_format_dims(t->rank, t->dims, want, sizeof want));
    }
    if (st == TCI_OK) st = select_variant(c, dims);
    free(dims);
    TRY_STATUS(st);
    TRY_STATUS(set_device_io(c, NULL));
    const plan *p = c->engine->plan;
    for (int i = 0; i < p->num_inputs; i++) {
        const plan_tensor *t = gpu_tensor_of(p, p->input_tensors[i]);
        size_t bytes = (size_t)gpu_count_of(t) * tci_dtype_size(host_dtype(t));
        if (bytes && !inputs[i].data)
            return status_error(TCI_ERR_INVALID_ARGUMENT, "input '%s' has no data", t->name);
        if (bytes && device_inputs) TRY_STATUS(check_device_input(t, inputs[i].data, bytes));
        if (bytes)
            KERN_CUDA_CHECK(cudaMemcpyAsync(c->input_staging[i], inputs[i].data, bytes,
                                            device_inputs ? cudaMemcpyDefault
                                                          : cudaMemcpyHostToDevice,
                                            c->stream));
    }
    for (int i = 0; i < p->num_outputs; i++) {
        const plan_tensor *t = gpu_tensor_of(p, p->output_tensors[i]);
        for (int d = 0; d < t->rank; d++) c->outputs[i].dims[d] = t->dims[d];
    }
    c->outputs_staged = false; /* until the run below has written them */
    TRY_STATUS(launch(c));
    for (int i = 0; i < p->num_outputs; i++) {
        tci_tensor *o = &c->outputs[i];
        size_t bytes = (size_t)tci_tensor_count(o) * tci_dtype_size(o->dtype);
        if (bytes) KERN_CUDA_CHECK(cudaMemcpyAsync(o->data, c->output_staging[i], bytes,
                                                   cudaMemcpyDeviceToHost, c->stream));
    }
    int gather_error = 0;
    KERN_CUDA_CHECK(cudaMemcpyAsync(&gather_error, c->gather_error, sizeof gather_error,
                                    cudaMemcpyDeviceToHost, c->stream));
    if (p->num_outputs)
        KERN_CUDA_CHECK(cudaMemcpyAsync(c->nonfinite_host, c->nonfinite,
                                        (size_t)p->num_outputs * sizeof(unsigned int),
                                        cudaMemcpyDeviceToHost, c->stream));
    KERN_CUDA_CHECK(cudaStreamSynchronize(c->stream));
    c->nonfinite_on_host = true;
    c->outputs_staged = !gather_error;
    if (gather_error) {
        cudaMemset(c->gather_error, 0, sizeof(int));
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "an index input of a gather or scatter (or a RotaryEmbedding's "
                         "position_ids) was out of range");
    }
    return TCI_OK;
}

const tci_tensor *exec_gpu_output(const exec_gpu_context *c, size_t index) {
    return &c->outputs[index];
}

tci_status exec_gpu_output_device(const exec_gpu_context *c, size_t index, tci_tensor *out) {
    if (!c->outputs_staged)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                            "no output on the device: the last run was not a tci_context_run "
                            "(or tci_context_run_device_inputs) that succeeded; "
                            "tci_context_run_device writes the outputs into the caller's "
                            "buffers");
    *out = c->outputs[index];
    out->data = c->output_staging[index];
    return TCI_OK;
}

tci_status exec_gpu_run_device(exec_gpu_context *c, const void *const *inputs, void *const *outputs,
                               const int64_t *leading_dims, cudaStream_t caller) {
    /* the engine's device is current (the api makes it so); the caller's stream and buffers
     * must be there too */
    int device = 0, owner = -1;
    KERN_CUDA_CHECK(cudaGetDevice(&device));
    if (caller) {
        if (cudaStreamGetDevice(caller, &owner) != cudaSuccess)
            (void)cudaGetLastError(); /* not placed here: its use below reports it */
        else if (owner != device)
            return status_error(TCI_ERR_INVALID_ARGUMENT,
                                "the stream belongs to CUDA device %d; the engine runs on "
                                "device %d",
                                owner, device);
    }
    const plan *bp = c->base->plan;
    int nio = bp->num_inputs + bp->num_outputs;
    void **io = calloc((size_t)nio + 1, sizeof *io);
    int64_t *dims = built_dims(bp);
    tci_status st = io && dims ? TCI_OK : status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
    for (int i = 0; st == TCI_OK && i < nio; i++) {
        bool in = i < bp->num_inputs;
        io[i] = in ? (void *)(uintptr_t)inputs[i] : outputs[i - bp->num_inputs];
        if (!io[i] || ((uintptr_t)io[i] & 15u))
            st = status_error(TCI_ERR_INVALID_ARGUMENT, "device %s %d is %s", in ? "input" : "output",
                           in ? i : i - bp->num_inputs, io[i] ? "not 16-byte aligned" : "NULL");
        else if (!gpu_device_accessible(io[i]))
            st = status_error(TCI_ERR_INVALID_ARGUMENT,
                              "device %s %d (%p) is not memory the GPU can address (a host "
                              "pointer?)",
                              in ? "input" : "output", in ? i : i - bp->num_inputs, io[i]);
        else if ((owner = gpu_device_of(io[i])) >= 0 && owner != device)
            st = status_error(TCI_ERR_INVALID_ARGUMENT,
                              "device %s %d (%p) is memory of CUDA device %d; the engine runs on "
                              "device %d",
                              in ? "input" : "output", in ? i : i - bp->num_inputs, io[i], owner,
                              device);
    }
    for (int i = 0; st == TCI_OK && i < bp->num_inputs; i++) {
        const plan_tensor *t = gpu_tensor_of(bp, bp->input_tensors[i]);
        int64_t *dim0 = &dims[(size_t)i * TCI_MAX_RANK];
        if (leading_dims && t->rank) *dim0 = leading_dims[i];
        if (t->rank && (*dim0 < 1 || *dim0 > t->dims[0]))
            st = status_error(TCI_ERR_INVALID_ARGUMENT,
                           "leading dim %" PRId64 " of input '%s' is outside 1..%" PRId64, *dim0,
                           t->name, t->dims[0]);
    }
    if (st == TCI_OK) st = select_variant(c, dims);
    /* each buffer must hold its tensor at this batch, where the driver tells the allocation's
     * size (cuMemGetAddressRange) */
    for (int i = 0; st == TCI_OK && i < nio; i++) {
        const plan *p = c->engine->plan;
        bool in = i < p->num_inputs;
        const plan_tensor *t =
            gpu_tensor_of(p, in ? p->input_tensors[i] : p->output_tensors[i - p->num_inputs]);
        size_t room;
        if (gpu_device_room(io[i], &room) && room < t->bytes)
            st = status_error(TCI_ERR_INVALID_ARGUMENT,
                              "device %s %d ('%s') has %zu bytes from the pointer to the end of its "
                              "allocation; it needs %zu",
                              in ? "input" : "output", in ? i : i - p->num_inputs, t->name, room,
                              t->bytes);
    }
    if (st == TCI_OK) st = set_device_io(c, io);
    free(io);
    free(dims);
    TRY_STATUS(st);
    KERN_CUDA_CHECK(cudaEventRecord(c->caller_ready, caller));
    KERN_CUDA_CHECK(cudaStreamWaitEvent(c->stream, c->caller_ready, 0));
    c->nonfinite_on_host = false;
    c->outputs_staged = false;
    TRY_STATUS(launch(c));
    KERN_CUDA_CHECK(cudaEventRecord(c->done, c->stream));
    KERN_CUDA_CHECK(cudaStreamWaitEvent(caller, c->done, 0));
    return TCI_OK;
}

tci_status exec_gpu_bench(exec_gpu_context *c, int iterations, int warmup, float *times_ms) {
    for (int i = 0; i < warmup; i++) TRY_STATUS(launch(c));
    cudaEvent_t start = c->events[0], stop = c->events[1];
    for (int i = 0; i < iterations; i++) {
        KERN_CUDA_CHECK(cudaEventRecord(start, c->stream));
        TRY_STATUS(launch(c));
        KERN_CUDA_CHECK(cudaEventRecord(stop, c->stream));
        KERN_CUDA_CHECK(cudaEventSynchronize(stop));
        KERN_CUDA_CHECK(cudaEventElapsedTime(&times_ms[i], start, stop));
    }
    return TCI_OK;
}

static int compare_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

tci_status exec_gpu_profile(exec_gpu_context *c, int iterations, float *step_ms) {
    const exec_gpu_engine *e = c->engine;
    int n = e->plan->num_steps;
    if (iterations < 1) iterations = 1;
    float *samples = calloc((size_t)n * (size_t)iterations + 1, sizeof(float));
    if (!samples) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory profiling");
    tci_status st = device_mode(c) ? TCI_OK : convert_inputs(c);
    for (int it = 0; st == TCI_OK && it < iterations; it++) {
        for (int i = 0; st == TCI_OK && i < n; i++) {
            if (cudaEventRecord(c->events[2 * i], c->stream) != cudaSuccess)
                st = status_error(TCI_ERR_CUDA, "cudaEventRecord failed");
            if (st == TCI_OK)
                st = gpu_step_error(&e->plan->steps[i], gpu_run_step(e, c, c->arena, i, c->stream));
            if (st == TCI_OK && cudaEventRecord(c->events[2 * i + 1], c->stream) != cudaSuccess)
                st = status_error(TCI_ERR_CUDA, "cudaEventRecord failed");
        }
        if (st == TCI_OK && cudaStreamSynchronize(c->stream) != cudaSuccess)
            st = status_error(TCI_ERR_CUDA, "cudaStreamSynchronize failed while profiling");
        for (int i = 0; st == TCI_OK && i < n; i++)
            cudaEventElapsedTime(&samples[(size_t)i * (size_t)iterations + (size_t)it],
                                 c->events[2 * i], c->events[2 * i + 1]);
    }
    for (int i = 0; st == TCI_OK && i < n; i++) {
        float *row = &samples[(size_t)i * (size_t)iterations];
        qsort(row, (size_t)iterations, sizeof(float), compare_float);
        step_ms[i] = row[iterations / 2];
    }
    free(samples);
    return st;
}

tci_status exec_gpu_nonfinite(exec_gpu_context *c, uint64_t *counts) {
    const plan *p = c->engine->plan;
    if (!c->nonfinite_on_host && p->num_outputs) {
        KERN_CUDA_CHECK(cudaMemcpyAsync(c->nonfinite_host, c->nonfinite,
                                        (size_t)p->num_outputs * sizeof(unsigned int),
                                        cudaMemcpyDeviceToHost, c->stream));
        KERN_CUDA_CHECK(cudaStreamSynchronize(c->stream));
        c->nonfinite_on_host = true;
    }
    for (int k = 0; k < p->num_outputs; k++) counts[k] = c->nonfinite_host[k];
    return TCI_OK;
}

/* NaN/Inf values in the physical storage of plan tensor index (NHWC8 pads hold zeros). */
static tci_status count_tensor(exec_gpu_context *c, int index, unsigned int *out_count) {
    const plan *p = c->engine->plan;
    const plan_tensor *t = gpu_tensor_of(p, index);
    unsigned int *counter = &c->nonfinite[p->num_outputs];
    *out_count = 0;
    if (t->dtype != TCI_DTYPE_FLOAT16 && t->dtype != TCI_DTYPE_BFLOAT16 &&
        t->dtype != TCI_DTYPE_FLOAT)
        return TCI_OK;
    KERN_CUDA_CHECK(cudaMemsetAsync(counter, 0, sizeof *counter, c->stream));
    TRY_STATUS(kern_count_nonfinite(gpu_tensor_ptr(c->engine, c, c->arena, index), t->dtype,
                                 (int64_t)(t->bytes / tci_dtype_size(t->dtype)), counter,
                                 c->stream));
    KERN_CUDA_CHECK(cudaMemcpyAsync(out_count, counter, sizeof *counter, cudaMemcpyDeviceToHost,
                                    c->stream));
    KERN_CUDA_CHECK(cudaStreamSynchronize(c->stream));
    return TCI_OK;
}

tci_status exec_gpu_locate_nonfinite(exec_gpu_context *c, int *out_input, int *out_step) {
    const exec_gpu_engine *e = c->engine;
    const plan *p = e->plan;
    *out_input = *out_step = -1;
    unsigned int n = 0;
    if (!device_mode(c)) TRY_STATUS(convert_inputs(c));
    for (int i = 0; i < p->num_inputs; i++) {
        TRY_STATUS(count_tensor(c, p->input_tensors[i], &n));
        if (n) {
            *out_input = i;
            return TCI_OK;
        }
    }
    for (int i = 0; i < p->num_steps; i++) {
        const plan_step *s = &p->steps[i];
        TRY_STATUS(gpu_step_error(s, gpu_run_step(e, c, c->arena, i, c->stream)));
        if (e->impl[i].skipped) continue; /* its output is not written */
        for (int j = 0; j < s->num_outputs; j++) {
            if (s->outputs[j] < 0) continue;
            TRY_STATUS(count_tensor(c, s->outputs[j], &n));
            if (n) {
                *out_step = i;
                return TCI_OK;
            }
        }
    }
    return TCI_OK;
}

const plan *exec_gpu_context_plan(const exec_gpu_context *c) { return c->engine->plan; }
