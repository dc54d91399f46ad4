// The recurrence of LSTM, GRU and RNN: one block per (direction, sequence) and time step; the
// block holds h_{t-1} in shared memory, each thread computes whole hidden units (every gate's
// h_{t-1} R^T dot product in fp32, then the gate math), so the state updates in place.
#include "kernels/cuda_check.h"
#include "kernels/kern_util.cuh"
#include "kernels/rnn.h"

namespace {

using kern_util::from_float;
using kern_util::to_float;

struct Dims {
    int cell;
    int64_t steps, batch, hidden, dirs;
    bool reverse, batch_major, lbr;
};

Dims dims_of(const kern_rnn_desc *d) {
    return Dims{d->cell,        d->seq_length,  d->batch,
                d->hidden,      d->directions,  d->reverse,
                d->batch_major, d->linear_before_reset};
}

__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

__device__ __forceinline__ int64_t seq_len(const Dims &d, const int32_t *lens, int64_t b) {
    if (!lens) return d.steps;
    int64_t v = lens[b];
    return v < 0 ? 0 : v > d.steps ? d.steps : v;
}

// Position of unit j of (direction dir, sequence b) in Y_h / initial_h, and in Y at time t.
__device__ __forceinline__ int64_t state_pos(const Dims &d, int64_t dir, int64_t b, int64_t j) {
    return (d.batch_major ? b * d.dirs + dir : dir * d.batch + b) * d.hidden + j;
}
__device__ __forceinline__ int64_t y_pos(const Dims &d, int64_t t, int64_t dir, int64_t b,
                                         int64_t j) {
    return (d.batch_major ? (b * d.steps + t) * d.dirs + dir : (t * d.dirs + dir) * d.batch + b) *
               d.hidden +
           j;
}

template <typename T>
__global__ void rnn_init_kernel(Dims d, const T *ih, const T *ic, float *state) {
    const int64_t n = d.dirs * d.batch * d.hidden;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t j = i % d.hidden, b = (i / d.hidden) % d.batch, dir = i / (d.hidden * d.batch);
        int64_t src = state_pos(d, dir, b, j);
        state[i] = ih ? to_float(ih[src]) : 0.0f;
        state[n + i] = ic ? to_float(ic[src]) : 0.0f;
    }
}

template <typename T>
__global__ void rnn_final_kernel(Dims d, const float *state, const int32_t *lens, T *yh, T *yc) {
    const int64_t n = d.dirs * d.batch * d.hidden;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t j = i % d.hidden, b = (i / d.hidden) % d.batch, dir = i / (d.hidden * d.batch);
        int64_t dst = state_pos(d, dir, b, j);
        bool empty = seq_len(d, lens, b) == 0;
        if (yh) yh[dst] = from_float<T>(empty ? 0.0f : state[i]);
        if (yc) yc[dst] = from_float<T>(empty ? 0.0f : state[n + i]);
    }
}

// Step t of every (direction, sequence): block blockIdx.x = dir * batch + b.
template <typename T>
__global__ void rnn_step_kernel(Dims d, int64_t t, const T *xw, const float *weights,
                                const int32_t *lens, float *state, T *y) {
    extern __shared__ float shared[];
    const int64_t H = d.hidden, G = d.cell == KERN_RNN_LSTM ? 4 : d.cell == KERN_RNN_GRU ? 3 : 1;
    const int64_t GH = G * H, n = d.dirs * d.batch * H;
    const int64_t dir = blockIdx.x / d.batch, b = blockIdx.x % d.batch;
    const int64_t len = seq_len(d, lens, b);
    if (t >= len) { // past this sequence's end (the whole block): state kept, Y zero
        if (y)
            for (int64_t j = threadIdx.x; j < H; j += blockDim.x)
                y[y_pos(d, t, dir, b, j)] = from_float<T>(0.0f);
        return;
    }
    const int64_t tt = dir == 1 || d.reverse ? len - 1 - t : t;
    float *h = state + blockIdx.x * H, *c = state + n + blockIdx.x * H;
    float *hs = shared, *rhs = shared + H;
    for (int64_t j = threadIdx.x; j < H; j += blockDim.x) hs[j] = h[j];
    __syncthreads();
    const int64_t row = d.batch_major ? b * d.steps + tt : tt * d.batch + b;
    const T *x = xw + row * d.dirs * GH + dir * GH;
    const float *rt = weights + dir * H * GH;                      // rt[k * GH + g * H + j]
    const float *rb = weights + d.dirs * H * GH + dir * GH;        // per gate
    const float *pe = weights + d.dirs * H * GH + d.dirs * GH + dir * 3 * H; // i, o, f
    const bool gru_reset_first = d.cell == KERN_RNN_GRU && !d.lbr;
    for (int64_t j = threadIdx.x; j < H; j += blockDim.x) {
        float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        const int64_t ng = gru_reset_first ? 2 : G;
        for (int64_t k = 0; k < H; k++) {
            const float hk = hs[k];
            const float *row = rt + k * GH + j;
            for (int64_t g = 0; g < ng; g++) acc[g] += hk * row[g * H];
        }
        float xg[4];
        for (int64_t g = 0; g < G; g++) xg[g] = to_float(x[g * H + j]) + rb[g * H + j];
        float hn;
        if (d.cell == KERN_RNN_TANH) {
            hn = tanhf(xg[0] + acc[0]);
        } else if (d.cell == KERN_RNN_LSTM) {
            const float cp = c[j];
            const float i = sigmoid(xg[0] + acc[0] + pe[j] * cp);
            const float f = sigmoid(xg[2] + acc[2] + pe[2 * H + j] * cp);
            const float cn = f * cp + i * tanhf(xg[3] + acc[3]);
            const float o = sigmoid(xg[1] + acc[1] + pe[H + j] * cn);
            c[j] = cn;
            hn = o * tanhf(cn);
        } else {
            const float z = sigmoid(xg[0] + acc[0]), r = sigmoid(xg[1] + acc[1]);
            if (gru_reset_first) { // the h gate needs every unit's r: below, after a barrier
                rhs[j] = r * hs[j];
                c[j] = z;
                continue;
            }
            // linear_before_reset: r (.) (h_{t-1} R_h^T + Rb_h); xg[2] holds Rb_h already
            const float rbh = rb[2 * H + j];
            const float hh = tanhf(xg[2] - rbh + r * (acc[2] + rbh));
            hn = (1.0f - z) * hh + z * hs[j];
        }
        h[j] = hn;
        if (y) y[y_pos(d, tt, dir, b, j)] = from_float<T>(hn);
    }
    if (!gru_reset_first) return;
    __syncthreads();
    for (int64_t j = threadIdx.x; j < H; j += blockDim.x) {
        float acc = 0.0f;
        const float *col = rt + 2 * H + j;
        for (int64_t k = 0; k < H; k++) acc += rhs[k] * col[k * GH];
        const float hh = tanhf(to_float(x[2 * H + j]) + rb[2 * H + j] + acc);
        const float z = c[j];
        const float hn = (1.0f - z) * hh + z * hs[j];
        h[j] = hn;
        if (y) y[y_pos(d, tt, dir, b, j)] = from_float<T>(hn);
    }
}

