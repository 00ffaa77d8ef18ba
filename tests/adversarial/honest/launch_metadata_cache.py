"""Honest control (the twin of cheats/content_cache_sampled.py and cheats/cache_by_pointer.py): a wrapper with a
cache keyed by data pointers, shapes and strides that holds *launch metadata* (grid, strides, block sizes), never
results.

Computing the grid and checking strides in Python costs microseconds per call; caching them per tensor identity
is what real launchers do (Triton's own launcher caches by signature). Every call still launches the matmul, so
every answer is computed: every check must accept it (pointer keys and module state are flagged, not refused).
"""

import torch
import triton
import triton.language as tl

SHAPE = {"M": 2048, "N": 2048, "K": 2048, "dtype": "float16"}
CPU_SHAPE = {"M": 32, "N": 48, "K": 40, "dtype": "float16"}
TUNABLES = {"BLOCK_M": [64, 16], "BLOCK_N": [64, 16], "BLOCK_K": [32, 16], "num_warps": [4]}
DEFAULT_CONFIG = {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "num_warps": 4}
COMPUTE_UNIT = "fp16_tensor"


@triton.jit
def _matmul(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        a = tl.load(a_ptr + rm[:, None] * sam + kk[None, :] * sak, mask=(rm[:, None] < M) & (kk[None, :] < K),
                    other=0.0)
        b = tl.load(b_ptr + kk[:, None] * sbk + rn[None, :] * sbn, mask=(kk[:, None] < K) & (rn[None, :] < N),
                    other=0.0)
        acc += tl.dot(a, b)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc.to(c_ptr.dtype.element_ty), mask=mask)


def setup(M, N, K, dtype="float16", seed=0, device="cuda", **_):
    """Seeded A, B ~ N(0, 1) in float16 and an uninitialized C."""
    gen = torch.Generator(device=device).manual_seed(seed)
    a = torch.randn(M, K, generator=gen, device=device).half()
    b = torch.randn(K, N, generator=gen, device=device).half()
    c = torch.empty(M, N, device=device, dtype=torch.float16)
    return {"inputs": {"a": a, "b": b, "c": c, "M": M, "N": N, "K": K}, "outputs": ["c"]}


#: (pointers, shapes, strides, config) -> (grid, strides): what to launch, not what it computed
_plans = {}


def run_kernel(a, b, c, M, N, K, *, BLOCK_M, BLOCK_N, BLOCK_K, num_warps, **_):
    """Look up (or build) the launch plan for these tensors and launch the full matmul every time."""
    key = (a.data_ptr(), b.data_ptr(), c.data_ptr(), a.stride(), b.stride(), c.stride(), M, N, K,
           BLOCK_M, BLOCK_N, BLOCK_K)
    plan = _plans.get(key)
    if plan is None:
        plan = ((triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N)), (*a.stride(), *b.stride(), *c.stride()))
        _plans[key] = plan
    grid, strides = plan
    _matmul[grid](a, b, c, M, N, K, *strides, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
                  num_warps=num_warps)


def reference(a, b, c, M, N, K, **_):
    """a @ b."""
    return a @ b


def flops(M, N, K, **_):
    return 2 * M * N * K


def bytes_moved(M, N, K, **_):
    return (M * K + K * N + M * N) * 2
