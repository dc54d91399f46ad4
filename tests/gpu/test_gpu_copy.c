/* GPU data-movement kernels (src/kernels/copy.h) against plain C references: every element of the
 * poisoned outputs must equal, bit for bit, the element the op's definition picks. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_harness.h"
#include "layers/op.h"
#include "kernels/copy.h"

#define MAX_RANK KERN_COPY_MAX_RANK

/* Deterministic bytes; what they mean does not matter to data movement. */
static void *random_bytes(size_t bytes, uint64_t seed) {
    unsigned char *p = malloc(bytes ? bytes : 1);
    ck_assert_ptr_nonnull(p);
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 7;
    for (size_t i = 0; i < bytes; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        p[i] = (unsigned char)(s >> 24);
    }
    return p;
}

static int64_t count_of(int rank, const int64_t *dims) {
    int64_t n = 1;
    for (int d = 0; d < rank; d++) n *= dims[d];
    return n;
}

static void contiguous(int rank, const int64_t *dims, int64_t *strides) {
    int64_t s = 1;
    for (int d = rank - 1; d >= 0; d--) strides[d] = s, s *= dims[d];
}

static void unravel(int64_t i, int rank, const int64_t *dims, int64_t *idx) {
    for (int d = rank - 1; d >= 0; d--) idx[d] = i % dims[d], i /= dims[d];
}

/* Asserts got == want element by element, naming the first element that differs. */
static void assert_same(const void *got, const void *want, int64_t count, int elem) {
    for (int64_t i = 0; i < count; i++)
        ck_assert_msg(memcmp((const char *)got + i * elem, (const char *)want + i * elem,
                             (size_t)elem) == 0,
                      "element %lld differs", (long long)i);
}

/* ---- strided copy ---- */

static void check_transpose(int elem, int rank, const int64_t *dims, const int *perm, uint64_t seed) {
    int64_t n = count_of(rank, dims), in_st[MAX_RANK], out_dims[MAX_RANK], out_st[MAX_RANK];
    contiguous(rank, dims, in_st);
    kern_copy_desc desc = {.rank = rank, .elem_size = elem};
    for (int d = 0; d < rank; d++) out_dims[d] = dims[perm[d]];
    contiguous(rank, out_dims, out_st);
    for (int d = 0; d < rank; d++) {
        desc.shape[d] = out_dims[d];
        desc.dst_strides[d] = out_st[d];
        desc.src_strides[d] = in_st[perm[d]];
    }
    char *x = random_bytes((size_t)(n * elem), seed);
    char *want = malloc((size_t)(n * elem)), *got = malloc((size_t)(n * elem));
    for (int64_t i = 0; i < n; i++) {
        int64_t o[MAX_RANK], src = 0;
        unravel(i, rank, out_dims, o);
        for (int d = 0; d < rank; d++) src += o[d] * in_st[perm[d]];
        memcpy(want + i * elem, x + src * elem, (size_t)elem);
    }
    void *dx = gpu_upload(x, (size_t)(n * elem)), *dy = gpu_upload(NULL, (size_t)(n * elem));
    ck_assert_tci_ok(kern_strided_copy(dy, dx, &desc, 0));
    gpu_sync();
    gpu_download(got, dy, (size_t)(n * elem));
    assert_same(got, want, n, elem);
    gpu_free(dx);
    gpu_free(dy);
    free(x);
    free(want);
    free(got);
}

START_TEST(test_transpose_2d_odd) {
    check_transpose(2, 2, (int64_t[]){37, 53}, (int[]){1, 0}, 1);   /* tiled */
    check_transpose(2, 2, (int64_t[]){67, 129}, (int[]){1, 0}, 2);  /* tiled, several tiles */
    check_transpose(2, 2, (int64_t[]){3, 1000}, (int[]){1, 0}, 3);  /* narrow: row path */
    check_transpose(2, 2, (int64_t[]){1000, 5}, (int[]){1, 0}, 4);
}
END_TEST

START_TEST(test_transpose_nd_odd) {
    check_transpose(2, 4, (int64_t[]){2, 5, 7, 9}, (int[]){0, 2, 3, 1}, 5); /* NCHW -> NHWC */
    check_transpose(2, 4, (int64_t[]){3, 9, 11, 13}, (int[]){0, 3, 1, 2}, 6); /* NHWC -> NCHW */
    check_transpose(4, 4, (int64_t[]){3, 17, 2, 19}, (int[]){3, 1, 0, 2}, 7);
    check_transpose(2, 5, (int64_t[]){2, 3, 4, 5, 6}, (int[]){4, 2, 0, 3, 1}, 8);
    check_transpose(2, 6, (int64_t[]){2, 3, 1, 5, 2, 7}, (int[]){5, 4, 3, 2, 1, 0}, 9);
    check_transpose(2, 3, (int64_t[]){40, 1, 33}, (int[]){2, 1, 0}, 10);
}
END_TEST

