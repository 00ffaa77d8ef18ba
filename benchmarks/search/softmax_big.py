"""A search-benchmark kernel with a space of 10,800 configs: the bundled softmax example's kernel with two more
launch-level knobs, the loads' eviction policy and the stores' cache modifier (``EVICT``, ``STORE_CACHE``), and wider
ranges of rows per program, warps and stages.

It exists to test a search on a space too large to enumerate within a default budget (issue 25: ">= 10,000
configs: within 3 % of the best found by a long exhaustive run in <= 25 % of its time"); the numbers are in
docs/search.md. The kernel is the example's (docs of the two paths there); only the knobs are new.

Row-wise softmax over the last dimension of a contiguous M x N matrix, computed in fp32, stored in the input dtype.
"""


import torch
import triton
import triton.language as tl

SHAPE = {"M": 4096, "N": 4096, "dtype": "float32"}
CPU_SHAPE = {"M": 8, "N": 256, "dtype": "float32"}
TUNABLES = {
    "BLOCK_N": [64, 128, 256, 512, 1024, 2048, 4096, 8192],
    "ROWS_PER_PROGRAM": [1, 2, 4, 8, 16],
    "num_warps": [1, 2, 4, 8, 16, 32],
    "num_stages": [1, 2, 3, 4, 5],
    "EVICT": ["", "evict_first", "evict_last"],
    "STORE_CACHE": ["", ".cs", ".wt"],
}
# A typical first attempt: a small column tile, so the looped two-pass path runs at SHAPE.
DEFAULT_CONFIG = {"BLOCK_N": 256, "ROWS_PER_PROGRAM": 1, "num_warps": 4, "num_stages": 2, "EVICT": "",
                  "STORE_CACHE": ""}
COMPUTE_UNIT = "fp32"

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def _torch_dtype(dtype: str) -> torch.dtype:
    if dtype not in _DTYPES:
        raise ValueError(f"softmax: dtype must be one of {sorted(_DTYPES)}, got {dtype!r}")
    return _DTYPES[dtype]


@triton.jit
def _softmax_kernel(
    x_ptr, y_ptr, M, N, stride_xm, stride_ym,
    BLOCK_N: tl.constexpr, ROWS: tl.constexpr, SINGLE_TILE: tl.constexpr, EVICT: tl.constexpr,
    STORE_CACHE: tl.constexpr,
):
    pid = tl.program_id(0)
    rows = pid * ROWS + tl.arange(0, ROWS)
    row_ok = rows < M
    # Clamp rows past the end for loads (finite values, no NaN), mask them on store.
    rows_ld = tl.minimum(rows, M - 1).to(tl.int64)
    x_rows = x_ptr + rows_ld[:, None] * stride_xm
    y_rows = y_ptr + rows.to(tl.int64)[:, None] * stride_ym
    cols = tl.arange(0, BLOCK_N)

    if SINGLE_TILE:
        col_ok = cols < N
        x = tl.load(x_rows + cols[None, :], mask=col_ok[None, :], other=float("-inf"), eviction_policy=EVICT).to(tl.float32)
        row_max = tl.max(x, axis=1)
        num = tl.exp(x - row_max[:, None])
        den = tl.sum(num, axis=1)
        out = num / den[:, None]
        tl.store(y_rows + cols[None, :], out.to(y_ptr.dtype.element_ty),
                 mask=row_ok[:, None] & col_ok[None, :], cache_modifier=STORE_CACHE)
    else:
        # Pass 1: online max and sum, rescaling the sum whenever the max grows.
        run_max = tl.full([ROWS], float("-inf"), tl.float32)
        run_sum = tl.zeros([ROWS], tl.float32)
        for start in range(0, N, BLOCK_N):
            c = start + cols
            x = tl.load(x_rows + c[None, :], mask=(c < N)[None, :], other=float("-inf"), eviction_policy=EVICT).to(tl.float32)
            new_max = tl.maximum(run_max, tl.max(x, axis=1))
            run_sum = run_sum * tl.exp(run_max - new_max) + tl.sum(tl.exp(x - new_max[:, None]), axis=1)
            run_max = new_max
        inv_sum = 1.0 / run_sum
        # Pass 2: normalize and store.
        for start in range(0, N, BLOCK_N):
            c = start + cols
            c_ok = c < N
            x = tl.load(x_rows + c[None, :], mask=c_ok[None, :], other=float("-inf"), eviction_policy=EVICT).to(tl.float32)
            out = tl.exp(x - run_max[:, None]) * inv_sum[:, None]
            tl.store(y_rows + c[None, :], out.to(y_ptr.dtype.element_ty),
                     mask=row_ok[:, None] & c_ok[None, :], cache_modifier=STORE_CACHE)


def setup(M, N, dtype="float32", seed=0, device="cuda", **_):
    """Fresh standard-normal x scaled by 4 (so exp spans a wide range) and an uninitialized y."""
    tdt = _torch_dtype(dtype)
    gen = torch.Generator(device=device).manual_seed(seed)
    x = (4.0 * torch.randn(M, N, generator=gen, device=device, dtype=torch.float32)).to(tdt)
    y = torch.empty(M, N, device=device, dtype=tdt)
    return {"inputs": {"x": x, "y": y, "M": M, "N": N}, "outputs": ["y"]}


def run_kernel(x, y, M, N, *, BLOCK_N, ROWS_PER_PROGRAM, num_warps, num_stages, EVICT, STORE_CACHE, **_):
    """Launch cdiv(M, ROWS_PER_PROGRAM) programs; writes `y` in place."""
    if x.shape != (M, N) or y.shape != (M, N):
        raise ValueError(f"softmax: x and y must be ({M}, {N}), got {tuple(x.shape)} and {tuple(y.shape)}")
    if x.stride(1) != 1 or y.stride(1) != 1:
        raise ValueError("softmax: x and y must have unit stride along the last dimension")
    grid = (triton.cdiv(M, ROWS_PER_PROGRAM),)
    _softmax_kernel[grid](
        x, y, M, N, x.stride(0), y.stride(0),
        BLOCK_N=BLOCK_N, ROWS=ROWS_PER_PROGRAM, SINGLE_TILE=N <= BLOCK_N, EVICT=EVICT, STORE_CACHE=STORE_CACHE,
        num_warps=num_warps, num_stages=num_stages,
    )


def reference(x, y, M, N, **_):
    """torch.softmax over the last dim, in the input's dtype (float64 for upcast copies)."""
    return torch.softmax(x, dim=-1)


def flops(M, N, **_):
    # Per element: 1 compare (max), 1 subtract, 1 exp, 1 add (sum), 1 multiply (normalize) = 5.
    # The online rescaling and the second exp of the looped path are not counted.
    return 5 * M * N


def bytes_moved(M, N, dtype="float32", **_):
    # Read x once, write y once.
    return 2 * M * N * _torch_dtype(dtype).itemsize
