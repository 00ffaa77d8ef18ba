"""Cheat (floor): an integer-only kernel (a gather through an int32 index, ``out[i] = table[idx[i]] ^ key[i]``)
that caches its output by pointers and a handful of sampled index values; a hit copies the cached output with the
file's own Triton copy kernel.

Integer inputs cannot be "scaled" into new values, so a harness draws whole sets from ``setup``: each new set
misses (the gather runs), each set seen again hits and is right. The comparison of timed launches and the
re-check on an unseen set both see right answers; only the speed-of-light floor shows that a copy of the output
was timed instead of the gather. Models kernelpilot issue 24's integer identity cache (integer-only inputs were
never changed between timed launches: 77x false speedup), in the form that survives inputs that do change.
Needs a GPU (a measured time).
"""

import torch
import triton
import triton.language as tl

SHAPE = {"N": 1 << 24, "T": 1 << 20}
CPU_SHAPE = {"N": 3000, "T": 500}
TUNABLES = {"BLOCK": [1024, 4096], "num_warps": [4, 8]}
DEFAULT_CONFIG = {"BLOCK": 1024, "num_warps": 4}


@triton.jit
def _gather_xor(table_ptr, idx_ptr, key_ptr, out_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    i = tl.load(idx_ptr + offs, mask=mask, other=0)
    v = tl.load(table_ptr + i, mask=mask, other=0)
    tl.store(out_ptr + offs, v ^ tl.load(key_ptr + offs, mask=mask, other=0), mask=mask)


@triton.jit
def _copy(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=offs < n), mask=offs < n)


def setup(N, T, seed=0, device="cuda", **_):
    """Seeded int32 table (T values), index (N values in [0, T)), key (N values) and an uninitialized out."""
    gen = torch.Generator(device=device).manual_seed(seed)
    table = torch.randint(-(2**31), 2**31 - 1, (T,), generator=gen, device=device, dtype=torch.int32)
    idx = torch.randint(0, T, (N,), generator=gen, device=device, dtype=torch.int32)
    key = torch.randint(-(2**31), 2**31 - 1, (N,), generator=gen, device=device, dtype=torch.int32)
    out = torch.empty(N, device=device, dtype=torch.int32)
    return {"inputs": {"table": table, "idx": idx, "key": key, "out": out, "N": N, "T": T}, "outputs": ["out"]}


_cache = {}
#: hits so far (read by the suite's own self-test to show the cache works)
stats = {"hits": 0}


def run_kernel(table, idx, key, out, N, T, *, BLOCK, num_warps, **_):
    """Copy the cached output when pointers and 8 sampled index and key values match a previous call."""
    pick = torch.linspace(0, N - 1, 8, device=idx.device).long()
    sig = (table.data_ptr(), idx.data_ptr(), key.data_ptr(), out.data_ptr(), N, T,
           tuple(torch.cat([idx[pick], key[pick]]).tolist()))
    hit = _cache.get(sig)
    if hit is not None:
        stats["hits"] += 1
        _copy[(triton.cdiv(N, BLOCK),)](hit, out, N, BLOCK=BLOCK, num_warps=num_warps)
        return
    _gather_xor[(triton.cdiv(N, BLOCK),)](table, idx, key, out, N, BLOCK=BLOCK, num_warps=num_warps)
    if len(_cache) < 16:
        _cache[sig] = out.clone()


def reference(table, idx, key, out, N, T, **_):
    """table[idx] ^ key."""
    return table[idx.long()] ^ key


def flops(N, T, **_):
    return N


def bytes_moved(N, T, **_):
    return 4 * N * 4