START_TEST(test_transpose_element_sizes) {
    check_transpose(1, 3, (int64_t[]){5, 41, 39}, (int[]){0, 2, 1}, 11);
    check_transpose(4, 3, (int64_t[]){5, 41, 39}, (int[]){2, 0, 1}, 12);
    check_transpose(8, 3, (int64_t[]){3, 35, 37}, (int[]){1, 2, 0}, 13);
    check_transpose(8, 2, (int64_t[]){2, 3}, (int[]){1, 0}, 14);
    check_transpose(2, 3, (int64_t[]){2, 3, 4}, (int[]){0, 1, 2}, 15); /* identity: one row */
}
END_TEST

/* NHWC8 concat on channels: the inputs' live channels land side by side in the output's. */
static void check_concat_channels(int64_t n, int64_t h, int64_t w, int64_t c1, int64_t c2) {
    int64_t cp1 = (c1 + 7) / 8 * 8, cp2 = (c2 + 7) / 8 * 8, c = c1 + c2, cp = (c + 7) / 8 * 8;
    int64_t pixels = n * h * w;
    float *f1 = malloc(sizeof(float) * (size_t)(pixels * cp1));
    float *f2 = malloc(sizeof(float) * (size_t)(pixels * cp2));
    gpu_fill_random(f1, (size_t)(pixels * cp1), 21, -3.0f, 3.0f);
    gpu_fill_random(f2, (size_t)(pixels * cp2), 22, -3.0f, 3.0f);
    for (int64_t p = 0; p < pixels; p++) { /* NHWC8: padded channels are zero */
        for (int64_t k = c1; k < cp1; k++) f1[p * cp1 + k] = 0.0f;
        for (int64_t k = c2; k < cp2; k++) f2[p * cp2 + k] = 0.0f;
    }
    uint16_t *a = malloc(2 * (size_t)(pixels * cp1)), *b = malloc(2 * (size_t)(pixels * cp2));
    uint16_t *got = malloc(2 * (size_t)(pixels * cp));
    gpu_to_half(f1, a, (size_t)(pixels * cp1));
    gpu_to_half(f2, b, (size_t)(pixels * cp2));
    void *da = gpu_upload(a, 2 * (size_t)(pixels * cp1)), *db = gpu_upload(b, 2 * (size_t)(pixels * cp2));
    uint16_t *dy = gpu_upload(NULL, 2 * (size_t)(pixels * cp));
    if (c < cp) ck_assert_tci_ok(kern_fill(dy, pixels * cp, 2, 0, 0));
    kern_copy_desc d1 = {.rank = 4, .elem_size = 2, .shape = {n, h, w, c1},
                         .dst_strides = {h * w * cp, w * cp, cp, 1},
                         .src_strides = {h * w * cp1, w * cp1, cp1, 1}};
    kern_copy_desc d2 = {.rank = 4, .elem_size = 2, .shape = {n, h, w, c2},
                         .dst_strides = {h * w * cp, w * cp, cp, 1},
                         .src_strides = {h * w * cp2, w * cp2, cp2, 1}};
    ck_assert_tci_ok(kern_strided_copy(dy, da, &d1, 0));
    ck_assert_tci_ok(kern_strided_copy(dy + c1, db, &d2, 0));
    gpu_sync();
    gpu_download(got, dy, 2 * (size_t)(pixels * cp));
    for (int64_t p = 0; p < pixels; p++)
        for (int64_t k = 0; k < cp; k++) {
            uint16_t want = k < c1 ? a[p * cp1 + k] : k < c ? b[p * cp2 + k - c1] : 0;
            ck_assert_msg(got[p * cp + k] == want, "pixel %lld channel %lld: 0x%04x, want 0x%04x",
                          (long long)p, (long long)k, got[p * cp + k], want);
        }
    gpu_free(da);
    gpu_free(db);
    gpu_free(dy);
    free(f1);
    free(f2);
    free(a);
    free(b);
    free(got);
}

START_TEST(test_concat_padded_channels) {
    check_concat_channels(2, 5, 7, 3, 5);  /* C=3 and C=5 into C=8 */
    check_concat_channels(1, 3, 11, 3, 2); /* into C=5: padded channels zero-filled first */
    check_concat_channels(2, 4, 3, 8, 13); /* aligned first input, then two chunks */
}
END_TEST

/* kern_copy_blocks: `num` NHWC8 inputs of channels c[k] (each padded to 8) into the channels of
 * one output in one launch, the output's padding zero-filled first; every element bit for bit
 * (elements of elem bytes: 2 moves 16-byte vectors where the channels allow, odd counts less). */
