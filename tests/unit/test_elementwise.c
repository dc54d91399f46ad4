/* util/elementwise.h: the activation and binary-op vocabulary, its names, flags and host formulas. */
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "harness.h"
#include "util/elementwise.h"

START_TEST(test_numbering) {
    /* engine files and the kernels' descriptors carry these numbers */
    ck_assert_int_eq(ACT_NONE, 0);
    ck_assert_int_eq(ACT_RELU, 1);
    ck_assert_int_eq(ACT_CLIP, 3);
    ck_assert_int_eq(ACT_SELU, 9);
    ck_assert_int_eq(ACT_GELU_TANH, 14);
    ck_assert_int_eq(ACT_SILU, 15);
    ck_assert_int_eq(ACT_RECIPROCAL, 20);
    ck_assert_int_eq(ACT_FLOOR, 21);
    ck_assert_int_eq(ACT_IS_INF, 33);
    ck_assert_int_eq(ACT_TAN, 34);
    ck_assert_int_eq(ACT_SCALE, 45);
    ck_assert_int_eq(ACT_GELU_OF_DIV, 46);
    ck_assert_int_eq(ACT_GELU_SCALED, 47);
    ck_assert_int_eq(ACT_COUNT, 48);
    ck_assert_int_eq(BINARY_NONE, 0);
    ck_assert_int_eq(BINARY_ADD, 1);
    ck_assert_int_eq(BINARY_PRELU, 8);
    ck_assert_int_eq(BINARY_WHERE, 10);
    ck_assert_int_eq(BINARY_MOD, 11);
    ck_assert_int_eq(BINARY_FMOD, 12);
    ck_assert_int_eq(BINARY_LESS, 13);
    ck_assert_int_eq(BINARY_XOR, 19);
    ck_assert_int_eq(BINARY_COUNT, 20);
}
END_TEST

START_TEST(test_names) {
    for (int i = 0; i < ACT_COUNT; i++) {
        ck_assert_str_ne(act_name((act_kind)i), "?");
        for (int j = 0; j < i; j++) ck_assert_str_ne(act_name((act_kind)i), act_name((act_kind)j));
    }
    for (int i = 0; i < BINARY_COUNT; i++) {
        ck_assert_str_ne(binary_name((binary_op)i), "?");
        for (int j = 0; j < i; j++)
            ck_assert_str_ne(binary_name((binary_op)i), binary_name((binary_op)j));
    }
    ck_assert_str_eq(act_name(ACT_RELU), "Relu");
    ck_assert_str_eq(act_name(ACT_HARD_SWISH), "HardSwish");
    ck_assert_str_eq(act_name((act_kind)ACT_COUNT), "?");
    ck_assert_str_eq(act_name((act_kind)-1), "?");
    ck_assert_str_eq(binary_name(BINARY_PRELU), "PRelu");
    ck_assert_str_eq(binary_name((binary_op)BINARY_COUNT), "?");
    ck_assert_str_eq(binary_name((binary_op)-1), "?");
}
END_TEST

START_TEST(test_flags) {
    for (int i = 0; i < ACT_COUNT; i++) {
        const act_kind k = (act_kind)i;
        ck_assert_msg(!(act_flags(k) & ACT_FUSES_CUDNN) == !(k == ACT_NONE || k == ACT_RELU),
                      "cuDNN flag of %s", act_name(k));
        ck_assert_msg(!(act_flags(k) & ACT_FUSES_CUBLASLT) ==
                          !(k == ACT_NONE || k == ACT_RELU || k == ACT_GELU_TANH),
                      "cuBLASLt flag of %s", act_name(k));
    }
    ck_assert_uint_eq(act_flags((act_kind)ACT_COUNT), 0);
    /* bool results: the tests and Not, nothing else */
    for (int i = 0; i < ACT_COUNT; i++) {
        const act_kind k = (act_kind)i;
        ck_assert_msg(!(act_flags(k) & ACT_BOOL_RESULT) ==
                          !(k == ACT_NOT || k == ACT_IS_NAN || k == ACT_IS_INF),
                      "bool flag of %s", act_name(k));
    }
    for (int i = 0; i < BINARY_COUNT; i++) {
        const binary_op op = (binary_op)i;
        const bool compare = op == BINARY_EQUAL || op == BINARY_LESS ||
                             op == BINARY_LESS_EQUAL || op == BINARY_GREATER ||
                             op == BINARY_GREATER_EQUAL;
        const bool logical = op == BINARY_AND || op == BINARY_OR || op == BINARY_XOR;
        ck_assert_msg(!(binary_flags(op) & BINARY_BOOL_RESULT) == !(compare || logical),
                      "bool result flag of %s", binary_name(op));
        ck_assert_msg(!(binary_flags(op) & BINARY_BOOL_INPUTS) == !logical,
                      "bool inputs flag of %s", binary_name(op));
    }
    ck_assert_uint_eq(binary_flags((binary_op)BINARY_COUNT), 0);
}
END_TEST

