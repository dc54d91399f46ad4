/* Activation memory planner: hand-made plans, in-place reuse, argument errors, and a randomized
 * check that buffers alive together never share bytes. */
#include <stdint.h>
#include <stdlib.h>

#include "graph/plan/memplan.h"
#include "harness.h"

static memplan_buffer buf(size_t bytes, int first, int last, int inplace_of) {
    return (memplan_buffer){bytes, first, last, inplace_of};
}

static size_t align_up(size_t bytes, size_t alignment) {
    return (bytes + alignment - 1) / alignment * alignment;
}

/* Checks every invariant of a plan: alignment, bounds, totals, and that two buffers alive on a
 * common step are disjoint unless one legally took the other over in place (same offset). */
static void check_plan(const memplan_buffer *b, int n, size_t alignment, const size_t *off,
                       const memplan_totals *t) {
    size_t naive = 0, top = 0;
    for (int i = 0; i < n; i++) {
        size_t size = align_up(b[i].bytes, alignment);
        naive += size;
        ck_assert_msg(off[i] % alignment == 0, "buffer %d offset %zu unaligned", i, off[i]);
        if (size && off[i] + size > top) top = off[i] + size;
    }
    ck_assert_uint_eq(t->naive_bytes, naive);
    ck_assert_uint_eq(t->arena_bytes, top);
    ck_assert_uint_le(t->arena_bytes, t->naive_bytes);
    for (int i = 0; i < n; i++) {
        size_t si = align_up(b[i].bytes, alignment);
        for (int j = i + 1; j < n; j++) {
            size_t sj = align_up(b[j].bytes, alignment);
            if (b[i].first_step > b[j].last_step || b[j].first_step > b[i].last_step) continue;
            if (!si || !sj) continue;
            bool disjoint = off[i] + si <= off[j] || off[j] + sj <= off[i];
            if (disjoint) continue;
            bool j_took_i = b[j].inplace_of == i && b[i].last_step == b[j].first_step && sj <= si;
            bool i_took_j = b[i].inplace_of == j && b[j].last_step == b[i].first_step && si <= sj;
            ck_assert_msg((j_took_i || i_took_j) && off[i] == off[j],
                          "buffers %d [%d,%d] @%zu+%zu and %d [%d,%d] @%zu+%zu overlap", i,
                          b[i].first_step, b[i].last_step, off[i], si, j, b[j].first_step,
                          b[j].last_step, off[j], sj);
        }
    }
}

/* The peak of live bytes over steps: no plan can beat it without in-place reuse. */
static size_t live_peak(const memplan_buffer *b, int n, size_t alignment, int steps) {
    size_t peak = 0;
    for (int s = 0; s < steps; s++) {
        size_t live = 0;
        for (int i = 0; i < n; i++)
            if (b[i].first_step <= s && s <= b[i].last_step) live += align_up(b[i].bytes, alignment);
        if (live > peak) peak = live;
    }
    return peak;
}

static uint64_t next_random(uint64_t *state) {
    /* xorshift64*: a fixed, platform-independent sequence for a reproducible property test */
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return *state * UINT64_C(2685821657736338717);
}

START_TEST(test_chain_reuses_memory) {
    /* a -> b -> c -> d; each lives from its producer to its consumer */
    memplan_buffer b[4] = {buf(100, 0, 1, -1), buf(200, 1, 2, -1), buf(100, 2, 3, -1),
                           buf(50, 3, 4, -1)};
    size_t off[4];
    memplan_totals t;
    ck_assert_tci_ok(memplan_plan(b, 4, 64, off, &t));
    check_plan(b, 4, 64, off, &t);
    /* b (256) first at 0; a and c (128) above it; d (64) back into b's bytes once b is dead */
    ck_assert_uint_eq(off[0], 256);
    ck_assert_uint_eq(off[1], 0);
    ck_assert_uint_eq(off[2], 256);
    ck_assert_uint_eq(off[3], 0);
    ck_assert_uint_eq(t.arena_bytes, 384);
    ck_assert_uint_eq(t.naive_bytes, 128 + 256 + 128 + 64);
    ck_assert_double_eq_tol(memplan_ratio(&t), 384.0 / 576.0, 1e-12);
}
END_TEST