static void check_blocks(int elem, int64_t pixels, int num, const int64_t *c) {
    int64_t cp[KERN_COPY_MAX_BLOCKS], at[KERN_COPY_MAX_BLOCKS], total = 0;
    for (int k = 0; k < num; k++) {
        cp[k] = (c[k] + 7) / 8 * 8;
        at[k] = total;
        total += c[k];
    }
    const int64_t ycp = (total + 7) / 8 * 8;
    unsigned char *x[KERN_COPY_MAX_BLOCKS];
    const void *dx[KERN_COPY_MAX_BLOCKS];
    kern_copy_block blocks[KERN_COPY_MAX_BLOCKS];
    for (int k = 0; k < num; k++) {
        x[k] = random_bytes((size_t)(pixels * cp[k] * elem), 40 + (uint64_t)k);
        dx[k] = gpu_upload(x[k], (size_t)(pixels * cp[k] * elem));
        blocks[k] = (kern_copy_block){pixels, c[k], cp[k], ycp, at[k]};
    }
    unsigned char *got = malloc((size_t)(pixels * ycp * elem));
    void *dy = gpu_upload(NULL, (size_t)(pixels * ycp * elem));
    ck_assert_tci_ok(kern_fill(dy, pixels * ycp, elem, 0, 0));
    ck_assert_tci_ok(kern_copy_blocks(dy, dx, blocks, num, elem, 0));
    gpu_sync();
    gpu_download(got, dy, (size_t)(pixels * ycp * elem));
    for (int64_t p = 0; p < pixels; p++)
        for (int64_t ch = 0; ch < ycp; ch++) {
            int k = 0;
            while (k + 1 < num && ch >= at[k + 1]) k++;
            const unsigned char *want =
                ch < total ? x[k] + (p * cp[k] + ch - at[k]) * elem : NULL;
            const unsigned char *g = got + (p * ycp + ch) * elem;
            for (int e = 0; e < elem; e++)
                ck_assert_msg(g[e] == (want ? want[e] : 0),
                              "%d blocks, pixel %lld channel %lld byte %d differs", num,
                              (long long)p, (long long)ch, e);
        }
    for (int k = 0; k < num; k++) {
        gpu_free((void *)dx[k]);
        free(x[k]);
    }
    gpu_free(dy);
    free(got);
}

START_TEST(test_copy_blocks) {
    check_blocks(2, 3 * 56 * 56, 5, (const int64_t[]){64, 32, 32, 32, 32}); /* DenseNet, 16 B */
    check_blocks(2, 7 * 9, 3, (const int64_t[]){3, 5, 2});                  /* odd: 2 B */
    check_blocks(4, 100, 8, (const int64_t[]){8, 16, 4, 12, 8, 8, 24, 2});  /* fp32, 8 blocks */
    check_blocks(1, 1, 1, (const int64_t[]){7});
    /* empty blocks are passed over; bad ones refused */
    kern_copy_block none = {0, 8, 8, 8, 0};
    const void *src = NULL;
    ck_assert_tci_ok(kern_copy_blocks(NULL, &src, &none, 1, 2, 0));
    kern_copy_block wide = {1, 16, 8, 16, 0};
    ck_assert_tci_error(kern_copy_blocks(NULL, &src, &wide, 1, 2, 0), TCI_ERR_INVALID_ARGUMENT,
                        "src_ld 8");
    ck_assert_tci_error(kern_copy_blocks(NULL, &src, &none, KERN_COPY_MAX_BLOCKS + 1, 2, 0),
                        TCI_ERR_INVALID_ARGUMENT, "at most");
    ck_assert_tci_error(kern_copy_blocks(NULL, &src, &none, 1, 3, 0), TCI_ERR_INVALID_ARGUMENT,
                        "element size 3");
}
END_TEST

START_TEST(test_concat_and_split_dense) {
    /* Concat (2,3,4) and (2,5,4) on axis 1 into (2,8,4); then Split it back as (2,8,4)->(2,8,1..)
     * windows on the inner axis */
    int64_t na = 2 * 3 * 4, nb = 2 * 5 * 4, ny = 2 * 8 * 4;
    uint16_t *a = random_bytes(2 * (size_t)na, 31), *b = random_bytes(2 * (size_t)nb, 32);
    uint16_t *got = malloc(2 * (size_t)ny), want[64];
    for (int o = 0; o < 2; o++) {
        memcpy(want + o * 32, a + o * 12, 24);
        memcpy(want + o * 32 + 12, b + o * 20, 40);
    }
    void *da = gpu_upload(a, 2 * (size_t)na), *db = gpu_upload(b, 2 * (size_t)nb);
    uint16_t *dy = gpu_upload(NULL, 2 * (size_t)ny);
    kern_copy_desc da_desc = {.rank = 3, .elem_size = 2, .shape = {2, 3, 4},
                              .dst_strides = {32, 4, 1}, .src_strides = {12, 4, 1}};
    kern_copy_desc db_desc = {.rank = 3, .elem_size = 2, .shape = {2, 5, 4},
                              .dst_strides = {32, 4, 1}, .src_strides = {20, 4, 1}};
    ck_assert_tci_ok(kern_strided_copy(dy, da, &da_desc, 0));
    ck_assert_tci_ok(kern_strided_copy(dy + 12, db, &db_desc, 0));
    gpu_sync();
    gpu_download(got, dy, 2 * (size_t)ny);
    assert_same(got, want, ny, 2);

    /* Split (4, 40) on axis 1 into 16 + 24: 16-byte vectors on both parts */
    uint16_t *x = random_bytes(2 * 160, 33), part[96];
    void *dx = gpu_upload(x, 2 * 160);
    uint16_t *dp = gpu_upload(NULL, 2 * 96);
    int64_t offsets[2] = {0, 16}, widths[2] = {16, 24};
    for (int s = 0; s < 2; s++) {
        kern_copy_desc ds = {.rank = 2, .elem_size = 2, .shape = {4, widths[s]},
                             .dst_strides = {widths[s], 1}, .src_strides = {40, 1}};
        ck_assert_tci_ok(kern_strided_copy(dp, (uint16_t *)dx + offsets[s], &ds, 0));
        gpu_sync();
        gpu_download(part, dp, 2 * (size_t)(4 * widths[s]));
        for (int r = 0; r < 4; r++)
            for (int k = 0; k < widths[s]; k++)
                ck_assert_uint_eq(part[r * widths[s] + k], x[r * 40 + offsets[s] + k]);
    }
    gpu_free(da);
    gpu_free(db);
    gpu_free(dy);
    gpu_free(dx);
    gpu_free(dp);
    free(a);
    free(b);
    free(got);
    free(x);
}
END_TEST

