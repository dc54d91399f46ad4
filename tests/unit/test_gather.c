/* The Triton backend's batch gather (serving/triton/gather.c): copies split over the caller and
 * its workers land byte for byte, whatever the sizes and the split's cut points. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gather.h"
#include "harness.h"

/* n requests of the given sizes gathered back to back into one batch by copier (NULL: inline),
 * checked against the sources. */
static void check_gather(tct_workers *copier, const size_t *sizes, size_t n) {
    size_t total = 0;
    for (size_t i = 0; i < n; i++) total += sizes[i];
    unsigned char *batch = malloc(total + 1), **src = calloc(n, sizeof *src);
    tct_copy *copies = calloc(n, sizeof *copies);
    ck_assert_ptr_nonnull(batch);
    batch[total] = 0xA5; /* a guard past the end */
    memset(batch, 0, total);
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        src[i] = malloc(sizes[i] ? sizes[i] : 1);
        for (size_t b = 0; b < sizes[i]; b++) src[i][b] = (unsigned char)(i * 131 + b * 7 + 1);
        copies[i] = (tct_copy){batch + at, src[i], sizes[i]};
        at += sizes[i];
    }
    tct_copy_run(copier, copies, n);
    at = 0;
    for (size_t i = 0; i < n; i++) {
        ck_assert_msg(memcmp(batch + at, src[i], sizes[i]) == 0, "copy %zu of %zu (%zu bytes)",
                      i, n, sizes[i]);
        at += sizes[i];
        free(src[i]);
    }
    ck_assert_int_eq(batch[total], 0xA5);
    free(copies);
    free(src);
    free(batch);
}

START_TEST(test_gather_parallel) {
    tct_workers *c;
    ck_assert_int_eq(tct_workers_create(3, &c), 0);
    /* ResNet-50-sized rows: 45 requests of 602,112 bytes, split four ways */
    size_t rows[45];
    for (int i = 0; i < 45; i++) rows[i] = 602112;
    check_gather(c, rows, 45);
    /* odd sizes, empty requests, one copy larger than every range, cuts inside copies */
    size_t odd[] = {0, 1, 3 << 20, 17, 0, 65, 777777, 1, 2 << 20, 63};
    check_gather(c, odd, sizeof odd / sizeof odd[0]);
    /* a batch below TCT_COPY_PARALLEL_MIN is copied by the caller alone, and many runs in a
     * row reuse the workers */
    size_t small[] = {100, 200, 300};
    for (int r = 0; r < 50; r++) {
        check_gather(c, small, 3);
        size_t one[] = {TCT_COPY_PARALLEL_MIN + (size_t)r * 4099};
        check_gather(c, one, 1);
    }
    check_gather(c, NULL, 0);
    tct_workers_free(c);
}
END_TEST

START_TEST(test_gather_inline_and_errors) {
    size_t sizes[] = {5 << 20, 3};
    check_gather(NULL, sizes, 2); /* no workers: the caller copies */
    tct_workers *c = (tct_workers *)1;
    ck_assert_int_eq(tct_workers_create(0, &c), EINVAL);
    ck_assert_ptr_null(c);
    ck_assert_int_eq(tct_workers_create(65, &c), EINVAL);
    tct_workers_free(NULL);
    /* one worker: two ways */
    ck_assert_int_eq(tct_workers_create(1, &c), 0);
    check_gather(c, sizes, 2);
    tct_workers_free(c);
}
END_TEST

/* tct_workers_each's record of which slots ran, and with what count */
typedef struct {
    int calls[8];
    int slots_seen[8];
} each_record;

static void record_slot(void *arg, int slot, int slots) {
    each_record *r = arg;
    r->calls[slot]++; /* each slot has its own element: no two threads write one */
    r->slots_seen[slot] = slots;
}

START_TEST(test_workers_each) {
    tct_workers *w;
    ck_assert_int_eq(tct_workers_create(3, &w), 0);
    for (int run = 0; run < 100; run++) {
        each_record r = {{0}, {0}};
        tct_workers_each(w, record_slot, &r);
        for (int k = 0; k < 4; k++) {
            ck_assert_int_eq(r.calls[k], 1);
            ck_assert_int_eq(r.slots_seen[k], 4);
        }
        ck_assert_int_eq(r.calls[4], 0);
    }
    tct_workers_free(w);
    each_record r = {{0}, {0}};
    tct_workers_each(NULL, record_slot, &r); /* no workers: slot 0 of 1 on the caller */
    ck_assert_int_eq(r.calls[0], 1);
    ck_assert_int_eq(r.slots_seen[0], 1);
    ck_assert_int_eq(r.calls[1], 0);
}
END_TEST

int main(void) {
    Suite *s = suite_create("gather");
    TCase *tc = tcase_create("gather");
    tcase_add_test(tc, test_gather_parallel);
    tcase_add_test(tc, test_gather_inline_and_errors);
    tcase_add_test(tc, test_workers_each);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
