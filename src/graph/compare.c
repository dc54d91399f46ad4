/* Accuracy metrics between a test output and a baseline, classification agreement, and the
 * per-layer error-jump rule behind the --compare report. */
#include "graph/compare.h"

#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "util/status.h"

#define TOPK 5

tci_status compare_arrays(const float *test, const float *baseline, size_t count,
                          compare_metrics *metrics) {
    if (!metrics || (count > 0 && (!test || !baseline)))
        return status_error(TCI_ERR_INVALID_ARGUMENT, "compare: NULL arrays or metrics");
    size_t nonfinite = 0;
    bool mismatch = false;
    double max_abs = 0, sum_abs = 0, diff_sq = 0, test_sq = 0, base_sq = 0, dot = 0;
    for (size_t i = 0; i < count; i++) {
        double t = test[i], b = baseline[i];
        if (!isfinite(t)) nonfinite++;
        if (!isfinite(t) || !isfinite(b)) {
            /* t == b holds for equal infinities; NaN needs its own test. */
            if (!((isnan(t) && isnan(b)) || t == b)) mismatch = true;
            continue;
        }
        double d = fabs(t - b);
        if (d > max_abs) max_abs = d;
        sum_abs += d;
        diff_sq += d * d;
        test_sq += t * t;
        base_sq += b * b;
        dot += t * b;
    }
    metrics->count = count;
    metrics->nonfinite_count = nonfinite;
    if (mismatch) {
        metrics->max_abs_error = INFINITY;
        metrics->mean_abs_error = INFINITY;
        metrics->relative_l2_error = INFINITY;
        metrics->cosine_similarity = 0;
        return TCI_OK;
    }
    metrics->max_abs_error = max_abs;
    metrics->mean_abs_error = count ? sum_abs / (double)count : 0;
    if (base_sq == 0)
        metrics->relative_l2_error = diff_sq == 0 ? 0 : INFINITY;
    else
        metrics->relative_l2_error = sqrt(diff_sq) / sqrt(base_sq);
    if (test_sq == 0 || base_sq == 0) {
        metrics->cosine_similarity = test_sq == base_sq ? 1 : 0;
    } else {
        /* Rounding can push the quotient of parallel vectors a hair past 1. */
        double c = dot / (sqrt(test_sq) * sqrt(base_sq));
        metrics->cosine_similarity = c > 1 ? 1 : c < -1 ? -1 : c;
    }
    return TCI_OK;
}

tci_status compare_within_bound(const float *test, const float *baseline, size_t count,
                                double atol, double rtol, compare_bound *result) {
    if (!result || (count > 0 && (!test || !baseline)))
        return status_error(TCI_ERR_INVALID_ARGUMENT, "compare: NULL arrays or result");
    if (!(atol >= 0) || !isfinite(atol))
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                            "compare: atol is %g; a finite number >= 0 expected", atol);
    if (!(rtol >= 0) || !isfinite(rtol))
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                            "compare: rtol is %g; a finite number >= 0 expected", rtol);
    size_t failures = 0, worst = 0;
    double worst_excess = -INFINITY, max_relative = 0;
    for (size_t i = 0; i < count; i++) {
        double t = test[i], b = baseline[i], excess;
        if (!isfinite(t) || !isfinite(b)) {
            /* t == b holds for equal infinities; NaN needs its own test. */
            bool same = (isnan(t) && isnan(b)) || t == b;
            excess = same ? -INFINITY : INFINITY;
        } else {
            double d = fabs(t - b);
            excess = d - (atol + rtol * fabs(b));
            if (b != 0 && d / fabs(b) > max_relative) max_relative = d / fabs(b);
        }
        if (excess > 0) failures++;
        if (excess > worst_excess) {
            worst_excess = excess;
            worst = i;
        }
    }
    result->failures = failures;
    result->worst_index = worst;
    result->worst_excess = count ? worst_excess : 0;
    result->max_relative = max_relative;
    return TCI_OK;
}