/* Slice of (6,10,9) with starts/steps per dim (negative steps read backwards). */
static void check_slice(int elem, const int64_t *dims, const int64_t *starts, const int64_t *steps,
                        const int64_t *counts, uint64_t seed) {
    int64_t n = count_of(3, dims), m = count_of(3, counts), st[3], out_st[3];
    contiguous(3, dims, st);
    contiguous(3, counts, out_st);
    char *x = random_bytes((size_t)(n * elem), seed), *want = malloc((size_t)(m * elem)),
         *got = malloc((size_t)(m * elem));
    for (int64_t i = 0; i < m; i++) {
        int64_t o[3], src = 0;
        unravel(i, 3, counts, o);
        for (int d = 0; d < 3; d++) src += (starts[d] + o[d] * steps[d]) * st[d];
        memcpy(want + i * elem, x + src * elem, (size_t)elem);
    }
    kern_copy_desc desc = {.rank = 3, .elem_size = elem};
    int64_t first = 0;
    for (int d = 0; d < 3; d++) {
        desc.shape[d] = counts[d];
        desc.dst_strides[d] = out_st[d];
        desc.src_strides[d] = st[d] * steps[d];
        first += starts[d] * st[d];
    }
    char *dx = gpu_upload(x, (size_t)(n * elem));
    void *dy = gpu_upload(NULL, (size_t)(m * elem));
    ck_assert_tci_ok(kern_strided_copy(dy, dx + first * elem, &desc, 0));
    gpu_sync();
    gpu_download(got, dy, (size_t)(m * elem));
    assert_same(got, want, m, elem);
    gpu_free(dx);
    gpu_free(dy);
    free(x);
    free(want);
    free(got);
}

START_TEST(test_slice_negative_steps) {
    int64_t dims[3] = {6, 10, 9};
    /* [0:6:2, 8:0:-2, ::-1] */
    check_slice(2, dims, (int64_t[]){0, 8, 8}, (int64_t[]){2, -2, -1}, (int64_t[]){3, 4, 9}, 41);
    /* [5::-1, :, 8::-3] on 4-byte elements */
    check_slice(4, dims, (int64_t[]){5, 0, 8}, (int64_t[]){-1, 1, -3}, (int64_t[]){6, 10, 3}, 42);
    /* [1:5, 2:9, 1:8]: plain window, contiguous inner */
    check_slice(2, dims, (int64_t[]){1, 2, 1}, (int64_t[]){1, 1, 1}, (int64_t[]){4, 7, 7}, 43);
    /* [::-1, ::-1, :]: reversed outer dims with contiguous rows (vector path) */
    check_slice(8, dims, (int64_t[]){5, 9, 0}, (int64_t[]){-1, -1, 1}, (int64_t[]){6, 10, 9}, 44);
}
END_TEST

/* Expand in_dims (right-aligned, 1 = broadcast) to out_dims. */
static void check_expand(int elem, int in_rank, const int64_t *in_dims, int rank,
                         const int64_t *out_dims, uint64_t seed) {
    int64_t full[MAX_RANK], in_st[MAX_RANK], out_st[MAX_RANK];
    for (int d = 0; d < rank; d++) full[d] = d < rank - in_rank ? 1 : in_dims[d - (rank - in_rank)];
    contiguous(rank, full, in_st);
    contiguous(rank, out_dims, out_st);
    int64_t n = count_of(rank, full), m = count_of(rank, out_dims);
    kern_copy_desc desc = {.rank = rank, .elem_size = elem};
    for (int d = 0; d < rank; d++) {
        desc.shape[d] = out_dims[d];
        desc.dst_strides[d] = out_st[d];
        desc.src_strides[d] = full[d] == 1 ? 0 : in_st[d];
    }
    char *x = random_bytes((size_t)(n * elem), seed), *want = malloc((size_t)(m * elem)),
         *got = malloc((size_t)(m * elem));
    for (int64_t i = 0; i < m; i++) {
        int64_t o[MAX_RANK], src = 0;
        unravel(i, rank, out_dims, o);
        for (int d = 0; d < rank; d++) src += (full[d] == 1 ? 0 : o[d]) * in_st[d];
        memcpy(want + i * elem, x + src * elem, (size_t)elem);
    }
    void *dx = gpu_upload(x, (size_t)(n * elem)), *dy = gpu_upload(NULL, (size_t)(m * elem));
    ck_assert_tci_ok(kern_strided_copy(dy, dx, &desc, 0));
    gpu_sync();
    gpu_download(got, dy, (size_t)(m * elem));
    assert_same(got, want, m, elem);
    gpu_free(dx);
    gpu_free(dy);
    free(x);
    free(want);
    free(got);
}

