/* GPU index kernels (src/kernels/index.h) against the CPU reference (the ops' cpu_forward run
 * through a one-node graph): GatherElements, ScatterElements and ScatterND with every
 * reduction, Trilu and OneHot. Data movement and fp32/int64 reductions must match bit for bit
 * (an fp32 sum or product of two floats is correctly rounded on both sides); fp16 reductions
 * within one fp16 rounding (2^-11 relative). Out-of-range indices raise the flag and write
 * nothing out of bounds. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_harness.h"
#include "kernels/index.h"
#include "layers/op.h"

/* The CPU reference: op at opset with optional reduction / axis (INT64_MIN: absent). */
static void cpu_ref(const char *op, int opset, const char *reduction, int64_t axis,
                    const tci_tensor *in, int num_in, tci_tensor *out) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    ir_node *n = th_node(g, op, opset, num_in, 1);
    if (reduction) th_attr_string(g, n, "reduction", reduction);
    if (axis != INT64_MIN) th_attr_int(g, n, "axis", axis);
    ck_assert_tci_ok(th_run(g, n, in, out));
    ir_graph_destroy(g);
}

static size_t bytes_of(const tci_tensor *t) {
    size_t n = tci_dtype_size(t->dtype);
    for (int d = 0; d < t->rank; d++) n *= (size_t)t->dims[d];
    return n;
}

static void *upload(const tci_tensor *t) { return gpu_upload(t->data, bytes_of(t)); }

/* Indices in [-dim, dim) of dtype int32 or int64. */
static void *random_indices(tci_dtype dtype, int64_t n, int64_t dim, uint64_t seed) {
    void *p = malloc((size_t)n * 8 + 8);
    ck_assert_ptr_nonnull(p);
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
    for (int64_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        int64_t v = (int64_t)(s % (uint64_t)(2 * dim)) - dim;
        if (dtype == TCI_DTYPE_INT32) ((int32_t *)p)[i] = (int32_t)v;
        else ((int64_t *)p)[i] = v;
    }
    return p;
}

static void assert_bytes(const void *got, const void *want, size_t bytes, const char *what) {
    ck_assert_msg(memcmp(got, want, bytes) == 0, "%s: GPU and CPU reference differ", what);
}

static int *new_flag(void) {
    int zero = 0;
    return gpu_upload(&zero, sizeof zero);
}

static int read_flag(int *flag) {
    int v;
    gpu_sync();
    gpu_download(&v, flag, sizeof v);
    return v;
}

START_TEST(test_gather_elements) {
    /* data (3, 7, 5); indices (2, 9, 4) along axis 1, int32 and int64, fp32 and fp16 bytes */
    int64_t dd[3] = {3, 7, 5}, id[3] = {2, 9, 4};
    float data[105];
    gpu_fill_random(data, 105, 3, -4, 4);
    for (int t = 0; t < 4; t++) {
        tci_dtype it = t & 1 ? TCI_DTYPE_INT32 : TCI_DTYPE_INT64;
        tci_dtype dt = t & 2 ? TCI_DTYPE_FLOAT16 : TCI_DTYPE_FLOAT;
        uint16_t half[105];
        gpu_to_half(data, half, 105);
        void *idx = random_indices(it, 72, 7, 10 + (uint64_t)t);
        tci_tensor in[2] = {th_tensor(dt, 3, dd, dt == TCI_DTYPE_FLOAT ? (void *)data : half),
                            th_tensor(it, 3, id, idx)};
        tci_tensor want;
        cpu_ref("GatherElements", 13, NULL, 1, in, 2, &want);
        void *dx = upload(&in[0]), *di = upload(&in[1]), *dy = gpu_upload(NULL, bytes_of(&want));
        int *flag = new_flag();
        ck_assert_tci_ok(kern_gather_elements(dy, dx, di, it == TCI_DTYPE_INT32, 3, dd, id, 1,
                                              (int)tci_dtype_size(dt), flag, 0));
        ck_assert_int_eq(read_flag(flag), 0);
        char got[72 * 4];
        gpu_download(got, dy, bytes_of(&want));
        assert_bytes(got, want.data, bytes_of(&want), "gather_elements");
        th_free(&want, 1);
        gpu_free(dx), gpu_free(di), gpu_free(dy), gpu_free(flag);
        free(idx);
    }
}
END_TEST

