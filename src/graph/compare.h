/* Accuracy metrics of a test output (the fp16 GPU path) against a baseline (the fp32 CPU
 * reference), and the rule that names the layer where a per-layer error first jumps. */
#ifndef TCI_GRAPH_COMPARE_H
#define TCI_GRAPH_COMPARE_H

#include <stddef.h>

#include "tcinfer.h"

typedef struct compare_metrics {
    size_t count;             /* elements compared */
    size_t nonfinite_count;   /* NaN or +-Inf values in the test output */
    double max_abs_error;     /* max |test - baseline| */
    double mean_abs_error;    /* sum |test - baseline| / count */
    double relative_l2_error; /* ||test - baseline||_2 / ||baseline||_2 */
    double cosine_similarity; /* <test, baseline> / (||test||_2 ||baseline||_2) */
} compare_metrics;

/* Compares test[i] with baseline[i] for i < count, accumulating in double.
 *
 * Defined edge cases: relative_l2_error is 0 when ||baseline|| is 0 and test equals it, else
 * +inf; cosine_similarity is 1 when both vectors are zero, 0 when exactly one is. count 0 gives
 * errors 0 and cosine 1 (two empty vectors agree).
 *
 * Non-finite values: an element where test and baseline hold the same non-finite value (both
 * NaN, or the same infinity, e.g. a -inf attention mask) agrees; it adds 0 error and is left out
 * of the norms. Any other element with a non-finite value on either side is a mismatch: max,
 * mean and relative L2 error become +inf and cosine similarity 0, so a threshold on any one
 * metric fails such an output. nonfinite_count counts the test's NaN/Inf values either way.
 *
 * Errors: TCI_ERR_INVALID_ARGUMENT for NULL arrays with count > 0 or a NULL metrics. */
tci_status compare_arrays(const float *test, const float *baseline, size_t count,
                          compare_metrics *metrics);

typedef struct compare_bound {
    size_t failures;      /* elements with |test - baseline| > atol + rtol * |baseline| */
    size_t worst_index;   /* the element furthest past (or closest to) its bound: the largest
                             |test - baseline| - (atol + rtol * |baseline|), the first on ties;
                             0 when count is 0 */
    double worst_excess;  /* that difference; +inf for a non-finite mismatch */
    double max_relative;  /* max |test - baseline| / |baseline| over the finite elements whose
                             baseline is not 0; 0 when there is none */
} compare_bound;

/* Polygraphy's element-wise check (--atol, --rtol): element i passes when
 * |test[i] - baseline[i]| <= atol + rtol * |baseline[i]|, in double. A non-finite value passes
 * only where test and baseline hold the same one (as compare_arrays); any other non-finite
 * element fails, and the first such is the worst.
 *
 * Errors: TCI_ERR_INVALID_ARGUMENT for NULL arrays with count > 0, a NULL result, or an atol
 * or rtol that is negative or not finite (the message names which). */
tci_status compare_within_bound(const float *test, const float *baseline, size_t count,
                                double atol, double rtol, compare_bound *result);

typedef struct compare_topk {
    size_t rows;
    size_t top1_matches;    /* rows whose test argmax equals the baseline argmax */
    size_t top5_hits;       /* rows whose baseline argmax is among the test's top 5 */
    size_t top5_set_equal;  /* rows whose test and baseline top-5 index sets are equal */
    double top1_agreement;  /* top1_matches / rows */
    double top5_agreement;  /* top5_hits / rows */
    double top5_set_agreement; /* top5_set_equal / rows */
} compare_topk;

/* Classification agreement of two rows x classes score arrays (row-major, e.g. logits of an
 * N x C output). Ranking: a larger score ranks higher; ties go to the lower class index (as
 * numpy's argmax); NaN ranks below every number, so a NaN never counts as a prediction. With
 * fewer than 5 classes "top 5" means all classes. Set equality ignores order within the top 5.
 * rows 0 gives agreements of 1 (nothing disagrees).
 *
 * Errors: TCI_ERR_INVALID_ARGUMENT for classes 0 with rows > 0, rows * classes overflowing,
 * NULL arrays with rows > 0 or a NULL result. */
tci_status compare_classification(const float *test, const float *baseline, size_t rows,
                                  size_t classes, compare_topk *result);

#define COMPARE_JUMP_FACTOR 10.0

typedef struct compare_jump {
    int first_jump;           /* index of the first layer flagged by the jump rule, or -1 */
    int first_over_threshold; /* index of the first layer with error > threshold (or NaN), or -1 */
} compare_jump;

/* Given per-layer relative L2 errors in execution order (one per marked layer output, as with
 * Polygraphy's "mark all"), finds where accuracy breaks.
 *
 * Rule: layer i "jumps" when its error is bad (> threshold, or NaN) and it is much worse than
 * the layer before: i == 0, or errors[i-1] is not NaN and errors[i] > factor * errors[i-1] (a
 * NaN error counts as worse than any number). Layers after a NaN do not jump, since the NaN
 * itself is where it broke. An error that drifts past the threshold by less than factor per
 * layer flags no jump; first_over_threshold names where it crossed, for that case.
 *
 * Errors: TCI_ERR_INVALID_ARGUMENT for a negative or non-finite threshold, a factor that is not
 * finite and >= 1, NULL errors with count > 0, count > INT_MAX or a NULL result. */
tci_status compare_find_jump(const double *errors, size_t count, double threshold, double factor,
                             compare_jump *result);

#endif
