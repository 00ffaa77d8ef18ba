"""The reference process forked from a worker that already ran parallel CPU work (OpenMP, torch's intra-op pool)
answers: a fork inherits the pool's state but not its threads, and its first parallel op hung (a float64 upcast,
seen in a CI run of tests/test_check_memory.py under xdist, where the worker had run other test files first)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCENARIO = """
import hashlib, sys
from pathlib import Path
import torch
torch.set_num_threads(2)
from kernelpilot.measure import refproc, settings
if sys.argv[2] == "installed":
    settings.install()  # as a worker does before any kernel file: the fork puts this capture back (2 threads)
torch.rand(20_000_000).to(torch.float64)  # the intra-op pool is running in this process before the fork
path = Path(sys.argv[1])
server = refproc.ReferenceProcess(path, hashlib.sha256(path.read_bytes()).hexdigest(), "cpu", method="fork")
x = torch.rand(4_000_000)
got, why = server.outputs({"x": x, "out": torch.empty_like(x)}, ["out"])
assert torch.equal(got["out"], torch.relu(x).double()), why
server.close()
print("answered")
"""


@pytest.mark.parametrize("capture", ["installed", "not_installed"])
def test_a_forked_reference_process_answers_after_the_worker_ran_parallel_cpu_work(tmp_path: Path,
                                                                                   capture: str) -> None:
    # "installed": the worker's capture of torch's settings, which the fork puts back, holds 2 threads; putting
    # it back undid the fork's one thread, and the server hung in CI (session 11)
    ref = tmp_path / "ref.py"
    ref.write_text("import torch\n\n\ndef reference(x, out):\n    out.copy_(torch.relu(x))\n    return {'out': out}\n")
    script = tmp_path / "scenario.py"
    script.write_text(SCENARIO)
    try:
        proc = subprocess.run([sys.executable, str(script), str(ref), capture], capture_output=True, text=True,
                              timeout=120)
    except subprocess.TimeoutExpired:
        raise AssertionError("the forked reference process hung in its first parallel CPU op") from None
    assert proc.returncode == 0 and "answered" in proc.stdout, proc.stderr[-2000:]


ORPHANED = """
import hashlib, os, sys, time
from pathlib import Path
import torch
real = torch.set_num_threads
def slow(n):  # the server is slow to start (a loaded host): its worker dies before the server follows it
    time.sleep(1.5)
    real(n)
torch.set_num_threads = slow
from kernelpilot.measure import refproc
path = Path(sys.argv[1])
server = refproc.ReferenceProcess(path, hashlib.sha256(path.read_bytes()).hexdigest(), "cpu", method="fork")
Path(sys.argv[2]).write_text(str(server.proc.pid))
os._exit(0)  # killed right after it forked the server, as a refused worker is
"""


def test_a_reference_process_whose_worker_died_before_it_started_exits(tmp_path: Path) -> None:
    """A CI run's ``check vector_add.cu --json`` on a CPU host printed its refusal and then held its caller 600 s: the
    worker, killed right after it refused the file, had forked its reference server a moment before; the server
    armed its parent-death signal after the worker was gone and waited on a pipe whose other end it held itself.
    Here the worker exits at once and the server is slow to start: the server must be gone within seconds, and
    the worker's caller must see EOF on the output the server inherited."""
    import os
    import time

    ref = tmp_path / "ref.py"
    ref.write_text("import torch\n\n\ndef reference(x, out):\n    out.copy_(torch.relu(x))\n    return {'out': out}\n")
    script, pid_file = tmp_path / "orphaned.py", tmp_path / "server.pid"
    script.write_text(ORPHANED)
    try:  # run() reads stdout and stderr to EOF: a server alive with the worker's stderr holds it
        subprocess.run([sys.executable, str(script), str(ref), str(pid_file)], capture_output=True, timeout=60)
    except subprocess.TimeoutExpired:
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), 9)
        raise AssertionError("the orphaned reference server held the worker's output open") from None
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.kill(pid, 9)
    raise AssertionError(f"the reference server {pid} outlived its worker by 10 s")


SWITCHED = """
import hashlib, sys
from pathlib import Path
import torch
from kernelpilot.measure import refproc, settings
settings.install()  # the worker's capture, before any kernel file
torch.set_default_dtype(torch.float64)  # a file imported in the worker (a .cu sidecar) switched it, not yet put back
path = Path(sys.argv[1])
server = refproc.ReferenceProcess(path, hashlib.sha256(path.read_bytes()).hexdigest(), "cpu", method="fork")
x = torch.rand(8, dtype=torch.float32)
got, why = server.outputs({"x": x, "out": torch.empty_like(x)}, ["out"])
assert got is not None, why
server.close()
print("answered")
"""


def test_a_reference_process_forked_after_a_switch_computes_under_the_workers_capture(tmp_path: Path) -> None:
    """A server forked after a file changed a switch puts back the worker's capture, not the switched state."""
    ref = tmp_path / "ref.py"
    ref.write_text("import torch\n\n\ndef reference(x, out):\n    assert torch.get_default_dtype() == torch.float32, "
                   "'computed under the switched default dtype'\n    out.copy_(x)\n    return {'out': out}\n")
    script = tmp_path / "scenario.py"
    script.write_text(SWITCHED)
    proc = subprocess.run([sys.executable, str(script), str(ref)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "answered" in proc.stdout, proc.stderr[-2000:]