START_TEST(test_long_equal_chain_needs_two_buffers) {
    enum { N = 200 };
    memplan_buffer b[N];
    size_t off[N];
    for (int i = 0; i < N; i++) b[i] = buf(1000, i, i + 1, -1);
    memplan_totals t;
    ck_assert_tci_ok(memplan_plan(b, N, 256, off, &t));
    check_plan(b, N, 256, off, &t);
    ck_assert_uint_eq(t.arena_bytes, 2 * 1024);
    ck_assert_uint_eq(t.naive_bytes, N * 1024);
    ck_assert_double_eq_tol(memplan_ratio(&t), 2.0 / N, 1e-12);
}
END_TEST

/* x feeds conv1 (step 1) and the residual Add (step 3), so it stays alive while conv1's and
 * conv2's outputs exist: three buffers at step 2, and Add's output reuses conv1's slot. */
START_TEST(test_residual_block) {
    memplan_buffer b[5] = {
        buf(256, 0, 3, -1), /* x */
        buf(256, 1, 2, -1), /* conv1 out */
        buf(256, 2, 3, -1), /* conv2 out */
        buf(256, 3, 4, -1), /* add out */
        buf(256, 4, 5, -1), /* next */
    };
    size_t off[5];
    memplan_totals t;
    ck_assert_tci_ok(memplan_plan(b, 5, 256, off, &t));
    check_plan(b, 5, 256, off, &t);
    ck_assert_uint_eq(off[0], 0);
    ck_assert_uint_eq(off[1], 256);
    ck_assert_uint_eq(off[2], 512);
    ck_assert_uint_eq(off[3], 256);
    ck_assert_uint_eq(off[4], 0);
    ck_assert_uint_eq(t.arena_bytes, 768);
    ck_assert_uint_eq(t.naive_bytes, 1280);

    /* the same block with Add writing in place over conv2's output */
    b[3].inplace_of = 2;
    ck_assert_tci_ok(memplan_plan(b, 5, 256, off, &t));
    check_plan(b, 5, 256, off, &t);
    ck_assert_uint_eq(off[3], off[2]);
    ck_assert_uint_ne(off[3], off[0]);
    ck_assert_uint_eq(t.arena_bytes, 768);
}
END_TEST

START_TEST(test_inplace_honoured) {
    memplan_buffer b[2] = {buf(500, 0, 1, -1), buf(512, 1, 2, 0)};
    size_t off[2];
    memplan_totals t;
    ck_assert_tci_ok(memplan_plan(b, 2, 256, off, &t));
    check_plan(b, 2, 256, off, &t);
    ck_assert_uint_eq(off[0], off[1]);
    ck_assert_uint_eq(t.arena_bytes, 512);
    /* without the hint the two meet at step 1 and need separate slots */
    b[1].inplace_of = -1;
    ck_assert_tci_ok(memplan_plan(b, 2, 256, off, &t));
    ck_assert_uint_eq(t.arena_bytes, 1024);
}
END_TEST

START_TEST(test_inplace_chain_and_smaller_child) {
    /* relu, then sigmoid, each in place, and a smaller in-place child at the end; d is alive
     * throughout and must stay clear of the whole chain */
    memplan_buffer b[4] = {buf(1024, 0, 1, -1), buf(1024, 1, 2, 0), buf(300, 2, 5, 1),
                           buf(256, 0, 5, -1)};
    size_t off[4];
    memplan_totals t;
    ck_assert_tci_ok(memplan_plan(b, 4, 256, off, &t));
    check_plan(b, 4, 256, off, &t);
    ck_assert_uint_eq(off[0], off[1]);
    ck_assert_uint_eq(off[1], off[2]);
    ck_assert_uint_eq(t.arena_bytes, 1024 + 256);
}
END_TEST

