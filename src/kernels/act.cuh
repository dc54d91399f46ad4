// The device form of util/elementwise.h's activations, the only one: every kernel that applies an
// activation calls act_apply (activation fixed at compile time), act_apply_rt (chosen at run time),
// act_each or act8 (several values), and launches one kernel per activation through with_act.
// Internal to src/kernels/*.cu (CUDA C++); host code never includes it.
#ifndef TCI_KERNELS_ACT_CUH
#define TCI_KERNELS_ACT_CUH

#include <cuda_runtime.h>
#include <math.h>

#include "util/elementwise.h"

// util/status.h has no extern "C" guard of its own
extern "C" {
#include "util/status.h"
}

namespace kern_util {

// FAST: the hardware exp/log/reciprocal approximations, whose few-ulp fp32 errors vanish in an
// fp16 (2^-11) or bf16 (2^-8) rounding of the result; otherwise the precise functions.
template <bool FAST> __device__ __forceinline__ float exp_(float x) {
    return FAST ? __expf(x) : expf(x);
}
template <bool FAST> __device__ __forceinline__ float log_(float x) {
    return FAST ? __logf(x) : logf(x);
}
template <bool FAST> __device__ __forceinline__ float rcp_(float x) {
    return FAST ? __frcp_rn(x) : 1.0f / x;
}

// false for every ACT: a static_assert on it fires only in the branch a missing case reaches.
template <int ACT> constexpr bool kNoCase = false;

#define EXP_(v) exp_<FAST>(v)
#define LOG_(v) log_<FAST>(v)
#define RCP_(v) rcp_<FAST>(v)

#define ACT_ROW_BRANCH(NAME, DISPLAY, FORMULA, FLAGS)                                              \
    if constexpr (ACT == ACT_##NAME)                                                               \
        return (FORMULA);                                                                          \
    else

template <int ACT, bool FAST>
__device__ __forceinline__ float act_apply(float x, float alpha, float beta) {
    ACT_LIST(ACT_ROW_BRANCH) {
        static_assert(kNoCase<ACT>, "an activation without a row in ACT_LIST");
        return x;
    }
}
#undef ACT_ROW_BRANCH

// A uniform switch: for epilogues that apply the activation once per output of a long reduction.
// Activations outside the enum are rejected on the host; NaN marks one that got through.
#define ACT_ROW_CASE(NAME, DISPLAY, FORMULA, FLAGS)                                                \
    case ACT_##NAME: return (FORMULA);

template <bool FAST>
__device__ __forceinline__ float act_apply_rt(int act, float x, float alpha, float beta) {
    switch (act) { ACT_LIST(ACT_ROW_CASE) }
    return __int_as_float(0x7fffffff);
}
#undef ACT_ROW_CASE

#undef EXP_
#undef LOG_
#undef RCP_

// Activation ACT on each of N values.
template <int ACT, bool FAST, int N>
__device__ __forceinline__ void act_each(float (&v)[N], float alpha, float beta) {
#pragma unroll
    for (int i = 0; i < N; ++i) v[i] = act_apply<ACT, FAST>(v[i], alpha, beta);
}

// Activation act on eight values of an epilogue, dispatched once for the eight: act_apply_rt in a
// loop over the values compiles to one indirect branch (the switch's jump table) per value. The
// activations the engine fuses into convolutions and GEMMs get a case of their own; the others
// keep the per-value switch.
template <bool FAST>
__device__ __forceinline__ void act8(int act, float (&v)[8], float alpha, float beta) {
    switch (act) {
    case ACT_NONE: return;
    case ACT_RELU: act_each<ACT_RELU, FAST>(v, alpha, beta); return;
    case ACT_CLIP: act_each<ACT_CLIP, FAST>(v, alpha, beta); return;
    case ACT_LEAKY_RELU: act_each<ACT_LEAKY_RELU, FAST>(v, alpha, beta); return;
    case ACT_SIGMOID: act_each<ACT_SIGMOID, FAST>(v, alpha, beta); return;
    case ACT_HARD_SWISH: act_each<ACT_HARD_SWISH, FAST>(v, alpha, beta); return;
    case ACT_SILU: act_each<ACT_SILU, FAST>(v, alpha, beta); return;
    case ACT_GELU: act_each<ACT_GELU, FAST>(v, alpha, beta); return;
    case ACT_GELU_TANH: act_each<ACT_GELU_TANH, FAST>(v, alpha, beta); return;
    case ACT_GELU_OF_DIV: act_each<ACT_GELU_OF_DIV, FAST>(v, alpha, beta); return;
    default:
#pragma unroll
        for (int i = 0; i < 8; ++i) v[i] = act_apply_rt<FAST>(act, v[i], alpha, beta);
    }
}

// The activation as a compile-time constant for a host-side dispatch:
//   with_act(who, act, [&](auto a) { kernel<decltype(a)::value><<<...>>>(...); return TCI_OK; })
// instantiates one kernel per row of ACT_LIST (a runtime switch per element made the vector
// kernels large and slow: 0.8 TB/s for fp16 sigmoid against 3.4 TB/s for a copy).
template <int ACT> struct ActTag {
    static constexpr int value = ACT;
};

#define ACT_ROW_DISPATCH(NAME, DISPLAY, FORMULA, FLAGS)                                            \
    case ACT_##NAME: return f(ActTag<ACT_##NAME>{});

template <typename F> inline tci_status with_act(const char *who, int act, F &&f) {
    switch (act) { ACT_LIST(ACT_ROW_DISPATCH) }
    return status_error(TCI_ERR_INVALID_ARGUMENT, "%s: unknown activation %d", who, act);
}
#undef ACT_ROW_DISPATCH

} // namespace kern_util

#endif
