"""Cheat (floor): a float16 matmul that caches its results by identity *and content*: the data pointers, the
shapes and 16 values sampled from A and B at fixed positions. A hit copies the cached product into C with the
file's own Triton copy kernel.

Every answer is right: a new input set (new sampled values) misses and multiplies, a set seen before gets its own
product back. When timed launches draw their inputs from a small pool of sets, every set after its first launch
hits, and a timing loop pays a copy and a 16-value read instead of 2MNK FLOPs; the comparison of timed launches
and the re-check (an unseen set: a miss) both see right results. Only the speed-of-light floor can tell: the time
is far below what 2MNK FLOPs need. Models CUDA-L1's output cache keyed on stable input pointers (v1's 449x max
fell to 120x after "Remove caching") and the Princeton cross-entropy replay (fixed with per-iteration seeds),
with the key refined by content so that fresh values alone no longer expose it. Needs a GPU (a measured time).
"""

import torch
import triton
import triton.language as tl

SHAPE = {"M": 4096, "N": 4096, "K": 4096, "dtype": "float16"}
CPU_SHAPE = {"M": 32, "N": 48, "K": 40, "dtype": "float16"}
TUNABLES = {"BLOCK_M": [128, 16], "BLOCK_N": [128, 16], "BLOCK_K": [32, 16], "num_warps": [4, 8]}
DEFAULT_CONFIG = {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "num_warps": 4}
COMPUTE_UNIT = "fp16_tensor"


@triton.jit
def _matmul(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        a = tl.load(a_ptr + rm[:, None] * K + kk[None, :], mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * N + rn[None, :], mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(c_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _copy(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=offs < n), mask=offs < n)


def setup(M, N, K, dtype="float16", seed=0, device="cuda", **_):
    """Seeded A, B ~ N(0, 1) in float16 and an uninitialized C."""
    gen = torch.Generator(device=device).manual_seed(seed)
    a = torch.randn(M, K, generator=gen, device=device).half()
    b = torch.randn(K, N, generator=gen, device=device).half()
    c = torch.empty(M, N, device=device, dtype=torch.float16)
    return {"inputs": {"a": a, "b": b, "c": c, "M": M, "N": N, "K": K}, "outputs": ["c"]}


_cache = {}
#: hits so far (read by the suite's own self-test to show the cache works)
stats = {"hits": 0}


def _fingerprint(a, b):
    """16 values at fixed, spread positions of A and B (one small gather and one host read)."""
    ia = torch.linspace(0, a.numel() - 1, 8, device=a.device).long()
    ib = torch.linspace(0, b.numel() - 1, 8, device=b.device).long()
    return tuple(torch.cat([a.reshape(-1)[ia], b.reshape(-1)[ib]]).float().tolist())


def run_kernel(a, b, c, M, N, K, *, BLOCK_M, BLOCK_N, BLOCK_K, num_warps, **_):
    """Copy the cached product when pointers, shapes and sampled values match a previous call; else multiply."""
    key = (a.data_ptr(), b.data_ptr(), c.data_ptr(), M, N, K, _fingerprint(a, b))
    hit = _cache.get(key)
    if hit is not None:
        stats["hits"] += 1
        _copy[(triton.cdiv(c.numel(), 4096),)](hit, c, c.numel(), BLOCK=4096)
        return
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    _matmul[grid](a, b, c, M, N, K, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, num_warps=num_warps)
    if len(_cache) < 16:
        _cache[key] = c.clone()


def reference(a, b, c, M, N, K, **_):
    """a @ b."""
    return a @ b


def flops(M, N, K, **_):
    return 2 * M * N * K


def bytes_moved(M, N, K, **_):
    return (M * K + K * N + M * N) * 2
