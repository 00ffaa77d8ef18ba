#!/usr/bin/env bash
# Fetch the public SGEMM optimization series kernelpilot's CUDA backend is exercised on (siboehm/SGEMM_CUDA, MIT,
# Simon Boehm), unmodified, into benchmarks/cuda_sgemm_series/third_party/SGEMM_CUDA/. Run it on a machine with
# network access before scripts/device-cuda.sh (the device has none; untracked files travel with the working tree).
# The files are third-party code: they are not committed to this repository (benchmarks/cuda_sgemm_series/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=benchmarks/cuda_sgemm_series/third_party/SGEMM_CUDA
RAW=https://raw.githubusercontent.com/siboehm/SGEMM_CUDA
# path -> the commit each file was read at (the last commit touching it that the reviewer saw)
FILES=(
  "60cba6f9b20a198116c76f18de8047f44df8c8b8 LICENSE"
  "d668922980d06f4263a6b34201ab50ab28149af4 src/kernels/1_naive.cuh"
  "d668922980d06f4263a6b34201ab50ab28149af4 src/kernels/2_kernel_global_mem_coalesce.cuh"
  "d668922980d06f4263a6b34201ab50ab28149af4 src/kernels/3_kernel_shared_mem_blocking.cuh"
  "1dfc00d29e7cf52ba340b846439b787d81ae62bc src/kernels/4_kernel_1D_blocktiling.cuh"
  "1dfc00d29e7cf52ba340b846439b787d81ae62bc src/kernels/5_kernel_2D_blocktiling.cuh"
  "1bc1353027f2e1f9b1224e195b32ed9fe9bd9ffc src/kernels/6_kernel_vectorize.cuh"
  "49b63c10a1d09d9602860862f97ab4b7a14b5c08 src/kernels/10_kernel_warptiling.cuh"
  "44cc675db7601ae217ef1015beff60b68ebf03e7 src/kernels/11_kernel_double_buffering.cuh"
)
for entry in "${FILES[@]}"; do
  commit=${entry%% *}; path=${entry#* }
  mkdir -p "$DEST/$(dirname "$path")"
  curl -fsSL "$RAW/$commit/$path" -o "$DEST/$path"
  echo "fetched $path @ ${commit:0:12}"
done
