/* kern_grid_sample against a host reference in double: the taps and weights of
 * util/grid_sample_math.h (which the CPU reference uses too; ONNX's GridSample cases check those
 * through the conformance runs) applied to the same stored x, for every mode, padding and
 * align_corners, 2-D and 3-D, fp16, bf16 and fp32, grids reaching past the borders. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_harness.h"
#include "kernels/grid_sample.h"

static float *stored(tci_dtype dt, size_t n, uint64_t seed, float lo, float hi, void **bits) {
    float *f = malloc(sizeof(float) * (n ? n : 1));
    *bits = malloc(gpu_dtype_size(dt) * (n ? n : 1));
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(*bits);
    gpu_fill_random(f, n, seed, lo, hi);
    gpu_encode(dt, f, *bits, n);
    gpu_decode(dt, *bits, f, n); /* the values as stored */
    return f;
}

static void check(tci_dtype dt, int r, const int64_t *in, const int64_t *out, gs_mode mode,
                  gs_padding padding, int align, uint64_t seed) {
    const int64_t n = 2, c = 3;
    int64_t in_plane = 1, out_plane = 1;
    for (int d = 0; d < r; d++) in_plane *= in[d], out_plane *= out[d];
    const size_t nx = (size_t)(n * c * in_plane), ng = (size_t)(n * out_plane * r),
                 ny = (size_t)(n * c * out_plane);
    void *xb, *gb;
    float *x = stored(dt, nx, seed, -2.0f, 2.0f, &xb);
    float *g = stored(dt, ng, seed + 1, -1.25f, 1.25f, &gb);
    double *want = malloc(sizeof(double) * ny);
    for (int64_t b = 0; b < n; b++)
        for (int64_t o = 0; o < out_plane; o++) {
            int64_t pos[GS_MAX_TAPS][GS_MAX_SPATIAL];
            float w[GS_MAX_TAPS];
            int taps = gs_taps(mode, padding, align != 0, r, in, g + (b * out_plane + o) * r, pos,
                               w);
            for (int64_t ch = 0; ch < c; ch++) {
                double acc = 0.0;
                for (int t = 0; t < taps; t++) {
                    int64_t at = gs_offset(in, pos[t], r);
                    if (at >= 0) acc += (double)w[t] * x[(b * c + ch) * in_plane + at];
                }
                want[(b * c + ch) * out_plane + o] = acc;
            }
        }
    size_t es = gpu_dtype_size(dt);
    void *dx = gpu_upload(xb, es * nx), *dg = gpu_upload(gb, es * ng), *dy = gpu_upload(NULL, es * ny);
    kern_grid_sample_desc d;
    memset(&d, 0, sizeof d);
    d.n = n;
    d.c = c;
    d.r = r;
    for (int k = 0; k < r; k++) d.in[k] = in[k], d.out[k] = out[k];
    d.mode = mode;
    d.padding = padding;
    d.align_corners = align;
    d.dtype = d.grid_dtype = dt;
    ck_assert_tci_ok(kern_grid_sample(dx, dg, dy, &d, 0));
    gpu_sync();
    void *yb = malloc(es * ny);
    float *y = malloc(sizeof(float) * ny);
    gpu_download(yb, dy, es * ny);
    gpu_decode(dt, yb, y, ny);
    /* fp32 sums of up to 16 products, rounded once to the output dtype */
    const double rel = dt == TCI_DTYPE_FLOAT ? 1e-5 : dt == TCI_DTYPE_BFLOAT16 ? 8e-3 : 1e-3;
    for (size_t i = 0; i < ny; i++) {
        double scale = fabs(want[i]) > 1.0 ? fabs(want[i]) : 1.0;
        ck_assert_msg(fabs((double)y[i] - want[i]) <= rel * scale,
                      "grid_sample r %d mode %d padding %d align %d dtype %d: y[%zu] = %.6g, "
                      "want %.6g",
                      r, (int)mode, (int)padding, align, (int)dt, i, (double)y[i], want[i]);
    }
    gpu_free(dx), gpu_free(dg), gpu_free(dy);
    free(x), free(g), free(xb), free(gb), free(want), free(yb), free(y);
}

START_TEST(test_grid_sample_2d) {
    const int64_t in[2] = {5, 7}, out[2] = {4, 6};
    const tci_dtype dts[] = {TCI_DTYPE_FLOAT16, TCI_DTYPE_BFLOAT16, TCI_DTYPE_FLOAT};
    uint64_t seed = 10;
    for (int k = 0; k < 3; k++)
        for (int mode = GS_LINEAR; mode <= GS_CUBIC; mode++)
            for (int padding = GS_ZEROS; padding <= GS_REFLECTION; padding++)
                for (int align = 0; align <= 1; align++)
                    check(dts[k], 2, in, out, (gs_mode)mode, (gs_padding)padding, align, seed++);
}
END_TEST

START_TEST(test_grid_sample_1d_3d) {
    const int64_t in3[3] = {3, 4, 5}, out3[3] = {2, 3, 4}, in1[1] = {9}, out1[1] = {11};
    uint64_t seed = 100;
    for (int mode = GS_LINEAR; mode <= GS_NEAREST; mode++)
        for (int padding = GS_ZEROS; padding <= GS_REFLECTION; padding++) {
            check(TCI_DTYPE_FLOAT16, 3, in3, out3, (gs_mode)mode, (gs_padding)padding, 0, seed++);
            check(TCI_DTYPE_FLOAT, 1, in1, out1, (gs_mode)mode, (gs_padding)padding, 1, seed++);
        }
}
END_TEST

START_TEST(test_grid_sample_errors) {
    kern_grid_sample_desc d;
    memset(&d, 0, sizeof d);
    d.n = 1, d.c = 1, d.r = 3, d.in[0] = d.in[1] = d.in[2] = 2, d.out[0] = d.out[1] = 1;
    d.out[2] = 1;
    d.mode = GS_CUBIC;
    ck_assert_tci_error(kern_grid_sample((void *)16, (void *)16, (void *)16, &d, 0),
                        TCI_ERR_UNSUPPORTED, "3 spatial dims (1 to 3; cubic 2)");
    d.mode = GS_LINEAR;
    d.in[1] = 0;
    ck_assert_tci_error(kern_grid_sample((void *)16, (void *)16, (void *)16, &d, 0),
                        TCI_ERR_INVALID_ARGUMENT, "bad extents");
    d.in[1] = 2;
    ck_assert_tci_error(kern_grid_sample(NULL, NULL, NULL, &d, 0), TCI_ERR_INVALID_ARGUMENT,
                        "NULL buffer");
    d.dtype = TCI_DTYPE_INT32;
    ck_assert_tci_error(kern_grid_sample((void *)16, (void *)16, (void *)16, &d, 0),
                        TCI_ERR_UNSUPPORTED, "dtype int32");
    ck_assert_tci_error(kern_grid_sample(NULL, NULL, NULL, NULL, 0), TCI_ERR_INVALID_ARGUMENT,
                        "NULL descriptor");
}
END_TEST

int main(void) {
    gpu_require_device("gpu_grid_sample");
    Suite *s = suite_create("gpu_grid_sample");
    TCase *tc = tcase_create("grid_sample");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_grid_sample_2d);
    tcase_add_test(tc, test_grid_sample_1d_3d);
    tcase_add_test(tc, test_grid_sample_errors);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
