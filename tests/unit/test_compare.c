/* Accuracy metrics (--compare): hand-computed values of every metric, zero/NaN/Inf edge cases,
 * classification agreement, and the per-layer error-jump rule. */
#include <limits.h>
#include <math.h>
#include <stdint.h>

#include "graph/compare.h"
#include "harness.h"

static compare_metrics metrics_of(const float *test, const float *baseline, size_t count) {
    compare_metrics m;
    ck_assert_tci_ok(compare_arrays(test, baseline, count, &m));
    ck_assert_uint_eq(m.count, count);
    return m;
}

START_TEST(test_metrics_hand_computed) {
    /* diff {0, 1, 0, -1}; ||b|| = 5; ||t|| = sqrt(27); <t, b> = 25 */
    const float b[4] = {3, 0, 4, 0}, t[4] = {3, 1, 4, -1};
    compare_metrics m = metrics_of(t, b, 4);
    ck_assert_double_eq(m.max_abs_error, 1);
    ck_assert_double_eq(m.mean_abs_error, 0.5);
    ck_assert_double_eq_tol(m.relative_l2_error, sqrt(2.0) / 5, 1e-15);
    ck_assert_double_eq_tol(m.cosine_similarity, 5 / sqrt(27.0), 1e-15);
    ck_assert_uint_eq(m.nonfinite_count, 0);
}
END_TEST

START_TEST(test_metrics_single_differing_element) {
    const float b[4] = {1, 1, 1, 1}, t[4] = {1, 1, 1, 3};
    compare_metrics m = metrics_of(t, b, 4);
    ck_assert_double_eq(m.max_abs_error, 2);
    ck_assert_double_eq(m.mean_abs_error, 0.5);
    ck_assert_double_eq_tol(m.relative_l2_error, 1, 1e-15);
    ck_assert_double_eq_tol(m.cosine_similarity, sqrt(3.0) / 2, 1e-15);
}
END_TEST

START_TEST(test_metrics_identical_and_opposite) {
    const float b[5] = {0.25f, -3, 1e-3f, 7, -0.5f};
    compare_metrics m = metrics_of(b, b, 5);
    ck_assert_double_eq(m.max_abs_error, 0);
    ck_assert_double_eq(m.mean_abs_error, 0);
    ck_assert_double_eq(m.relative_l2_error, 0);
    ck_assert_double_eq_tol(m.cosine_similarity, 1, 1e-15);
    ck_assert_double_le(m.cosine_similarity, 1);

    float neg[5];
    for (int i = 0; i < 5; i++) neg[i] = -b[i];
    m = metrics_of(neg, b, 5);
    ck_assert_double_eq(m.max_abs_error, 14);
    ck_assert_double_eq_tol(m.relative_l2_error, 2, 1e-15);
    ck_assert_double_eq_tol(m.cosine_similarity, -1, 1e-15);
    ck_assert_double_ge(m.cosine_similarity, -1);
}
END_TEST

START_TEST(test_metrics_zero_vectors) {
    const float zero[3] = {0, 0, 0}, x[3] = {0, 3, -4};
    compare_metrics m = metrics_of(zero, zero, 3);
    ck_assert_double_eq(m.relative_l2_error, 0);
    ck_assert_double_eq(m.cosine_similarity, 1);
    ck_assert_double_eq(m.max_abs_error, 0);

    m = metrics_of(x, zero, 3); /* baseline zero, test not: no finite relative error */
    ck_assert(isinf(m.relative_l2_error) && m.relative_l2_error > 0);
    ck_assert_double_eq(m.cosine_similarity, 0);
    ck_assert_double_eq(m.max_abs_error, 4);
    ck_assert_double_eq_tol(m.mean_abs_error, 7.0 / 3, 1e-15);

    m = metrics_of(zero, x, 3);
    ck_assert_double_eq(m.relative_l2_error, 1);
    ck_assert_double_eq(m.cosine_similarity, 0);

    m = metrics_of(NULL, NULL, 0);
    ck_assert_double_eq(m.max_abs_error, 0);
    ck_assert_double_eq(m.mean_abs_error, 0);
    ck_assert_double_eq(m.relative_l2_error, 0);
    ck_assert_double_eq(m.cosine_similarity, 1);
}
END_TEST

