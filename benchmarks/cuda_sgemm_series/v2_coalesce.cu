// kernelpilot wrapper (ours) around kernel 2 (global memory coalescing) from siboehm/SGEMM_CUDA (MIT; third_party/, fetched by
// scripts/fetch-sgemm-series.sh, not committed): C = A @ B, fp32, row-major, square 4096 by default.
// kernelpilot: SHAPE = {"M": 4096, "N": 4096, "K": 4096}
// kernelpilot: CHECK_SHAPES = [{"M": 2048, "N": 2048, "K": 2048}]
// kernelpilot: INPLACE = ["C"]
// kernelpilot: FLOPS = "2 * M * N * K"
// kernelpilot: BYTES_MOVED = "4 * (M * K + K * N + 2 * M * N)"
#include "third_party/SGEMM_CUDA/src/kernels/2_kernel_global_mem_coalesce.cuh"

#ifndef CEIL_DIV  // this header does not define it (headers 4 to 11 do): their definition
#define CEIL_DIV(M, N) (((M) + (N)-1) / (N))
#endif

extern "C" void solve(const float* A, const float* B, float* C, int M, int N, int K) {
    dim3 grid(CEIL_DIV(M, 32), CEIL_DIV(N, 32)), block(32 * 32);
    sgemm_global_mem_coalesce<32><<<grid, block>>>(M, N, K, 1.0f, (float*)A, (float*)B, 0.0f, C);
}
