"""A deliberately broken Triton kernel: one tunable, MODE, picks how it breaks (tests of the search's typed failures).

The kernel copies x into out (out[i] = x[i]); every MODE but ``ok`` is a real fault in the ``@triton.jit`` code,
not a simulated exception, so the same file fails the same way under the Triton interpreter (CPU) and compiled
for a GPU:

* ``compile_error``: ``tl.arange`` over a range that is not a power of two: Triton rejects it while building the
  kernel (a ``CompilationError`` when compiled; the interpreter raises the same front-end ``ValueError``);
* ``nan``: divides 0 by 0 (``(x - x) / (x - x)``) for every element;
* ``wrong``: an off-by-one load, out[i] = x[i + 1] (masked, so no element is read out of bounds);
* ``hang``: spins until a flag in memory, which nobody ever sets, turns non-zero; the flag is re-read with a
  volatile load each iteration, so the compiler can neither fold the loop away nor hoist the load out of it;
* ``illegal``: an unmasked store 2**40 elements past ``out``: an illegal memory access on a GPU (it poisons the
  CUDA context); under the interpreter the store writes through a raw host address and the process dies of a
  segmentation fault;
* ``ok``: correct.

TUNABLES put the failures first and ``ok`` last, so an exhaustive search reaches the good config only after
surviving every failure.
"""

import torch
import triton
import triton.language as tl

SHAPE = {"N": 1 << 20}
CPU_SHAPE = {"N": 256}
TUNABLES = {
    "MODE": ["compile_error", "nan", "wrong", "hang", "illegal", "ok"],
    "BLOCK": [64],
}
DEFAULT_CONFIG = {"MODE": "ok", "BLOCK": 64}
COMPUTE_UNIT = "fp32"

#: How far past ``out`` the ``illegal`` config stores, in elements (4 TiB of float32: mapped nowhere).
FAR_ELEMS = tl.constexpr(1 << 40)


@triton.jit
def _broken_copy(x_ptr, out_ptr, flag_ptr, N, MODE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    if MODE == "compile_error":
        odd = tl.arange(0, BLOCK - 1)  # not a power of two: rejected by Triton's front end
        y = x + tl.sum(odd.to(tl.float32), axis=0)
    elif MODE == "nan":
        zero = x - x
        y = zero / zero
    elif MODE == "wrong":
        y = tl.load(x_ptr + offs + 1, mask=(offs + 1) < N, other=0.0)
    elif MODE == "hang":
        spins = tl.load(flag_ptr)
        while tl.load(flag_ptr, volatile=True) == 0:
            spins += 1
        y = x + spins.to(tl.float32)
    elif MODE == "illegal":
        tl.store(out_ptr + offs.to(tl.int64) + FAR_ELEMS, x)  # no mask: far outside any allocation
        y = x
    else:
        y = x
    tl.store(out_ptr + offs, y, mask=mask)


def setup(N, seed=0, device="cuda", **_):
    """Standard-normal x (seeded), an uninitialized out, and a zero flag (the ``hang`` config waits on it)."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(N, generator=gen, dtype=torch.float32).to(device)
    out = torch.empty(N, device=device, dtype=torch.float32)
    flag = torch.zeros(1, device=device, dtype=torch.int32)
    return {"inputs": {"x": x, "out": out, "flag": flag, "N": N}, "outputs": ["out"], "scratch": ["flag"]}


def run_kernel(x, out, flag, N, *, MODE, BLOCK, **_):
    """One program per BLOCK elements; writes ``out`` in place (or breaks, per MODE)."""
    _broken_copy[(triton.cdiv(N, BLOCK),)](x, out, flag, N, MODE=MODE, BLOCK=BLOCK)


def reference(x, out, flag, N, **_):
    """out = x."""
    return x.clone()


def bytes_moved(N, **_):
    # Read x once, write out once.
    return 8 * N
