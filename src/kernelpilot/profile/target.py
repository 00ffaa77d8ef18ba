"""The program Nsight Compute profiles: load the kernel, warm up, then launch once inside an NVTX range.

Run as ``python -m kernelpilot.profile.target SPEC.json`` by :func:`kernelpilot.profile.ncu_run.profile_kernel`.
The warm-up launches (compilation, autotuning, caches) happen outside the range ``kp_profile``; ncu is told to
profile only launches inside it (``--nvtx --nvtx-include kp_profile/``), so exactly the measured launch is
profiled, whatever the kernel is called.
"""

from __future__ import annotations

import json
import sys

NVTX_RANGE = "kp_profile"


def main(argv: list[str]) -> int:
    """Entry point. ``argv[0]``: a JSON file with kernel, ref, shape, config, seed, warmup_launches."""
    import torch

    from kernelpilot.kernels.contract import load_kernel, make_case, run_kernel

    spec = json.loads(open(argv[0]).read())
    kf = load_kernel(spec["kernel"], spec.get("ref"), interpreted=False)
    case = make_case(kf, spec["shape"], spec.get("seed", 0), "cuda")
    for _ in range(int(spec.get("warmup_launches", 3))):
        run_kernel(kf, case.inputs, spec["config"])
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push(NVTX_RANGE)
    run_kernel(kf, case.inputs, spec["config"])
    torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
