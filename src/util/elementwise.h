/* The element-wise vocabulary, defined once: each activation's enum value, name, formula and the
 * libraries that can fuse it, and the binary/ternary element-wise ops. Plain C, included by host
 * code and by the CUDA kernels alike (src/kernels/act.cuh expands the formulas for the device). */
#ifndef TCI_UTIL_ELEMENTWISE_H
#define TCI_UTIL_ELEMENTWISE_H

/* What fuses an activation into a convolution or GEMM beyond tcinfer's own kernels (which fuse
 * every activation). */
#define ACT_FUSES_CUDNN 1u    /* cuDNN's fused convolution + bias + activation call */
#define ACT_FUSES_CUBLASLT 2u /* a cuBLASLt epilogue */
/* The formula is a test (1 or 0) of an op whose output is bool (IsNaN, IsInf, Not): the
 * element-wise kernel writes it as a bool byte, and it is never fused as an epilogue. */
#define ACT_BOOL_RESULT 4u

/* X(NAME, "display name", FORMULA, FLAGS), one row per activation; the row order is the enum's
 * numbering. FORMULA is an fp32 expression in x, alpha and beta. It calls EXP_, LOG_ and RCP_
 * (1/v), which the expanding context defines: the precise functions on the host and in the
 * precise device kernels, the hardware approximations in the fast ones (kernels/act.cuh); every
 * other function in it exists identically on host and device. Comments give the parameters. */
