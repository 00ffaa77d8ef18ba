"""Cheat (shapes): a float16 matmul whose K loop stops at the last full BLOCK_K (``K - K % BLOCK_K``) with no mask
along K; M and N are masked. A ``CHECK_SHAPES`` lists only K that are multiples of every BLOCK_K.

The output is fully written, so no poison shows: the missing K tail only makes every element a little wrong
(each output misses up to BLOCK_K - 1 products), at every shape whose K is not a multiple of the block. The
declared shapes, their halves and the declared CHECK_SHAPES all have such a K. Models the reduction-dimension
form of shape hard-coding (robust-kbench, AgentKernelArena unseen configurations; issue 24: CHECK_SHAPES replaced
the derived shape). Caught at a K kernelpilot picks (odd, not a multiple of any block: stage ``shapes``).
"""

import torch
import triton
import triton.language as tl

SHAPE = {"M": 4096, "N": 4096, "K": 4096, "dtype": "float16"}
CPU_SHAPE = {"M": 32, "N": 48, "K": 64, "dtype": "float16"}
TUNABLES = {"BLOCK_M": [64, 16], "BLOCK_N": [64, 16], "BLOCK_K": [32, 16], "num_warps": [4]}
DEFAULT_CONFIG = {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "num_warps": 4}
COMPUTE_UNIT = "fp16_tensor"
CHECK_SHAPES = [{"M": 40, "N": 24, "K": 96}, {"M": 17, "N": 33, "K": 32}]  # odd M and N, K a multiple of 32


@triton.jit
def _matmul(a_ptr, b_ptr, c_ptr, M, N, K, K_FULL, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
            BLOCK_K: tl.constexpr):
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
    for k0 in range(0, K_FULL, BLOCK_K):
        kk = k0 + rk
        a = tl.load(a_ptr + rm[:, None] * K + kk[None, :], mask=rm[:, None] < M, other=0.0)
        b = tl.load(b_ptr + kk[:, None] * N + rn[None, :], mask=rn[None, :] < N, other=0.0)
        acc += tl.dot(a, b)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(c_ptr.dtype.element_ty), mask=mask)


def setup(M, N, K, dtype="float16", seed=0, device="cuda", **_):
    """Seeded A, B ~ N(0, 1) in float16 and an uninitialized C."""
    gen = torch.Generator(device=device).manual_seed(seed)
    a = torch.randn(M, K, generator=gen, device=device).half()
    b = torch.randn(K, N, generator=gen, device=device).half()
    c = torch.empty(M, N, device=device, dtype=torch.float16)
    return {"inputs": {"a": a, "b": b, "c": c, "M": M, "N": N, "K": K}, "outputs": ["c"]}


def run_kernel(a, b, c, M, N, K, *, BLOCK_M, BLOCK_N, BLOCK_K, num_warps, **_):
    """The K loop covers whole blocks only."""
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    _matmul[grid](a, b, c, M, N, K, K - K % BLOCK_K, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
                  num_warps=num_warps)


def reference(a, b, c, M, N, K, **_):
    """a @ b."""
    return a @ b


def flops(M, N, K, **_):
    return 2 * M * N * K


def bytes_moved(M, N, K, **_):
    return (M * K + K * N + M * N) * 2
