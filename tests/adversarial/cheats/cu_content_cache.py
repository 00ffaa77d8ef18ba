"""Sidecar of cu_content_cache.cu: inputs, reference, shapes and the work (2MNK FLOPs: the floor that catches it)."""
import torch

SHAPE = {"M": 2048, "N": 2048, "K": 2048}
CPU_SHAPE = {"M": 32, "N": 48, "K": 40}
TUNABLES = {"TILE": [16]}
COMPUTE_UNIT = "fp32"


def setup(M, N, K, seed=0, device="cuda"):
    """Seeded A (M x K), B (K x N) ~ N(0, 1) in float32 and an uninitialized C."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    A = torch.randn(M, K, generator=g).to(device)
    B = torch.randn(K, N, generator=g).to(device)
    return {"inputs": {"A": A, "B": B, "C": torch.empty(M, N, device=device), "M": M, "N": N, "K": K},
            "outputs": ["C"]}


def reference(A, B, C, M, N, K, **_):
    """A @ B."""
    return A @ B


def flops(M, N, K, **_):
    return 2 * M * N * K


def bytes_moved(M, N, K, **_):
    return (M * K + K * N + M * N) * 4
