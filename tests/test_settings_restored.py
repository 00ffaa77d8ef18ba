"""torch's process-wide switches changed by a kernel file are put back before the reference and the baselines run
(kernelpilot.measure.settings): a file that turns cuDNN off or TF32 on at import would otherwise slow the baselines
or lower the reference's precision, with no change to its kernel."""

from __future__ import annotations

import textwrap
from pathlib import Path

import torch

from kernelpilot.measure import settings

#: A kernel file that changes three switches at import (one through a computed setattr the screen cannot name) and
#: whose reference refuses to run under any of them: a reference or baseline run under the file's settings fails.
KERNEL = '''
import torch
import triton
import triton.language as tl

setattr(torch.backends.cudnn, "enab" + "led", False)
torch.backends.cuda.matmul.allow_tf32 = True
torch.set_float32_matmul_precision("medium")

SHAPE = {"N": 4096}
CPU_SHAPE = {"N": 256}
TUNABLES = {"BLOCK": [128], "num_warps": [4]}


@triton.jit
def _double(x_ptr, y_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < N
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2.0, mask=m)


def setup(N, seed=0, device="cuda", **_):
    gen = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(N, generator=gen, device=device)
    return {"inputs": {"x": x, "y": torch.empty_like(x), "N": N}, "outputs": ["y"]}


def run_kernel(x, y, N, *, BLOCK, num_warps, **_):
    _double[(triton.cdiv(N, BLOCK),)](x, y, N, BLOCK=BLOCK, num_warps=num_warps)


def reference(x, y, N, **_):
    assert torch.backends.cudnn.enabled and not torch.backends.cuda.matmul.allow_tf32, "run under the file's switches"
    assert torch.get_float32_matmul_precision() == "highest", "run under the file's switches"
    return x * 2


def bytes_moved(N, **_):
    return 8 * N


def flops(N, **_):
    return N
'''


def test_a_switch_changed_after_install_is_put_back_and_a_baseline_runs_under_the_installed_ones() -> None:
    before = settings.capture()
    try:
        settings.install()
        torch.backends.cudnn.enabled = False
        torch.backends.cuda.matmul.allow_tf32 = True
        seen = settings.pristine(lambda: (torch.backends.cudnn.enabled, torch.backends.cuda.matmul.allow_tf32))()
        assert seen == (True, False)
        assert any(line.startswith("torch.backends.cudnn.enabled: False -> True") for line in settings.restored())
        assert settings.restore() == []  # nothing differs now
    finally:
        settings.install(before)
        settings.restore()


def test_the_reference_and_the_eager_baseline_run_under_torch_defaults(tmp_path: Path) -> None:
    """verify (reference in its own process, which imports the file) and bench --baselines (eager in the worker)
    both pass with a reference that refuses the file's switches, and the records name what was put back."""
    from kernelpilot import api

    path = tmp_path / "switches.py"
    path.write_text(textwrap.dedent(KERNEL))
    result = api.verify(path)
    assert result.accepted, result.message
    lines = result.records["settings_restored"]
    assert {line.split(":")[0] for line in lines} == {"torch.backends.cudnn.enabled",
                                                      "torch.backends.cuda.matmul.allow_tf32",
                                                      "torch.float32_matmul_precision"}
    bench = api.bench(path, baselines=True)
    eager = next(r for r in bench.baselines.rows if r.name.startswith("PyTorch eager"))
    assert eager.timing is not None and not eager.skipped, eager.skipped


#: A kernel file that changes torch.compile's config at import through computed names (a Dynamo field, and an
#: Inductor variable of the environment read when the config module is imported), and whose reference refuses to
#: run under either: the torch.compile baseline is compiled in the process that imported the file.
COMPILER_KERNEL = KERNEL.replace('''setattr(torch.backends.cudnn, "enab" + "led", False)
torch.backends.cuda.matmul.allow_tf32 = True
torch.set_float32_matmul_precision("medium")''', '''import importlib, os

os.environ["TORCHINDUCTOR_" + "MAX_AUTOTUNE"] = "1"
_dynamo_config = importlib.import_module("torch._dyn" + "amo.config")
setattr(_dynamo_config, "cache_size_" + "limit", 1)''').replace('''    assert torch.backends.cudnn.enabled and not torch.backends.cuda.matmul.allow_tf32, "run under the file's switches"
    assert torch.get_float32_matmul_precision() == "highest", "run under the file's switches"''', '''    import os
    import torch._dynamo.config as dynamo_config
    import torch._inductor.config as inductor_config

    assert dynamo_config.cache_size_limit != 1, "run under the file's Dynamo config"
    assert "TORCHINDUCTOR_MAX_AUTOTUNE" not in os.environ and not inductor_config.max_autotune, "the file's env"''')


