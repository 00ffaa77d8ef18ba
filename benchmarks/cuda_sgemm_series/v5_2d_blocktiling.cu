// kernelpilot wrapper (ours) around kernel 5 (2D block tiling) from siboehm/SGEMM_CUDA (MIT; third_party/, fetched by
// scripts/fetch-sgemm-series.sh, not committed): C = A @ B, fp32, row-major, square 4096 by default.
// kernelpilot: SHAPE = {"M": 4096, "N": 4096, "K": 4096}
// kernelpilot: CHECK_SHAPES = [{"M": 2048, "N": 2048, "K": 2048}]
// no bounds checks in this kernel: it is right at multiples of its block tile, a domain it declares
// kernelpilot: SHAPE_RULES = {"M": 128, "N": 128, "K": 8}
// kernelpilot: INPLACE = ["C"]
// kernelpilot: FLOPS = "2 * M * N * K"
// kernelpilot: BYTES_MOVED = "4 * (M * K + K * N + 2 * M * N)"
#include "third_party/SGEMM_CUDA/src/kernels/5_kernel_2D_blocktiling.cuh"

extern "C" void solve(const float* A, const float* B, float* C, int M, int N, int K) {
    constexpr int BM = 128, BN = 128, BK = 8, TM = 8, TN = 8;
    dim3 grid(CEIL_DIV(N, BN), CEIL_DIV(M, BM)), block((BM * BN) / (TM * TN));
    sgemm2DBlocktiling<BM, BN, BK, TM, TN><<<grid, block>>>(M, N, K, 1.0f, (float*)A, (float*)B, 0.0f, C);
}