/* clang-format off */
#define ACT_LIST(X)                                                                                \
    X(NONE, "None", x, ACT_FUSES_CUDNN | ACT_FUSES_CUBLASLT)                                       \
    X(RELU, "Relu", x < 0.0f ? 0.0f : x, ACT_FUSES_CUDNN | ACT_FUSES_CUBLASLT)                     \
    /* alpha: slope for x < 0 */                                                                   \
    X(LEAKY_RELU, "LeakyRelu", x < 0.0f ? alpha * x : x, 0)                                        \
    /* alpha: min, beta: max (-INFINITY / INFINITY for an absent bound); ReLU6 is CLIP(0, 6) */    \
    X(CLIP, "Clip", x < alpha ? alpha : (x > beta ? beta : x), 0)                                  \
    X(SIGMOID, "Sigmoid", RCP_(1.0f + EXP_(-x)), 0)                                                \
    X(HARD_SIGMOID, "HardSigmoid", fminf(1.0f, fmaxf(0.0f, alpha * x + beta)), 0)                  \
    X(HARD_SWISH, "HardSwish", x * fminf(1.0f, fmaxf(0.0f, x * (1.0f / 6.0f) + 0.5f)), 0)          \
    X(TANH, "Tanh", tanhf(x), 0)                                                                   \
    X(ELU, "Elu", x < 0.0f ? alpha * expm1f(x) : x, 0)                                             \
    /* alpha, beta = gamma */                                                                      \
    X(SELU, "Selu", x <= 0.0f ? beta * (alpha * expm1f(x)) : beta * x, 0)                          \
    /* max(x, 0) + log1p(exp(-|x|)) neither overflows for large x nor loses small results */       \
    X(SOFTPLUS, "Softplus", fmaxf(x, 0.0f) + log1pf(EXP_(-fabsf(x))), 0)                           \
    X(SQRT, "Sqrt", sqrtf(x), 0)                                                                   \
    X(ERF, "Erf", erff(x), 0)                                                                      \
    /* 0.5x(1 + erf(x/sqrt 2)) */                                                                  \
    X(GELU, "Gelu", 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)), 0)                         \
    /* 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))) */                                              \
    X(GELU_TANH, "GeluTanh",                                                                       \
      0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x))),               \
      ACT_FUSES_CUBLASLT)                                                                          \
    /* x * sigmoid(x) */                                                                           \
    X(SILU, "Silu", x * RCP_(1.0f + EXP_(-x)), 0)                                                  \
    X(NEG, "Neg", -x, 0)                                                                           \
    X(ABS, "Abs", fabsf(x), 0)                                                                     \
    X(EXP, "Exp", EXP_(x), 0)                                                                      \
    X(LOG, "Log", LOG_(x), 0)                                                                      \
    X(RECIPROCAL, "Reciprocal", RCP_(x), 0)                                                    \
    X(FLOOR, "Floor", floorf(x), 0)                                                                \
    X(CEIL, "Ceil", ceilf(x), 0)                                                                   \
    /* rintf in the default rounding mode: halves to even */                                      \
    X(ROUND, "Round", rintf(x), 0)                                                                 \
    /* +-0 and NaN give themselves */                                                              \
    X(SIGN, "Sign", x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : x), 0)                                   \
    /* a division, as onnxruntime's: inf / inf is NaN, and no reciprocal underflows */            \
    X(SOFTSIGN, "Softsign", x / (1.0f + fabsf(x)), 0)                                              \
    /* x * tanh(softplus(x)), softplus as in SOFTPLUS */                                           \
    X(MISH, "Mish", x * tanhf(fmaxf(x, 0.0f) + log1pf(EXP_(-fabsf(x)))), 0)                        \
    /* alpha: max(0, x) + min(0, alpha (exp(x / alpha) - 1)) */                                    \
    X(CELU, "Celu", fmaxf(x, 0.0f) + fminf(0.0f, alpha * expm1f(x / alpha)), 0)                    \
    /* alpha: the threshold */                                                                     \
    X(THRESHOLDED_RELU, "ThresholdedRelu", x > alpha ? x : 0.0f, 0)                                \
    X(SIN, "Sin", sinf(x), 0)                                                                      \
    X(COS, "Cos", cosf(x), 0)                                                                      \
    /* x a bool as 0 or 1 */                                                                       \
    X(NOT, "Not", x != 0.0f ? 0.0f : 1.0f, ACT_BOOL_RESULT)                                        \
    X(IS_NAN, "IsNaN", x != x ? 1.0f : 0.0f, ACT_BOOL_RESULT)                                      \
    /* alpha: detect_negative, beta: detect_positive (0 or 1) */                                   \
    X(IS_INF, "IsInf",                                                                             \
      fabsf(x) == INFINITY && (x > 0.0f ? beta : alpha) != 0.0f ? 1.0f : 0.0f, ACT_BOOL_RESULT)    \
    /* rows added later go last: engine files carry the numbers */                                 \
    X(TAN, "Tan", tanf(x), 0)                                                                      \
    X(ASIN, "Asin", asinf(x), 0)                                                                   \
    X(ACOS, "Acos", acosf(x), 0)                                                                   \
    X(ATAN, "Atan", atanf(x), 0)                                                                   \
    X(SINH, "Sinh", sinhf(x), 0)                                                                   \
    X(COSH, "Cosh", coshf(x), 0)                                                                   \
    X(ASINH, "Asinh", asinhf(x), 0)                                                                \
    X(ACOSH, "Acosh", acoshf(x), 0)                                                                \
    X(ATANH, "Atanh", atanhf(x), 0)                                                                \
    /* alpha: lambd, beta: bias */                                                                 \
    X(SHRINK, "Shrink", x < -alpha ? x + beta : (x > alpha ? x - beta : 0.0f), 0)                  \
    /* alpha: x * sigmoid(alpha x) */                                                              \
    X(SWISH, "Swish", x * RCP_(1.0f + EXP_(-alpha * x)), 0)                                        \
    /* alpha: the factor (Mean's 1/n after its sum) */                                             \
    X(SCALE, "Scale", alpha * x, 0)                                                                \
    /* the erf-expanded Gelu after its Div: x = v / alpha, 0.5 v (1 + erf(x)) (alpha sqrt(2)) */   \
    X(GELU_OF_DIV, "GeluOfDiv", 0.5f * alpha * x * (1.0f + erff(x)), 0)                            \
    /* the erf-expanded Gelu of x with alpha = 1 / its Div's divisor, divided in fp32: for a Div   \
     * step that takes its Gelu, so that the divisor is not its constant rounded to 16 bits */     \
    X(GELU_SCALED, "GeluScaled", 0.5f * x * (1.0f + erff(x * alpha)), 0)