START_TEST(test_expand) {
    check_expand(2, 3, (int64_t[]){3, 1, 5}, 4, (int64_t[]){2, 3, 4, 5}, 51);
    check_expand(2, 2, (int64_t[]){5, 1}, 2, (int64_t[]){5, 7}, 52);       /* inner broadcast */
    check_expand(8, 0, NULL, 2, (int64_t[]){7, 9}, 53);                    /* scalar */
    check_expand(1, 1, (int64_t[]){33}, 3, (int64_t[]){3, 2, 33}, 54);
    check_expand(2, 4, (int64_t[]){1, 16, 1, 8}, 4, (int64_t[]){3, 16, 5, 8}, 55); /* vectors */
    /* innermost broadcast written as repeated vectors */
    check_expand(2, 2, (int64_t[]){5, 1}, 2, (int64_t[]){5, 64}, 56);
    check_expand(8, 2, (int64_t[]){3, 1}, 2, (int64_t[]){3, 6}, 57);
    check_expand(1, 2, (int64_t[]){4, 1}, 2, (int64_t[]){4, 24}, 58);
    check_expand(2, 3, (int64_t[]){16, 1, 1}, 4, (int64_t[]){2, 16, 5, 8}, 59); /* per channel */
}
END_TEST

START_TEST(test_copy_rank0_and_empty) {
    uint32_t v = 0xdeadbeef, got = 0;
    void *dx = gpu_upload(&v, 4), *dy = gpu_upload(NULL, 4);
    kern_copy_desc one = {.rank = 0, .elem_size = 4};
    ck_assert_tci_ok(kern_strided_copy(dy, dx, &one, 0));
    kern_copy_desc empty = {.rank = 2, .elem_size = 4, .shape = {3, 0}, .dst_strides = {0, 0}};
    ck_assert_tci_ok(kern_strided_copy(NULL, NULL, &empty, 0));
    gpu_sync();
    gpu_download(&got, dy, 4);
    ck_assert_uint_eq(got, v);
    gpu_free(dx);
    gpu_free(dy);
}
END_TEST

START_TEST(test_copy_errors) {
    uint64_t words[8] = {0};
    char *buf = (char *)words;
    kern_copy_desc d = {.rank = 2, .elem_size = 3, .shape = {2, 2}, .dst_strides = {2, 1},
                        .src_strides = {2, 1}};
    ck_assert_tci_error(kern_strided_copy(buf, buf + 32, &d, 0), TCI_ERR_INVALID_ARGUMENT,
                        "element size 3");
    d.elem_size = 2;
    d.dst_strides[0] = 0;
    ck_assert_tci_error(kern_strided_copy(buf, buf + 32, &d, 0), TCI_ERR_INVALID_ARGUMENT,
                        "dst stride 0 is 0");
    d.dst_strides[0] = 1;
    ck_assert_tci_error(kern_strided_copy(buf, buf + 32, &d, 0), TCI_ERR_INVALID_ARGUMENT,
                        "writes overlap");
    d.rank = 7;
    ck_assert_tci_error(kern_strided_copy(buf, buf + 32, &d, 0), TCI_ERR_INVALID_ARGUMENT,
                        "rank 7");
    d.rank = 2;
    d.dst_strides[0] = 2;
    ck_assert_tci_error(kern_strided_copy(NULL, buf, &d, 0), TCI_ERR_INVALID_ARGUMENT,
                        "NULL destination");
    ck_assert_tci_error(kern_strided_copy(buf + 1, buf + 32, &d, 0), TCI_ERR_INVALID_ARGUMENT,
                        "not aligned");
    ck_assert_tci_error(kern_strided_copy(buf, buf, NULL, 0), TCI_ERR_INVALID_ARGUMENT,
                        "desc is NULL");
}
END_TEST

/* ---- gather ---- */