/* True when class a (score sa) ranks above class b: larger score, NaN lowest, lower index
 * first on ties. */
static bool ranks_above(float sa, size_t a, float sb, size_t b) {
    if (isnan(sa) || isnan(sb)) {
        if (isnan(sa) && isnan(sb)) return a < b;
        return isnan(sb);
    }
    if (sa != sb) return sa > sb;
    return a < b;
}

/* The k best class indices of one row, best first. */
static void top_k(const float *row, size_t classes, size_t k, size_t *best) {
    size_t n = 0;
    for (size_t c = 0; c < classes; c++) {
        if (n == k && !ranks_above(row[c], c, row[best[k - 1]], best[k - 1])) continue;
        size_t at = n < k ? n++ : k - 1;
        while (at > 0 && ranks_above(row[c], c, row[best[at - 1]], best[at - 1])) {
            best[at] = best[at - 1];
            at--;
        }
        best[at] = c;
    }
}

static bool contains(const size_t *set, size_t n, size_t value) {
    for (size_t i = 0; i < n; i++)
        if (set[i] == value) return true;
    return false;
}

tci_status compare_classification(const float *test, const float *baseline, size_t rows,
                                  size_t classes, compare_topk *result) {
    if (!result || (rows > 0 && (!test || !baseline)))
        return status_error(TCI_ERR_INVALID_ARGUMENT, "compare: NULL arrays or result");
    if (rows > 0 && classes == 0)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "compare: %zu rows of 0 classes", rows);
    if (classes > 0 && rows > SIZE_MAX / classes)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "compare: %zu x %zu scores overflow", rows,
                         classes);
    size_t k = classes < TOPK ? classes : TOPK;
    size_t top1 = 0, hits = 0, set_equal = 0;
    for (size_t r = 0; r < rows; r++) {
        size_t test_best[TOPK], base_best[TOPK];
        top_k(test + r * classes, classes, k, test_best);
        top_k(baseline + r * classes, classes, k, base_best);
        if (test_best[0] == base_best[0]) top1++;
        if (contains(test_best, k, base_best[0])) hits++;
        bool same = true;
        for (size_t i = 0; i < k && same; i++) same = contains(base_best, k, test_best[i]);
        if (same) set_equal++;
    }
    result->rows = rows;
    result->top1_matches = top1;
    result->top5_hits = hits;
    result->top5_set_equal = set_equal;
    result->top1_agreement = rows ? (double)top1 / (double)rows : 1;
    result->top5_agreement = rows ? (double)hits / (double)rows : 1;
    result->top5_set_agreement = rows ? (double)set_equal / (double)rows : 1;
    return TCI_OK;
}

tci_status compare_find_jump(const double *errors, size_t count, double threshold, double factor,
                             compare_jump *result) {
    if (!result || (count > 0 && !errors))
        return status_error(TCI_ERR_INVALID_ARGUMENT, "compare: NULL errors or result");
    if (count > INT_MAX)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "compare: %zu layers is too many", count);
    if (!isfinite(threshold) || threshold < 0)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "compare: jump threshold %g is not >= 0",
                         threshold);
    if (!isfinite(factor) || factor < 1)
        return status_error(TCI_ERR_INVALID_ARGUMENT, "compare: jump factor %g is not >= 1", factor);
    result->first_jump = -1;
    result->first_over_threshold = -1;
    for (size_t i = 0; i < count; i++) {
        double e = errors[i];
        if (!(isnan(e) || e > threshold)) continue;
        if (result->first_over_threshold < 0) result->first_over_threshold = (int)i;
        bool jumps = i == 0 || (!isnan(errors[i - 1]) && (isnan(e) || e > factor * errors[i - 1]));
        if (jumps) {
            result->first_jump = (int)i;
            break;
        }
    }
    return TCI_OK;
}
