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

TMA = 1 selects a second kernel, _matmul_tma_persistent_kernel (issue 25, "GEMM": the best tiled config stayed at
0.93-0.96x cuBLAS). It launches min(SM count, tiles) programs, each looping over the tiles p, p + programs, ... of
the same grouped order, so no program waits in a launch queue and the last wave is as short as the tile count
allows. A, B and C are moved by the Tensor Memory Accelerator through host tensor descriptors
(triton.tools.tensor_descriptor.TensorDescriptor, in Triton 3.6 and 3.9): a tile is one bulk copy into shared memory
instead of per-thread loads, rows and columns past M, N and K are zero-filled by the hardware, and the C store is
clipped at M and N. The tile loop is flattened with the K loop (tl.range(..., flatten=True)), so the software
pipeline issues the next tile's loads during this tile's epilogue. Measured on an H100 80GB HBM3 (Triton 3.6, torch
2.11, bf16 4096^3, docs/device-runs/2026-11-26-h100-gemm): the best TMA config, 128x256x64, 8 warps, 3 stages, took
176.93 us beside cuBLAS's 173.73 us in one `kernelpilot bench --baselines` call (0.982x; torch.compile 176.54 us),
and 189.92 vs 192.48 us (1.013x) as medians of 7 interleaved do_bench rounds, where the best tiled config
(128x256x64, 8 warps, 4 stages) took 201.31 us (0.956x); timed one after the other, cuBLAS first, 186.50 vs
174.98 us (0.938x): the GPU's clocks drift, so compare only interleaved timings. `kernelpilot tune --strategy
exhaustive --constraint "TMA == 1"` found the same best (179.47 us, 10 configs in 54 s). Not flattening was slower
(189.73 vs 182.72 us in one run), and so were a subtiled epilogue (two half-width C stores, 185.66 us) and Triton
3.6's warp specialization (tl.range(..., warp_specialize=True), 192.58 us), which were therefore left out.

TMA needs a 16-byte aligned base and row strides that are multiples of 16 bytes (bf16/fp16: K and N multiples of 8)
and a GPU of compute capability >= 9.0; elsewhere (e.g. the shapes stage's K = 4096 + 3, or an A100) run_kernel
runs the tiled kernel with the same tiles, so every config is correct at every shape and a TMA config is never a
failed config for its shape. Static compiles (`kernelpilot inspect`, tune's pruning) capture the launch with CPU
tensors and so compile the TMA kernel: for a target before sm_90 they fail where the GPU would fall back. Under the
interpreter the TMA kernel runs on the CPU (Triton's interpreter models the descriptors, their zero fill and
clipping), with 2 programs so the loop over tiles is exercised.
"""

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

SHAPE = {"M": 4096, "N": 4096, "K": 4096, "dtype": "bfloat16"}
CPU_SHAPE = {"M": 64, "N": 64, "K": 64, "dtype": "bfloat16"}
TUNABLES = {
    "BLOCK_M": [32, 64, 128, 256],
    "BLOCK_N": [32, 64, 128, 256],
    "BLOCK_K": [32, 64, 128],
    "GROUP_M": [1, 8],
    "num_warps": [2, 4, 8],
    "num_stages": [2, 3, 4, 5],
    "TMA": [0, 1],
}
# TMA == 1 (the persistent TMA kernel) only where it can be good: the large wgmma tiles Hopper needs (128 or 256 on
# M and N, K slices of 64 or 128), grouped order, >= 3 stages, <= 128 accumulator registers per thread (room left
# for the pipeline's addresses and the epilogue), and the pipelined A/B buffers plus the C staging tile within
# 232,448 bytes (227 KiB, the opt-in shared memory per block of sm_90 and sm_100; a literal so the space is the
# same with or without a GPU spec). 10 configs; the 1152 tiled ones (TMA == 0) are unchanged.
CONSTRAINTS = [
    "TMA == 0 or (BLOCK_M >= 128 and BLOCK_N >= 128 and BLOCK_K >= 64 and GROUP_M == 8 and num_stages >= 3)",
    "TMA == 0 or BLOCK_M * BLOCK_N // (32 * num_warps) <= 128",
    "TMA == 0 or num_stages * (BLOCK_M + BLOCK_N) * BLOCK_K * 2 + BLOCK_M * BLOCK_N * 2 <= 232448",
]
# Reasonable but improvable: small tiles, no swizzle, shallow pipeline.
DEFAULT_CONFIG = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 1, "num_warps": 4, "num_stages": 2,
                  "TMA": 0}
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
def _tile_coords(tile, tiles_m, tiles_n, GROUP_M: tl.constexpr):
    """(tile-row, tile-column) of linear tile index `tile`, in groups of GROUP_M tile-rows walked column by column."""
    per_group = GROUP_M * tiles_n
    first_m = (tile // per_group) * GROUP_M
    rows_in_group = tl.minimum(tiles_m - first_m, GROUP_M)
    local = tile % per_group
    return first_m + local % rows_in_group, local // rows_in_group


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
        pid_m, pid_n = _tile_coords(pid, tiles_m, tiles_n, GROUP_M)

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


@triton.jit
def _matmul_tma_persistent_kernel(
    a_desc, b_desc, c_desc, M, N, K, num_programs,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    OUT_BF16: tl.constexpr, UPCAST_OPERANDS: tl.constexpr,
):
    # Program p computes tiles p, p + num_programs, ... of the grouped order; TMA loads zero-fill rows/columns past
    # M, N and K, and the TMA store clips the C tile at M and N.
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    k_steps = tl.cdiv(K, BLOCK_K)
    # flatten=True: the two loops are pipelined as one, so the next tile's first loads are issued while this tile's
    # last products and epilogue run. The epilogue finds its tile from its own counter, not from `tile`, so the
    # pipelined loads and the epilogue share no value.
    tile_c = tl.program_id(0) - num_programs
    for tile in tl.range(tl.program_id(0), tiles_m * tiles_n, num_programs, flatten=True):
        pid_m, pid_n = _tile_coords(tile, tiles_m, tiles_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(k_steps):
            a = a_desc.load([off_m, k * BLOCK_K])
            b = b_desc.load([k * BLOCK_K, off_n])
            if UPCAST_OPERANDS:
                # Interpreter only, as in _matmul_kernel.
                a = a.to(tl.float32)
                b = b.to(tl.float32)
            acc = tl.dot(a, b, acc)
        tile_c += num_programs
        pid_m, pid_n = _tile_coords(tile_c, tiles_m, tiles_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        if OUT_BF16:
            c_desc.store([off_m, off_n], acc.to(tl.bfloat16))
        else:
            c_desc.store([off_m, off_n], acc.to(tl.float16))


def setup(M, N, K, dtype="bfloat16", seed=0, device="cuda", **_):
    """Fresh standard-normal A, B (seeded) and an uninitialized C."""
    tdt = _torch_dtype(dtype)
    gen = torch.Generator(device=device).manual_seed(seed)
    a = torch.randn(M, K, generator=gen, device=device, dtype=torch.float32).to(tdt)
    b = torch.randn(K, N, generator=gen, device=device, dtype=torch.float32).to(tdt)
    c = torch.empty(M, N, device=device, dtype=tdt)
    return {"inputs": {"a": a, "b": b, "c": c, "M": M, "N": N, "K": K}, "outputs": ["c"]}


def run_kernel(a, b, c, M, N, K, *, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages, TMA=0, **_):
    """Compute c = a @ b in place (a: M x K, b: K x N, c: M x N; bf16 or fp16, fp32 accumulation).

    TMA=0 (also when absent, as in configs from before the tunable existed): one program per C tile
    (_matmul_kernel). TMA=1: min(SM count, tiles) programs of _matmul_tma_persistent_kernel with host tensor
    descriptors for A, B and C, falling back to _matmul_kernel with the same tiles where TMA cannot be used (see
    _tma_usable: a row stride that is not a multiple of 16 bytes, e.g. K or N odd, or a GPU before sm_90).

    Raises:
        ValueError: shapes of a, b, c disagree with M, N, K; a tile under 16; an accumulator that can only spill.
    """
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
    interpreted = type(_matmul_kernel).__name__ == "InterpretedFunction"
    upcast = interpreted and a.dtype == torch.bfloat16
    tiles = triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N)
    if TMA and _tma_usable(a, b, c):
        a_desc = TensorDescriptor.from_tensor(a, [BLOCK_M, BLOCK_K])
        b_desc = TensorDescriptor.from_tensor(b, [BLOCK_K, BLOCK_N])
        c_desc = TensorDescriptor.from_tensor(c, [BLOCK_M, BLOCK_N])
        programs = min(_program_slots(a.device), tiles)
        _matmul_tma_persistent_kernel[(programs,)](
            a_desc, b_desc, c_desc, M, N, K, programs,
            BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M=GROUP_M,
            OUT_BF16=c.dtype == torch.bfloat16, UPCAST_OPERANDS=upcast,
            num_warps=num_warps, num_stages=num_stages,
        )
        return
    _matmul_kernel[(tiles,)](
        a, b, c, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M=GROUP_M,
        UPCAST_OPERANDS=upcast,
        num_warps=num_warps, num_stages=num_stages,
    )


def _tma_usable(*tensors) -> bool:
    """Whether host TMA descriptors can describe every 2-D tensor given, on the device they live on.

    The TMA unit (CUDA's cuTensorMapEncodeTiled) needs a 16-byte aligned base address, a unit stride on the last
    axis and the other strides multiples of 16 bytes (for bf16/fp16: K and N multiples of 8), and a GPU of compute
    capability 9.0 or later. The base is judged by the tensor's offset into its storage: storages that PyTorch
    allocates start at least 64-byte aligned (CUDA's caching allocator: 512), so a view whose offset is not a
    multiple of 16 bytes is refused. (The address itself is not read: kernelpilot's screen flags run_kernel code
    reading data pointers, the pattern of caches keyed on them.) CPU tensors pass the device test: under the
    interpreter the kernel runs there, and kernelpilot's static compile (sm_90 without a GPU) captures the launch
    with CPU tensors.
    """
    for t in tensors:
        if t.stride(-1) != 1 or (t.stride(0) * t.element_size()) % 16 or (t.storage_offset() * t.element_size()) % 16:
            return False
    device = tensors[0].device
    return device.type != "cuda" or torch.cuda.get_device_capability(device)[0] >= 9


def _program_slots(device) -> int:
    """Programs of the persistent kernel: the GPU's SM count (one resident program each), or 2 off a GPU (the
    interpreter and static compiles; 2 so that CPU tests walk the loop over tiles)."""
    if device.type != "cuda":
        return 2
    if device not in _SM_COUNTS:
        _SM_COUNTS[device] = torch.cuda.get_device_properties(device).multi_processor_count
    return _SM_COUNTS[device]


_SM_COUNTS: dict = {}


def reference(a, b, c, M, N, K, **_):
    """a @ b in the inputs' dtype (float64 for upcast copies)."""
    return torch.matmul(a, b)


def flops(M, N, K, **_):
    # One multiply and one add per (m, n, k) triple.
    return 2 * M * N * K


def bytes_moved(M, N, K, dtype="bfloat16", **_):
    # Read A and B once, write C once.
    return (M * K + K * N + M * N) * _torch_dtype(dtype).itemsize