static void check_gather(int elem, int64_t outer, int64_t axis, int64_t inner,
                         const int64_t *indices, int64_t num, int as_int32, int expect_flag,
                         uint64_t seed) {
    int64_t n = outer * axis * inner, m = outer * num * inner;
    char *x = random_bytes((size_t)(n * elem), seed), *want = malloc((size_t)(m * elem)),
         *got = malloc((size_t)(m * elem));
    for (int64_t o = 0; o < outer; o++)
        for (int64_t q = 0; q < num; q++) {
            int64_t idx = indices[q] < 0 ? indices[q] + axis : indices[q];
            idx = idx < 0 ? 0 : idx >= axis ? axis - 1 : idx;
            memcpy(want + ((o * num + q) * inner) * elem, x + ((o * axis + idx) * inner) * elem,
                   (size_t)(inner * elem));
        }
    int32_t idx32[64];
    for (int64_t q = 0; q < num; q++) idx32[q] = (int32_t)indices[q];
    void *dx = gpu_upload(x, (size_t)(n * elem)), *dy = gpu_upload(NULL, (size_t)(m * elem));
    void *di = as_int32 ? gpu_upload(idx32, 4 * (size_t)num) : gpu_upload(indices, 8 * (size_t)num);
    int zero = 0, flag = -1;
    int *dflag = gpu_upload(&zero, sizeof zero);
    ck_assert_tci_ok(kern_gather(dy, dx, di, as_int32, outer, axis, inner, num, elem, dflag, 0));
    gpu_sync();
    gpu_download(got, dy, (size_t)(m * elem));
    gpu_download(&flag, dflag, sizeof flag);
    assert_same(got, want, m, elem);
    ck_assert_int_eq(flag, expect_flag);
    gpu_free(dx);
    gpu_free(dy);
    gpu_free(di);
    gpu_free(dflag);
    free(x);
    free(want);
    free(got);
}

START_TEST(test_gather_negative_indices) {
    int64_t idx[] = {-1, 0, 6, -7, 3, 2};
    check_gather(2, 3, 7, 5, idx, 6, 0, 0, 61);
    check_gather(2, 3, 7, 5, idx, 6, 1, 0, 62);           /* int32 indices */
    check_gather(2, 2, 7, 16, idx, 6, 0, 0, 63);          /* 32-byte rows: vectors */
    check_gather(8, 1, 6, 1, (int64_t[]){5, -6, 2}, 3, 0, 0, 64); /* shape-tensor gather */
    check_gather(1, 4, 7, 3, idx, 6, 1, 0, 65);
    check_gather(2, 5, 7, 1, idx, 6, 0, 0, 66);           /* scalars (axis = last) */
}
END_TEST

START_TEST(test_gather_out_of_range_flags) {
    check_gather(2, 3, 7, 5, (int64_t[]){7, -8, 1}, 3, 0, 1, 67);
    check_gather(4, 2, 4, 3, (int64_t[]){100000}, 1, 1, 1, 68);
    /* nothing to read: zeros, flagged */
    uint16_t got[6];
    int64_t idx_host[1] = {0};
    int zero = 0, flag = 0;
    void *dy = gpu_upload(NULL, sizeof got), *di = gpu_upload(idx_host, 8);
    int *dflag = gpu_upload(&zero, sizeof zero);
    ck_assert_tci_ok(kern_gather(dy, NULL, di, 0, 2, 0, 3, 1, 2, dflag, 0));
    gpu_sync();
    gpu_download(got, dy, sizeof got);
    gpu_download(&flag, dflag, sizeof flag);
    for (int i = 0; i < 6; i++) ck_assert_uint_eq(got[i], 0);
    ck_assert_int_eq(flag, 1);
    ck_assert_tci_error(kern_gather(dy, dy, di, 0, 1, 2, 3, 1, 5, NULL, 0),
                        TCI_ERR_INVALID_ARGUMENT, "element size 5");
    ck_assert_tci_error(kern_gather(dy, dy, di, 0, 1, -2, 3, 1, 2, NULL, 0),
                        TCI_ERR_INVALID_ARGUMENT, "negative extent");
    gpu_free(dy);
    gpu_free(di);
    gpu_free(dflag);
}
END_TEST

/* ---- pad ---- */

static int64_t pad_source(kern_pad_mode mode, int64_t o, int64_t begin, int64_t end, int64_t in) {
    int64_t crop = begin < 0 ? -begin : 0, lead = begin > 0 ? begin : 0;
    int64_t kept = in - crop - (end < 0 ? -end : 0), j = o - lead;
    if (j >= 0 && j < kept) return j + crop;
    switch (mode) {
    case KERN_PAD_CONSTANT: return -1;
    case KERN_PAD_EDGE: j = j < 0 ? 0 : kept - 1; break;
    case KERN_PAD_WRAP:
        while (j < 0) j += kept;
        j %= kept;
        break;
    case KERN_PAD_REFLECT: /* bounce off the ends until inside */
        while (j < 0 || j >= kept) {
            if (kept == 1) j = 0;
            else if (j < 0) j = -j;
            else j = 2 * (kept - 1) - j;
        }
        break;
    }
    return j + crop;
}

static void check_pad(int elem, int rank, const int64_t *dims, const int64_t *begin,
                      const int64_t *end, kern_pad_mode mode, uint64_t value, uint64_t seed) {
    int64_t out_dims[MAX_RANK], in_st[MAX_RANK];
    for (int d = 0; d < rank; d++) out_dims[d] = dims[d] + begin[d] + end[d];
    contiguous(rank, dims, in_st);
    int64_t n = count_of(rank, dims), m = count_of(rank, out_dims);
    char *x = random_bytes((size_t)(n * elem), seed), *want = malloc((size_t)(m * elem)),
         *got = malloc((size_t)(m * elem));
    for (int64_t i = 0; i < m; i++) {
        int64_t o[MAX_RANK], src = 0;
        unravel(i, rank, out_dims, o);
        for (int d = 0; d < rank && src >= 0; d++) {
            int64_t j = pad_source(mode, o[d], begin[d], end[d], dims[d]);
            src = j < 0 ? -1 : src + j * in_st[d];
        }
        if (src < 0) memcpy(want + i * elem, &value, (size_t)elem);
        else memcpy(want + i * elem, x + src * elem, (size_t)elem);
    }
    void *dx = gpu_upload(x, (size_t)(n * elem)), *dy = gpu_upload(NULL, (size_t)(m * elem));
    ck_assert_tci_ok(kern_pad(dy, dx, rank, dims, begin, end, mode, value, elem, 0));
    gpu_sync();
    gpu_download(got, dy, (size_t)(m * elem));
    assert_same(got, want, m, elem);
    gpu_free(dx);
    gpu_free(dy);
    free(x);
    free(want);
    free(got);
}

