"""Every command runs the kernel file in an isolated worker: a kernel that exits, segfaults, hangs or raises gives a
typed failure, a non-zero exit and one JSON error object (``--json``) or ``error:``/``hint:`` lines on stderr, never
exit 0 without a result (issue 10). CPU only: kernels run under the Triton interpreter, static inspection compiles
for sm_90 without a GPU."""

from __future__ import annotations

import json
import signal

import pytest
from typer.testing import CliRunner

from conftest import EXAMPLES
from kernelpilot.cli import app

runner = CliRunner()

EXIT_AT_IMPORT = "import sys\nsys.exit(0)\n"
#: run_kernel bodies that misbehave (BODY of conftest.TORCH_KERNEL).
EXIT_IN_RUN = "import sys; sys.exit(0)"
SEGFAULT = "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"  # a crash the static screen lets through
OS_EXIT = "import os; os._exit(3)"
HANG = "while True: pass"


def invoke_json(*args: str) -> tuple[int, dict]:
    """Run the CLI with --json; stdout must be exactly one JSON object."""
    result = runner.invoke(app, [*args, "--json"])
    assert result.stdout.strip(), f"empty stdout, exit {result.exit_code}: {result.stderr}"
    return result.exit_code, json.loads(result.stdout)


def assert_failed(code: int, data: dict, failure: str, *fragments: str) -> None:
    assert code == 1, data
    assert data["error"] == "KernelFailed" and data["failure"] == failure, data
    assert data["hint"]
    for fragment in fragments:
        assert fragment in data["message"], data["message"]


@pytest.fixture
def evil(write_kernel, tmp_path):
    """Kernel files that misbehave: ``evil("exit_import")`` etc."""

    def make(kind: str):
        if kind == "exit_import":
            return write_kernel(source=EXIT_AT_IMPORT + write_kernel().read_text(), name="exit_import.py")
        body = {"exit_run": EXIT_IN_RUN, "segfault": SEGFAULT, "os_exit": OS_EXIT, "hang": HANG}[kind]
        return write_kernel(body, name=f"{kind}.py")

    return make


# ------------------------------------------------------------------------------------------------------------ check


def test_check_of_a_kernel_that_exits_at_import(evil):
    code, data = invoke_json("check", str(evil("exit_import")), "--timeout-s", "60")
    assert_failed(code, data, "worker_crash", "sys.exit(0)", "importing the kernel file")


def test_check_of_a_kernel_that_exits_in_run_kernel(evil):
    code, data = invoke_json("check", str(evil("exit_run")), "--timeout-s", "60")
    assert_failed(code, data, "worker_crash", "sys.exit(0)", "check")


def test_check_of_a_kernel_that_segfaults_names_the_signal(evil):
    code, data = invoke_json("check", str(evil("segfault")), "--timeout-s", "60")
    assert_failed(code, data, "worker_crash", "SIGSEGV", f"({int(signal.SIGSEGV)})")


def test_check_of_a_kernel_that_calls_os_exit_names_the_exit_code(evil):
    code, data = invoke_json("check", str(evil("os_exit")), "--timeout-s", "60")
    assert_failed(code, data, "worker_crash", "exit code 3")


def test_check_of_a_kernel_that_hangs_times_out(evil):
    code, data = invoke_json("check", str(evil("hang")), "--timeout-s", "5")
    assert_failed(code, data, "timeout", "5 s")


def test_check_human_mode_prints_error_and_hint_on_stderr(evil):
    result = runner.invoke(app, ["check", str(evil("segfault")), "--timeout-s", "60"])
    assert result.exit_code == 1
    assert "error:" in result.stderr and "SIGSEGV" in result.stderr and "hint:" in result.stderr
    assert result.stdout.strip() == ""


def test_a_kernel_that_prints_cannot_corrupt_the_json(write_kernel):
    path = write_kernel("print('{\"passed\": false}'); out.copy_(x + y)")
    code, data = invoke_json("check", str(path), "--seeds", "1")
    assert code == 0 and data["passed"] is True


