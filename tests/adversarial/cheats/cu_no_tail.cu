// Cheat (shapes, CUDA): out = alpha * x + y launched on N / BLOCK_SIZE blocks with no bounds check; the sidecar's
// CHECK_SHAPES lists only multiples of every BLOCK_SIZE. The last N % BLOCK_SIZE elements are never written, and
// no shape the author lets the check see has them (the declared 2^24, its halves, the CHECK_SHAPES). Models shape
// hard-coding (robust-kbench; AgentKernelArena's unseen configurations) and issue 24's finding that CHECK_SHAPES
// replaced kernelpilot's own derived shape. Caught at a shape kernelpilot picks (odd, not a multiple of any
// block: stage `shapes`). Sidecar: cu_no_tail.py.
#include <cuda_runtime.h>

#ifndef BLOCK_SIZE
#define BLOCK_SIZE 256
#endif

__global__ void __launch_bounds__(BLOCK_SIZE) axpy_full_blocks(const float* __restrict__ x,
                                                               const float* __restrict__ y,
                                                               float* __restrict__ out, float alpha) {
    size_t i = (size_t)blockIdx.x * BLOCK_SIZE + threadIdx.x;
    out[i] = alpha * x[i] + y[i];
}

extern "C" void solve(const float* x, const float* y, float* out, int N) {
    int blocks = N / BLOCK_SIZE;
    if (blocks > 0) axpy_full_blocks<<<blocks, BLOCK_SIZE>>>(x, y, out, 1.5f);
    cudaDeviceSynchronize();
}
