"""``kernelpilot bundle bench BUNDLE KERNEL`` (GPU): the bundle against the JIT kernel at the same config and shape.

For every entry: the kernel file's ``setup`` at the entry's shape on the GPU, the JIT ``run_kernel`` at the entry's
config and the bundle's launch on identical inputs; the outputs must be bit-identical (``torch.equal``); both are
timed with kernelpilot's CUDA-event timer; and the bundle's load time (manifest, hashes, checks) is reported.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from kernelpilot.errors import ContractError, ToolMissingError
from kernelpilot.target import Target

__all__ = ["BundleBench", "BundleBenchEntry", "bench_bundle"]


class BundleBenchEntry(BaseModel):
    """One entry: its shape and config, whether every output equals the JIT's bit for bit (``identical``, and the
    names that differ), and the median launch time of each side in ns with the ratio bundle / JIT."""

    shape: dict[str, Any]
    config: dict[str, Any]
    identical: bool
    differing_outputs: list[str]
    jit_median_ns: float
    bundle_median_ns: float
    ratio: float


class BundleBench(BaseModel):
    """``kernelpilot bundle bench``: load time (s: manifest, hashes, arch and driver checks; module load happens at
    the first call, inside ``first_call_s``) and one :class:`BundleBenchEntry` per entry; ``ok`` when all match."""

    bundle: str
    kernel: str
    load_s: float
    first_call_s: float
    ok: bool
    entries: list[BundleBenchEntry]


def bench_bundle(bundle: str | Path, kernel: str | Path) -> BundleBench:
    """Compare a bundle with its kernel file's JIT kernel on this GPU (see the module docstring).

    Raises:
        ToolMissingError: no GPU (or no CUDA driver). BundleError: the bundle cannot load here.
        ContractError: the kernel file is not the one the bundle was built from (its name differs).
    """
    import torch

    if not torch.cuda.is_available():
        raise ToolMissingError("bundle bench needs a GPU (it runs the JIT kernel and the bundle)",
                               "run `kernelpilot bundle verify` for the checks that need no GPU")
    from kernelpilot.bundle.load import load
    from kernelpilot.kernels.contract import load_kernel, make_case, run_kernel
    from kernelpilot.measure.timing import time_callable

    t0 = time.perf_counter()
    bk = load(bundle)
    load_s = time.perf_counter() - t0
    if Path(kernel).name != bk.manifest.kernel:
        raise ContractError(f"{kernel}: the bundle was built from {bk.manifest.kernel}",
                            f"pass the kernel file {bk.manifest.kernel}")
    kf = load_kernel(kernel)
    rows, first_call_s = [], 0.0
    for i, e in enumerate(bk.entries):
        jit_case = make_case(kf, e.shape, 0, "cuda")
        bun_case = make_case(kf, e.shape, 0, "cuda")
        run_kernel(kf, jit_case.inputs, e.config)
        t1 = time.perf_counter()
        bk(**bun_case.inputs)
        torch.cuda.synchronize()
        if i == 0:
            first_call_s = time.perf_counter() - t1
        differ = [o for o in jit_case.outputs if not torch.equal(jit_case.inputs[o], bun_case.inputs[o])]
        jit_t = time_callable(lambda: run_kernel(kf, jit_case.inputs, e.config), Target.gpu())
        bun_t = time_callable(lambda: bk(**bun_case.inputs), Target.gpu())
        rows.append(BundleBenchEntry(shape=e.shape, config=e.config, identical=not differ, differing_outputs=differ,
                                     jit_median_ns=jit_t.median_ns, bundle_median_ns=bun_t.median_ns,
                                     ratio=bun_t.median_ns / jit_t.median_ns if jit_t.median_ns else 0.0))
    return BundleBench(bundle=str(bundle), kernel=str(kernel), load_s=round(load_s, 6),
                       first_call_s=round(first_call_s, 6), ok=all(r.identical for r in rows), entries=rows)