START_TEST(test_pad_constant) {
    int64_t dims[4] = {2, 3, 5, 6};
    check_pad(2, 4, dims, (int64_t[]){0, 1, 2, -1}, (int64_t[]){1, 0, -2, 3}, KERN_PAD_CONSTANT,
              0x3e00, 71); /* 1.5 in fp16; crops too */
    check_pad(4, 4, dims, (int64_t[]){1, 0, 0, 2}, (int64_t[]){0, 0, 3, 0}, KERN_PAD_CONSTANT,
              0x3fc00000, 72);
    check_pad(1, 2, (int64_t[]){7, 9}, (int64_t[]){2, 3}, (int64_t[]){1, 4}, KERN_PAD_CONSTANT,
              0x7f, 73);
    check_pad(8, 1, (int64_t[]){4}, (int64_t[]){-4}, (int64_t[]){2}, KERN_PAD_CONSTANT, 9, 74);
    /* NHWC8 spatial padding: whole 16-byte channel vectors, padded channels stay as given */
    check_pad(2, 4, (int64_t[]){2, 5, 7, 8}, (int64_t[]){0, 1, 2, 0}, (int64_t[]){0, 2, 1, 0},
              KERN_PAD_CONSTANT, 0, 75);
}
END_TEST

START_TEST(test_pad_reflect) {
    int64_t dims[3] = {3, 5, 6};
    check_pad(2, 3, dims, (int64_t[]){0, 2, 4}, (int64_t[]){0, 3, 5}, KERN_PAD_REFLECT, 0, 81);
    check_pad(2, 3, dims, (int64_t[]){1, -1, 3}, (int64_t[]){2, 2, -2}, KERN_PAD_REFLECT, 0, 82);
    check_pad(2, 3, dims, (int64_t[]){0, 9, 0}, (int64_t[]){0, 11, 0}, KERN_PAD_REFLECT, 0, 83);
    check_pad(4, 2, (int64_t[]){1, 5}, (int64_t[]){2, 1}, (int64_t[]){1, 1}, KERN_PAD_REFLECT, 0, 84);
    check_pad(2, 4, (int64_t[]){1, 6, 5, 16}, (int64_t[]){0, 2, 3, 0}, (int64_t[]){0, 1, 4, 0},
              KERN_PAD_REFLECT, 0, 85);
}
END_TEST

START_TEST(test_pad_edge_and_wrap) {
    int64_t dims[3] = {3, 5, 6};
    check_pad(2, 3, dims, (int64_t[]){2, 3, 1}, (int64_t[]){1, 4, 7}, KERN_PAD_EDGE, 0, 91);
    check_pad(8, 3, dims, (int64_t[]){0, -2, 1}, (int64_t[]){1, 4, -3}, KERN_PAD_EDGE, 0, 92);
    check_pad(2, 3, dims, (int64_t[]){1, 3, 7}, (int64_t[]){2, 6, 2}, KERN_PAD_WRAP, 0, 93);
    check_pad(1, 3, dims, (int64_t[]){0, -1, 2}, (int64_t[]){0, 3, -1}, KERN_PAD_WRAP, 0, 94);
}
END_TEST

START_TEST(test_pad_errors) {
    uint64_t words[8] = {0};
    char *buf = (char *)words;
    int64_t dims[2] = {3, 4};
    ck_assert_tci_error(kern_pad(buf, buf, 2, dims, (int64_t[]){0, -3}, (int64_t[]){0, -2},
                                 KERN_PAD_CONSTANT, 0, 2, 0),
                        TCI_ERR_INVALID_ARGUMENT, "leave -1");
    ck_assert_tci_error(kern_pad(buf, buf, 2, dims, (int64_t[]){0, -4}, (int64_t[]){0, 2},
                                 KERN_PAD_REFLECT, 0, 2, 0),
                        TCI_ERR_INVALID_ARGUMENT, "keeps no elements to extend in reflect mode");
    ck_assert_tci_error(kern_pad(buf, buf, 0, dims, dims, dims, KERN_PAD_CONSTANT, 0, 2, 0),
                        TCI_ERR_INVALID_ARGUMENT, "rank 0");
    ck_assert_tci_error(kern_pad(buf, buf, 2, dims, dims, dims, KERN_PAD_EDGE, 0, 6, 0),
                        TCI_ERR_INVALID_ARGUMENT, "element size 6");
    /* constant mode may crop everything and fill */
    uint16_t got[4];
    uint16_t *dy = gpu_upload(NULL, sizeof got);
    char *dx = gpu_upload(NULL, 24);
    ck_assert_tci_ok(kern_pad(dy, dx, 2, dims, (int64_t[]){-3, 1}, (int64_t[]){1, -4},
                              KERN_PAD_CONSTANT, 0x3c00, 2, 0));
    gpu_sync();
    gpu_download(got, dy, 2);
    ck_assert_uint_eq(got[0], 0x3c00);
    gpu_free(dy);
    gpu_free(dx);
}
END_TEST