START_TEST(test_gather_elements_out_of_range) {
    int64_t dd[2] = {2, 3}, id[2] = {2, 2};
    float data[6] = {1, 2, 3, 4, 5, 6};
    int64_t idx[4] = {0, 3, -4, 2};
    void *dx = gpu_upload(data, sizeof data), *di = gpu_upload(idx, sizeof idx);
    /* a guard element after the output must stay untouched */
    float *dy = gpu_upload(NULL, 5 * sizeof(float));
    int *flag = new_flag();
    ck_assert_tci_ok(kern_gather_elements(dy, dx, di, 0, 2, dd, id, 1, 4, flag, 0));
    ck_assert_int_eq(read_flag(flag), 1);
    float got[5];
    gpu_download(got, dy, sizeof got);
    ck_assert_float_eq(got[0], 1); /* in range */
    ck_assert_float_eq(got[1], 3); /* 3 clamped to 2 */
    ck_assert_float_eq(got[2], 4); /* -4 clamped to 0 */
    ck_assert_float_eq(got[3], 6);
    ck_assert(isnan(got[4]));
    ck_assert_tci_error(kern_gather_elements(dy, dx, di, 0, 2, dd, (int64_t[]){2, 4}, 0, 4, flag,
                                             0),
                        TCI_ERR_INVALID_ARGUMENT, "does not fit");
    gpu_free(dx), gpu_free(di), gpu_free(dy), gpu_free(flag);
}
END_TEST

static const char *const reductions[] = {"none", "add", "mul", "max", "min"};

/* fp16 storage: within one rounding of the reference per step, with duplicates compounding;
 * values stay in [-2, 2] and few updates meet, so 4 ulp of fp16 (2^-9 relative) bounds it. */
static void assert_half_near(const uint16_t *got, const uint16_t *want, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float g, w;
        gpu_from_half(&got[i], &g, 1);
        gpu_from_half(&want[i], &w, 1);
        ck_assert_msg(fabsf(g - w) <= fmaxf(1.0f, fabsf(w)) / 512.0f,
                      "element %zu: GPU %g, reference %g", i, (double)g, (double)w);
    }
}

START_TEST(test_scatter_elements) {
    /* data (4, 6, 3), indices/updates (4, 5, 2) along axis 1: duplicates in most lines */
    int64_t dd[3] = {4, 6, 3}, id[3] = {4, 5, 2};
    float data[72], upd[40];
    int64_t data64[72], upd64[40];
    gpu_fill_random(data, 72, 21, -2, 2);
    gpu_fill_random(upd, 40, 22, -2, 2);
    for (int i = 0; i < 72; i++) data64[i] = (int64_t)(data[i] * 1000) * (1 << 20);
    for (int i = 0; i < 40; i++) upd64[i] = (int64_t)(upd[i] * 1000);
    for (int r = 0; r < 5; r++)
        for (int t = 0; t < 3; t++) {
            tci_dtype dt = t == 0 ? TCI_DTYPE_FLOAT : t == 1 ? TCI_DTYPE_INT64 : TCI_DTYPE_FLOAT16;
            tci_dtype it = r & 1 ? TCI_DTYPE_INT32 : TCI_DTYPE_INT64;
            uint16_t hdata[72], hupd[40];
            gpu_to_half(data, hdata, 72);
            gpu_to_half(upd, hupd, 40);
            void *xd = t == 0 ? (void *)data : t == 1 ? (void *)data64 : hdata;
            void *ud = t == 0 ? (void *)upd : t == 1 ? (void *)upd64 : hupd;
            void *idx = random_indices(it, 40, 6, 30 + (uint64_t)(r * 3 + t));
            tci_tensor in[3] = {th_tensor(dt, 3, dd, xd), th_tensor(it, 3, id, idx),
                                th_tensor(dt, 3, id, ud)};
            tci_tensor want;
            cpu_ref("ScatterElements", 18, reductions[r], 1, in, 3, &want);
            void *dx = upload(&in[0]), *di = upload(&in[1]), *du = upload(&in[2]);
            void *dy = gpu_upload(NULL, bytes_of(&want));
            int *flag = new_flag();
            ck_assert_tci_ok(kern_scatter_elements(dy, dx, di, it == TCI_DTYPE_INT32, du, 3, dd,
                                                   id, 1, (kern_scatter_reduce)r, dt, flag, 0));
            ck_assert_int_eq(read_flag(flag), 0);
            char got[72 * 8];
            gpu_download(got, dy, bytes_of(&want));
            if (dt == TCI_DTYPE_FLOAT16 && r != 0) assert_half_near((uint16_t *)got, want.data, 72);
            else assert_bytes(got, want.data, bytes_of(&want), reductions[r]);
            th_free(&want, 1);
            gpu_free(dx), gpu_free(di), gpu_free(du), gpu_free(dy), gpu_free(flag);
            free(idx);
        }
}
END_TEST

