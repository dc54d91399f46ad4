/* GPU tests of kern_eltwise on int32 (the index arithmetic of exported transformers: position ids
 * from a cumulative sum of the padding mask, times the mask, plus an offset): every integer op
 * against exact expected values, with ONNX's semantics (Div truncates toward zero, Mod takes the
 * divisor's sign, Fmod the dividend's), wrap-around at the int32 extremes, broadcasting, the
 * unary activations through a transposed read, Where, bool results, and the errors. */
#include <cuda_runtime_api.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_harness.h"
#include "kernels/eltwise.h"
#include "util/elementwise.h"

/* Runs d over host inputs and downloads out_bytes of output (poisoned with 0x5a first). */
static void run_int(const kern_eltwise_desc *d, const void *const *host_in, const size_t *bytes,
                    void *host_out, size_t out_bytes) {
    int nin = kern_eltwise_num_inputs(d->op);
    void *dev[KERN_ELTWISE_MAX_INPUTS] = {NULL, NULL, NULL};
    for (int k = 0; k < nin; k++)
        dev[k] = gpu_upload(host_in[k], bytes[k]);
    unsigned char *poison = malloc(out_bytes);
    ck_assert_ptr_nonnull(poison);
    memset(poison, 0x5a, out_bytes);
    void *out = gpu_upload(poison, out_bytes);
    free(poison);
    ck_assert_tci_ok(kern_eltwise(d, (const void *const *)dev, out, 0));
    gpu_sync();
    gpu_download(host_out, out, out_bytes);
    for (int k = 0; k < nin; k++)
        gpu_free(dev[k]);
    gpu_free(out);
}

/* Binary ops of two same-shape int32 vectors, each case written out with its exact answer. */
typedef struct {
    binary_op op;
    int32_t a, b, want;
} int_case;

static const int_case cases[] = {
    {BINARY_ADD, 7, -9, -2},
    {BINARY_ADD, INT32_MAX, 1, INT32_MIN}, /* wraps */
    {BINARY_SUB, -5, 12, -17},
    {BINARY_SUB, INT32_MIN, 1, INT32_MAX},
    {BINARY_MUL, 6, -7, -42},
    {BINARY_MUL, 65536, 65536, 0}, /* 2^32 wraps to 0 */
    {BINARY_MUL, 46341, 46341, -2147479015}, /* 2147488281 - 2^32 */
    {BINARY_DIV, 7, 2, 3},
    {BINARY_DIV, -7, 2, -3}, /* toward zero, not -4 */
    {BINARY_DIV, 7, -2, -3},
    {BINARY_DIV, -7, -2, 3},
    {BINARY_DIV, 5, 0, 0},
    {BINARY_DIV, INT32_MIN, -1, INT32_MIN}, /* wraps, no trap */
    {BINARY_DIV, 100000000, 3, 33333333},
    {BINARY_MAX, -3, 2, 2},
    {BINARY_MIN, -3, 2, -3},
    {BINARY_MOD, -7, 3, 2},  /* divisor's sign */
    {BINARY_MOD, 7, -3, -2},
    {BINARY_MOD, -6, 3, 0},
    {BINARY_MOD, INT32_MIN, -1, 0},
    {BINARY_MOD, INT32_MIN, INT32_MAX, INT32_MAX - 1},
    {BINARY_FMOD, -7, 3, -1}, /* dividend's sign */
    {BINARY_FMOD, 7, -3, 1},
    {BINARY_FMOD, 9, 0, 0},
    {BINARY_EQUAL, 4, 4, 1},
    {BINARY_EQUAL, 4, -4, 0},
    {BINARY_LESS, -1, 0, 1},
    {BINARY_LESS_EQUAL, 3, 3, 1},
    {BINARY_GREATER, INT32_MIN, INT32_MAX, 0},
    {BINARY_GREATER_EQUAL, 2, 3, 0},
};

START_TEST(test_int32_binary_exact) {
    const int n = (int)(sizeof cases / sizeof cases[0]);
    for (int i = 0; i < n; i++) {
        const int64_t dims[1] = {3};
        /* the case at element 1 between two neighbours that would expose a misread stride */
        int32_t a[3] = {11, cases[i].a, -13}, b[3] = {5, cases[i].b, 4};
        kern_eltwise_desc d;
        kern_eltwise_desc_init(&d, cases[i].op, TCI_DTYPE_INT32, 1, dims);
        const void *in[2] = {a, b};
        size_t bytes[2] = {sizeof a, sizeof b};
        int32_t got[3];
        uint8_t got8[3];
        bool to_bool = kern_eltwise_writes_bool(&d);
        run_int(&d, in, bytes, to_bool ? (void *)got8 : (void *)got,
                to_bool ? sizeof got8 : sizeof got);
        int32_t g = to_bool ? got8[1] : got[1];
        ck_assert_msg(g == cases[i].want, "case %d (%s %d, %d): got %d, want %d", i,
                      binary_name(cases[i].op), cases[i].a, cases[i].b, g, cases[i].want);
    }
}
END_TEST

