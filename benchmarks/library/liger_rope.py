"""Liger-Kernel's rotary position embedding forward (liger_kernel.ops.rope._triton_rope), rotating q and k IN PLACE.

For each token t and head h: with x = q[b, h, t, :] split in halves x1, x2 (rotary dim = head dim),
x <- [x1 * cos_t - x2 * sin_t, x2 * cos_t + x1 * sin_t], cos/sin of shape (1, seq, head_dim) (HF's
``cat(freqs, freqs)`` layout); the same for k. q and k have HF's layout (batch, heads, seq, head_dim) as views of
(batch, seq, heads, head_dim) storage, which is what the kernel rotates in place (the library's launcher
liger_kernel.ops.rope.rope_forward transposes back and finds them contiguous).

q and k are both inputs and outputs: setup declares ``"inplace": ["q", "k"]`` so kernelpilot restores them before
every launch outside the timed region and the reference sees the original values. run_kernel launches the
library's @triton.jit kernel with the arguments rope_forward passes; rope_forward gives no num_warps (Triton's
default, 4), which is the tunable here.
"""

import torch
import triton
from liger_kernel.ops.rope import _triton_rope

# Llama-3-8B attention: 32 query heads, 8 KV heads (GQA), head dim 128; 4 sequences of 2048 tokens.
SHAPE = {"B": 4, "S": 2048, "HQ": 32, "HK": 8, "D": 128, "dtype": "bfloat16"}
CPU_SHAPE = {"B": 2, "S": 8, "HQ": 4, "HK": 2, "D": 16, "dtype": "bfloat16"}
# RoPE rotates the two halves of each head: the head dimension is even (the reference itself needs it)
SHAPE_RULES = {"D": 2}
TUNABLES = {"num_warps": [4, 1, 2, 8, 16]}
COMPUTE_UNIT = "fp32"

THETA = 500000.0  # Llama-3's rope_theta
_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


def setup(B, S, HQ, HK, D, dtype="bfloat16", seed=0, device="cuda", **_):
    """q, k ~ N(0, 1) as (B, H, S, D) views of (B, S, H, D) storage; cos/sin of positions 0..S-1 in the model dtype."""
    gen = torch.Generator(device=device).manual_seed(seed)
    tdt = _DTYPES[dtype]
    q = torch.randn(B, S, HQ, D, generator=gen, device=device).to(tdt).transpose(1, 2)
    k = torch.randn(B, S, HK, D, generator=gen, device=device).to(tdt).transpose(1, 2)
    inv_freq = 1.0 / (THETA ** (torch.arange(0, D, 2, device=device, dtype=torch.float32) / D))
    freqs = torch.outer(torch.arange(S, device=device, dtype=torch.float32), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)[None]  # (1, S, D)
    inputs = {"q": q, "k": k, "cos": emb.cos().to(tdt), "sin": emb.sin().to(tdt)}
    # the kernel reads only the first half of cos and sin: "partial" keeps them out of the minimum bytes
    return {"inputs": inputs, "outputs": ["q", "k"], "inplace": ["q", "k"], "partial": ["cos", "sin"]}


def run_kernel(q, k, cos, sin, *, num_warps, **_):
    """Launch Liger's RoPE kernel, one program per token; rotates q and k in place."""
    qs, ks = q.transpose(1, 2), k.transpose(1, 2)  # (B, S, H, D) physical layout
    if not (qs.is_contiguous() and ks.is_contiguous() and cos.is_contiguous() and sin.is_contiguous()):
        raise ValueError("liger_rope: q and k must be (B, H, S, D) views of contiguous (B, S, H, D) storage")
    batch, seq, n_qh, hd = qs.shape
    n_kh = ks.shape[2]
    pad_qh, pad_kh = triton.next_power_of_2(n_qh), triton.next_power_of_2(n_kh)
    pad_hd = triton.next_power_of_2(hd)
    _triton_rope[(batch * seq,)](
        qs, qs.stride(1), ks, ks.stride(1), cos, cos.stride(-2), sin, sin.stride(-2), seq, batch, cos.shape[0],
        n_qh, n_kh, hd, pad_qh, pad_kh, pad_hd, pad_hd, hd, BLOCK_SIZE=max(pad_qh, pad_kh), BACKWARD_PASS=False,
        num_warps=num_warps,
    )


def _rotate(x, cos, sin):
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos[:, None] + rotated * sin[:, None]


def reference(q, k, cos, sin, **_):
    """HF apply_rotary_pos_emb: x * cos + rotate_half(x) * sin, cos/sin broadcast over heads."""
    return _rotate(q, cos, sin), _rotate(k, cos, sin)


def flops(B, S, HQ, HK, D, **_):
    """FLOPs: per element of q and k 2 multiplies + 1 add = 3."""
    return 3 * B * S * (HQ + HK) * D


def bytes_moved(B, S, HQ, HK, D, dtype="bfloat16", **_):
    """Bytes: q and k read once and written once (in place, counted once each way); the first halves of cos and
    sin read once ((1, S, D/2) each; every batch re-reads them from L2)."""
    size = _DTYPES[dtype].itemsize
    return (2 * B * S * (HQ + HK) * D + 2 * S * (D // 2)) * size
