// Honest control (CUDA; the twin of cheats/cu_launch_counter.cu and cheats/cu_globaltimer_gap.cu): row softmax
// on a persistent grid whose blocks take rows from a __device__ ticket counter (atomicAdd), a legitimate use of
// device state that persists between launches. solve() resets the counter with cudaMemsetAsync on the launch
// stream before each launch, so every launch computes every row whatever came before; the host also keeps a
// launch count and caches the grid size (the SM count, read once). Every check must accept it.
// Sidecar: cu_ticket_softmax.py.
#include <cuda_runtime.h>

#ifndef BLOCK_SIZE
#define BLOCK_SIZE 256
#endif

__device__ unsigned int g_next_row;

__global__ void __launch_bounds__(BLOCK_SIZE) softmax_rows_ticket(const float* __restrict__ x,
                                                                  float* __restrict__ y, int rows, int cols) {
    __shared__ float red[BLOCK_SIZE];
    __shared__ unsigned int row_s;
    while (true) {
        if (threadIdx.x == 0) row_s = atomicAdd(&g_next_row, 1u);
        __syncthreads();
        unsigned int row = row_s;
        if (row >= (unsigned int)rows) return;
        const float* xr = x + (size_t)row * cols;
        float* yr = y + (size_t)row * cols;
        float m = -INFINITY;
        for (int c = threadIdx.x; c < cols; c += BLOCK_SIZE) m = fmaxf(m, xr[c]);
        red[threadIdx.x] = m;
        __syncthreads();
        for (int s = BLOCK_SIZE / 2; s > 0; s >>= 1) {
            if (threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
            __syncthreads();
        }
        m = red[0];
        __syncthreads();
        float sum = 0.f;
        for (int c = threadIdx.x; c < cols; c += BLOCK_SIZE) sum += __expf(xr[c] - m);
        red[threadIdx.x] = sum;
        __syncthreads();
        for (int s = BLOCK_SIZE / 2; s > 0; s >>= 1) {
            if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
            __syncthreads();
        }
        float inv = 1.f / red[0];
        for (int c = threadIdx.x; c < cols; c += BLOCK_SIZE) yr[c] = __expf(xr[c] - m) * inv;
        __syncthreads();  // red[] and row_s are reused by the next row
    }
}

static int g_grid = 0;            // cached launch metadata: 4 blocks per SM, read once
static unsigned long g_launches = 0;  // a host-side launch count (statistics only)

extern "C" void solve(const float* x, float* y, int M, int N) {
    if (g_grid == 0) {
        int dev = 0, sms = 0;
        cudaGetDevice(&dev);
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
        g_grid = 4 * (sms > 0 ? sms : 1);
    }
    void* counter = nullptr;
    cudaGetSymbolAddress(&counter, g_next_row);
    cudaMemsetAsync(counter, 0, sizeof(unsigned int), 0);
    softmax_rows_ticket<<<M < g_grid ? (M > 0 ? M : 1) : g_grid, BLOCK_SIZE>>>(x, y, M, N);
    ++g_launches;
    cudaDeviceSynchronize();
}
