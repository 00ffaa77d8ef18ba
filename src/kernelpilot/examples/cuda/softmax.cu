// Row softmax of a rows x cols float matrix, one block of 256 threads per row (the seed form: no sidecar; the
// reference is ref.py beside this file, inputs are synthesized from the signature: rows*cols elements per buffer).
// kernelpilot: SHAPE = {"rows": 4096, "cols": 1024}
#include <cuda_runtime.h>
#include <math.h>

#define THREADS 256

__device__ float block_reduce(float v, bool is_max) {
    __shared__ float scratch[THREADS / 32];
    for (int off = 16; off > 0; off >>= 1) {
        float other = __shfl_xor_sync(0xffffffff, v, off);
        v = is_max ? fmaxf(v, other) : v + other;
    }
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < THREADS / 32 ? scratch[lane] : (is_max ? -INFINITY : 0.f);
    for (int off = 16; off > 0; off >>= 1) {
        float other = __shfl_xor_sync(0xffffffff, v, off);
        v = is_max ? fmaxf(v, other) : v + other;
    }
    __syncthreads();  // scratch is reused by the next reduction
    return v;
}

__global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y, int cols) {
    const float* row = x + (size_t)blockIdx.x * cols;
    float* out = y + (size_t)blockIdx.x * cols;
    float m = -INFINITY;
    for (int j = threadIdx.x; j < cols; j += THREADS) m = fmaxf(m, row[j]);
    m = block_reduce(m, true);
    float s = 0.f;
    for (int j = threadIdx.x; j < cols; j += THREADS) s += __expf(row[j] - m);
    s = block_reduce(s, false);
    float inv = 1.f / s;
    for (int j = threadIdx.x; j < cols; j += THREADS) out[j] = __expf(row[j] - m) * inv;
}

extern "C" void solve(const float* input, float* output, int rows, int cols) {
    softmax_rows<<<rows, THREADS>>>(input, output, cols);
    cudaDeviceSynchronize();
}