def test_a_contract_error_in_the_worker_keeps_its_class_and_hint(write_kernel):
    path = write_kernel(source="import torch\nSHAPE = {'N': 4}\n")
    code, data = invoke_json("check", str(path))
    assert code == 1 and data["error"] == "ContractError" and "no `setup` defined" in data["message"] and data["hint"]
    assert "failure" not in data


def test_a_bad_config_in_the_worker_is_still_a_contract_error(write_kernel):
    code, data = invoke_json("check", str(write_kernel()), "--config", "BLOCK=3")
    assert code == 1 and data["error"] == "ContractError" and "BLOCK" in data["message"]


# ------------------------------------------------------------------------------------------------------------ bench


@pytest.mark.parametrize("kind, failure, fragment", [("exit_run", "worker_crash", "sys.exit(0)"),
                                                     ("segfault", "worker_crash", "SIGSEGV"),
                                                     ("hang", "timeout", "no answer within 5 s")])
def test_bench_of_a_misbehaving_kernel_fails_typed(evil, kind, failure, fragment):
    code, data = invoke_json("bench", str(evil(kind)), "--baselines", "--timeout-s", "5" if kind == "hang" else "60")
    assert_failed(code, data, failure, fragment)


def test_bench_of_a_raising_kernel_is_a_typed_runtime_error(write_kernel):
    code, data = invoke_json("bench", str(write_kernel("raise RuntimeError('boom')")))
    assert_failed(code, data, "runtime_error", "RuntimeError", "boom")


def test_bench_with_baselines_still_measures_in_the_worker(write_kernel):
    code, data = invoke_json("bench", str(write_kernel()), "--baselines")
    assert code == 0 and data["timing"]["n_samples"] > 0
    rows = data["baselines"]["rows"]
    assert rows[0]["timing"] == data["timing"]  # the kernel is timed once, not again for the table
    assert rows[1]["name"].startswith("PyTorch eager") and rows[1]["timing"]["n_samples"] > 0


# ---------------------------------------------------------------------------------------------- inspect, pipeline


@pytest.mark.parametrize("kind, failure, fragment", [("exit_import", "worker_crash", "importing the kernel file"),
                                                     ("exit_run", "worker_crash", "sys.exit(0)"),
                                                     ("segfault", "worker_crash", "SIGSEGV"),
                                                     ("hang", "timeout", "no answer within 5 s")])
def test_inspect_of_a_misbehaving_kernel_fails_typed(evil, kind, failure, fragment):
    code, data = invoke_json("inspect", str(evil(kind)), "--shape", "N=64",
                             "--timeout-s", "5" if kind == "hang" else "60")
    assert_failed(code, data, failure, fragment)


def _vector_add_crashing_at(tmp_path, block: int, body: str):
    """The vector_add example with a small space whose run_kernel misbehaves at BLOCK_SIZE == ``block``."""
    src = (EXAMPLES / "vector_add.py").read_text()
    src = src.replace('"BLOCK_SIZE": [128, 256, 512, 1024, 2048, 4096],\n    "num_warps": [1, 2, 4, 8],',
                      '"BLOCK_SIZE": [128, 256, 512],\n    "num_warps": [4],')
    src = src.replace('    grid = (triton.cdiv(N, BLOCK_SIZE),)',
                      f'    if BLOCK_SIZE == {block}:\n        {body}\n    grid = (triton.cdiv(N, BLOCK_SIZE),)')
    assert '"BLOCK_SIZE": [128, 256, 512]' in src and f"BLOCK_SIZE == {block}" in src
    path = tmp_path / "vector_add_evil.py"
    path.write_text(src)
    return path


