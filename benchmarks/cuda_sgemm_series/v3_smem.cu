// kernelpilot wrapper (ours) around kernel 3 (shared-memory blocking) from siboehm/SGEMM_CUDA (MIT; third_party/, fetched by
// scripts/fetch-sgemm-series.sh, not committed): C = A @ B, fp32, row-major, square 4096 by default.
// kernelpilot: SHAPE = {"M": 4096, "N": 4096, "K": 4096}
// kernelpilot: CHECK_SHAPES = [{"M": 2048, "N": 2048, "K": 2048}]
// no bounds checks in this kernel: it is right at multiples of its block tile, a domain it declares
// kernelpilot: SHAPE_RULES = {"M": 32, "N": 32, "K": 32}
// kernelpilot: INPLACE = ["C"]
// kernelpilot: FLOPS = "2 * M * N * K"
// kernelpilot: BYTES_MOVED = "4 * (M * K + K * N + 2 * M * N)"
#include "third_party/SGEMM_CUDA/src/kernels/3_kernel_shared_mem_blocking.cuh"

extern "C" void solve(const float* A, const float* B, float* C, int M, int N, int K) {
    dim3 grid(CEIL_DIV(M, 32), CEIL_DIV(N, 32)), block(32 * 32);
    cudaFuncSetAttribute(sgemm_shared_mem_block<32>, cudaFuncAttributePreferredSharedMemoryCarveout,
                         cudaSharedmemCarveoutMaxShared);
    sgemm_shared_mem_block<32><<<grid, block>>>(M, N, K, 1.0f, (float*)A, (float*)B, 0.0f, C);
}