START_TEST(test_inplace_refused_when_illegal) {
    size_t off[3];
    memplan_totals t;
    /* child larger than its parent */
    memplan_buffer big[2] = {buf(512, 0, 1, -1), buf(1024, 1, 2, 0)};
    ck_assert_tci_ok(memplan_plan(big, 2, 256, off, &t));
    check_plan(big, 2, 256, off, &t);
    ck_assert_uint_eq(t.arena_bytes, 1536);
    /* parent still read after the child is written */
    memplan_buffer late[2] = {buf(512, 0, 2, -1), buf(512, 1, 3, 0)};
    ck_assert_tci_ok(memplan_plan(late, 2, 256, off, &t));
    check_plan(late, 2, 256, off, &t);
    ck_assert_uint_ne(off[0], off[1]);
    /* two children want one parent: the lower index wins */
    memplan_buffer two[3] = {buf(512, 0, 1, -1), buf(512, 1, 2, 0), buf(512, 1, 2, 0)};
    ck_assert_tci_ok(memplan_plan(two, 3, 256, off, &t));
    check_plan(two, 3, 256, off, &t);
    ck_assert_uint_eq(off[1], off[0]);
    ck_assert_uint_ne(off[2], off[0]);
    ck_assert_uint_eq(t.arena_bytes, 1024);
}
END_TEST

START_TEST(test_inplace_ring_on_one_step) {
    memplan_buffer b[2] = {buf(256, 5, 5, 1), buf(256, 5, 5, 0)};
    size_t off[2];
    memplan_totals t;
    ck_assert_tci_ok(memplan_plan(b, 2, 256, off, &t));
    check_plan(b, 2, 256, off, &t);
    ck_assert_uint_eq(off[0], off[1]);
    ck_assert_uint_eq(t.arena_bytes, 256);
}
END_TEST

/* a -> b -> c in place with b living on one step only: a and c are both alive on that step, so
 * only one of the two links may be taken, whichever index order the links come in. */
START_TEST(test_inplace_single_step_middle) {
    size_t off[3];
    memplan_totals t;
    memplan_buffer forward[3] = {buf(256, 0, 2, -1), buf(256, 2, 2, 0), buf(256, 2, 4, 1)};
    ck_assert_tci_ok(memplan_plan(forward, 3, 256, off, &t));
    check_plan(forward, 3, 256, off, &t);
    ck_assert_uint_eq(off[1], off[0]);
    ck_assert_uint_ne(off[2], off[0]);
    memplan_buffer backward[3] = {buf(256, 2, 4, 1), buf(256, 2, 2, 2), buf(256, 0, 2, -1)};
    ck_assert_tci_ok(memplan_plan(backward, 3, 256, off, &t));
    check_plan(backward, 3, 256, off, &t);
    ck_assert_uint_eq(off[0], off[1]);
    ck_assert_uint_ne(off[2], off[0]);
    ck_assert_uint_eq(t.arena_bytes, 512);
}
END_TEST

START_TEST(test_zero_and_empty) {
    memplan_totals t = {1, 1};
    ck_assert_tci_ok(memplan_plan(NULL, 0, 256, NULL, &t));
    ck_assert_uint_eq(t.arena_bytes, 0);
    ck_assert_uint_eq(t.naive_bytes, 0);
    ck_assert_double_eq(memplan_ratio(&t), 1.0);

    memplan_buffer b[3] = {buf(0, 0, 3, -1), buf(10, 1, 2, -1), buf(0, 1, 1, -1)};
    size_t off[3];
    ck_assert_tci_ok(memplan_plan(b, 3, 16, off, &t));
    check_plan(b, 3, 16, off, &t);
    ck_assert_uint_eq(off[0], 0);
    ck_assert_uint_eq(off[1], 0);
    ck_assert_uint_eq(off[2], 0);
    ck_assert_uint_eq(t.arena_bytes, 16);
    ck_assert_uint_eq(t.naive_bytes, 16);
}
END_TEST

