"""Liger-Kernel 0.8.5's cross-entropy forward (liger_kernel.ops.cross_entropy.liger_cross_entropy_kernel), as
``LigerCrossEntropyLoss()(x, target)`` runs it under ``torch.no_grad()`` (x.requires_grad False, so the kernel's
HAS_GRADIENTS is False): reduction "mean", ignore_index -100, no class weights, no label smoothing, no z-loss,
no soft-capping.

What the kernel does, one program per row (read from the wheel's source):
- a row whose target is ignore_index: x[row, :] is overwritten with zeros and nothing else is written (loss[row]
  keeps what it held: the library's launcher allocates loss with torch.zeros, so it is 0);
- any other row: one online-softmax pass over x[row, :] (max and sum in BLOCK_SIZE chunks) plus one load of
  x[row, y]; loss[row] = (logsumexp(x[row]) - x[row, y]) / n_non_ignore. x is not written (no gradients).

So x is an in-place output written in part (the ignored rows, 1/8 of them here), read in part (the other 7/8),
and loss is a pure output. Declared as issue 23 says: "outputs": ["loss", "x"], "inplace": ["x"]; no
bytes_moved(): what the kernel moves is for kernelpilot to observe. What it really moves at SHAPE, by the source
above: x read for 7/8 of the rows and written for 1/8 (together one pass over x: BT·V·4 B = 1.048 GB), target read
(BT·8 B), loss written (BT·4 B): about 1.048e9 B. Counting x read and written in full gives 2.097e9 B instead.

run_kernel zeroes loss and launches the library's own @triton.jit kernel with the arguments its launcher
(liger_kernel.ops.cross_entropy.cross_entropy_forward) passes, except BLOCK_SIZE and num_warps, which are the
tunables; the launcher's own choice at SHAPE is DEFAULT_CONFIG: BLOCK_SIZE = min(MAX_FUSED_SIZE = 32768,
next_power_of_2(V)) and num_warps = 32 (its rule: 8 only for 2-byte inputs on Blackwell, 16 on ROCm, else 32).
The kernel loops over the row in BLOCK_SIZE chunks, so any power of two is correct.
"""

import torch
import triton
from liger_kernel.ops.cross_entropy import MAX_FUSED_SIZE, liger_cross_entropy_kernel

# A Llama-2 vocabulary (32000), 4 sequences of 2048 tokens: x is 8192 x 32000 fp32 = 1.048 GB.
SHAPE = {"BT": 8192, "V": 32000, "dtype": "float32"}
CPU_SHAPE = {"BT": 16, "V": 1000, "dtype": "float32"}
TUNABLES = {"BLOCK_SIZE": [1024, 2048, 4096, 8192, 16384, 32768], "num_warps": [4, 8, 16, 32]}
# What cross_entropy_forward launches at SHAPE on an NVIDIA GPU (fp32 input): see the docstring.
DEFAULT_CONFIG = {"BLOCK_SIZE": min(MAX_FUSED_SIZE, triton.next_power_of_2(SHAPE["V"])), "num_warps": 32}
COMPUTE_UNIT = "fp32"

IGNORE_INDEX = -100  # the library's default ignore_index
IGNORED_FRACTION = 8  # one row in 8 is ignored (padding / prompt tokens)
_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


def setup(BT, V, dtype="float32", seed=0, device="cuda", **_):
    """Logits x ~ 2·N(0, 1) (BT, V) in ``dtype``; targets (BT,) int64 in [0, V) with BT // 8 rows, chosen at
    random, set to ignore_index; loss (BT,) in ``dtype``; n_non_ignore = BT - BT // 8 (an int)."""
    gen = torch.Generator(device=device).manual_seed(seed)
    x = (2.0 * torch.randn(BT, V, generator=gen, device=device)).to(_DTYPES[dtype])
    target = torch.randint(0, V, (BT,), generator=gen, device=device, dtype=torch.int64)
    ignored = torch.randperm(BT, generator=gen, device=device)[: BT // IGNORED_FRACTION]
    target[ignored] = IGNORE_INDEX
    loss = torch.empty(BT, device=device, dtype=_DTYPES[dtype])
    inputs = {"x": x, "target": target, "loss": loss, "n_non_ignore": BT - BT // IGNORED_FRACTION}
    return {"inputs": inputs, "outputs": ["loss", "x"], "inplace": ["x"]}


def run_kernel(x, target, loss, n_non_ignore, *, BLOCK_SIZE, num_warps, **_):
    """Zero loss (the launcher's torch.zeros), then launch Liger's kernel, one program per row; writes loss and
    zeroes the ignored rows of x."""
    n_rows, n_cols = x.shape
    loss.zero_()
    liger_cross_entropy_kernel[(n_rows,)](
        X_ptr=x, X_stride=x.stride(-2), Y_ptr=target, Y_stride=target.stride(-1), weight_ptr=None,
        loss_ptr=loss, z_loss_ptr=None, loss_stride=loss.stride(-1),
        token_accuracy_ptr=None, token_accuracy_stride=0, predicted_tokens_ptr=None, predicted_tokens_stride=0,
        n_cols=n_cols, n_non_ignore=n_non_ignore, sum_non_ignore_weight=n_non_ignore, ignore_index=IGNORE_INDEX,
        weight_sum=0.0, lse_square_scale=0.0, label_smoothing=0.0, reduction="mean", softcap=None,
        RETURN_Z_LOSS=False, RETURN_TOKEN_ACCURACY=False, RETURN_PREDICTED_TOKENS=False,
        BLOCK_SIZE=BLOCK_SIZE, HAS_WEIGHT=False, HAS_SOFTCAPPING=False, HAS_GRADIENTS=False,
        num_warps=num_warps,
    )


def reference(x, target, loss, n_non_ignore, **_):
    """(loss, x) as the kernel leaves them: loss[r] = (logsumexp(x[r]) - x[r, target[r]]) / n_non_ignore for a
    kept row, 0 for an ignored one; x with the ignored rows zeroed and the others unchanged. ``x`` here holds the
    values before the launch (the checker passes a float64 copy of the pristine x)."""
    kept = target != IGNORE_INDEX
    lse = torch.logsumexp(x, dim=-1)
    picked = x.gather(1, torch.where(kept, target, 0).unsqueeze(1)).squeeze(1)
    row_loss = torch.where(kept, (lse - picked) / n_non_ignore, torch.zeros_like(lse))
    return row_loss, x.masked_fill(~kept.unsqueeze(1), 0.0)