def test_compiler_config_and_its_environment_changed_after_install_are_put_back() -> None:
    import os

    from kernelpilot.measure import compiler_config

    settings.install()
    try:
        import torch._dynamo.config as dynamo_config  # captured at install, or by the import watch now

        limit = dynamo_config.cache_size_limit
        setattr(dynamo_config, "cache_size_limit", limit + 7)
        os.environ["TORCHINDUCTOR_MAX_AUTOTUNE"] = "1"
        lines = settings.restore()
        assert dynamo_config.cache_size_limit == limit and "TORCHINDUCTOR_MAX_AUTOTUNE" not in os.environ
        # cache_size_limit is an alias of recompile_limit in newer torch: the line names the field itself
        assert any(line.endswith(f"_limit: {limit + 7} -> {limit}") and line.startswith("torch._dynamo.config.")
                   for line in lines), lines
        assert "os.environ['TORCHINDUCTOR_MAX_AUTOTUNE']: '1' -> None" in lines
        assert compiler_config.restore() == []  # nothing differs now
    finally:
        os.environ.pop("TORCHINDUCTOR_MAX_AUTOTUNE", None)
        settings.restore()


def test_a_kernel_file_changing_the_compiler_config_at_import_is_put_back_before_the_reference(tmp_path: Path) -> None:
    from kernelpilot import api

    path = tmp_path / "compiler_config.py"
    path.write_text(textwrap.dedent(COMPILER_KERNEL))
    result = api.verify(path)
    assert result.accepted, result.message
    names = {line.split(":")[0] for line in result.records["settings_restored"]}
    assert "os.environ['TORCHINDUCTOR_MAX_AUTOTUNE']" in names, names
    assert names & {"torch._dynamo.config.cache_size_limit", "torch._dynamo.config.recompile_limit"}, names


def test_a_kernel_file_that_removes_the_import_watch_is_refused_as_tampering(tmp_path: Path) -> None:
    """Without the watch, a config module imported later is never captured and its fields could be changed unseen:
    removing it is tampering with kernelpilot's instruments, like replacing a timer."""
    from kernelpilot import api

    path = tmp_path / "unwatched.py"
    path.write_text(textwrap.dedent(COMPILER_KERNEL.replace(
        'import importlib, os\n',
        'import importlib, os, sys\n\nsys.meta_path[:] = [f for f in sys.meta_path if "Find" + "er" != type(f).__name__[1:]]\n')))
    result = api.verify(path)
    assert not result.accepted and result.status == "timer_tampered", (result.status, result.message)
    assert "import watch" in result.message


def test_the_quick_check_before_each_baseline_launch_finds_changed_fields_without_comparing_every_field(
        monkeypatch) -> None:
    # the full comparison (get_config_copy of every field) cost 2.3-4.1 ms a launch on an H200 host (session 11);
    # the quick one compares the config's own hash and the fields that hash leaves out, and reads the whole config
    # only of a module where one of those differs
    from kernelpilot.measure import compiler_config

    settings.install()
    try:
        import torch._dynamo.config as dynamo_config
        import torch._inductor.config as inductor_config

        settings.restore()
        copies = []
        real = compiler_config._config_of
        monkeypatch.setattr(compiler_config, "_config_of", lambda m: (copies.append(m.__name__), real(m))[1])
        assert settings.restore(quick=True) == [] and copies == []  # nothing changed: no module read in full
        limit = dynamo_config.cache_size_limit  # left out of Dynamo's hash (compile-ignored): checked one by one
        setattr(dynamo_config, "cache_size_" + "limit", limit + 3)
        autotune = inductor_config.max_autotune  # in Inductor's hash
        setattr(inductor_config, "max_" + "autotune", not autotune)
        lines = settings.restore(quick=True)
        assert dynamo_config.cache_size_limit == limit and inductor_config.max_autotune == autotune
        assert any(line.endswith(f"_limit: {limit + 3} -> {limit}") for line in lines), lines
        assert f"torch._inductor.config.max_autotune: {not autotune!r} -> {autotune!r}" in lines
        assert set(copies) == {"torch._dynamo.config", "torch._inductor.config"}  # only the changed modules
    finally:
        settings.restore()