START_TEST(test_metrics_nonfinite_in_test) {
    const float b[3] = {1, 2, 3};
    const float with_nan[3] = {1, NAN, 3}, with_inf[3] = {INFINITY, 2, -INFINITY};
    compare_metrics m = metrics_of(with_nan, b, 3);
    ck_assert_uint_eq(m.nonfinite_count, 1);
    ck_assert(isinf(m.max_abs_error) && isinf(m.mean_abs_error) && isinf(m.relative_l2_error));
    ck_assert_double_eq(m.cosine_similarity, 0);

    m = metrics_of(with_inf, b, 3);
    ck_assert_uint_eq(m.nonfinite_count, 2);
    ck_assert(isinf(m.relative_l2_error));
    ck_assert_double_eq(m.cosine_similarity, 0);

    /* a NaN in the baseline only is a mismatch too, though the test output has none */
    m = metrics_of(b, with_nan, 3);
    ck_assert_uint_eq(m.nonfinite_count, 0);
    ck_assert(isinf(m.max_abs_error));

    /* +inf against -inf disagrees */
    const float pos[1] = {INFINITY}, negative[1] = {-INFINITY};
    m = metrics_of(pos, negative, 1);
    ck_assert(isinf(m.relative_l2_error));
}
END_TEST

START_TEST(test_metrics_matching_nonfinite_agree) {
    /* e.g. a -inf attention mask reproduced exactly: the finite part decides the metrics */
    const float b[4] = {NAN, -INFINITY, 3, 4}, t[4] = {NAN, -INFINITY, 3, 5};
    compare_metrics m = metrics_of(t, b, 4);
    ck_assert_uint_eq(m.nonfinite_count, 2);
    ck_assert_double_eq(m.max_abs_error, 1);
    ck_assert_double_eq(m.mean_abs_error, 0.25);
    ck_assert_double_eq_tol(m.relative_l2_error, 1.0 / 5, 1e-15);
    ck_assert_double_eq_tol(m.cosine_similarity, 29 / (5 * sqrt(34.0)), 1e-15);
}
END_TEST

START_TEST(test_metrics_accumulate_in_double) {
    /* squares of 1e20 overflow float; a float accumulator would give inf / inf */
    const float b[2] = {2e20f, 0}, t[2] = {1e20f, 0};
    compare_metrics m = metrics_of(t, b, 2);
    ck_assert_double_eq_tol(m.relative_l2_error, 0.5, 1e-7);
    ck_assert_double_eq_tol(m.cosine_similarity, 1, 1e-15);
    /* many small errors: a float running sum of 2^20 terms near 1e-4 drifts by percents */
    enum { N = 1 << 20 };
    static float ones[N], near_ones[N];
    for (int i = 0; i < N; i++) {
        ones[i] = 1;
        near_ones[i] = 1.0001f;
    }
    double d = (double)1.0001f - 1.0;
    m = metrics_of(near_ones, ones, N);
    ck_assert_double_eq_tol(m.mean_abs_error, d, d * 1e-9);
    ck_assert_double_eq_tol(m.relative_l2_error, d, d * 1e-9);
}
END_TEST

START_TEST(test_metrics_argument_errors) {
    const float x[1] = {1};
    compare_metrics m;
    ck_assert_tci_error(compare_arrays(x, x, 1, NULL), TCI_ERR_INVALID_ARGUMENT, "NULL");
    ck_assert_tci_error(compare_arrays(NULL, x, 1, &m), TCI_ERR_INVALID_ARGUMENT, "NULL arrays");
}
END_TEST

START_TEST(test_bound_polygraphy_rule) {
    /* |d| = {0, 0.5, 0.25, 2}; bounds atol 0.1 + rtol 0.1 * |b| = {0.2, 0.3, 0.5, 0.2} */
    const float b[4] = {1, 2, 4, -1}, t[4] = {1, 2.5f, 4.25f, 1};
    compare_bound r;
    ck_assert_tci_ok(compare_within_bound(t, b, 4, 0.1, 0.1, &r));
    ck_assert_uint_eq(r.failures, 2); /* elements 1 and 3 */
    ck_assert_uint_eq(r.worst_index, 3);
    ck_assert_double_eq_tol(r.worst_excess, 1.8, 1e-12);
    ck_assert_double_eq_tol(r.max_relative, 2.0, 1e-12);
    /* at the bound exactly: passes (<=) */
    ck_assert_tci_ok(compare_within_bound(t, b, 4, 2.0, 0, &r));
    ck_assert_uint_eq(r.failures, 0);
    ck_assert_uint_eq(r.worst_index, 3);
    ck_assert_double_eq(r.worst_excess, 0);
    /* rtol alone scales with |baseline|: 0.5 <= 0.25 * 2 and 0.25 <= 0.25 * 4 pass, 2 > 0.25 */
    ck_assert_tci_ok(compare_within_bound(t, b, 4, 0, 0.25, &r));
    ck_assert_uint_eq(r.failures, 1);
    ck_assert_uint_eq(r.worst_index, 3);
    /* atol = rtol = 0: every differing element fails, the worst is the largest difference */
    ck_assert_tci_ok(compare_within_bound(t, b, 4, 0, 0, &r));
    ck_assert_uint_eq(r.failures, 3);
    ck_assert_uint_eq(r.worst_index, 3);
    /* no element: nothing fails */
    ck_assert_tci_ok(compare_within_bound(t, b, 0, 0, 0, &r));
    ck_assert_uint_eq(r.failures, 0);
    ck_assert_uint_eq(r.worst_index, 0);
    ck_assert_double_eq(r.max_relative, 0);
}
END_TEST