/* RoBERTa's position ids: mask = (ids != pad) as int32 [2, 6], cumsum along the row (given),
 * times the mask, broadcast against a [1, 1] offset; then Div of [2, 6] by a per-row [2, 1]. */
START_TEST(test_int32_broadcast_position_ids) {
    const int64_t out[2] = {2, 6}, one[2] = {1, 1};
    const int32_t cum[12] = {1, 2, 3, 4, 4, 4, 1, 2, 3, 4, 5, 6};
    const int32_t mask[12] = {1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1};
    const int32_t pad[1] = {1};
    kern_eltwise_desc d;
    kern_eltwise_desc_init(&d, BINARY_MUL, TCI_DTYPE_INT32, 2, out);
    const void *in[2] = {cum, mask};
    size_t bytes[2] = {sizeof cum, sizeof mask};
    int32_t ids[12];
    run_int(&d, in, bytes, ids, sizeof ids);
    const int32_t want_ids[12] = {1, 2, 3, 4, 0, 0, 1, 2, 3, 4, 5, 6};
    for (int i = 0; i < 12; i++)
        ck_assert_int_eq(ids[i], want_ids[i]);

    kern_eltwise_desc_init(&d, BINARY_ADD, TCI_DTYPE_INT32, 2, out);
    ck_assert_tci_ok(kern_eltwise_broadcast_strides(&d, 1, 2, one));
    const void *in2[2] = {ids, pad};
    size_t bytes2[2] = {sizeof ids, sizeof pad};
    int32_t pos[12];
    run_int(&d, in2, bytes2, pos, sizeof pos);
    for (int i = 0; i < 12; i++)
        ck_assert_int_eq(pos[i], want_ids[i] + 1);

    const int64_t col[2] = {2, 1};
    const int32_t divisor[2] = {-3, 2};
    const int32_t num[12] = {-7, -6, -5, 5, 6, 7, -7, -6, -5, 5, 6, 7};
    kern_eltwise_desc_init(&d, BINARY_DIV, TCI_DTYPE_INT32, 2, out);
    ck_assert_tci_ok(kern_eltwise_broadcast_strides(&d, 1, 2, col));
    const void *in3[2] = {num, divisor};
    size_t bytes3[2] = {sizeof num, sizeof divisor};
    int32_t q[12];
    run_int(&d, in3, bytes3, q, sizeof q);
    const int32_t want_q[12] = {2, 2, 1, -1, -2, -2, -3, -3, -2, 2, 3, 3};
    for (int i = 0; i < 12; i++)
        ck_assert_msg(q[i] == want_q[i], "Div element %d: got %d, want %d", i, q[i], want_q[i]);
}
END_TEST

/* Unary Neg / Abs / Relu / Sign / copy through a transposed read; Where with a broadcast cond. */
START_TEST(test_int32_unary_and_where) {
    const int32_t a[6] = {-4, 0, INT32_MIN, 9, -1, INT32_MAX}; /* a [2, 3], read as [3, 2] */
    const int64_t tdims[2] = {3, 2};
    const act_kind acts[] = {ACT_NONE, ACT_NEG, ACT_ABS, ACT_RELU, ACT_SIGN};
    /* want[act][r * 2 + c] = act(a[c * 3 + r]) */
    const int32_t want[5][6] = {
        {-4, 9, 0, -1, INT32_MIN, INT32_MAX},
        {4, -9, 0, 1, INT32_MIN, -INT32_MAX}, /* -INT32_MIN wraps to itself */
        {4, 9, 0, 1, INT32_MIN, INT32_MAX},
        {0, 9, 0, 0, 0, INT32_MAX},
        {-1, 1, 0, -1, -1, 1},
    };
    for (int k = 0; k < 5; k++) {
        kern_eltwise_desc d;
        kern_eltwise_desc_init(&d, BINARY_NONE, TCI_DTYPE_INT32, 2, tdims);
        d.act = acts[k];
        d.strides[0][0] = 1, d.strides[0][1] = 3;
        const void *in[1] = {a};
        size_t bytes[1] = {sizeof a};
        int32_t got[6];
        run_int(&d, in, bytes, got, sizeof got);
        for (int i = 0; i < 6; i++)
            ck_assert_msg(got[i] == want[k][i], "%s element %d: got %d, want %d",
                          act_name(acts[k]), i, got[i], want[k][i]);
    }

    const int64_t out[2] = {2, 3}, row[1] = {3};
    const uint8_t cond[3] = {1, 0, 1};
    const int32_t other[3] = {100, 200, 300};
    kern_eltwise_desc d;
    kern_eltwise_desc_init(&d, BINARY_WHERE, TCI_DTYPE_INT32, 2, out);
    ck_assert_tci_ok(kern_eltwise_broadcast_strides(&d, 0, 1, row));
    ck_assert_tci_ok(kern_eltwise_broadcast_strides(&d, 2, 1, row));
    const void *in[3] = {cond, a, other};
    size_t bytes[3] = {sizeof cond, sizeof a, sizeof other};
    int32_t got[6];
    run_int(&d, in, bytes, got, sizeof got);
    const int32_t want_where[6] = {-4, 200, INT32_MIN, 9, 200, INT32_MAX};
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(got[i], want_where[i]);
}
END_TEST

