"""The reference process forked from a worker that already ran parallel CPU work (OpenMP, torch's intra-op pool)
answers: a fork inherits the pool's state but not its threads, and its first parallel op hung (a float64 upcast,
seen in a CI run of tests/test_check_memory.py under xdist, where the worker had run other test files first)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCENARIO = """
import hashlib, sys
from pathlib import Path
import torch
torch.set_num_threads(2)
torch.rand(20_000_000).to(torch.float64)  # the intra-op pool is running in this process before the fork
from kernelpilot.measure import refproc
path = Path(sys.argv[1])
server = refproc.ReferenceProcess(path, hashlib.sha256(path.read_bytes()).hexdigest(), "cpu", method="fork")
x = torch.rand(4_000_000)
got, why = server.outputs({"x": x, "out": torch.empty_like(x)}, ["out"])
assert torch.equal(got["out"], torch.relu(x).double()), why
server.close()
print("answered")
"""


def test_a_forked_reference_process_answers_after_the_worker_ran_parallel_cpu_work(tmp_path: Path) -> None:
    ref = tmp_path / "ref.py"
    ref.write_text("import torch\n\n\ndef reference(x, out):\n    out.copy_(torch.relu(x))\n    return {'out': out}\n")
    script = tmp_path / "scenario.py"
    script.write_text(SCENARIO)
    try:
        proc = subprocess.run([sys.executable, str(script), str(ref)], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        raise AssertionError("the forked reference process hung in its first parallel CPU op") from None
    assert proc.returncode == 0 and "answered" in proc.stdout, proc.stderr[-2000:]
