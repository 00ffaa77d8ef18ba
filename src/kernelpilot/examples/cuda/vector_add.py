"""Sidecar of vector_add.cu: inputs, reference, shape and the BLOCK_SIZE tunable (a -D define)."""
import torch

SHAPE = {"N": 1 << 24}
TUNABLES = {"BLOCK_SIZE": [128, 256, 512, 1024]}
THREADS_PER_BLOCK = "BLOCK_SIZE"  # for the occupancy of `inspect` (an expression over the tunables)


def setup(N, seed=0, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)  # drawn where they are used (see sgemm_db.py)
    a = torch.randn(N, generator=g, device=device)
    b = torch.randn(N, generator=g, device=device)
    return {"inputs": {"a": a, "b": b, "c": torch.empty_like(a), "N": N}, "outputs": ["c"]}


def reference(a, b, c, N, **_):
    return a + b


def bytes_moved(N, **_):
    return 3 * 4 * N
