"""Sidecar of cu_launch_counter.cu: inputs, reference, shapes and the BLOCK_SIZE tunable."""
import torch

SHAPE = {"M": 4096, "N": 1024}
CPU_SHAPE = {"M": 8, "N": 128}
TUNABLES = {"BLOCK_SIZE": [256, 128]}
THREADS_PER_BLOCK = "BLOCK_SIZE"


def setup(M, N, seed=0, device="cuda"):
    """Seeded x = 4 * N(0, 1) (M x N, float32) and an uninitialized y."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    x = (4.0 * torch.randn(M, N, generator=g)).to(device)
    return {"inputs": {"x": x, "y": torch.empty_like(x), "M": M, "N": N}, "outputs": ["y"]}


def reference(x, y, M, N, **_):
    """Row softmax."""
    return torch.softmax(x, dim=-1)


def flops(M, N, **_):
    return 5 * M * N


def bytes_moved(M, N, **_):
    return 2 * M * N * 4
