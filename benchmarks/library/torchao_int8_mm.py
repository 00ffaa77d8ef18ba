"""torchao's Triton int8 matmul (torchao.kernel.intmm_triton.matmul_kernel_with_block_pointers): C = A @ B.

A (M, K) and B (K, N) int8, row-major; C (M, N) int32, accumulated in int32 by ``tl.dot`` over BLOCK_K slices,
block pointers with boundary checks, GROUP_M-grouped program order. This is the kernel behind torchao's
``torch.ops.torchao.int_matmul`` (CUDA), launched unmodified with the arguments of torchao's launcher
``intmm_triton.int_matmul_kernel``.

torchao does not decorate it with ``@triton.autotune``: its launcher takes the config that torchao's own
autotuner (``torchao.kernel.autotuner.get_best_config_fn``) finds by timing every entry of
``intmm_triton.int8_mm_kernel_configs`` at the first call of a shape (960 configs: BLOCK_M/N/K in 32..256 x 15
stage/warp pairs; ``TORCHINDUCTOR_MAX_AUTOTUNE_GEMM_SEARCH_SPACE=EXHAUSTIVE`` at import gives another list). This
wrapper hands that same list, unchanged, to ``triton.autotune`` so that kernelpilot searches it as a config list;
the list's first entry is the starting point. torchao's library default is therefore the best of the list
(its autotuner times all of them), not one fixed config: compare a final with the exhaustive best.

Needs torchao (PyPI ``torchao``; 0.17.0 is built for torch 2.11). ``import torchao`` tries its C++ extensions
and logs a warning if they do not load (CPU, or another torch): the Triton kernels do not need them.
"""

import torch
import triton
from torchao.kernel.intmm_triton import int8_mm_kernel_configs, matmul_kernel_with_block_pointers

# A square int8 GEMM the size of a 4k-hidden projection over 4096 tokens.
SHAPE = {"M": 4096, "N": 4096, "K": 4096}
CPU_SHAPE = {"M": 64, "N": 96, "K": 80}  # not multiples of the blocks: the boundary checks run
COMPUTE_UNIT = "int8_tensor"

int8_mm = triton.autotune(configs=int8_mm_kernel_configs, key=["M", "N", "K"])(matmul_kernel_with_block_pointers)


def setup(M, N, K, seed=0, device="cuda", **_):
    """A (M, K) and B (K, N) uniform int8 in [-128, 127], C (M, N) int32 uninitialized."""
    gen = torch.Generator(device=device).manual_seed(seed)
    a = torch.randint(-128, 128, (M, K), generator=gen, device=device, dtype=torch.int8)
    b = torch.randint(-128, 128, (K, N), generator=gen, device=device, dtype=torch.int8)
    return {"inputs": {"a": a, "b": b, "c": torch.empty(M, N, device=device, dtype=torch.int32)}, "outputs": ["c"]}


def run_kernel(a, b, c, **_):
    """Launch torchao's kernel as ``int_matmul_kernel`` does (1-D grid of C tiles); writes c. Raises ValueError
    when the shapes do not chain."""
    M, K = a.shape
    K2, N = b.shape
    if K != K2 or c.shape != (M, N):
        raise ValueError(f"torchao_int8_mm: a {tuple(a.shape)} @ b {tuple(b.shape)} -> c {tuple(c.shape)}")
    grid = lambda META: (triton.cdiv(M, META["BLOCK_M"]) * triton.cdiv(N, META["BLOCK_N"]),)  # noqa: E731
    int8_mm[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))


def reference(a, b, c, **_):
    """A @ B exactly, in int32: ``torch._int_mm`` (cuBLASLt int8) on the GPU where it applies (M > 16, K and N
    multiples of 8), else a float64 matmul, exact here: |a_ik * b_kj| <= 2^14 and |sum| <= K * 2^14 < 2^53."""
    M, K = a.shape
    if a.is_cuda and M > 16 and K % 8 == 0 and b.shape[1] % 8 == 0:
        return torch._int_mm(a, b)
    return torch.matmul(a.double(), b.double()).to(torch.int32)


def flops(M, N, K, **_):
    """Integer ops: one multiply and one add per (m, n, k)."""
    return 2 * M * N * K


def bytes_moved(M, N, K, **_):
    """Bytes: A and B read once (int8), C written once (int32)."""
    return M * K + K * N + 4 * M * N
