// The recurrence of LSTM, GRU and RNN: one launch per time step (two for GRU with the reset
// before the product) covering every (direction, sequence); each sequence's hidden units are split
// over several blocks so that a batch of one still fills the GPU. A block holds the vector the
// products read (h_{t-1}, or GRU's r (.) h_{t-1}) in shared memory; its warps split the
// h_{t-1} R^T dot products of 32 units over k and sum them, then one warp applies the gate math.
// h is double-buffered (every block of a sequence reads h_{t-1} while others write h_t).
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
        state[i] = ih ? to_float(ih[src]) : 0.0f;          // h before step 0
        state[2 * n + i] = ic ? to_float(ic[src]) : 0.0f;  // c
    }
}

template <typename T>
__global__ void rnn_final_kernel(Dims d, const float *state, const int32_t *lens, T *yh, T *yc) {
    const int64_t n = d.dirs * d.batch * d.hidden;
    const float *h = state + (d.steps & 1) * n; // h after the last step
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t j = i % d.hidden, b = (i / d.hidden) % d.batch, dir = i / (d.hidden * d.batch);
        int64_t dst = state_pos(d, dir, b, j);
        bool empty = seq_len(d, lens, b) == 0;
        if (yh) yh[dst] = from_float<T>(empty ? 0.0f : h[i]);
        if (yc) yc[dst] = from_float<T>(empty ? 0.0f : state[2 * n + i]);
    }
}

constexpr int kUnits = 32;                 // units per chunk: a warp's lanes
constexpr int kGroups = 8;                 // warps splitting each dot product over k
constexpr int kThreads = kUnits * kGroups;

// Which gates a launch computes: every gate of the cell (RNN, LSTM, GRU with linear_before_reset),
// or GRU with the reset first in two launches: z and r (r (.) h_{t-1} stored for every unit),
// then the h gate from r (.) h_{t-1}.
enum Phase { ALL_GATES = 0, GRU_ZR = 1, GRU_H = 2 };