START_TEST(test_bound_nonfinite_and_zero_baseline) {
    const float b[4] = {0, NAN, -INFINITY, 0}, t[4] = {1e-3f, NAN, -INFINITY, INFINITY};
    compare_bound r;
    /* the NaN and the -inf agree; 1e-3 at baseline 0 fails atol 1e-4; inf against 0 is worst */
    ck_assert_tci_ok(compare_within_bound(t, b, 4, 1e-4, 1, &r));
    ck_assert_uint_eq(r.failures, 2);
    ck_assert_uint_eq(r.worst_index, 3);
    ck_assert(isinf(r.worst_excess));
    ck_assert_double_eq(r.max_relative, 0); /* no finite element with baseline != 0 */
    const float b2[2] = {1, 1}, t2[2] = {NAN, 1};
    ck_assert_tci_ok(compare_within_bound(t2, b2, 2, 1e9, 1e9, &r));
    ck_assert_uint_eq(r.failures, 1); /* no bound admits a NaN against a number */
    ck_assert_uint_eq(r.worst_index, 0);
}
END_TEST

START_TEST(test_bound_argument_errors) {
    const float x[1] = {1};
    compare_bound r;
    ck_assert_tci_error(compare_within_bound(x, x, 1, 0, 0, NULL), TCI_ERR_INVALID_ARGUMENT,
                        "NULL");
    ck_assert_tci_error(compare_within_bound(NULL, x, 1, 0, 0, &r), TCI_ERR_INVALID_ARGUMENT,
                        "NULL arrays");
    ck_assert_tci_error(compare_within_bound(x, x, 1, -1, 0, &r), TCI_ERR_INVALID_ARGUMENT,
                        "atol is -1");
    ck_assert_tci_error(compare_within_bound(x, x, 1, 0, NAN, &r), TCI_ERR_INVALID_ARGUMENT,
                        "rtol is nan");
    ck_assert_tci_error(compare_within_bound(x, x, 1, INFINITY, 0, &r),
                        TCI_ERR_INVALID_ARGUMENT, "atol is inf");
}
END_TEST

START_TEST(test_classification_agreement) {
    const float base[4 * 6] = {
        0.1f, 0.9f, 0.2f, 0.3f, 0.4f, 0.5f, /* top1 1, top5 {1,5,4,3,2} */
        5, 4, 3, 2, 1, 0,                   /* top1 0, top5 {0,1,2,3,4} */
        0, 1, 2, 3, 4, 5,                   /* top1 5, top5 {5,4,3,2,1} */
        9, 0, 0, 0, 0, 0,                   /* top1 0, ties by index: top5 {0,1,2,3,4} */
    };
    const float test[4 * 6] = {
        0.1f, 0.8f, 0.2f, 0.3f, 0.4f, 0.5f, /* same top1, same set */
        4, 5, 3, 2, 1, 0,                   /* top1 1: baseline's 0 is 2nd; same set */
        6, 1, 2, 3, 4, 5,                   /* top1 0; 5 in top5 {0,5,4,3,2}; set differs */
        -1, 1, 2, 3, 4, 5,                  /* top5 {5,4,3,2,1} lacks 0 */
    };
    compare_topk r;
    ck_assert_tci_ok(compare_classification(test, base, 4, 6, &r));
    ck_assert_uint_eq(r.rows, 4);
    ck_assert_uint_eq(r.top1_matches, 1);
    ck_assert_uint_eq(r.top5_hits, 3);
    ck_assert_uint_eq(r.top5_set_equal, 2);
    ck_assert_double_eq(r.top1_agreement, 0.25);
    ck_assert_double_eq(r.top5_agreement, 0.75);
    ck_assert_double_eq(r.top5_set_agreement, 0.5);

    /* identical outputs agree everywhere */
    ck_assert_tci_ok(compare_classification(base, base, 4, 6, &r));
    ck_assert_double_eq(r.top1_agreement, 1);
    ck_assert_double_eq(r.top5_set_agreement, 1);
}
END_TEST

