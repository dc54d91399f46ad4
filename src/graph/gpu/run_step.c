/* One plan step launched on a stream: the kernel or library call each step kind maps to, on the
 * tensors' device storage (arena, constants, or the caller's buffers). */
#include <stdint.h>
#include <string.h>

#include "graph/gpu/gpu_internal.h"
#include "kernels/argreduce.h"
#include "kernels/attention.h"
#include "kernels/cast.h"
#include "kernels/copy.h"
#include "kernels/grid_sample.h"
#include "kernels/index.h"
#include "kernels/layout.h"
#include "kernels/norm.h"
#include "kernels/pool.h"
#include "kernels/resize.h"
#include "kernels/rnn.h"
#include "kernels/rope.h"
#include "kernels/wgmma_gemm.h"
#include "layers/op.h"

_Static_assert(PLAN_TOPK_MAX_K <= KERN_TOPK_MAX_K, "TopK lowers a K that kern_topk refuses");

const plan_tensor *gpu_tensor_of(const plan *p, int index) { return &p->tensors[index]; }

void *gpu_device_ptr(const exec_gpu_engine *e, void *arena, int index) {
    const plan_tensor *t = &e->plan->tensors[index];
    if (t->memory == PLAN_MEM_CONSTANT) return e->constants[index];
    return (char *)arena + t->offset;
}

int64_t gpu_count_of(const plan_tensor *t) {
    int64_t c = 1;
    for (int i = 0; i < t->rank; i++) c *= t->dims[i];
    return c;
}

static uint64_t fill_bits(tci_dtype dtype, double value) {
    uint64_t bits = 0;
    switch (dtype) {
    case TCI_DTYPE_FLOAT16: bits = float_to_half((float)value); break;
    case TCI_DTYPE_BFLOAT16: bits = float_to_bfloat16((float)value); break;
    case TCI_DTYPE_FLOAT: {
        float f = (float)value;
        uint32_t u;
        memcpy(&u, &f, 4);
        bits = u;
        break;
    }
    case TCI_DTYPE_INT32: bits = (uint32_t)(int32_t)value; break;
    case TCI_DTYPE_INT64: bits = (uint64_t)(int64_t)value; break;
    default: bits = value != 0; break;
    }
    return bits;
}

tci_status gpu_run_activation(const plan_tensor *t, void *data, act_params act,
                              cudaStream_t stream) {
    int64_t dims[PLAN_MAX_PHYS_RANK];
    int rank;
    if (t->layout == PLAN_LAYOUT_NHWC8) {
        dims[0] = t->dims[0];
        dims[1] = t->dims[2];
        dims[2] = t->dims[3];
        dims[3] = t->padded_channels;
        rank = 4;
    } else {
        dims[0] = gpu_count_of(t);
        rank = 1;
    }
    kern_eltwise_desc d;
    kern_eltwise_desc_init(&d, BINARY_NONE, t->dtype, rank, dims);
    d.act = act.kind;
    d.act_alpha = act.alpha;
    d.act_beta = act.beta;
    if (t->layout == PLAN_LAYOUT_NHWC8) {
        d.pad_dim = 3;
        d.real_c = t->dims[1];
    }
    const void *in[1] = {data};
    return kern_eltwise(&d, in, data, stream);
}

/* A GEMM step on one of tcinfer's configs cfg: the fp16 (bf16) WMMA family, the wgmma kernel,
 * or for fp32 steps (WMMA_TF32) the tf32 kernel, whose bias is the step's fp32 one. */
tci_status gpu_run_wmma_gemm(const plan_gemm *g, int cfg, const step_impl *im, const void *a,
                             const void *b, const void *c, void *d, cudaStream_t stream) {
    kern_wmma_gemm_desc wd;
    gpu_wmma_gemm_desc_of(g, im->dtype, &wd);
    if (cfg == WMMA_TF32)
        return kern_wmma_variant_run(&wd, KERN_WMMA_TF32_16X16X8, a, b, im->bias, c, d, stream);
    if (cfg >= WGMMA) return kern_wgmma_gemm_run(&wd, cfg - WGMMA, a, b, im->bias_f32, c, d, stream);
    return kern_wmma_gemm_run(&wd, cfg, a, b, im->bias_f32, c, d, stream);
}