START_TEST(test_scatter_nd) {
    /* data (5, 4, 6); 7 tuples of k = 1 (slices of 24) and 9 of k = 3 (single elements) */
    int64_t dd[3] = {5, 4, 6};
    float data[120], upd[168];
    gpu_fill_random(data, 120, 41, -2, 2);
    gpu_fill_random(upd, 168, 42, -2, 2);
    for (int r = 0; r < 5; r++)
        for (int k = 1; k <= 3; k += 2) {
            int64_t n = k == 1 ? 7 : 9, id[2] = {n, k}, ud[3];
            int urank;
            if (k == 1) urank = 3, ud[0] = n, ud[1] = 4, ud[2] = 6;
            else urank = 1, ud[0] = n;
            int64_t *idx = malloc(sizeof(int64_t) * (size_t)(n * k));
            for (int64_t u = 0; u < n; u++)
                for (int j = 0; j < k; j++) {
                    int64_t *v = random_indices(TCI_DTYPE_INT64, 1, dd[j], 50 + (uint64_t)(u * 3 + j + r));
                    idx[u * k + j] = *v;
                    free(v);
                }
            tci_tensor in[3] = {th_tensor(TCI_DTYPE_FLOAT, 3, dd, data),
                                th_tensor(TCI_DTYPE_INT64, 2, id, idx),
                                th_tensor(TCI_DTYPE_FLOAT, urank, ud, upd)};
            tci_tensor want;
            cpu_ref("ScatterND", 18, reductions[r], INT64_MIN, in, 3, &want);
            void *dx = upload(&in[0]), *di = upload(&in[1]), *du = upload(&in[2]);
            void *dy = gpu_upload(NULL, bytes_of(&want));
            int *flag = new_flag();
            ck_assert_tci_ok(kern_scatter_nd(dy, dx, di, 0, du, 3, dd, k, n,
                                             (kern_scatter_reduce)r, TCI_DTYPE_FLOAT, flag, 0));
            ck_assert_int_eq(read_flag(flag), 0);
            float got[120];
            gpu_download(got, dy, sizeof got);
            assert_bytes(got, want.data, sizeof got, reductions[r]);
            th_free(&want, 1);
            gpu_free(dx), gpu_free(di), gpu_free(du), gpu_free(dy), gpu_free(flag);
            free(idx);
        }
}
END_TEST

START_TEST(test_scatter_out_of_range_and_in_place) {
    /* an out-of-range tuple is skipped and flagged; out == data scatters in place */
    int64_t dd[1] = {4};
    float data[5] = {1, 2, 3, 4, -7}; /* the last one is a guard after the tensor */
    int32_t idx[3] = {4, -5, -1};
    float upd[3] = {10, 20, 30};
    float *dx = gpu_upload(data, sizeof data);
    void *di = gpu_upload(idx, sizeof idx), *du = gpu_upload(upd, sizeof upd);
    int *flag = new_flag();
    ck_assert_tci_ok(kern_scatter_nd(dx, dx, di, 1, du, 1, dd, 1, 3, KERN_SCATTER_ADD,
                                     TCI_DTYPE_FLOAT, flag, 0));
    ck_assert_int_eq(read_flag(flag), 1);
    float got[5];
    gpu_download(got, dx, sizeof got);
    const float want[5] = {1, 2, 3, 34, -7};
    ck_assert_mem_eq(got, want, sizeof want);
    int zero = 0;
    gpu_free(flag);
    flag = gpu_upload(&zero, sizeof zero);
    int64_t id[1] = {3};
    ck_assert_tci_ok(kern_scatter_elements(dx, dx, di, 1, du, 1, dd, id, 0, KERN_SCATTER_NONE,
                                           TCI_DTYPE_FLOAT, flag, 0));
    ck_assert_int_eq(read_flag(flag), 1);
    gpu_download(got, dx, sizeof got);
    const float want2[5] = {1, 2, 3, 30, -7};
    ck_assert_mem_eq(got, want2, sizeof want2);
    ck_assert_tci_error(kern_scatter_nd(dx, dx, di, 1, du, 1, dd, 1, 3, KERN_SCATTER_ADD,
                                        TCI_DTYPE_BOOL, flag, 0),
                        TCI_ERR_UNSUPPORTED, "bool");
    gpu_free(dx), gpu_free(di), gpu_free(du), gpu_free(flag);
}
END_TEST