START_TEST(test_argument_errors) {
    memplan_buffer b[2] = {buf(8, 0, 1, -1), buf(8, 1, 2, -1)};
    size_t off[2];
    memplan_totals t;
    ck_assert_tci_error(memplan_plan(b, 2, 0, off, &t), TCI_ERR_INVALID_ARGUMENT,
                        "alignment 0 is not a power of two");
    ck_assert_tci_error(memplan_plan(b, 2, 48, off, &t), TCI_ERR_INVALID_ARGUMENT,
                        "alignment 48 is not a power of two");
    ck_assert_tci_error(memplan_plan(b, -1, 64, off, &t), TCI_ERR_INVALID_ARGUMENT,
                        "negative count -1");
    ck_assert_tci_error(memplan_plan(b, 2, 64, NULL, &t), TCI_ERR_INVALID_ARGUMENT, "NULL");
    ck_assert_tci_error(memplan_plan(b, 2, 64, off, NULL), TCI_ERR_INVALID_ARGUMENT, "NULL");

    b[1] = buf(8, 3, 2, -1);
    ck_assert_tci_error(memplan_plan(b, 2, 64, off, &t), TCI_ERR_INVALID_ARGUMENT,
                        "buffer 1 has invalid lifetime [3, 2]");
    b[1] = buf(8, -1, 2, -1);
    ck_assert_tci_error(memplan_plan(b, 2, 64, off, &t), TCI_ERR_INVALID_ARGUMENT,
                        "buffer 1 has invalid lifetime [-1, 2]");
    b[1] = buf(8, 1, 2, 1);
    ck_assert_tci_error(memplan_plan(b, 2, 64, off, &t), TCI_ERR_INVALID_ARGUMENT,
                        "buffer 1 has invalid inplace_of 1");
    b[1] = buf(8, 1, 2, 2);
    ck_assert_tci_error(memplan_plan(b, 2, 64, off, &t), TCI_ERR_INVALID_ARGUMENT,
                        "buffer 1 has invalid inplace_of 2 (count 2)");
    b[1] = buf(8, 1, 2, -2);
    ck_assert_tci_error(memplan_plan(b, 2, 64, off, &t), TCI_ERR_INVALID_ARGUMENT,
                        "invalid inplace_of -2");
}
END_TEST

START_TEST(test_size_overflow) {
    memplan_buffer one[1] = {buf(SIZE_MAX - 10, 0, 1, -1)};
    size_t off[2];
    memplan_totals t;
    ck_assert_tci_error(memplan_plan(one, 1, 256, off, &t), TCI_ERR_INVALID_ARGUMENT,
                        "buffer 0 size");
    ck_assert_tci_error(memplan_plan(one, 1, 256, off, &t), TCI_ERR_INVALID_ARGUMENT,
                        "overflows when aligned to 256");
    /* each fits, but together they do not */
    size_t half = SIZE_MAX / 2 + 1;
    memplan_buffer two[2] = {buf(half, 0, 1, -1), buf(half, 5, 6, -1)};
    ck_assert_tci_error(memplan_plan(two, 2, 256, off, &t), TCI_ERR_INVALID_ARGUMENT,
                        "total size overflows at buffer 1");
}
END_TEST

/* Many random lifetimes and sizes (fixed seeds): the plan never overlaps live buffers, every
 * offset is aligned, and the arena stays close to the live-bytes peak (a lower bound). */
