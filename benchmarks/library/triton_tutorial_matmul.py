"""Triton's matrix-multiplication tutorial (python/tutorials/03-matrix-multiplication.py): C = A @ B, fp16.

A (M, K) and B (K, N) fp16, row-major; C (M, N) fp16 from an fp32 accumulator (``tl.dot``), tiles of
BLOCK_SIZE_M x BLOCK_SIZE_N per program in grouped (GROUP_SIZE_M) order. The kernel is the tutorial's
``@triton.autotune`` ``matmul_kernel``, launched unmodified with the arguments of the tutorial's launcher
``matmul(a, b)`` (``ACTIVATION=""``); its autotune config list (16 configs on CUDA: 8 for fp16, 8 "good for fp8")
is kernelpilot's search space and its first config the starting point. No TUNABLES.

The tutorial is third-party code, not committed here: it is read from
third_party/triton_tutorials/03-matrix-multiplication.py (see benchmarks/library/README.md for the commit and how
to place it), or from the path in the environment variable KP_TRITON_TUTORIAL_MATMUL.

Importing the tutorial file as it is would run its unit test and its whole benchmark (``benchmark.run(...)`` at
top level: 31 sizes x 2 dtypes x 16 autotuned configs, minutes on a GPU, and matplotlib). So the wrapper imports
its definitions part, ``03-matrix-multiplication.defs.py`` next to it: the tutorial's lines before its
"# Unit Test" section (imports, DEVICE, the config lists, ``matmul_kernel``, ``leaky_relu``, the launcher
``matmul``), cut by ``sed '/^# Unit Test$/,$d'`` (README). At import the wrapper checks that the defs file is
exactly that prefix of the placed tutorial file, so nothing in it is edited.

GPU only: the tutorial asks Triton's GPU driver at import (``DEVICE = ...get_active_torch_device()``, and
``is_cuda()`` to choose the CUDA or HIP config list); under the interpreter (no GPU) Triton has no active driver,
and a kernel file must not replace the driver (kernelpilot's static screen refuses patched modules). The kernel
itself is interpretable (checked by hand at a small shape with a stand-in driver; see the README).
"""

import importlib.util
import os
import sys
from pathlib import Path

import torch
import triton

_DEFAULT = Path(__file__).resolve().parents[2] / "third_party" / "triton_tutorials" / "03-matrix-multiplication.py"
_PATH = Path(os.environ.get("KP_TRITON_TUTORIAL_MATMUL", _DEFAULT))
_DEFS = _PATH.with_suffix(".defs.py")  # the tutorial's lines before "# Unit Test" (see the docstring)
_CUT_AT = "# Unit Test\n"

# The tutorial's square fp16 benchmark size (its x_vals go up to 4096 in steps of 128).
SHAPE = {"M": 4096, "N": 4096, "K": 4096}
COMPUTE_UNIT = "fp16_tensor"
# no SHAPE_RULES: the kernel wraps rows and columns (offs % M, offs % N) and masks K and the store, any size is right


def _load_tutorial():
    """The tutorial's definitions as a module (ImportError: a file missing, the defs file not the tutorial's
    prefix up to "# Unit Test", or no GPU)."""
    for path in (_PATH, _DEFS):
        if not path.is_file():
            raise ImportError(f"triton_tutorial_matmul: {path} is not there; place Triton's tutorial and cut its "
                              "definitions part (benchmarks/library/README.md says which commit and how)")
    full, defs = _PATH.read_text(), _DEFS.read_text()
    if not (full.startswith(defs) and full[len(defs):].startswith(_CUT_AT)):
        raise ImportError(f"triton_tutorial_matmul: {_DEFS} is not {_PATH} up to its {_CUT_AT!r} line: cut it "
                          f"again with sed '/^# Unit Test$/,$d' (README)")
    if not torch.cuda.is_available():
        raise ImportError("triton_tutorial_matmul: the tutorial queries the GPU driver at import (DEVICE, is_cuda()), "
                          "which the Triton interpreter does not have: run on a GPU")
    name = "kp_triton_tutorial_matmul"
    spec = importlib.util.spec_from_file_location(name, _DEFS)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


_tutorial = _load_tutorial()
matmul_kernel = _tutorial.matmul_kernel  # the only @triton.autotune kernel bound here: kernelpilot tunes its configs


def setup(M, N, K, seed=0, device="cuda", **_):
    """A (M, K) and B (K, N) ~ U(-0.5, 0.5) fp16 (the tutorial's test distribution), C (M, N) fp16 uninitialized."""
    gen = torch.Generator(device=device).manual_seed(seed)
    a = (torch.rand(M, K, generator=gen, device=device) - 0.5).half()
    b = (torch.rand(K, N, generator=gen, device=device) - 0.5).half()
    return {"inputs": {"a": a, "b": b, "c": torch.empty(M, N, device=device, dtype=torch.float16)},
            "outputs": ["c"]}


def run_kernel(a, b, c, **_):
    """Launch ``matmul_kernel`` as the tutorial's ``matmul(a, b)`` does (1-D grid of C tiles, ACTIVATION="");
    writes c. Raises ValueError on shapes that do not chain or a non-contiguous A (the launcher's asserts)."""
    M, K = a.shape
    K2, N = b.shape
    if K != K2 or c.shape != (M, N):
        raise ValueError(f"triton_tutorial_matmul: a {tuple(a.shape)} @ b {tuple(b.shape)} -> c {tuple(c.shape)}")
    if not a.is_contiguous():
        raise ValueError("triton_tutorial_matmul: the tutorial's launcher requires a contiguous A")
    grid = lambda META: (triton.cdiv(M, META["BLOCK_SIZE_M"]) * triton.cdiv(N, META["BLOCK_SIZE_N"]),)  # noqa: E731
    matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                        c.stride(1), ACTIVATION="")


def reference(a, b, c, **_):
    """A @ B (torch.matmul: cuBLAS on the GPU) in the inputs' dtype."""
    return torch.matmul(a, b)


def flops(M, N, K, **_):
    """FLOPs: one multiply and one add per (m, n, k)."""
    return 2 * M * N * K


def bytes_moved(M, N, K, **_):
    """Bytes: A and B read once, C written once, fp16."""
    return (M * K + K * N + M * N) * 2