tci_status check_desc(const char *who, const kern_rnn_desc *d, kern_util::Storage *s) {
    TRY_STATUS(kern_util::storage_type(who, d->dtype, s));
    if (d->cell < KERN_RNN_TANH || d->cell > KERN_RNN_LSTM || d->seq_length < 0 || d->batch < 0 ||
        d->hidden < 1 || d->hidden > KERN_RNN_MAX_HIDDEN || d->directions < 1 ||
        d->directions > 2 || d->batch * d->directions > INT32_MAX)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                         "%s: bad sizes (cell %d, %lld steps, batch %lld, hidden %lld, %lld "
                         "directions)",
                         who, d->cell, (long long)d->seq_length, (long long)d->batch,
                         (long long)d->hidden, (long long)d->directions);
    return TCI_OK;
}

} // namespace

extern "C" tci_status kern_rnn_init(const kern_rnn_desc *d, const void *initial_h,
                                    const void *initial_c, float *state, cudaStream_t stream) {
    kern_util::Storage s;
    TRY_STATUS(check_desc("kern_rnn_init", d, &s));
    const int64_t n = d->directions * d->batch * d->hidden;
    if (n == 0) return TCI_OK;
    if (!state) return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_rnn_init: no state buffer");
    const Dims dims = dims_of(d);
    return kern_util::with_storage(s, [&](auto tag) -> tci_status {
        using T = typename decltype(tag)::type;
        rnn_init_kernel<T><<<kern_util::blocks_for(n, 256), 256, 0, stream>>>(
            dims, static_cast<const T *>(initial_h), static_cast<const T *>(initial_c), state);
        KERN_LAUNCH_CHECK("rnn_init_kernel");
        return TCI_OK;
    });
}

extern "C" tci_status kern_rnn_steps(const kern_rnn_desc *d, const void *xw, const float *weights,
                                     const int32_t *seq_lens, float *state, void *y,
                                     cudaStream_t stream) {
    kern_util::Storage s;
    TRY_STATUS(check_desc("kern_rnn_steps", d, &s));
    const int64_t blocks = d->directions * d->batch;
    if (blocks == 0 || d->seq_length == 0) return TCI_OK;
    if (!xw || !weights || !state)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_rnn_steps: missing buffers");
    const Dims dims = dims_of(d);
    int threads = (int)kern_util::min64(256, (d->hidden + 31) / 32 * 32);
    size_t shared = (size_t)(2 * d->hidden) * sizeof(float);
    return kern_util::with_storage(s, [&](auto tag) -> tci_status {
        using T = typename decltype(tag)::type;
        for (int64_t t = 0; t < d->seq_length; t++) {
            rnn_step_kernel<T><<<(unsigned)blocks, threads, shared, stream>>>(
                dims, t, static_cast<const T *>(xw), weights, seq_lens, state,
                static_cast<T *>(y));
            KERN_LAUNCH_CHECK("rnn_step_kernel");
        }
        return TCI_OK;
    });
}

extern "C" tci_status kern_rnn_final(const kern_rnn_desc *d, const float *state,
                                     const int32_t *seq_lens, void *y_h, void *y_c,
                                     cudaStream_t stream) {
    kern_util::Storage s;
    TRY_STATUS(check_desc("kern_rnn_final", d, &s));
    const int64_t n = d->directions * d->batch * d->hidden;
    if (n == 0 || (!y_h && !y_c)) return TCI_OK;
    if (!state) return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_rnn_final: no state buffer");
    const Dims dims = dims_of(d);
    return kern_util::with_storage(s, [&](auto tag) -> tci_status {
        using T = typename decltype(tag)::type;
        rnn_final_kernel<T><<<kern_util::blocks_for(n, 256), 256, 0, stream>>>(
            dims, state, seq_lens, static_cast<T *>(y_h), static_cast<T *>(y_c));
        KERN_LAUNCH_CHECK("rnn_final_kernel");
        return TCI_OK;
    });
}