START_TEST(test_classification_few_classes_ties_nan) {
    compare_topk r;
    /* 3 classes: "top 5" is every class, so only top-1 can disagree */
    const float b3[3] = {0, 1, 2}, t3[3] = {2, 1, 0};
    ck_assert_tci_ok(compare_classification(t3, b3, 1, 3, &r));
    ck_assert_uint_eq(r.top1_matches, 0);
    ck_assert_uint_eq(r.top5_hits, 1);
    ck_assert_uint_eq(r.top5_set_equal, 1);

    /* all tied: argmax is the lowest index on both sides */
    const float flat[4] = {1, 1, 1, 1}, first[4] = {1, 0, 0, 0};
    ck_assert_tci_ok(compare_classification(flat, first, 1, 4, &r));
    ck_assert_uint_eq(r.top1_matches, 1);

    /* NaN ranks lowest: it never becomes the test's prediction */
    const float tn[3] = {NAN, 1, 2}, bn[3] = {3, 1, 2};
    ck_assert_tci_ok(compare_classification(tn, bn, 1, 3, &r));
    ck_assert_uint_eq(r.top1_matches, 0);
    const float tn6[6] = {NAN, 0, 0, 0, 0, 0}, bn6[6] = {1, 0, 0, 0, 0, 0};
    ck_assert_tci_ok(compare_classification(tn6, bn6, 1, 6, &r));
    ck_assert_uint_eq(r.top5_hits, 0);
    ck_assert_uint_eq(r.top5_set_equal, 0);
    const float all_nan[2] = {NAN, NAN}, b2[2] = {1, 0};
    ck_assert_tci_ok(compare_classification(all_nan, b2, 1, 2, &r));
    ck_assert_uint_eq(r.top1_matches, 1); /* among NaNs the lowest index wins */

    ck_assert_tci_ok(compare_classification(NULL, NULL, 0, 0, &r));
    ck_assert_uint_eq(r.rows, 0);
    ck_assert_double_eq(r.top1_agreement, 1);
    ck_assert_double_eq(r.top5_agreement, 1);
}
END_TEST

START_TEST(test_classification_argument_errors) {
    const float x[2] = {1, 2};
    compare_topk r;
    ck_assert_tci_error(compare_classification(x, x, 1, 0, &r), TCI_ERR_INVALID_ARGUMENT,
                        "1 rows of 0 classes");
    ck_assert_tci_error(compare_classification(x, x, SIZE_MAX, 2, &r), TCI_ERR_INVALID_ARGUMENT,
                        "overflow");
    ck_assert_tci_error(compare_classification(x, NULL, 1, 2, &r), TCI_ERR_INVALID_ARGUMENT,
                        "NULL");
    ck_assert_tci_error(compare_classification(x, x, 1, 2, NULL), TCI_ERR_INVALID_ARGUMENT,
                        "NULL");
}
END_TEST

static compare_jump jump_of(const double *errors, size_t count) {
    compare_jump j;
    ck_assert_tci_ok(compare_find_jump(errors, count, 1e-2, COMPARE_JUMP_FACTOR, &j));
    return j;
}

START_TEST(test_jump_rule) {
    const double sharp[6] = {1e-4, 2e-4, 3e-4, 5e-2, 6e-2, 1.0};
    compare_jump j = jump_of(sharp, 6);
    ck_assert_int_eq(j.first_jump, 3);
    ck_assert_int_eq(j.first_over_threshold, 3);

    /* crosses the threshold at 2 by drifting, then jumps at 3 */
    const double drift_then_jump[4] = {1e-3, 5e-3, 2e-2, 0.5};
    j = jump_of(drift_then_jump, 4);
    ck_assert_int_eq(j.first_jump, 3);
    ck_assert_int_eq(j.first_over_threshold, 2);

    const double drift[5] = {1e-3, 5e-3, 2e-2, 9e-2, 0.5};
    j = jump_of(drift, 5);
    ck_assert_int_eq(j.first_jump, -1);
    ck_assert_int_eq(j.first_over_threshold, 2);

    /* a big ratio below the threshold is not a jump */
    const double small[3] = {1e-7, 1e-5, 1e-3};
    j = jump_of(small, 3);
    ck_assert_int_eq(j.first_jump, -1);
    ck_assert_int_eq(j.first_over_threshold, -1);

    const double bad_first[2] = {0.5, 0.6};
    j = jump_of(bad_first, 2);
    ck_assert_int_eq(j.first_jump, 0);

    const double after_exact[3] = {0, 0, 0.1};
    j = jump_of(after_exact, 3);
    ck_assert_int_eq(j.first_jump, 2);

    j = jump_of(NULL, 0);
    ck_assert_int_eq(j.first_jump, -1);
    ck_assert_int_eq(j.first_over_threshold, -1);
}
END_TEST