START_TEST(test_trilu) {
    int64_t xd[3] = {3, 5, 7};
    float x[105];
    gpu_fill_random(x, 105, 61, -3, 3);
    for (int upper = 0; upper <= 1; upper++)
        for (int64_t k = -6; k <= 8; k += 2) {
            ir_graph *g;
            ck_assert_tci_ok(ir_graph_create(&g));
            ir_node *n = th_node(g, "Trilu", 14, 2, 1);
            th_attr_int(g, n, "upper", upper);
            tci_tensor in[2] = {th_tensor(TCI_DTYPE_FLOAT, 3, xd, x),
                                th_tensor(TCI_DTYPE_INT64, 0, NULL, &k)};
            tci_tensor want;
            ck_assert_tci_ok(th_run(g, n, in, &want));
            ir_graph_destroy(g);
            void *dx = gpu_upload(x, sizeof x), *dy = gpu_upload(NULL, sizeof x);
            ck_assert_tci_ok(kern_trilu(dy, dx, 3, 5, 7, k, NULL, upper, 4, 0));
            gpu_sync();
            float got[105];
            gpu_download(got, dy, sizeof got);
            assert_bytes(got, want.data, sizeof got, "trilu");
            /* the same k read on the device (the host value given is ignored) */
            int64_t *dk = gpu_upload(&k, sizeof k);
            gpu_free(dy);
            dy = gpu_upload(NULL, sizeof x);
            ck_assert_tci_ok(kern_trilu(dy, dx, 3, 5, 7, 1000, dk, upper, 4, 0));
            gpu_sync();
            gpu_download(got, dy, sizeof got);
            assert_bytes(got, want.data, sizeof got, "trilu, k on the device");
            th_free(&want, 1);
            gpu_free(dx), gpu_free(dy), gpu_free(dk);
        }
}
END_TEST

START_TEST(test_one_hot) {
    /* indices (3, 4) in [-6, 6) with depth 5: some out of range; axis 1; fp16 and int64 values */
    int64_t id[2] = {3, 4}, two[1] = {2};
    for (int t = 0; t < 2; t++) {
        tci_dtype it = t ? TCI_DTYPE_INT32 : TCI_DTYPE_INT64;
        void *idx = random_indices(it, 12, 6, 70 + (uint64_t)t);
        int64_t depth = 5;
        uint16_t hvals[2];
        float fvals[2] = {-0.5f, 3.25f};
        int64_t ivals[2] = {7, -9};
        gpu_to_half(fvals, hvals, 2);
        tci_dtype vt = t ? TCI_DTYPE_FLOAT16 : TCI_DTYPE_INT64;
        tci_tensor in[3] = {th_tensor(it, 2, id, idx), th_tensor(TCI_DTYPE_INT64, 0, NULL, &depth),
                            th_tensor(vt, 1, two, t ? (void *)hvals : ivals)};
        tci_tensor want;
        cpu_ref("OneHot", 11, NULL, 1, in, 3, &want);
        int es = (int)tci_dtype_size(vt);
        uint64_t off = 0, on = 0;
        memcpy(&off, t ? (void *)&hvals[0] : &ivals[0], (size_t)es);
        memcpy(&on, t ? (void *)&hvals[1] : &ivals[1], (size_t)es);
        void *di = upload(&in[0]), *dy = gpu_upload(NULL, bytes_of(&want));
        ck_assert_tci_ok(kern_one_hot(dy, di, it == TCI_DTYPE_INT32, 3, 5, 4, off, on, es, 0));
        gpu_sync();
        char got[60 * 8];
        gpu_download(got, dy, bytes_of(&want));
        assert_bytes(got, want.data, bytes_of(&want), "one_hot");
        th_free(&want, 1);
        gpu_free(di), gpu_free(dy);
        free(idx);
    }
}
END_TEST

int main(void) {
    gpu_require_device("gpu_index");
    Suite *s = suite_create("gpu_index");
    TCase *tc = tcase_create("index");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_gather_elements);
    tcase_add_test(tc, test_gather_elements_out_of_range);
    tcase_add_test(tc, test_scatter_elements);
    tcase_add_test(tc, test_scatter_nd);
    tcase_add_test(tc, test_scatter_out_of_range_and_in_place);
    tcase_add_test(tc, test_trilu);
    tcase_add_test(tc, test_one_hot);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
