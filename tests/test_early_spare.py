"""The spare worker boots while the campaign's own process imports the kernel file, when the shape it will run at
can be read from the file's source (session 14, H100: fla-core's l2norm and Liger's RoPE took 17 s to import in
the campaign's process, then 17 s again in the spare it started afterwards)."""

from __future__ import annotations

import textwrap
import time
from pathlib import Path

import pytest

from kernelpilot.api import bundled_example
from kernelpilot.app.context import prepare
from kernelpilot.kernels.contract import literal_shape

SLEEP_S = 6.0


def _file(tmp_path: Path, head: str, shape_line: str | None = None) -> Path:
    text = bundled_example("vector_add").read_text()
    if shape_line is not None:
        text = text.replace('CPU_SHAPE = {"N": 4096, "dtype": "float32"}', shape_line)
    path = tmp_path / "slow_add.py"
    path.write_text(head + text)
    return path


def test_the_shape_is_read_from_literals_and_small_integer_arithmetic_only(tmp_path):
    va = bundled_example("vector_add")
    assert literal_shape(va, False) == {"N": 2**26, "dtype": "float32"}, "2**26 is folded"
    assert literal_shape(va, True) == {"N": 4096, "dtype": "float32"}, "CPU_SHAPE under the interpreter"
    assert literal_shape(va, True, {"N": 64}) == {"N": 64, "dtype": "float32"}
    assert literal_shape(va, True, {"Q": 1}) is None, "an unknown override: resolve_shape says what is wrong"
    computed = _file(tmp_path, "", 'CPU_SHAPE = {"N": int("4096"), "dtype": "float32"}')
    assert literal_shape(computed, True) is None and literal_shape(computed, False) is not None
    huge = _file(tmp_path, "", 'CPU_SHAPE = {"N": 2 ** 10 ** 9, "dtype": "float32"}')
    assert literal_shape(huge, True) is None, "no unbounded power is evaluated"
    assert literal_shape(bundled_example("vector_add").parent / "cuda" / "vector_add.cu", False) is None


def test_the_spare_imports_the_kernel_file_while_this_process_does(tmp_path):
    slow = _file(tmp_path, f"import time\ntime.sleep({SLEEP_S})\n")
    t0 = time.monotonic()
    ctx = prepare(slow, spare_worker=True)
    try:
        assert ctx.spare is not None and ctx.spare.opts.shape == ctx.shape
        assert ctx.setup_s["load"] >= SLEEP_S, ctx.setup_s
        # the spare slept in its own import meanwhile: observing the roles does not wait for a second sleep
        assert ctx.setup_s["roles"] < SLEEP_S * 0.8, ctx.setup_s
        assert time.monotonic() - t0 < 2 * SLEEP_S + ctx.setup_s["flops"] + 1.0
    finally:
        ctx.discard_spare()


@pytest.mark.parametrize("shape_line, override", [('CPU_SHAPE = {"N": int("4096"), "dtype": "float32"}', None),
                                                  (None, {"N": 2048})])
def test_a_shape_unknown_before_the_import_or_overridden_still_gets_a_spare_at_the_resolved_shape(
        tmp_path, shape_line, override):
    path = _file(tmp_path, "", shape_line)
    ctx = prepare(path, shape=override, spare_worker=True)
    try:
        assert ctx.spare is not None and ctx.spare.opts.shape == ctx.shape
        assert ctx.shape["N"] == (override or {}).get("N", 4096)
    finally:
        ctx.discard_spare()


def test_the_roles_are_observed_while_this_process_builds_the_case_and_counts_the_flops(tmp_path):
    """``setup`` sleeps: once here (the case on the CPU, for the FLOPs and bytes) and once in the spare (the roles'
    case). One after the other they cost two sleeps; observed in the background, about one."""
    slow = tmp_path / "slow_setup_add.py"
    slow.write_text(bundled_example("vector_add").read_text() + textwrap.dedent(f"""

        _setup = setup


        def setup(*args, **kwargs):
            import time
            time.sleep({SLEEP_S})
            return _setup(*args, **kwargs)
    """))
    ctx = prepare(slow, spare_worker=True)
    try:
        laps = ctx.setup_s
        assert laps["case"] >= SLEEP_S, laps
        assert laps["roles"] < SLEEP_S * 0.5, laps  # the spare's own sleep ran beside this process's
        assert ctx.spare is not None
    finally:
        ctx.discard_spare()