// Step t of every (direction, sequence), units [slice * per_block, +per_block) of one sequence per
// block: block blockIdx.x = (dir * batch + b) * slices + slice.
template <typename T>
__global__ void __launch_bounds__(kThreads)
rnn_step_kernel(Dims d, int64_t t, int phase, int64_t per_block, const T *xw,
                const float *weights, const int32_t *lens, float *state, T *y) {
    extern __shared__ float shared[];
    const int64_t H = d.hidden, G = d.cell == KERN_RNN_LSTM ? 4 : d.cell == KERN_RNN_GRU ? 3 : 1;
    const int64_t GH = G * H, n = d.dirs * d.batch * H;
    const int64_t slices = (H + per_block - 1) / per_block;
    const int64_t seq = blockIdx.x / slices, slice = blockIdx.x % slices;
    const int64_t dir = seq / d.batch, b = seq % d.batch;
    const int64_t j0 = slice * per_block, j1 = j0 + per_block < H ? j0 + per_block : H;
    const float *h_prev = state + (t & 1) * n + seq * H;
    float *h_next = state + ((t + 1) & 1) * n + seq * H;
    float *c = state + 2 * n + seq * H, *rh = state + 3 * n + seq * H;
    const int64_t len = seq_len(d, lens, b);
    if (t >= len) { // past this sequence's end: state kept, Y zero
        if (phase == GRU_ZR) return;
        for (int64_t j = j0 + threadIdx.x; j < j1; j += blockDim.x) {
            h_next[j] = h_prev[j];
            if (y) y[y_pos(d, t, dir, b, j)] = from_float<T>(0.0f);
        }
        return;
    }
    const int64_t tt = dir == 1 || d.reverse ? len - 1 - t : t;
    float *vec = shared, *part = shared + H; // part[group][gate][lane]
    const float *src = phase == GRU_H ? rh : h_prev;
    for (int64_t k = threadIdx.x; k < H; k += blockDim.x) vec[k] = src[k];
    __syncthreads();
    const int64_t row = d.batch_major ? b * d.steps + tt : tt * d.batch + b;
    const T *x = xw + row * d.dirs * GH + dir * GH;
    const float *rt = weights + dir * H * GH;                      // rt[k * GH + g * H + j]
    const float *rb = weights + d.dirs * H * GH + dir * GH;        // per gate
    const float *pe = weights + d.dirs * H * GH + d.dirs * GH + dir * 3 * H; // i, o, f
    const int g_lo = phase == GRU_H ? 2 : 0, g_hi = phase == GRU_ZR ? 2 : (int)G;
    const int lane = threadIdx.x % kUnits, group = threadIdx.x / kUnits;
    for (int64_t jc = j0; jc < j1; jc += kUnits) {
        const int64_t j = jc + lane;
        float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        if (j < j1)
            for (int64_t k = group; k < H; k += kGroups) {
                const float hk = vec[k];
                const float *w = rt + k * GH + j;
                for (int g = g_lo; g < g_hi; g++) acc[g] += hk * w[g * H];
            }
        for (int g = g_lo; g < g_hi; g++) part[(group * 4 + g) * kUnits + lane] = acc[g];
        __syncthreads();
        if (group == 0 && j < j1) {
            for (int g = g_lo; g < g_hi; g++) {
                float sum = 0.0f;
                for (int q = 0; q < kGroups; q++) sum += part[(q * 4 + g) * kUnits + lane];
                acc[g] = sum;
            }
            float xg[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            for (int g = g_lo; g < g_hi; g++) xg[g] = to_float(x[g * H + j]) + rb[g * H + j];
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
            } else if (phase == GRU_ZR) { // the h gate needs every unit's r: the next launch
                const float z = sigmoid(xg[0] + acc[0]), r = sigmoid(xg[1] + acc[1]);
                c[j] = z;
                rh[j] = r * vec[j];
                hn = 0.0f;
            } else if (phase == GRU_H) {
                const float hh = tanhf(xg[2] + acc[2]);
                const float z = c[j];
                hn = (1.0f - z) * hh + z * h_prev[j];
            } else { // linear_before_reset: r (.) (h_{t-1} R_h^T + Rb_h); xg[2] holds Rb_h already
                const float z = sigmoid(xg[0] + acc[0]), r = sigmoid(xg[1] + acc[1]);
                const float rbh = rb[2 * H + j];
                const float hh = tanhf(xg[2] - rbh + r * (acc[2] + rbh));
                hn = (1.0f - z) * hh + z * vec[j];
            }
            if (phase != GRU_ZR) {
                h_next[j] = hn;
                if (y) y[y_pos(d, tt, dir, b, j)] = from_float<T>(hn);
            }
        }
        __syncthreads();
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
    const int64_t seqs = d->directions * d->batch;
    if (seqs == 0 || d->seq_length == 0) return TCI_OK;
    if (!xw || !weights || !state)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "kern_rnn_steps: missing buffers");
    // chunks of 32 units per block: about two blocks per SM over every sequence
    int device = 0, sms = 0;
    KERN_CUDA_CHECK(cudaGetDevice(&device));
    KERN_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    const int64_t chunks = (d->hidden + kUnits - 1) / kUnits, target = 2 * (int64_t)sms;
    int64_t per_block = (chunks * seqs + target - 1) / target;
    if (per_block < 1) per_block = 1;
    if (per_block > chunks) per_block = chunks;
    int64_t slices = (chunks + per_block - 1) / per_block;
    while (seqs * slices > INT32_MAX) { // a grid's x extent
        per_block++;
        slices = (chunks + per_block - 1) / per_block;
    }
    const int64_t blocks = seqs * slices;
    per_block *= kUnits;
    const Dims dims = dims_of(d);
    const size_t shared = (size_t)(d->hidden + kGroups * 4 * kUnits) * sizeof(float);
    const bool two = d->cell == KERN_RNN_GRU && !d->linear_before_reset;
    return kern_util::with_storage(s, [&](auto tag) -> tci_status {
        using T = typename decltype(tag)::type;
        for (int64_t t = 0; t < d->seq_length; t++)
            for (int phase = two ? GRU_ZR : ALL_GATES; phase <= (two ? GRU_H : ALL_GATES);
                 phase++) {
                rnn_step_kernel<T><<<(unsigned)blocks, kThreads, shared, stream>>>(
                    dims, t, phase, per_block, static_cast<const T *>(xw), weights, seq_lens,
                    state, static_cast<T *>(y));
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
