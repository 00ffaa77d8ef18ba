// Elementwise c = a + b, one element per thread; BLOCK_SIZE threads per block (a tunable: -DBLOCK_SIZE=...).
// kernelpilot example (docs/cuda.md): the sidecar vector_add.py gives setup, reference and TUNABLES.
#include <cuda_runtime.h>

#ifndef BLOCK_SIZE
#define BLOCK_SIZE 256
#endif

__global__ void __launch_bounds__(BLOCK_SIZE) vector_add_kernel(const float* __restrict__ a,
                                                               const float* __restrict__ b,
                                                               float* __restrict__ c, int n) {
    int i = blockIdx.x * BLOCK_SIZE + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

extern "C" void solve(const float* a, const float* b, float* c, int N) {
    int blocks = (N + BLOCK_SIZE - 1) / BLOCK_SIZE;
    vector_add_kernel<<<blocks, BLOCK_SIZE>>>(a, b, c, N);
    cudaDeviceSynchronize();  // the seed demos do this; kernelpilot keeps the timing honest (docs/cuda.md)
}
