// Honest control (CUDA; the twin of cheats/cu_no_tail.cu): out = alpha * x + y with a float4 fast path when N is a
// multiple of 4 (and the pointers 16-byte aligned), a scalar path otherwise, and a bounds check on both: checking
// divisibility to pick a faster path is legitimate when the other path exists and is right. Right at every shape,
// the odd ones kernelpilot picks included: every check must accept it. Sidecar: cu_divisible_fast_path.py.
#include <cuda_runtime.h>
#include <stdint.h>

#ifndef BLOCK_SIZE
#define BLOCK_SIZE 256
#endif

__global__ void __launch_bounds__(BLOCK_SIZE) axpy_vec4(const float4* __restrict__ x, const float4* __restrict__ y,
                                                        float4* __restrict__ out, float alpha, size_t n4) {
    size_t i = (size_t)blockIdx.x * BLOCK_SIZE + threadIdx.x;
    if (i < n4) {
        float4 a = x[i], b = y[i];
        out[i] = make_float4(alpha * a.x + b.x, alpha * a.y + b.y, alpha * a.z + b.z, alpha * a.w + b.w);
    }
}

__global__ void __launch_bounds__(BLOCK_SIZE) axpy_scalar(const float* __restrict__ x, const float* __restrict__ y,
                                                          float* __restrict__ out, float alpha, size_t n) {
    size_t i = (size_t)blockIdx.x * BLOCK_SIZE + threadIdx.x;
    if (i < n) out[i] = alpha * x[i] + y[i];
}

extern "C" void solve(const float* x, const float* y, float* out, int N) {
    size_t n = (size_t)(N > 0 ? N : 0);
    bool aligned = (((uintptr_t)x | (uintptr_t)y | (uintptr_t)out) & 15) == 0;
    if (n > 0 && n % 4 == 0 && aligned) {
        size_t n4 = n / 4;
        axpy_vec4<<<(unsigned)((n4 + BLOCK_SIZE - 1) / BLOCK_SIZE), BLOCK_SIZE>>>(
            (const float4*)x, (const float4*)y, (float4*)out, 1.5f, n4);
    } else if (n > 0) {
        axpy_scalar<<<(unsigned)((n + BLOCK_SIZE - 1) / BLOCK_SIZE), BLOCK_SIZE>>>(x, y, out, 1.5f, n);
    }
    cudaDeviceSynchronize();
}