tci_status gpu_run_library_gemm(const plan_gemm *g, const step_impl *im, cublasLtHandle_t lt,
                                cudaStream_t stream, int64_t m, int batch, const void *a,
                                const void *b, const void *c, void *d, const plan_tensor *y,
                                void *workspace, size_t workspace_bytes) {
    TRY_STATUS(kern_gemm_run(im->gemm, lt, stream, m, batch, a, b, c, d, im->bias, workspace,
                             workspace_bytes));
    act_params post = gpu_gemm_library_post_act(g);
    return post.kind == ACT_NONE ? TCI_OK : gpu_run_activation(y, d, post, stream);
}

/* gpu_device_ptr, with the caller's buffers in place of redirected tensors (device I/O) */
void *gpu_tensor_ptr(const exec_gpu_engine *e, const exec_gpu_context *c, void *arena,
                     int index) {
    if (c && c->redirect && index < c->redirect_count) {
        const plan_tensor *t = &e->plan->tensors[index];
        int root = t->alias_of >= 0 ? t->alias_of : index;
        if (c->redirect[root]) return (char *)c->redirect[root] + t->view_bytes;
    }
    return gpu_device_ptr(e, arena, index);
}

void gpu_attention_operands(const exec_gpu_engine *e, const exec_gpu_context *c, void *arena,
                            int index, const void **q, const void **k, const void **v) {
    const plan_step *s = &e->plan->steps[index];
    const plan_attention *a = &s->u.attention;
    const size_t es = tci_dtype_size(gpu_tensor_of(e->plan, s->outputs[0])->dtype);
    const int64_t offsets[3] = {a->q_offset, a->k_offset, a->v_offset};
    const void **out[3] = {q, k, v};
    /* each starts at its element offset into the tensor read (a packed projection) */
    for (int i = 0; i < 3; i++)
        *out[i] = s->inputs[i] >= 0 ? (const char *)gpu_tensor_ptr(e, c, arena, s->inputs[i]) +
                                          (size_t)offsets[i] * es
                                    : NULL;
}

/* One of a recurrent layer's three steps (plan_rnn in graph/lower.h). */
static tci_status run_rnn(const exec_gpu_engine *e, const exec_gpu_context *c, void *arena,
                          int index, void *const *in, cudaStream_t stream) {
    const plan *p = e->plan;
    const plan_step *s = &p->steps[index];
    const plan_rnn *r = &s->u.rnn;
    kern_rnn_desc d;
    memset(&d, 0, sizeof d);
    d.cell = r->cell == PLAN_RNN_LSTM ? KERN_RNN_LSTM
             : r->cell == PLAN_RNN_GRU ? KERN_RNN_GRU
                                       : KERN_RNN_TANH;
    d.seq_length = r->seq_length;
    d.batch = r->batch;
    d.hidden = r->hidden;
    d.directions = r->directions;
    d.reverse = r->reverse;
    d.batch_major = r->batch_major;
    d.linear_before_reset = r->linear_before_reset;
    switch (r->phase) {
    case PLAN_RNN_INIT: {
        int given = s->inputs[0] >= 0 ? s->inputs[0] : s->inputs[1];
        d.dtype = given >= 0 ? gpu_tensor_of(p, given)->dtype : TCI_DTYPE_FLOAT;
        return kern_rnn_init(&d, in[0], in[1], gpu_tensor_ptr(e, c, arena, s->outputs[0]), stream);
    }
    case PLAN_RNN_STEPS:
        if (e->impl[index].rnn) /* cuDNN's RNN, chosen at build (rnn_choice.c) */
            return gpu_run_rnn_cudnn(e, c, arena, index, e->impl[index].rnn, stream);
        d.dtype = gpu_tensor_of(p, s->inputs[0])->dtype;
        return kern_rnn_steps(&d, in[0], in[1], in[2], in[3],
                              s->num_outputs ? gpu_tensor_ptr(e, c, arena, s->outputs[0]) : NULL,
                              stream);
    case PLAN_RNN_FINAL: {
        if (s->num_outputs == 0) return TCI_OK;
        d.dtype = gpu_tensor_of(p, s->outputs[0])->dtype;
        void *y_h = r->has_y_h ? gpu_tensor_ptr(e, c, arena, s->outputs[0]) : NULL;
        void *y_c = r->has_y_c ? gpu_tensor_ptr(e, c, arena, s->outputs[r->has_y_h ? 1 : 0]) : NULL;
        return kern_rnn_final(&d, in[0], in[1], y_h, y_c, stream);
    }
    }
    return status_error(TCI_ERR_INTERNAL, "unknown recurrent step phase %d", (int)r->phase);
}

