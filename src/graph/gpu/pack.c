/* Conv, ConvTranspose and GEMM constants packed into the layouts their kernels read (fp16,
 * bf16 or fp32), and uploaded to the device. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "graph/gpu/gpu_internal.h"
#include "kernels/cuda_check.h"
#include "layers/op.h"

tci_status gpu_malloc(void **out, size_t bytes, const char *what) {
    *out = NULL;
    cudaError_t err = cudaMalloc(out, bytes ? bytes : 1);
    if (err == cudaSuccess) return TCI_OK;
    *out = NULL;
    if (err != cudaErrorMemoryAllocation)
        return status_error(TCI_ERR_CUDA, "cudaMalloc of %zu bytes for %s failed: %s", bytes, what,
                            cudaGetErrorString(err));
    (void)cudaGetLastError(); /* not a sticky error: clear it so that later calls go on */
    size_t available = 0, total = 0;
    if (cudaMemGetInfo(&available, &total) != cudaSuccess) {
        (void)cudaGetLastError();
        available = total = 0;
    }
    return status_error(TCI_ERR_OUT_OF_MEMORY,
                        "out of GPU memory for %s: %zu bytes asked, %zu bytes available (of %zu)",
                        what, bytes, available, total);
}

bool gpu_device_accessible(const void *ptr) {
    struct cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, ptr) != cudaSuccess) {
        (void)cudaGetLastError();
        return false;
    }
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged ||
           (a.type == cudaMemoryTypeHost && a.devicePointer != NULL);
}

int gpu_device_of(const void *ptr) {
    struct cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, ptr) != cudaSuccess) {
        (void)cudaGetLastError();
        return -1;
    }
    return a.type == cudaMemoryTypeDevice ? a.device : -1;
}

/* cuMemGetAddressRange through the runtime's driver entry points (no link to libcuda) */
typedef int (*mem_range_fn)(unsigned long long *base, size_t *size, unsigned long long ptr);

bool gpu_device_room(const void *ptr, size_t *out_bytes) {
    static mem_range_fn range;
    static bool looked;
    if (!looked) {
        void *fn = NULL;
        enum cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &fn, 12000, cudaEnableDefault,
                                             &q) == cudaSuccess &&
            q == cudaDriverEntryPointSuccess)
            range = (mem_range_fn)(uintptr_t)fn;
        else
            (void)cudaGetLastError();
        looked = true;
    }
    unsigned long long base = 0;
    size_t size = 0;
    unsigned long long p = (unsigned long long)(uintptr_t)ptr;
    if (!range || range(&base, &size, p) != 0 || p < base || p - base > size) return false;
    *out_bytes = size - (size_t)(p - base);
    return true;
}

bool gpu_context_broken(char *text, size_t size) {
    cudaError_t err = cudaDeviceSynchronize();
    (void)cudaGetLastError();
    if (err == cudaSuccess) return false;
    /* a sticky error stays: the same query fails again */
    cudaError_t again = cudaDeviceSynchronize();
    (void)cudaGetLastError();
    if (again == cudaSuccess) return false;
    snprintf(text, size, "%s: %s", cudaGetErrorName(again), cudaGetErrorString(again));
    return true;
}

tci_status gpu_upload_bytes(const void *host, size_t bytes, void **out) {
    *out = NULL;
    TRY_STATUS(gpu_malloc(out, bytes, "constants"));
    if (bytes) KERN_CUDA_CHECK(cudaMemcpy(*out, host, bytes, cudaMemcpyHostToDevice));
    return TCI_OK;
}

static tci_status pack_depthwise(exec_gpu_engine *e, int index) {
    const plan *p = e->plan;
    const plan_step *s = &p->steps[index];
    kern_depthwise_desc d;
    bool fp32 = gpu_step_fp32(p, s);
    gpu_depthwise_desc_of(&s->u.conv, e->impl[index].dtype, &d);
    int64_t cp = plan_pad8(s->u.conv.geom.c);
    size_t wbytes = (size_t)(s->u.conv.geom.kernel_h * s->u.conv.geom.kernel_w * cp) * (fp32 ? 4 : 2), bbytes = (size_t)cp * 4;
    void *hw = malloc(wbytes);
    float *hb = malloc(bbytes);
    tci_status st = hw && hb ? TCI_OK : status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory packing weights");
    const float *weights = gpu_tensor_of(p, s->inputs[1])->host_data;
    if (st == TCI_OK)
        st = fp32                              ? kern_depthwise_pack_weights_f32(&d, weights, hw)
             : d.dtype == TCI_DTYPE_BFLOAT16 ? kern_depthwise_pack_weights_bf16(&d, weights, hw)
                                             : kern_depthwise_pack_weights(&d, weights, hw);
    if (st == TCI_OK)
        st = kern_depthwise_pack_bias(&d, gpu_tensor_of(p, s->inputs[2])->host_data, hb);
    if (st == TCI_OK) st = gpu_upload_bytes(hw, wbytes, &e->impl[index].weights);
    if (st == TCI_OK) st = gpu_upload_bytes(hb, bbytes, &e->impl[index].bias);
    free(hw);
    free(hb);
    return st;
}

