"""Sidecar of sgemm_db.cu: fp32 GEMM inputs, reference, shape, and the tile defines as tunables."""
import torch

SHAPE = {"M": 4096, "N": 4096, "K": 4096}
CHECK_SHAPES = [{"M": 1024, "N": 512, "K": 256}]  # multiples of every tile below
SHAPE_RULES = {"M": "BM", "N": "BN", "K": "BK"}   # no bounds checks: right at multiples of the config's tile only
TUNABLES = {"BM": [64, 128], "BN": [64, 128], "BK": [8, 16, 32], "TM": [4, 8], "TN": [4, 8], "DOUBLE_BUFFER": [1, 0]}
DEFAULT_CONFIG = {"BM": 64, "BN": 64, "BK": 16, "TM": 4, "TN": 4, "DOUBLE_BUFFER": 1}
# a block of 32 to 1024 threads. Static shared memory reaches 64 KiB (BM = BN = 128, BK = 32, double buffered):
# nvcc 13 builds it for sm_90 and it runs on an H100/H200; a config the GPU's shared memory cannot hold is pruned
CONSTRAINTS = ["(BM // TM) * (BN // TN) <= 1024", "(BM // TM) * (BN // TN) >= 32"]
THREADS_PER_BLOCK = "(BM // TM) * (BN // TN)"
TILE = ("BM", "BN", "BK")        # read by `kernelpilot pipeline`
STAGES = "2 if DOUBLE_BUFFER else 1"
atol, rtol = 1e-3, 1e-3


def setup(M, N, K, seed=0, device="cuda"):
    # drawn on the device: on a 2-core CPU the two 4096^2 draws took 0.35 s, and a check draws them once per seed
    # for every config (session 13: the check of one sgemm evaluation took 0.66-1.36 s on an H200)
    g = torch.Generator(device=device).manual_seed(seed)
    a = torch.randn(M, K, generator=g, device=device)
    b = torch.randn(K, N, generator=g, device=device)
    return {"inputs": {"A": a, "B": b, "C": torch.empty(M, N, device=device), "M": M, "N": N, "K": K},
            "outputs": ["C"]}


def reference(A, B, C, M, N, K, **_):
    return A @ B


def flops(M, N, K, **_):
    return 2 * M * N * K