void gpu_rope_desc(const plan_step *s, bool ids_int32, tci_dtype dtype, kern_rope_desc *d) {
    memset(d, 0, sizeof *d);
    d->batch = s->u.rotary.batch;
    d->heads = s->u.rotary.heads;
    d->seq = s->u.rotary.seq;
    d->head_size = s->u.rotary.head_size;
    d->heads_first = s->u.rotary.heads_first;
    d->rotary_dim = s->u.rotary.rotary_dim;
    d->interleaved = s->u.rotary.interleaved;
    d->cache_batch = s->u.rotary.cache_batch;
    d->positions = s->u.rotary.positions;
    d->ids_batch = s->u.rotary.ids_batch;
    d->ids_int32 = ids_int32;
    d->dtype = dtype;
}

tci_status gpu_run_step(const exec_gpu_engine *e, exec_gpu_context *c, void *arena, int index,
                        cudaStream_t stream) {
    const plan *p = e->plan;
    const plan_step *s = &p->steps[index];
    /* a step whose outputs are all empty has nothing to write: no kernel sees an empty grid */
    bool empty = s->num_outputs > 0;
    for (int k = 0; k < s->num_outputs && empty; k++)
        empty = s->outputs[k] < 0 || gpu_count_of(gpu_tensor_of(p, s->outputs[k])) == 0;
    /* a projection cuDNN's RNN computes itself (rnn_choice.c) */
    if (empty || e->impl[index].skipped) return TCI_OK;
    void *in[PLAN_MAX_STEP_INPUTS] = {0};
    for (int k = 0; k < s->num_inputs; k++)
        if (s->inputs[k] >= 0) in[k] = gpu_tensor_ptr(e, c, arena, s->inputs[k]);
    void *out = s->num_outputs ? gpu_tensor_ptr(e, c, arena, s->outputs[0]) : NULL;
    const plan_tensor *y = s->num_outputs ? gpu_tensor_of(p, s->outputs[0]) : NULL;
    switch (s->kind) {
    case PLAN_STEP_CONV:
        if (s->u.conv.depthwise) {
            kern_depthwise_desc d;
            gpu_depthwise_desc_of(&s->u.conv, e->impl[index].dtype, &d);
            return kern_depthwise_conv(&d, in[0], e->impl[index].weights, e->impl[index].bias,
                                       s->u.conv.has_residual ? in[3] : NULL, out, stream);
        }
        if (e->impl[index].wmma >= 0) {
            kern_wmma_conv_desc wd;
            gpu_wmma_desc_of(&s->u.conv, e->impl[index].dtype, &wd);
            return kern_wmma_conv_run(&wd, e->impl[index].wmma, s->u.conv.geom.n, in[0],
                                      e->impl[index].weights, e->impl[index].bias_f32,
                                      s->u.conv.has_residual ? in[3] : NULL, out, c->workspace,
                                      e->workspace_bytes, stream);
        }
        TRY_STATUS(kern_conv_run(e->impl[index].conv, c->cudnn, stream, (int)s->u.conv.geom.n, in[0],
                              e->impl[index].weights, e->impl[index].bias,
                              s->u.conv.has_residual ? in[3] : NULL, out, c->workspace,
                              e->workspace_bytes));
        if (s->u.conv.post_act.kind != ACT_NONE)
            TRY_STATUS(gpu_run_activation(y, out, s->u.conv.post_act, stream));
        return TCI_OK;
    case PLAN_STEP_CONV_TRANSPOSE:
        TRY_STATUS(kern_convt_run(e->impl[index].convt, c->cudnn, stream, (int)s->u.conv.geom.n, in[0],
                               e->impl[index].weights, e->impl[index].bias, out, c->workspace,
                               e->workspace_bytes));
        if (s->u.conv.post_act.kind != ACT_NONE)
            TRY_STATUS(gpu_run_activation(y, out, s->u.conv.post_act, stream));
        return TCI_OK;
    case PLAN_STEP_GEMM:
        if (e->impl[index].wmma >= 0)
            return gpu_run_wmma_gemm(&s->u.gemm, e->impl[index].wmma, &e->impl[index], in[0], in[1],
                                     s->u.gemm.has_c ? in[3] : NULL, out, stream);
        /* a batch variant runs the parent's plan on its own (smaller) m and batch count */
        return gpu_run_library_gemm(&s->u.gemm, &e->impl[index], c->lt, stream, s->u.gemm.m,
                                    (int)(s->u.gemm.batch > 0 ? s->u.gemm.batch : 1), in[0],
                                    in[1], s->u.gemm.has_c ? in[3] : NULL, out, y, c->workspace,
                                    e->workspace_bytes);
    case PLAN_STEP_ELTWISE: {
        const plan_strided *v = &s->u.eltwise.view;
        int value_input = s->u.eltwise.op == BINARY_WHERE ? 1 : 0;
        kern_eltwise_desc d;
        kern_eltwise_desc_init(&d, s->u.eltwise.op,
                               gpu_tensor_of(p, s->inputs[value_input])->dtype, v->rank, v->dims);
        d.act = s->u.eltwise.act.kind;
        d.act_alpha = s->u.eltwise.act.alpha;
        d.act_beta = s->u.eltwise.act.beta;
        for (int k = 0; k < s->num_inputs; k++)
            for (int i = 0; i < v->rank; i++) d.strides[k][i] = v->strides[k][i];
        d.pad_dim = v->pad_dim;
        d.real_c = v->real_channels;
        return kern_eltwise(&d, (const void *const *)in, out, stream);
    }
    case PLAN_STEP_POOL: {
        const plan_pool *pp = &s->u.pool;
        kern_pool2d_desc d = {0};
        d.dtype = y->dtype;
        d.mode = pp->kind;
        d.count_include_pad = pp->count_include_pad;
        d.geom = pp->geom;
        return kern_pool2d(&d, in[0], out, stream);
    }
    case PLAN_STEP_GLOBAL_POOL:
        return kern_global_pool_dtype(s->u.pool.kind, in[0], out, s->u.pool.geom.n,
                                      s->u.pool.geom.c, s->u.pool.geom.h, s->u.pool.geom.w,
                                      y->dtype, stream);
    case PLAN_STEP_COPY: {
        _Static_assert(PLAN_MAX_STEP_INPUTS <= KERN_COPY_MAX_BLOCKS, "a step's blocks in a launch");
        if (s->u.copy.num_blocks > 0) {
            kern_copy_block blocks[PLAN_MAX_STEP_INPUTS];
            const void *srcs[PLAN_MAX_STEP_INPUTS];
            for (int k = 0; k < s->u.copy.num_blocks; k++) {
                const plan_copy_block *pb = &s->u.copy.blocks[k];
                blocks[k] = (kern_copy_block){pb->rows, pb->len, pb->src_ld, pb->dst_ld,
                                              pb->dst_offset};
                srcs[k] = (const char *)in[k] + pb->src_offset * (int64_t)s->u.copy.elem_size;
            }
            return kern_copy_blocks(out, srcs, blocks, s->u.copy.num_blocks,
                                    (int)s->u.copy.elem_size, stream);
        }
        const plan_strided *v = &s->u.copy.view;
        kern_copy_desc d = {0};
        d.rank = v->rank;
        d.elem_size = (int)s->u.copy.elem_size;
        for (int i = 0; i < v->rank; i++) {
            d.shape[i] = v->dims[i];
            d.src_strides[i] = v->strides[0][i];
            d.dst_strides[i] = v->out_strides[i];
        }
        const char *src = (const char *)in[0] + v->in_offset[0] * (int64_t)s->u.copy.elem_size;
        char *dst = (char *)out + v->out_offset * (int64_t)s->u.copy.elem_size;
        return kern_strided_copy(dst, src, &d, stream);
    }
    case PLAN_STEP_FILL:
        return kern_fill(out, s->u.fill.count, (int)tci_dtype_size(y->dtype),
                         fill_bits(y->dtype, s->u.fill.value), stream);
    case PLAN_STEP_LAYOUT: {
        const plan_tensor *x = gpu_tensor_of(p, s->inputs[0]);
        const plan_tensor *nhwc = s->u.layout.to_dense ? x : y;
        if (s->u.layout.to_dense)
            return kern_nhwc8_to_nchw(in[0], x->dtype, out, y->dtype, nhwc->dims[0],
                                      nhwc->dims[1], nhwc->dims[2], nhwc->dims[3], stream);
        return kern_nchw_to_nhwc8(in[0], x->dtype, out, y->dtype, nhwc->dims[0], nhwc->dims[1],
                                  nhwc->dims[2], nhwc->dims[3], stream);
    }
    case PLAN_STEP_CAST:
        return kern_cast(in[0], gpu_tensor_of(p, s->inputs[0])->dtype, out, y->dtype,
                         s->u.cast.count, stream);
    case PLAN_STEP_SOFTMAX:
        return s->u.softmax.log ? kern_log_softmax_rows_dtype(in[0], out, s->u.softmax.rows,
                                                              s->u.softmax.length, y->dtype, stream)
                                : kern_softmax_rows_dtype(in[0], out, s->u.softmax.rows,
                                                          s->u.softmax.length, y->dtype, stream);
    case PLAN_STEP_LAYERNORM: {
        const void *residual = s->u.layernorm.has_residual ? in[3] : NULL;
        void *sum = s->num_outputs > 1 ? gpu_tensor_ptr(e, c, arena, s->outputs[1]) : NULL;
        if (s->u.layernorm.rms)
            return kern_rmsnorm_residual_rows_dtype(in[0], residual, in[1], out, sum, NULL,
                                                    s->u.layernorm.rows, s->u.layernorm.length,
                                                    s->u.layernorm.epsilon, y->dtype, stream);
        return kern_layernorm_residual_rows_dtype(
            in[0], residual, in[1], s->u.layernorm.has_bias ? in[2] : NULL, out, sum, NULL, NULL,
            s->u.layernorm.rows, s->u.layernorm.length, s->u.layernorm.epsilon, y->dtype, stream);
    }
    case PLAN_STEP_ROTARY: {
        kern_rope_desc d;
        const bool ids_int32 =
            s->inputs[3] >= 0 && gpu_tensor_of(p, s->inputs[3])->dtype == TCI_DTYPE_INT32;
        gpu_rope_desc(s, ids_int32, y->dtype, &d);
        return kern_rotary_embedding(&d, in[0], in[1], in[2], in[3], out, c->gather_error, stream);
    }
    case PLAN_STEP_GROUPNORM:
        return kern_groupnorm_dtype(
            in[0], in[1], in[2], out, s->u.groupnorm.n, s->u.groupnorm.c, s->u.groupnorm.spatial,
            y->layout == PLAN_LAYOUT_NHWC8, s->u.groupnorm.groups, s->u.groupnorm.scale_per_group,
            s->u.groupnorm.epsilon, s->u.groupnorm.chunks,
            s->num_outputs > 1 ? gpu_tensor_ptr(e, c, arena, s->outputs[1]) : NULL, y->dtype,
            stream);
    case PLAN_STEP_GRID_SAMPLE: {
        kern_grid_sample_desc d;
        memset(&d, 0, sizeof d);
        d.n = s->u.grid_sample.n;
        d.c = s->u.grid_sample.c;
        d.r = s->u.grid_sample.r;
        for (int k = 0; k < d.r; k++) {
            d.in[k] = s->u.grid_sample.in[k];
            d.out[k] = s->u.grid_sample.out[k];
        }
        d.mode = s->u.grid_sample.mode;
        d.padding = s->u.grid_sample.padding;
        d.align_corners = s->u.grid_sample.align_corners;
        d.dtype = y->dtype;
        d.grid_dtype = gpu_tensor_of(p, s->inputs[1])->dtype;
        return kern_grid_sample(in[0], in[1], out, &d, stream);
    }
    case PLAN_STEP_LRN:
        return kern_lrn_dtype(in[0], out, s->u.lrn.n, s->u.lrn.c, s->u.lrn.spatial,
                              y->layout == PLAN_LAYOUT_NHWC8, s->u.lrn.size, s->u.lrn.alpha,
                              s->u.lrn.beta, s->u.lrn.bias, y->dtype, stream);
    case PLAN_STEP_REDUCE: {
        unsigned mask = 0;
        for (int i = 0; i < s->u.reduce.view.rank; i++)
            if (s->u.reduce.reduce_dim[i]) mask |= 1u << i;
        return kern_reduce_dtype(in[0], out, s->u.reduce.view.rank, s->u.reduce.view.dims, mask,
                                 s->u.reduce.op, y->dtype, stream);
    }
    case PLAN_STEP_RESIZE: {
        kern_resize_desc d;
        memset(&d, 0, sizeof d);
        d.dtype = y->dtype;
        d.n = s->u.resize.n;
        d.c = s->u.resize.c;
        d.in_h = s->u.resize.h;
        d.in_w = s->u.resize.w;
        d.out_h = s->u.resize.out_h;
        d.out_w = s->u.resize.out_w;
        d.scale_h = s->u.resize.scale_h;
        d.scale_w = s->u.resize.scale_w;
        d.mode = s->u.resize.mode;
        d.coord = s->u.resize.coord;
        d.rounding = s->u.resize.rounding;
        d.cubic_a = s->u.resize.cubic_a;
        d.exclude_outside = s->u.resize.exclude_outside;
        return kern_resize_nhwc8(in[0], out, &d, stream);
    }
    case PLAN_STEP_GATHER:
        return kern_gather(out, in[0], in[1],
                           gpu_tensor_of(p, s->inputs[1])->dtype == TCI_DTYPE_INT32,
                           s->u.gather.outer, s->u.gather.axis_dim, s->u.gather.inner,
                           s->u.gather.num_indices, (int)s->u.gather.elem_size, c->gather_error,
                           stream);
    case PLAN_STEP_PAD: {
        static const kern_pad_mode modes[] = {KERN_PAD_CONSTANT, KERN_PAD_REFLECT, KERN_PAD_EDGE};
        return kern_pad(out, in[0], s->u.pad.rank, s->u.pad.dims, s->u.pad.pads_begin,
                        s->u.pad.pads_end, modes[s->u.pad.mode],
                        fill_bits(y->dtype, s->u.pad.value), (int)s->u.pad.elem_size, stream);
    }
    case PLAN_STEP_GATHER_ELEMENTS:
        return kern_gather_elements(out, in[0], in[1],
                                    gpu_tensor_of(p, s->inputs[1])->dtype == TCI_DTYPE_INT32,
                                    s->u.index.rank, s->u.index.data_dims, s->u.index.index_dims,
                                    s->u.index.axis, (int)s->u.index.elem_size, c->gather_error,
                                    stream);
    case PLAN_STEP_SCATTER: {
        static const kern_scatter_reduce reduces[] = {KERN_SCATTER_NONE, KERN_SCATTER_ADD,
                                                      KERN_SCATTER_MUL, KERN_SCATTER_MAX,
                                                      KERN_SCATTER_MIN};
        int i32 = gpu_tensor_of(p, s->inputs[1])->dtype == TCI_DTYPE_INT32;
        kern_scatter_reduce r = reduces[s->u.index.reduce];
        if (s->u.index.nd)
            return kern_scatter_nd(out, in[0], in[1], i32, in[2], s->u.index.rank,
                                   s->u.index.data_dims, s->u.index.k, s->u.index.num_updates, r,
                                   y->dtype, c->gather_error, stream);
        return kern_scatter_elements(out, in[0], in[1], i32, in[2], s->u.index.rank,
                                     s->u.index.data_dims, s->u.index.index_dims, s->u.index.axis,
                                     r, y->dtype, c->gather_error, stream);
    }
    case PLAN_STEP_TRILU:
        return kern_trilu(out, in[0], s->u.trilu.batch, s->u.trilu.rows, s->u.trilu.cols,
                          s->u.trilu.k, s->num_inputs > 1 ? (const int64_t *)in[1] : NULL,
                          s->u.trilu.upper, (int)s->u.trilu.elem_size, stream);
    case PLAN_STEP_ONE_HOT:
        return kern_one_hot(out, in[0], gpu_tensor_of(p, s->inputs[0])->dtype == TCI_DTYPE_INT32,
                            s->u.one_hot.outer, s->u.one_hot.depth, s->u.one_hot.inner,
                            fill_bits(y->dtype, s->u.one_hot.off),
                            fill_bits(y->dtype, s->u.one_hot.on), (int)tci_dtype_size(y->dtype),
                            stream);
    case PLAN_STEP_RNN: return run_rnn(e, c, arena, index, in, stream);
    case PLAN_STEP_ATTENTION: {
        const plan_attention *a = &s->u.attention;
        kern_attention_desc d;
        gpu_attention_desc_of(a, y->dtype, &d);
        for (int k = 0; k < s->num_inputs; k++) {
            /* the keep mask (inputs[3] with has_keep) is bool, the rest the storage type */
            const tci_dtype want = k == 3 && a->has_keep ? TCI_DTYPE_BOOL : y->dtype;
            if (s->inputs[k] >= 0 && gpu_tensor_of(p, s->inputs[k])->dtype != want)
                return status_error(TCI_ERR_INTERNAL, "attention input %d is not in %s", k,
                                    tci_dtype_name(want));
        }
        const void *q, *k, *v;
        gpu_attention_operands(e, c, arena, index, &q, &k, &v);
        /* cuDNN's plan, chosen at build (attention_choice.c), where it computes this shape
         * on these buffers (a shape variant, a caller's unaligned buffer: tcinfer's) */
        const kern_attention_cudnn_plan *sdpa = e->impl[index].sdpa;
        if (sdpa && kern_attention_cudnn_applies(sdpa, &d, q, k, v, out))
            return kern_attention_cudnn_run(sdpa, c->cudnn, stream, q, k, v, out, c->workspace,
                                            e->workspace_bytes);
        return kern_attention(&d, q, k, v, a->has_mask ? in[3] : NULL,
                              a->has_keep ? in[3] : NULL, out, stream);
    }
    case PLAN_STEP_ARG_REDUCE:
        return kern_arg_reduce(in[0], out, s->u.axis.outer, s->u.axis.len, s->u.axis.inner,
                               s->u.axis.is_min, s->u.axis.select_last,
                               gpu_tensor_of(p, s->inputs[0])->dtype, stream);
    case PLAN_STEP_CUMSUM:
        return kern_cumsum(in[0], out, s->u.axis.outer, s->u.axis.len, s->u.axis.inner,
                           s->u.axis.exclusive, s->u.axis.reverse, y->dtype, stream);
    case PLAN_STEP_TOPK:
        return kern_topk(in[0], out, gpu_tensor_ptr(e, c, arena, s->outputs[1]), s->u.axis.outer,
                         s->u.axis.len, s->u.axis.inner, s->u.axis.k, s->u.axis.largest, y->dtype,
                         stream);
    }
    return status_error(TCI_ERR_INTERNAL, "unknown plan step kind %d", (int)s->kind);
}

tci_status gpu_step_error(const plan_step *s, tci_status st) {
    if (st == TCI_OK) return st;
    return status_error_prefix(st, "GPU step '%s' (%s) of node '%s'", s->label, s->node->op_type,
                            s->node->name);
}