/* clang-format on */

#define ACT_ENUM_ROW(NAME, DISPLAY, FORMULA, FLAGS) ACT_##NAME,
typedef enum act_kind { ACT_LIST(ACT_ENUM_ROW) ACT_COUNT } act_kind;
#undef ACT_ENUM_ROW

/* An activation with its parameters (see ACT_LIST for what alpha and beta mean). */
typedef struct act_params {
    act_kind kind;
    float alpha, beta;
} act_params;

/* What a binary op's result is beyond a value of its inputs' dtype. */
#define BINARY_BOOL_RESULT 1u /* a comparison or logical op: bool (0/1), no activation after */
#define BINARY_BOOL_INPUTS 2u /* a logical op: its inputs are bools too */

/* X(NAME, "display name", FLAGS): y = op(a, b[, c]) before the activation. */
/* clang-format off */
#define BINARY_LIST(X)                                                                             \
    X(NONE, "None", 0)   /* one input: y = act(a) */                                               \
    X(ADD, "Add", 0)                                                                               \
    X(SUB, "Sub", 0)                                                                               \
    X(MUL, "Mul", 0)                                                                               \
    X(DIV, "Div", 0)                                                                               \
    X(POW, "Pow", 0)                                                                               \
    X(MAX, "Max", 0)     /* NaN propagates (numpy.maximum) */                                      \
    X(MIN, "Min", 0)                                                                               \
    X(PRELU, "PRelu", 0) /* a < 0 ? b*a : a, b the slope */                                        \
    X(EQUAL, "Equal", BINARY_BOOL_RESULT) /* a == b */                                             \
    X(WHERE, "Where", 0) /* inputs (cond, a, b): cond ? a : b */                                   \
    X(MOD, "Mod", 0)     /* integers: remainder with the divisor's sign (Python's %) */            \
    X(FMOD, "Fmod", 0)   /* remainder with the dividend's sign (C's fmod and %) */                 \
    X(LESS, "Less", BINARY_BOOL_RESULT)                                                            \
    X(LESS_EQUAL, "LessOrEqual", BINARY_BOOL_RESULT)                                               \
    X(GREATER, "Greater", BINARY_BOOL_RESULT)                                                      \
    X(GREATER_EQUAL, "GreaterOrEqual", BINARY_BOOL_RESULT)                                         \
    X(AND, "And", BINARY_BOOL_RESULT | BINARY_BOOL_INPUTS)                                         \
    X(OR, "Or", BINARY_BOOL_RESULT | BINARY_BOOL_INPUTS)                                           \
    X(XOR, "Xor", BINARY_BOOL_RESULT | BINARY_BOOL_INPUTS)
/* clang-format on */

#define BINARY_ENUM_ROW(NAME, DISPLAY, FLAGS) BINARY_##NAME,
typedef enum binary_op { BINARY_LIST(BINARY_ENUM_ROW) BINARY_COUNT } binary_op;
#undef BINARY_ENUM_ROW

#ifdef __cplusplus
extern "C" {
#endif

/* The display name ("Relu"); "?" for a value outside the enum. */
const char *act_name(act_kind kind);

/* The ACT_FUSES_* flags of kind; 0 for a value outside the enum. */
unsigned act_flags(act_kind kind);

/* kind's formula with the precise functions (the fp32 reference); NaN for a value outside the
 * enum. */
float act_apply_host(act_kind kind, float x, float alpha, float beta);

/* The display name ("Add"); "?" for a value outside the enum. */
const char *binary_name(binary_op op);

/* The BINARY_* flags of op; 0 for a value outside the enum. */
unsigned binary_flags(binary_op op);

#ifdef __cplusplus
}
#endif

#endif