START_TEST(test_random_lifetimes_never_overlap) {
    enum { N = 400, STEPS = 120 };
    memplan_buffer *b = malloc(N * sizeof *b);
    size_t *off = malloc(N * sizeof *off);
    ck_assert_ptr_nonnull(b);
    ck_assert_ptr_nonnull(off);
    uint64_t state = UINT64_C(0x9e3779b97f4a7c15);
    double worst = 0;
    for (int round = 0; round < 40; round++) {
        int n = 1 + (int)(next_random(&state) % N);
        size_t alignment = (size_t)1 << (next_random(&state) % 9); /* 1 .. 256 */
        for (int i = 0; i < n; i++) {
            int first = (int)(next_random(&state) % STEPS);
            /* mostly short lifetimes as in a CNN, some long ones as skip connections */
            int span = next_random(&state) % 8 == 0 ? (int)(next_random(&state) % 40)
                                                    : (int)(next_random(&state) % 3);
            size_t bytes = next_random(&state) % 16 == 0 ? 0 : next_random(&state) % 100000;
            b[i] = buf(bytes, first, first + span, -1);
        }
        memplan_totals t;
        ck_assert_tci_ok(memplan_plan(b, n, alignment, off, &t));
        check_plan(b, n, alignment, off, &t);
        size_t peak = live_peak(b, n, alignment, STEPS + 40);
        ck_assert_uint_ge(t.arena_bytes, peak);
        double excess = peak ? (double)t.arena_bytes / (double)peak : 1;
        if (excess > worst) worst = excess;
    }
    /* greedy by size is not optimal, but a plan far above the live peak would mean it broke */
    ck_assert_msg(worst < 1.3, "arena up to %.3f x the live peak", worst);
    free(b);
    free(off);
}
END_TEST

/* As above, with random in-place hints, some legal, some not. */
START_TEST(test_random_inplace_never_overlaps) {
    enum { N = 300, STEPS = 100 };
    memplan_buffer *b = malloc(N * sizeof *b);
    size_t *off = malloc(N * sizeof *off);
    ck_assert_ptr_nonnull(b);
    ck_assert_ptr_nonnull(off);
    uint64_t state = UINT64_C(12345);
    int shared = 0;
    for (int round = 0; round < 40; round++) {
        int n = 2 + (int)(next_random(&state) % (N - 1));
        for (int i = 0; i < n; i++) {
            int first = (int)(next_random(&state) % STEPS);
            int span = (int)(next_random(&state) % 4);
            size_t bytes = 1 + next_random(&state) % 5000;
            int inplace = -1;
            if (i > 0 && next_random(&state) % 2 == 0) {
                inplace = (int)(next_random(&state) % (uint64_t)i);
                /* make about half the hints start where the parent ends */
                if (next_random(&state) % 2 == 0) first = b[inplace].last_step;
            }
            b[i] = buf(bytes, first, first + span, inplace);
        }
        memplan_totals t;
        ck_assert_tci_ok(memplan_plan(b, n, 128, off, &t));
        check_plan(b, n, 128, off, &t);
        for (int i = 0; i < n; i++)
            if (b[i].inplace_of >= 0 && off[i] == off[b[i].inplace_of]) shared++;
    }
    ck_assert_int_gt(shared, 100);
    free(b);
    free(off);
}
END_TEST

int main(void) {
    Suite *s = suite_create("memplan");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_chain_reuses_memory);
    tcase_add_test(tc, test_long_equal_chain_needs_two_buffers);
    tcase_add_test(tc, test_residual_block);
    tcase_add_test(tc, test_inplace_honoured);
    tcase_add_test(tc, test_inplace_chain_and_smaller_child);
    tcase_add_test(tc, test_inplace_refused_when_illegal);
    tcase_add_test(tc, test_inplace_ring_on_one_step);
    tcase_add_test(tc, test_inplace_single_step_middle);
    tcase_add_test(tc, test_zero_and_empty);
    tcase_add_test(tc, test_argument_errors);
    tcase_add_test(tc, test_size_overflow);
    tcase_add_test(tc, test_random_lifetimes_never_overlap);
    tcase_add_test(tc, test_random_inplace_never_overlaps);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
