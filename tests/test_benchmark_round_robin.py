"""The round-robin benchmark of optimize's final (report/benchmark.py): the kernel's launches timed beside eager are
checked as every timed launch is, so a kernel that is right while checked and does less in the final's timing gets
no time there (the ratio to torch.compile printed from it would be a lie)."""

from __future__ import annotations

from pathlib import Path

from kernelpilot.kernels.contract import load_kernel
from kernelpilot.report.benchmark import run_benchmark
from kernelpilot.target import Target

ROOT = Path(__file__).resolve().parents[1]
CHEAT = ROOT / "tests" / "adversarial" / "cheats" / "calls_since_setup.py"
HONEST = ROOT / "src" / "kernelpilot" / "examples" / "softmax.py"


def test_a_kernel_that_does_less_after_its_checked_calls_gets_no_time_in_the_round_robin(tmp_path):
    # the adversarial suite's call counter, wrong from its second call after setup on: every timed launch is wrong,
    # so whichever launches the secret reservoir keeps, the check sees one
    cheat = tmp_path / "calls_since_setup_1.py"
    cheat.write_text(CHEAT.read_text().replace('_since_setup["calls"] > 5', '_since_setup["calls"] > 1'))
    kf = load_kernel(cheat, None, interpreted=True)
    bench = run_benchmark(kf, dict(kf.cpu_shape), {"num_warps": 4}, Target.cpu())
    kernel, eager = bench.rows[0], bench.rows[1]
    assert kernel.timing is None and kernel.skipped.startswith("wrong_when_timed"), kernel
    assert eager.timing is not None and "round-robin" in eager.note
    assert set(bench.baselines_ns) == {"PyTorch eager (reference)"}


def test_an_honest_kernel_is_timed_round_robin_beside_eager():
    kf = load_kernel(HONEST, None, interpreted=True)
    bench = run_benchmark(kf, dict(kf.cpu_shape), dict(kf.default_config), Target.cpu())
    assert all(r.timing is not None and "round-robin" in r.note for r in bench.rows[:2])
    assert bench.rows[0].timing.n_samples == bench.rows[1].timing.n_samples >= 3
    assert bench.rows[2].timing is None and "no GPU" in bench.rows[2].skipped
    assert bench.round_robin
