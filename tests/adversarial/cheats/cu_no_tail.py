"""Sidecar of cu_no_tail.cu: inputs, reference, the BLOCK_SIZE tunable and CHECK_SHAPES that are multiples of it."""
import torch

SHAPE = {"N": 1 << 24}
CPU_SHAPE = {"N": 4096}
TUNABLES = {"BLOCK_SIZE": [128, 256, 512]}
THREADS_PER_BLOCK = "BLOCK_SIZE"
CHECK_SHAPES = [{"N": 3 << 20}, {"N": 5 << 9}]  # multiples of every BLOCK_SIZE: the tail never shows


def setup(N, seed=0, device="cuda"):
    """Seeded x, y ~ N(0, 1) and an uninitialized out."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(N, generator=g).to(device)
    y = torch.randn(N, generator=g).to(device)
    return {"inputs": {"x": x, "y": y, "out": torch.empty_like(x), "N": N}, "outputs": ["out"]}


def reference(x, y, out, N, **_):
    """1.5 * x + y."""
    return 1.5 * x + y


def flops(N, **_):
    return 2 * N


def bytes_moved(N, **_):
    return 3 * N * 4