START_TEST(test_jump_nonfinite) {
    const double nan_from_1[3] = {1e-4, NAN, NAN};
    compare_jump j = jump_of(nan_from_1, 3);
    ck_assert_int_eq(j.first_jump, 1);
    ck_assert_int_eq(j.first_over_threshold, 1);

    /* after a NaN nothing jumps again: the NaN was the break */
    const double nan_first[3] = {NAN, 1e-4, 1.0};
    j = jump_of(nan_first, 3);
    ck_assert_int_eq(j.first_jump, 0);
    const double after_nan[3] = {1e-3, NAN, 1.0};
    j = jump_of(after_nan, 3);
    ck_assert_int_eq(j.first_jump, 1);

    const double inf_from_2[4] = {1e-4, 1e-4, INFINITY, INFINITY};
    j = jump_of(inf_from_2, 4);
    ck_assert_int_eq(j.first_jump, 2);

    /* factor 1 flags any growth past the threshold that factor 10 lets through */
    const double growth[3] = {2e-3, 1.5e-2, 3e-2};
    j = jump_of(growth, 3);
    ck_assert_int_eq(j.first_jump, -1);
    ck_assert_tci_ok(compare_find_jump(growth, 3, 1e-2, 1, &j));
    ck_assert_int_eq(j.first_jump, 1);
}
END_TEST

START_TEST(test_jump_argument_errors) {
    const double e[1] = {1};
    compare_jump j;
    ck_assert_tci_error(compare_find_jump(e, 1, -1, 10, &j), TCI_ERR_INVALID_ARGUMENT,
                        "jump threshold -1 is not >= 0");
    ck_assert_tci_error(compare_find_jump(e, 1, NAN, 10, &j), TCI_ERR_INVALID_ARGUMENT,
                        "jump threshold");
    ck_assert_tci_error(compare_find_jump(e, 1, 1e-2, 0.5, &j), TCI_ERR_INVALID_ARGUMENT,
                        "jump factor 0.5 is not >= 1");
    ck_assert_tci_error(compare_find_jump(e, 1, 1e-2, INFINITY, &j), TCI_ERR_INVALID_ARGUMENT,
                        "jump factor inf");
    ck_assert_tci_error(compare_find_jump(NULL, 1, 1e-2, 10, &j), TCI_ERR_INVALID_ARGUMENT,
                        "NULL");
    ck_assert_tci_error(compare_find_jump(e, (size_t)INT_MAX + 1, 1e-2, 10, &j),
                        TCI_ERR_INVALID_ARGUMENT, "too many");
}
END_TEST

int main(void) {
    Suite *s = suite_create("compare");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_metrics_hand_computed);
    tcase_add_test(tc, test_metrics_single_differing_element);
    tcase_add_test(tc, test_metrics_identical_and_opposite);
    tcase_add_test(tc, test_metrics_zero_vectors);
    tcase_add_test(tc, test_metrics_nonfinite_in_test);
    tcase_add_test(tc, test_metrics_matching_nonfinite_agree);
    tcase_add_test(tc, test_metrics_accumulate_in_double);
    tcase_add_test(tc, test_metrics_argument_errors);
    tcase_add_test(tc, test_bound_polygraphy_rule);
    tcase_add_test(tc, test_bound_nonfinite_and_zero_baseline);
    tcase_add_test(tc, test_bound_argument_errors);
    tcase_add_test(tc, test_classification_agreement);
    tcase_add_test(tc, test_classification_few_classes_ties_nan);
    tcase_add_test(tc, test_classification_argument_errors);
    tcase_add_test(tc, test_jump_rule);
    tcase_add_test(tc, test_jump_nonfinite);
    tcase_add_test(tc, test_jump_argument_errors);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