def test_inspect_all_configs_keeps_the_table_when_one_config_segfaults(tmp_path):
    path = _vector_add_crashing_at(tmp_path, 256, SEGFAULT)
    code, data = invoke_json("inspect", str(path), "--all-configs", "--workers", "1", "--shape", "N=4096",
                             "--timeout-s", "120")
    assert code == 1  # a config's worker died: the kernel file misbehaved
    by_block = {r["config"]["BLOCK_SIZE"]: r for r in data["results"]}
    assert by_block[128]["status"] == "ok" and by_block[512]["status"] == "ok"  # the worker was replaced
    bad = by_block[256]
    assert bad["status"] == "failed" and bad["stage"] == "worker" and bad["failure"] == "worker_crash"
    assert "SIGSEGV" in bad["message"]
    assert data["n_ok"] == 2 and data["n_failed"] == 1


def test_inspect_all_configs_human_table_names_the_failure(tmp_path):
    path = _vector_add_crashing_at(tmp_path, 512, EXIT_IN_RUN)
    result = runner.invoke(app, ["inspect", str(path), "--all-configs", "--workers", "1", "--shape", "N=4096",
                                 "--timeout-s", "120"])
    assert result.exit_code == 1
    assert "worker_crash" in result.stdout and "2 ok, 1 failed" in result.stdout


def test_pipeline_of_a_requested_config_that_exits_fails_typed(tmp_path):
    src = (EXAMPLES / "matmul.py").read_text()
    assert "\ndef run_kernel(" in src
    src = src.replace("\ndef run_kernel(", "\ndef _real_run_kernel(") + (
        "\n\ndef run_kernel(*args, **kwargs):\n    import sys\n    sys.exit(0)\n")
    path = tmp_path / "matmul_exit.py"
    path.write_text(src)
    code, data = invoke_json("pipeline", str(path), "--config", "num_stages=3", "--timeout-s", "60")
    assert_failed(code, data, "worker_crash", "sys.exit(0)")


def test_api_static_space_records_a_hang_per_config(tmp_path):
    from kernelpilot.profile.static import inspect_space

    path = _vector_add_crashing_at(tmp_path, 128, HANG)
    space = inspect_space(path, shape={"N": 4096}, max_workers=1, timeout_s=5)
    stages = [(r.config["BLOCK_SIZE"], r.status, getattr(r, "failure", None)) for r in space.results]
    assert stages == [(128, "failed", "timeout"), (256, "ok", None), (512, "ok", None)]


# ----------------------------------------------------------------------------------------------------------- GPU


@pytest.mark.gpu
@pytest.mark.parametrize("kind, failure, fragment", [("exit_run", "worker_crash", "sys.exit(0)"),
                                                     ("segfault", "worker_crash", "SIGSEGV"),
                                                     ("hang", "timeout", "no answer within 10 s")])
def test_gpu_profile_light_of_a_misbehaving_kernel_fails_typed(evil, kind, failure, fragment):
    code, data = invoke_json("profile", str(evil(kind)), "--light", "--timeout-s", "10" if kind == "hang" else "120")
    assert_failed(code, data, failure, fragment)


@pytest.mark.gpu
def test_gpu_profile_with_ncu_of_a_kernel_that_exits_is_an_error_not_a_traceback(evil, tmp_path):
    code, data = invoke_json("profile", str(evil("exit_run")), "--out", str(tmp_path / "k.ncu-rep"),
                             "--timeout-s", "120")
    assert code == 1 and data["error"] in ("ProfileError", "KernelFailed") and data["message"] and data["hint"]


@pytest.mark.gpu
@pytest.mark.parametrize("command", ["check", "bench"])
def test_gpu_check_and_bench_of_a_segfaulting_kernel_fail_typed(evil, command):
    code, data = invoke_json(command, str(evil("segfault")), "--timeout-s", "120")
    assert_failed(code, data, "worker_crash", "SIGSEGV")


@pytest.mark.gpu
def test_gpu_bench_baselines_run_in_the_worker():
    code, data = invoke_json("bench", str(EXAMPLES / "vector_add.py"), "--baselines", "--shape", "N=1048576")
    assert code == 0 and data["timing"]["is_measurement"]
    names = [r["name"] for r in data["baselines"]["rows"]]
    assert any(n.startswith("torch.compile") for n in names)
    assert all(r["timing"] is not None for r in data["baselines"]["rows"]), data["baselines"]["rows"]