/* ---- fill ---- */

static void check_fill(int elem, int64_t count, int64_t offset, uint64_t value) {
    size_t bytes = (size_t)((count + offset) * elem);
    char *got = malloc(bytes);
    char *dy = gpu_upload(NULL, bytes);
    ck_assert_tci_ok(kern_fill(dy + offset * elem, count, elem, value, 0));
    gpu_sync();
    gpu_download(got, dy, bytes);
    for (int64_t i = 0; i < offset * elem; i++) ck_assert_uint_eq((unsigned char)got[i], 0xff);
    for (int64_t i = 0; i < count; i++)
        ck_assert_msg(memcmp(got + (offset + i) * elem, &value, (size_t)elem) == 0,
                      "element %lld not filled", (long long)i);
    gpu_free(dy);
    free(got);
}

START_TEST(test_fill) {
    check_fill(2, 1003, 1, 0x3c00);      /* unaligned start: scalar */
    check_fill(2, 1003, 0, 0x3c00);      /* vectors and a tail */
    check_fill(4, 37, 0, 0x12345678);
    check_fill(8, 5, 1, 0x0123456789abcdefull);
    check_fill(2, 999, 3, 0);            /* memset path */
    check_fill(1, 100, 1, 0xab);
    ck_assert_tci_ok(kern_fill(NULL, 0, 2, 0, 0));
    ck_assert_tci_error(kern_fill(NULL, 3, 2, 0, 0), TCI_ERR_INVALID_ARGUMENT, "dst is NULL");
    ck_assert_tci_error(kern_fill(NULL, -1, 2, 0, 0), TCI_ERR_INVALID_ARGUMENT, "negative");
    char *dy = gpu_upload(NULL, 16);
    ck_assert_tci_error(kern_fill(dy + 1, 3, 2, 0, 0), TCI_ERR_INVALID_ARGUMENT, "not aligned");
    gpu_free(dy);
}
END_TEST

/* bf16 tensors move as 2-byte elements like fp16: only a constant's bits differ. The fill value
 * is the caller's bf16 bit pattern (round to nearest even of the fp32 value). */
START_TEST(test_fill_and_pad_bf16) {
    const uint16_t one_and_half = float_to_bfloat16(1.5f), minus = float_to_bfloat16(-2.25f);
    ck_assert_uint_eq(one_and_half, 0x3fc0);
    ck_assert_uint_eq(minus, 0xc010);
    check_fill(2, 1003, 1, one_and_half);
    check_fill(2, 1003, 0, one_and_half);
    /* Pad of NHWC8 bf16 data (2, 5, 7, 16) over H and W, decoded back to the constant */
    check_pad(2, 4, (int64_t[]){2, 5, 7, 16}, (int64_t[]){0, 1, 2, 0}, (int64_t[]){0, 2, 1, 0},
              KERN_PAD_CONSTANT, minus, 76);
    uint16_t got[4];
    uint16_t *dy = gpu_upload(NULL, sizeof got);
    ck_assert_tci_ok(kern_fill(dy, 4, 2, minus, 0));
    gpu_sync();
    gpu_download(got, dy, sizeof got);
    for (int i = 0; i < 4; i++) ck_assert_float_eq(bfloat16_to_float(got[i]), -2.25f);
    gpu_free(dy);
}
END_TEST

int main(void) {
    gpu_require_device("gpu_copy");
    Suite *s = suite_create("gpu_copy");
    TCase *tc = tcase_create("copy");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_transpose_2d_odd);
    tcase_add_test(tc, test_transpose_nd_odd);
    tcase_add_test(tc, test_transpose_element_sizes);
    tcase_add_test(tc, test_concat_padded_channels);
    tcase_add_test(tc, test_concat_and_split_dense);
    tcase_add_test(tc, test_copy_blocks);
    tcase_add_test(tc, test_slice_negative_steps);
    tcase_add_test(tc, test_expand);
    tcase_add_test(tc, test_copy_rank0_and_empty);
    tcase_add_test(tc, test_copy_errors);
    tcase_add_test(tc, test_gather_negative_indices);
    tcase_add_test(tc, test_gather_out_of_range_flags);
    tcase_add_test(tc, test_pad_constant);
    tcase_add_test(tc, test_fill_and_pad_bf16);
    tcase_add_test(tc, test_pad_reflect);
    tcase_add_test(tc, test_pad_edge_and_wrap);
    tcase_add_test(tc, test_pad_errors);
    tcase_add_test(tc, test_fill);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