/* A long vector: every element's product checked (the grid-stride loop and 32-bit indexing). */
START_TEST(test_int32_long) {
    const int64_t n = 300001;
    int32_t *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
    int32_t *got = malloc((size_t)n * sizeof *got);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    ck_assert_ptr_nonnull(got);
    for (int64_t i = 0; i < n; i++) {
        a[i] = (int32_t)(i % 20011) - 10000;
        b[i] = (int32_t)(i % 97) - 48;
    }
    kern_eltwise_desc d;
    kern_eltwise_desc_init(&d, BINARY_MUL, TCI_DTYPE_INT32, 1, &n);
    const void *in[2] = {a, b};
    size_t bytes[2] = {(size_t)n * sizeof *a, (size_t)n * sizeof *b};
    run_int(&d, in, bytes, got, (size_t)n * sizeof *got);
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(got[i] == a[i] * b[i], "element %lld: got %d, want %d", (long long)i,
                      got[i], a[i] * b[i]);
    free(a);
    free(b);
    free(got);
}
END_TEST

START_TEST(test_int32_errors) {
    const int64_t dims[2] = {2, 3};
    int32_t host[6] = {0};
    void *dev = gpu_upload(host, sizeof host);
    const void *in[3] = {dev, dev, dev};
    kern_eltwise_desc d;
    kern_eltwise_desc_init(&d, BINARY_POW, TCI_DTYPE_INT32, 2, dims);
    ck_assert_tci_error(kern_eltwise(&d, in, dev, 0), TCI_ERR_UNSUPPORTED,
                        "Pow is not provided for int32");
    kern_eltwise_desc_init(&d, BINARY_NONE, TCI_DTYPE_INT32, 2, dims);
    d.act = ACT_SIGMOID;
    ck_assert_tci_error(kern_eltwise(&d, in, dev, 0), TCI_ERR_UNSUPPORTED,
                        "activation Sigmoid is not provided for int32");
    kern_eltwise_desc_init(&d, BINARY_MUL, TCI_DTYPE_INT32, 2, dims);
    d.input_scale[0] = 0.5f;
    ck_assert_tci_error(kern_eltwise(&d, in, dev, 0), TCI_ERR_UNSUPPORTED,
                        "int32 inputs take no scale");
    kern_eltwise_desc_init(&d, BINARY_AND, TCI_DTYPE_INT32, 2, dims);
    ck_assert_tci_error(kern_eltwise(&d, in, dev, 0), TCI_ERR_UNSUPPORTED,
                        "And takes bool inputs, not int32");
    kern_eltwise_desc_init(&d, BINARY_ADD, TCI_DTYPE_UINT8, 2, dims);
    ck_assert_tci_error(kern_eltwise(&d, in, dev, 0), TCI_ERR_UNSUPPORTED,
                        "dtype uint8 is not supported");
    gpu_free(dev);
}
END_TEST

int main(void) {
    gpu_require_device("gpu_eltwise_int32");
    Suite *s = suite_create("gpu_eltwise_int32");
    TCase *tc = tcase_create("eltwise_int32");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_int32_binary_exact);
    tcase_add_test(tc, test_int32_broadcast_position_ids);
    tcase_add_test(tc, test_int32_unary_and_where);
    tcase_add_test(tc, test_int32_long);
    tcase_add_test(tc, test_int32_errors);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