tci_status gpu_pack_conv(exec_gpu_engine *e, int index) {
    const plan *p = e->plan;
    const plan_step *s = &p->steps[index];
    if (s->u.conv.depthwise) return pack_depthwise(e, index);
    kern_conv_desc d;
    bool fp32 = gpu_step_fp32(p, s);
    gpu_conv_desc_of(e, &s->u.conv, e->impl[index].dtype, &d);
    /* the packing does not depend on the padding; cuDNN's own refusal of asymmetric pads comes
     * at plan creation, where the WMMA kernels can still take the layer */
    d.geom.pad_bottom = d.geom.pad_top;
    d.geom.pad_right = d.geom.pad_left;
    kern_conv_info info;
    TRY_STATUS(kern_conv_shapes(&d, &info));
    size_t elem = fp32 ? 4 : 2;
    size_t wbytes = info.weight_elements * elem, bbytes = info.bias_elements * elem;
    size_t kp = (size_t)plan_pad8(s->u.conv.geom.k);
    void *hw = malloc(wbytes ? wbytes : 1), *hb = malloc(bbytes ? bbytes : 1);
    float *hf = calloc(kp + 1, sizeof(float));
    tci_status st = hw && hb && hf ? TCI_OK : status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory packing weights");
    const float *bias = gpu_tensor_of(p, s->inputs[2])->host_data;
    if (st == TCI_OK)
        st = kern_conv_pack_weights(&d, gpu_tensor_of(p, s->inputs[1])->host_data, hw);
    if (st == TCI_OK) st = kern_conv_pack_bias(&d, bias, hb);
    if (st == TCI_OK) st = gpu_upload_bytes(hw, wbytes, &e->impl[index].weights);
    if (st == TCI_OK) st = gpu_upload_bytes(hb, bbytes, &e->impl[index].bias);
    if (st == TCI_OK && !fp32 && e->kernels != TCI_KERNELS_LIBRARY) {
        for (int64_t k = 0; k < s->u.conv.geom.k; k++) hf[k] = bias[k];
        st = gpu_upload_bytes(hf, kp * sizeof(float), &e->impl[index].bias_f32);
    }
    free(hw);
    free(hb);
    free(hf);
    return st;
}

tci_status gpu_pack_conv_transpose(exec_gpu_engine *e, int index) {
    const plan *p = e->plan;
    const plan_step *s = &p->steps[index];
    kern_convt_desc d;
    bool fp32 = gpu_step_fp32(p, s);
    gpu_convt_desc_of(e, &s->u.conv, e->impl[index].dtype, &d);
    kern_convt_info info;
    TRY_STATUS(kern_convt_shapes(&d, &info));
    size_t elem = fp32 ? 4 : 2;
    size_t wbytes = info.weight_elements * elem, bbytes = info.bias_elements * elem;
    void *hw = malloc(wbytes ? wbytes : 1), *hb = malloc(bbytes ? bbytes : 1);
    tci_status st = hw && hb ? TCI_OK : status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory packing weights");
    if (st == TCI_OK)
        st = kern_convt_pack_weights(&d, gpu_tensor_of(p, s->inputs[1])->host_data, hw);
    if (st == TCI_OK) st = kern_convt_pack_bias(&d, gpu_tensor_of(p, s->inputs[2])->host_data, hb);
    if (st == TCI_OK) st = gpu_upload_bytes(hw, wbytes, &e->impl[index].weights);
    if (st == TCI_OK) st = gpu_upload_bytes(hb, bbytes, &e->impl[index].bias);
    free(hw);
    free(hb);
    return st;
}

tci_status gpu_pack_gemm_bias(exec_gpu_engine *e, int index) {
    const plan_step *s = &e->plan->steps[index];
    if (s->inputs[2] < 0) return TCI_OK;
    const plan_tensor *t = gpu_tensor_of(e->plan, s->inputs[2]);
    int64_t n = gpu_count_of(t);
    if (gpu_step_fp32(e->plan, s))
        return gpu_upload_bytes(t->host_data, (size_t)n * 4, &e->impl[index].bias);
    if (e->kernels != TCI_KERNELS_LIBRARY)
        TRY_STATUS(gpu_upload_bytes(t->host_data, (size_t)n * 4, &e->impl[index].bias_f32));
    uint16_t *h = malloc((size_t)(n ? n : 1) * 2);
    if (!h) return status_error(TCI_ERR_OUT_OF_MEMORY, "out of memory");
    bool bf16 = e->impl[index].dtype == TCI_DTYPE_BFLOAT16;
    for (int64_t i = 0; i < n; i++) {
        float v = ((const float *)t->host_data)[i];
        h[i] = bf16 ? float_to_bfloat16(v) : float_to_half(v);
    }
    tci_status st = gpu_upload_bytes(h, (size_t)n * 2, &e->impl[index].bias);
    free(h);
    return st;
}
