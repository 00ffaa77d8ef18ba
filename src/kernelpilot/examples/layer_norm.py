"""Layer normalization over the last dimension:
y[i, :] = (x[i, :] - mean_i) / sqrt(var_i + eps) * w + b   (biased variance, as torch.nn.functional.layer_norm).

x and y are contiguous row-major M x N matrices; w and b are length-N vectors; all of one dtype,
bfloat16 (default) or float32. Statistics and the affine transform are computed in fp32 inside
the kernel; y is stored in the input dtype.

One program per row.
- BLOCK_N >= N: single pass; the row stays in registers (x read once).
- BLOCK_N <  N: two passes over column tiles. Pass 1 computes each tile's mean and sum of squared
  deviations and merges them into the running statistics (Chan et al.'s pairwise update: stable,
  no E[x^2] - E[x]^2 cancellation); pass 2 re-reads x and writes y (x read twice).
Masked tails make every BLOCK_N valid for every N.
"""

import torch
import triton
import triton.language as tl

SHAPE = {"M": 8192, "N": 4096, "dtype": "bfloat16"}
CPU_SHAPE = {"M": 8, "N": 256, "dtype": "bfloat16"}
TUNABLES = {
    "BLOCK_N": [128, 256, 512, 1024, 2048, 4096, 8192],
    "num_warps": [1, 2, 4, 8, 16],
}
# A typical first attempt: a small tile (two passes over x at SHAPE) and 4 warps.
DEFAULT_CONFIG = {"BLOCK_N": 512, "num_warps": 4}
COMPUTE_UNIT = "fp32"

EPS = 1e-5
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def _torch_dtype(dtype: str) -> torch.dtype:
    if dtype not in _DTYPES:
        raise ValueError(f"layer_norm: dtype must be one of {sorted(_DTYPES)}, got {dtype!r}")
    return _DTYPES[dtype]


@triton.jit
def _layer_norm_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr, N, stride_xm, stride_ym, eps,
    BLOCK_N: tl.constexpr, SINGLE_TILE: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_xm
    y_row = y_ptr + row * stride_ym
    cols = tl.arange(0, BLOCK_N)

    if SINGLE_TILE:
        mask = cols < N
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        mean = tl.sum(x, axis=0) / N
        xc = tl.where(mask, x - mean, 0.0)
        var = tl.sum(xc * xc, axis=0) / N
        rstd = 1.0 / tl.sqrt(var + eps)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_row + cols, (xc * rstd * w + b).to(y_ptr.dtype.element_ty), mask=mask)
    else:
        # Pass 1: running (count, mean, M2) merged tile by tile.
        count = tl.zeros([], tl.float32)
        mean = tl.zeros([], tl.float32)
        m2 = tl.zeros([], tl.float32)
        for start in range(0, N, BLOCK_N):
            c = start + cols
            mask = c < N
            x = tl.load(x_row + c, mask=mask, other=0.0).to(tl.float32)
            n_t = tl.minimum(N - start, BLOCK_N).to(tl.float32)
            mean_t = tl.sum(x, axis=0) / n_t
            d = tl.where(mask, x - mean_t, 0.0)
            m2_t = tl.sum(d * d, axis=0)
            new_count = count + n_t
            delta = mean_t - mean
            mean = mean + delta * (n_t / new_count)
            m2 = m2 + m2_t + delta * delta * (count * n_t / new_count)
            count = new_count
        rstd = 1.0 / tl.sqrt(m2 / N + eps)
        # Pass 2: normalize, scale, shift.
        for start in range(0, N, BLOCK_N):
            c = start + cols
            mask = c < N
            x = tl.load(x_row + c, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + c, mask=mask, other=0.0).to(tl.float32)
            b = tl.load(b_ptr + c, mask=mask, other=0.0).to(tl.float32)
            tl.store(y_row + c, ((x - mean) * rstd * w + b).to(y_ptr.dtype.element_ty), mask=mask)


def setup(M, N, dtype="bfloat16", seed=0, device="cuda", **_):
    """Fresh random x (mean 1, std 2: a nonzero mean exercises the centering), w around 1, b around 0."""
    tdt = _torch_dtype(dtype)
    gen = torch.Generator(device=device).manual_seed(seed)
    x = (1.0 + 2.0 * torch.randn(M, N, generator=gen, device=device, dtype=torch.float32)).to(tdt)
    w = (1.0 + 0.1 * torch.randn(N, generator=gen, device=device, dtype=torch.float32)).to(tdt)
    b = (0.1 * torch.randn(N, generator=gen, device=device, dtype=torch.float32)).to(tdt)
    y = torch.empty(M, N, device=device, dtype=tdt)
    return {"inputs": {"x": x, "w": w, "b": b, "y": y, "M": M, "N": N, "eps": EPS}, "outputs": ["y"]}


def run_kernel(x, w, b, y, M, N, eps=EPS, *, BLOCK_N, num_warps, **_):
    """Launch one program per row; writes `y` in place."""
    if x.shape != (M, N) or y.shape != (M, N) or w.shape != (N,) or b.shape != (N,):
        raise ValueError(
            f"layer_norm: expected x, y ({M}, {N}) and w, b ({N},); got {tuple(x.shape)}, "
            f"{tuple(y.shape)}, {tuple(w.shape)}, {tuple(b.shape)}"
        )
    if x.stride(1) != 1 or y.stride(1) != 1 or w.stride(0) != 1 or b.stride(0) != 1:
        raise ValueError("layer_norm: tensors must have unit stride along the last dimension")
    _layer_norm_kernel[(M,)](
        x, w, b, y, N, x.stride(0), y.stride(0), float(eps),
        BLOCK_N=BLOCK_N, SINGLE_TILE=N <= BLOCK_N, num_warps=num_warps,
    )


def reference(x, w, b, y, M, N, eps=EPS, **_):
    """torch.nn.functional.layer_norm in the input's dtype (float64 for upcast copies)."""
    return torch.nn.functional.layer_norm(x, (N,), w, b, eps)


def flops(M, N, **_):
    # Per element: 1 add (mean), 1 subtract + 1 multiply + 1 add (variance), 1 multiply (rstd),
    # 1 multiply (w), 1 add (b) = 7. Per-row divides and sqrt are not counted.
    return 7 * M * N


def bytes_moved(M, N, dtype="bfloat16", **_):
    # Read x, w, b once; write y once.
    return (2 * M * N + 2 * N) * _torch_dtype(dtype).itemsize
