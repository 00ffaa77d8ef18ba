"""Does kernelpilot read KernelBench's real problem files? A coverage probe, not a solution.

For each problem named (``level1/23``, ``level2/all``), scaled down as check_small.py scales it, a temporary
"solution" is written whose ``ModelNew`` is the problem's own ``Model`` (a subclass: the same constructor, the same
parameters under KernelBench's seed) plus one launch of a no-op Triton kernel, and ``kernelpilot check`` runs on
the pair under the interpreter. A problem that fails names what the reader (``kernels/kernelbench.py``,
``backends/kernelbench.py``) or the scaling could not handle; a pass says inputs, init inputs, outputs and the
float64 reference were read as KernelBench reads them.

Note: these probe "solutions" pass ``check`` while computing with the reference's own ops — the limit written in
docs/kernelbench.md ("a solution may launch its own kernel on the side and still return a library op's result; the
launch count accepts it"). Never use them as solutions.

Usage: ``python3 benchmarks/kernelbench/probe_reader.py [--problems DIR] level1/19 level2/all ...``
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_small import DEFAULT_PROBLEMS, check_one, scale_source  # noqa: E402

PROBE = '''

import triton as _probe_triton
import triton.language as _probe_tl


@_probe_triton.jit
def _probe_noop_kernel(p):
    _probe_tl.store(p + _probe_tl.arange(0, 16), _probe_tl.zeros((16,), _probe_tl.float32))


class ModelNew(Model):
    def forward(self, *args):
        dev = next((a.device for a in args if isinstance(a, torch.Tensor)), torch.device("cpu"))
        _probe_noop_kernel[(1,)](torch.empty(16, device=dev))
        return super().forward(*args)
'''


def main(argv: list[str] | None = None) -> int:
    """Print one row per problem: its name, the check's status and the first 200 characters of its summary."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", type=Path, default=DEFAULT_PROBLEMS)
    ap.add_argument("--budget", type=int, default=4096)
    ap.add_argument("names", nargs="+", help="level1/23, level2/all, ...")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="kb_probe_") as tmp:
        for name in args.names:
            level, pid = name.split("/")
            pattern = "*.py" if pid == "all" else f"{pid}_*.py"
            for problem in sorted((args.problems / level).glob(pattern), key=lambda p: int(p.name.split("_")[0])):
                source, _ = scale_source(problem.read_text(encoding="utf-8"), args.budget)
                small = Path(tmp) / level / problem.name
                small.parent.mkdir(parents=True, exist_ok=True)
                small.write_text(source, encoding="utf-8")
                probe = small.with_name("probe_" + problem.name)
                probe.write_text(source + PROBE, encoding="utf-8")
                result = check_one(probe, small, 600)
                print(f"{level}/{problem.name:60s} {result['status']:22s} {result['detail'][:200]!r}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
