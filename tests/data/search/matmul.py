"""Matrix multiplication C = A @ B with fp32 accumulation on tensor cores.

A is M x K, B is K x N, C is M x N; all contiguous row-major and of one dtype, bfloat16 (default)
or float16. Products are accumulated in fp32 with tl.dot and C is rounded to the input dtype.

Each program computes one BLOCK_M x BLOCK_N tile of C, stepping over K in BLOCK_K slices. With
GROUP_M > 1 the programs are ordered in groups of GROUP_M tile-rows (swizzled), so programs that run
together share A and B tiles in L2. Rows of A past M are clamped for loads, columns of B past N are masked
(clamping B's contiguous axis broke vectorized loads: 24 vs 314 TFLOP/s at the default config on an H200);
the K tail is masked with zeros, so every config works at any shape (tl.dot needs tiles >= 16), except
those whose accumulator cannot fit in registers (see MAX_ACC_REGS_PER_THREAD: run_kernel raises ValueError).
On a GPU, configs whose pipelined A and B buffers (num_stages * (BLOCK_M + BLOCK_N) * BLOCK_K * 2 bytes)
exceed the shared memory per block fail to compile with Triton's OutOfResources error (256 x 256 x 128 with
5 stages asked for 655,360 of 232,448 bytes on an H200 with Triton 3.6); the interpreter does not model that.
"""

import torch
import triton
import triton.language as tl

SHAPE = {"M": 4096, "N": 4096, "K": 4096, "dtype": "bfloat16"}
CPU_SHAPE = {"M": 64, "N": 64, "K": 64, "dtype": "bfloat16"}
TUNABLES = {
    "BLOCK_M": [32, 64, 128, 256],
    "BLOCK_N": [32, 64, 128, 256],
    "BLOCK_K": [32, 64, 128],
    "GROUP_M": [1, 8],
    "num_warps": [2, 4, 8],
    "num_stages": [2, 3, 4, 5],
}
# Reasonable but improvable: small tiles, no swizzle, shallow pipeline.
DEFAULT_CONFIG = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 1, "num_warps": 4, "num_stages": 2}
COMPUTE_UNIT = "bf16_tensor"

# The fp32 accumulator tile alone takes BLOCK_M * BLOCK_N / (32 * num_warps) registers per thread. Past 256
# (a thread has at most 255) the config can only spill; 256x256x32 with 2 warps compiled for 166 s and ran
# in 8.9 ms at SHAPE on an H200 with Triton 3.6 (the default config: 0.44 ms), so run_kernel rejects such
# configs with a ValueError: (128, 256), (256, 128), (256, 256) with 2 warps and (256, 256) with 4 warps.
MAX_ACC_REGS_PER_THREAD = 256

_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16}


def _torch_dtype(dtype: str) -> torch.dtype:
    if dtype not in _DTYPES:
        raise ValueError(f"matmul: dtype must be one of {sorted(_DTYPES)}, got {dtype!r}")
    return _DTYPES[dtype]


@triton.jit
def _matmul_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    UPCAST_OPERANDS: tl.constexpr,
):
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    if GROUP_M == 1:
        pid_m = pid // tiles_n
        pid_n = pid % tiles_n
    else:
        # Walk GROUP_M tile-rows column by column before moving to the next group of rows.
        per_group = GROUP_M * tiles_n
        group = pid // per_group
        first_m = group * GROUP_M
        rows_in_group = tl.minimum(tiles_m - first_m, GROUP_M)
        local = pid % per_group
        pid_m = first_m + local % rows_in_group
        pid_n = local // rows_in_group

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    # Rows of A past M are clamped to a valid row (A's strided axis, so its loads stay contiguous along K);
    # columns of B past N are masked (B's contiguous axis: a clamp there would break vectorized loads).
    rows_a = tl.minimum(offs_m, M - 1)
    col_ok = offs_n < N
    a_ptrs = a_ptr + rows_a[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & col_ok[None, :], other=0.0)
        if UPCAST_OPERANDS:
            # Interpreter only: its tl.dot multiplies bfloat16 bit patterns (stored as uint16).
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc += tl.dot(a, b)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    c_mask = (offs_m[:, None] < M) & col_ok[None, :]
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=c_mask)


def setup(M, N, K, dtype="bfloat16", seed=0, device="cuda", **_):
    """Fresh standard-normal A, B (seeded) and an uninitialized C."""
    tdt = _torch_dtype(dtype)
    gen = torch.Generator(device=device).manual_seed(seed)
    a = torch.randn(M, K, generator=gen, device=device, dtype=torch.float32).to(tdt)
    b = torch.randn(K, N, generator=gen, device=device, dtype=torch.float32).to(tdt)
    c = torch.empty(M, N, device=device, dtype=tdt)
    return {"inputs": {"a": a, "b": b, "c": c, "M": M, "N": N, "K": K}, "outputs": ["c"]}


def run_kernel(a, b, c, M, N, K, *, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages, **_):
    """Launch one program per C tile; writes `c` in place."""
    if a.shape != (M, K) or b.shape != (K, N) or c.shape != (M, N):
        raise ValueError(
            f"matmul: expected a ({M}, {K}), b ({K}, {N}), c ({M}, {N}); got "
            f"{tuple(a.shape)}, {tuple(b.shape)}, {tuple(c.shape)}"
        )
    if min(BLOCK_M, BLOCK_N, BLOCK_K) < 16:
        raise ValueError(f"matmul: tl.dot needs tiles of at least 16; got {BLOCK_M}x{BLOCK_N}x{BLOCK_K}")
    acc_regs = BLOCK_M * BLOCK_N // (32 * num_warps)
    if acc_regs > MAX_ACC_REGS_PER_THREAD:
        raise ValueError(
            f"matmul: BLOCK_M={BLOCK_M} x BLOCK_N={BLOCK_N} with num_warps={num_warps} needs {acc_regs} fp32 "
            f"accumulator registers per thread (> {MAX_ACC_REGS_PER_THREAD}; a thread has at most 255): it can only "
            f"spill. Use more warps or a smaller tile."
        )
    grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)
    interpreted = type(_matmul_kernel).__name__ == "InterpretedFunction"
    _matmul_kernel[grid](
        a, b, c, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M=GROUP_M,
        UPCAST_OPERANDS=interpreted and a.dtype == torch.bfloat16,
        num_warps=num_warps, num_stages=num_stages,
    )


def reference(a, b, c, M, N, K, **_):
    """a @ b in the inputs' dtype (float64 for upcast copies)."""
    return torch.matmul(a, b)


def flops(M, N, K, **_):
    # One multiply and one add per (m, n, k) triple.
    return 2 * M * N * K


def bytes_moved(M, N, K, dtype="bfloat16", **_):
    # Read A and B once, write C once.
    return (M * K + K * N + M * N) * _torch_dtype(dtype).itemsize