START_TEST(test_host_formulas) {
    ck_assert_float_eq(act_apply_host(ACT_NONE, -1.5f, 0, 0), -1.5f);
    ck_assert_float_eq(act_apply_host(ACT_RELU, -1.5f, 0, 0), 0);
    ck_assert_float_eq(act_apply_host(ACT_RELU, 1.5f, 0, 0), 1.5f);
    ck_assert_float_eq(act_apply_host(ACT_LEAKY_RELU, -2, 0.25f, 0), -0.5f);
    ck_assert_float_eq(act_apply_host(ACT_CLIP, 7, 0, 6), 6);
    ck_assert_float_eq(act_apply_host(ACT_CLIP, -7, 0, 6), 0);
    ck_assert_float_eq(act_apply_host(ACT_CLIP, -7, -INFINITY, INFINITY), -7);
    ck_assert_float_eq(act_apply_host(ACT_SIGMOID, 0, 0, 0), 0.5f);
    ck_assert_float_eq(act_apply_host(ACT_SIGMOID, -200, 0, 0), 0);
    ck_assert_float_eq(act_apply_host(ACT_HARD_SIGMOID, 1, 0.2f, 0.5f), 0.2f * 1 + 0.5f);
    ck_assert_float_eq(act_apply_host(ACT_HARD_SIGMOID, 9, 0.2f, 0.5f), 1);
    ck_assert_float_eq(act_apply_host(ACT_HARD_SWISH, 3, 0, 0), 3);
    ck_assert_float_eq(act_apply_host(ACT_HARD_SWISH, -3, 0, 0), 0);
    ck_assert_float_eq(act_apply_host(ACT_TANH, 0.5f, 0, 0), tanhf(0.5f));
    ck_assert_float_eq(act_apply_host(ACT_ELU, -1, 2, 0), 2 * expm1f(-1));
    ck_assert_float_eq(act_apply_host(ACT_SELU, -1, 2, 3), 3 * (2 * expm1f(-1)));
    ck_assert_float_eq(act_apply_host(ACT_SELU, 1, 2, 3), 3);
    ck_assert_float_eq(act_apply_host(ACT_SOFTPLUS, 0, 0, 0), log1pf(1));
    ck_assert_float_eq(act_apply_host(ACT_SOFTPLUS, 200, 0, 0), 200);
    ck_assert_float_eq(act_apply_host(ACT_SQRT, 4, 0, 0), 2);
    ck_assert_float_eq(act_apply_host(ACT_ERF, 0.5f, 0, 0), erff(0.5f));
    ck_assert_float_eq_tol(act_apply_host(ACT_GELU, 1, 0, 0), 0.84134475f, 1e-7f);
    ck_assert_float_eq_tol(act_apply_host(ACT_GELU_TANH, 1, 0, 0), 0.84119199f, 1e-7f);
    ck_assert_float_eq_tol(act_apply_host(ACT_SILU, 1, 0, 0), 0.73105858f, 1e-7f);
    ck_assert_float_eq(act_apply_host(ACT_NEG, 2, 0, 0), -2);
    ck_assert_float_eq(act_apply_host(ACT_ABS, -2, 0, 0), 2);
    ck_assert_float_eq(act_apply_host(ACT_EXP, 1, 0, 0), expf(1));
    ck_assert_float_eq(act_apply_host(ACT_LOG, 2, 0, 0), logf(2));
    ck_assert_float_eq(act_apply_host(ACT_RECIPROCAL, 4, 0, 0), 0.25f);
    ck_assert_float_eq(act_apply_host(ACT_FLOOR, -1.5f, 0, 0), -2);
    ck_assert_float_eq(act_apply_host(ACT_CEIL, -1.5f, 0, 0), -1);
    /* halves to even */
    ck_assert_float_eq(act_apply_host(ACT_ROUND, 2.5f, 0, 0), 2);
    ck_assert_float_eq(act_apply_host(ACT_ROUND, -2.5f, 0, 0), -2);
    ck_assert_float_eq(act_apply_host(ACT_ROUND, 3.5f, 0, 0), 4);
    ck_assert_float_eq(act_apply_host(ACT_ROUND, 0.4f, 0, 0), 0);
    ck_assert_float_eq(act_apply_host(ACT_SIGN, -3, 0, 0), -1);
    ck_assert_float_eq(act_apply_host(ACT_SIGN, 0, 0, 0), 0);
    ck_assert_float_eq(act_apply_host(ACT_SIGN, 1e-30f, 0, 0), 1);
    ck_assert(isnan(act_apply_host(ACT_SIGN, NAN, 0, 0)));
    ck_assert_float_eq(act_apply_host(ACT_SOFTSIGN, -3, 0, 0), -0.75f);
    ck_assert_float_eq(act_apply_host(ACT_SOFTSIGN, 1e30f, 0, 0), 1);
    ck_assert(isnan(act_apply_host(ACT_SOFTSIGN, INFINITY, 0, 0)));
    ck_assert_float_eq_tol(act_apply_host(ACT_MISH, 1, 0, 0), 0.86509839f, 1e-7f);
    ck_assert_float_eq(act_apply_host(ACT_MISH, 100, 0, 0), 100);
    ck_assert_float_eq(act_apply_host(ACT_MISH, -200, 0, 0), 0);
    ck_assert_float_eq_tol(act_apply_host(ACT_CELU, -1, 2, 0), 2 * expm1f(-0.5f), 1e-7f);
    ck_assert_float_eq(act_apply_host(ACT_CELU, 3, 2, 0), 3);
    ck_assert_float_eq(act_apply_host(ACT_THRESHOLDED_RELU, 1, 1, 0), 0);
    ck_assert_float_eq(act_apply_host(ACT_THRESHOLDED_RELU, 1.5f, 1, 0), 1.5f);
    ck_assert_float_eq(act_apply_host(ACT_SIN, 0.5f, 0, 0), sinf(0.5f));
    ck_assert_float_eq(act_apply_host(ACT_COS, 0.5f, 0, 0), cosf(0.5f));
    ck_assert_float_eq(act_apply_host(ACT_NOT, 0, 0, 0), 1);
    ck_assert_float_eq(act_apply_host(ACT_NOT, 1, 0, 0), 0);
    ck_assert_float_eq(act_apply_host(ACT_IS_NAN, NAN, 0, 0), 1);
    ck_assert_float_eq(act_apply_host(ACT_IS_NAN, INFINITY, 0, 0), 0);
    /* alpha: detect_negative, beta: detect_positive */
    ck_assert_float_eq(act_apply_host(ACT_IS_INF, INFINITY, 1, 1), 1);
    ck_assert_float_eq(act_apply_host(ACT_IS_INF, -INFINITY, 1, 1), 1);
    ck_assert_float_eq(act_apply_host(ACT_IS_INF, -INFINITY, 0, 1), 0);
    ck_assert_float_eq(act_apply_host(ACT_IS_INF, INFINITY, 1, 0), 0);
    ck_assert_float_eq(act_apply_host(ACT_IS_INF, NAN, 1, 1), 0);
    ck_assert_float_eq(act_apply_host(ACT_IS_INF, FLT_MAX, 1, 1), 0);
    ck_assert(isnan(act_apply_host((act_kind)ACT_COUNT, 1, 0, 0)));
}
END_TEST

int main(void) {
    Suite *s = suite_create("elementwise");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_numbering);
    tcase_add_test(tc, test_names);
    tcase_add_test(tc, test_flags);
    tcase_add_test(tc, test_host_formulas);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
