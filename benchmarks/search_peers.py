#!/usr/bin/env python3
"""Side by side with the peer tuners (issue 25): time to the same best, on one GPU, in one call, over one space.

Per kernel, one tool after the other, each cold (its own empty Triton, Inductor and kernelpilot caches): kernelpilot
``tune --strategy exhaustive`` and ``optimize``, ``triton.autotune`` over the same config list (Triton kernels),
Kernel Tuner's brute force over the same defines (``.cu``), Inductor ``max-autotune``, PyTorch eager and
``torch.compile`` as reference rows. Every best is timed again by one common timer (``triton.testing.do_bench``
median) for the ratio column. Rows print as they finish; a peer that is missing or fails gets a row saying why.
benchmarks/search_peers.md says how to run it and what each column means.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as dt
import json
import os
import re
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Iterable

#: triton.Config's launch options; every other key of a config is a constexpr of the kernel (Triton 3.x).
TRITON_META = ("num_warps", "num_stages", "num_ctas", "maxnreg")
try:
    from kernelpilot.errors import Interrupted
except ImportError:  # --help still works without kernelpilot
    class Interrupted(Exception):  # type: ignore[no-redef]
        """Stand-in: nothing raises it without kernelpilot."""

try:  # the bundled examples, wherever kernelpilot is imported from (the script may be copied elsewhere to run)
    import kernelpilot as _kp

    EXAMPLES = Path(_kp.__file__).resolve().parent / "examples"
except ImportError:  # --help still works; a run then fails per kernel, saying so
    EXAMPLES = Path(__file__).resolve().parents[1] / "src" / "kernelpilot" / "examples"


@dataclasses.dataclass
class Row:
    """One line of the table (``wall_s``/``t_1pct_s`` in s, ``best_us``/``common_us`` in µs): ``space`` configs
    given (None: not a search), ``measured`` configs timed, ``wall_s`` of the whole call, ``best_us`` by the tool's
    own timer, ``common_us`` of that best by the common timer, ``t_1pct_s`` from the call's start until its best so far
    was within 1 % of its final best, ``ratio`` to the kernel's fastest row; search_peers.md says more."""

    tool: str
    kernel: str
    space: int | None = None
    measured: int | None = None
    wall_s: float | None = None
    best_us: float | None = None
    common_us: float | None = None
    t_1pct_s: float | None = None
    ratio: float | None = None
    config: dict[str, Any] | None = None
    note: str = ""


COLUMNS = ("tool", "kernel", "space", "measured", "wall_s", "best_us", "common_us", "t_1pct_s", "ratio", "note")


def _cell(value: Any) -> str:
    """A value as a table cell."""
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 10 else f"{value:.1f}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def render_row(row: Row) -> str:
    """One markdown table line of ``row`` (None prints as an em dash; floats: 3 decimals under 10, else 1)."""
    return "| " + " | ".join(_cell(getattr(row, c)) for c in COLUMNS) + " |"


def render_table(rows: Iterable[Row]) -> str:
    """The markdown table (header, rule, one line per row) of ``rows``."""
    head = "| " + " | ".join(COLUMNS) + " |\n|" + "---|" * len(COLUMNS)
    return "\n".join([head, *(render_row(r) for r in rows)])


def fill_ratios(rows: list[Row]) -> None:
    """Set each row's ``ratio``: its time (``common_us``, else ``best_us``) over the smallest time among the rows of
    the same kernel; rows without a time keep None."""
    value = lambda r: r.common_us if r.common_us is not None else r.best_us  # noqa: E731

    for kernel in {r.kernel for r in rows}:
        times = [value(r) for r in rows if r.kernel == kernel and value(r) is not None]
        for r in rows:
            if r.kernel == kernel:
                r.ratio = value(r) / min(times) if times and value(r) is not None else None


def time_to_within(trace: list[tuple[float, float]], final: float | None, pct: float = 1.0) -> float | None:
    """The first time of ``trace`` (``(seconds, best-so-far)`` pairs, in time order) whose best-so-far is within
    ``pct`` % of ``final`` (``<= final * (1 + pct / 100)``); None when ``final`` is None or none is."""
    return None if final is None else next((t for t, b in trace if b is not None and b <= final * (1 + pct / 100)),
                                           None)


def running_best(points: Iterable[tuple[float, float | None]]) -> list[tuple[float, float]]:
    """``(seconds, time or None)`` per evaluation, in order -> ``(seconds, best time so far)`` from the first timed."""
    out, best = [], None
    for t, v in points:
        if v is not None and (best is None or v < best):
            best = v
        if best is not None:
            out.append((t, best))
    return out


def cumulative(evaluations: Iterable[Any]) -> list[tuple[float, float]]:
    """A trace derived from evaluations in order (kernelpilot ``Evaluation``s: ``wall_s``, ``ok``,
    ``duration_ns``): their worker seconds summed, against the best correct ``duration_ns`` so far."""
    t, pts = 0.0, []
    for ev in evaluations:
        t += float(ev.wall_s or 0.0)
        pts.append((t, float(ev.duration_ns) if ev.ok else None))
    return running_best(pts)


def triton_configs(configs: Iterable[dict[str, Any]], to_meta: Callable[[dict[str, Any]], dict[str, Any]]) -> list:
    """``triton.Config`` objects for kernelpilot configs: ``num_warps``/``num_stages``/``num_ctas``/``maxnreg`` become
    launch options, the rest go through ``to_meta`` (tunable names -> the jit function's constexprs)."""
    import triton

    out = []
    for cfg in configs:
        launch = {k: cfg[k] for k in TRITON_META if k in cfg}
        out.append(triton.Config(to_meta({k: v for k, v in cfg.items() if k not in TRITON_META}), **launch))
    return out


def kernel_only_source(source: str) -> str:
    """A ``.cu`` file's device code for Kernel Tuner (compiled with NVRTC, which builds no host code): the
    ``cuda_runtime.h`` include and the host ``extern "C" ... solve(...) {...}`` wrapper removed, and ``size_t``
    declared (NVRTC has no ``<stddef.h>``; redeclaring a typedef to the same type is valid C++ where it is built in).
    """
    source = "typedef decltype(sizeof(0)) size_t;\n" + re.sub(r"^\s*#include\s*<cuda_runtime\.h>\s*$", "", source,
                                                             flags=re.M)
    m = re.search(r'extern\s+"C"\s+void\s+solve\s*\(', source)
    if not m:
        return source
    depth, i = 0, source.index("{", m.end())
    for j in range(i, len(source)):
        depth += {"{": 1, "}": -1}.get(source[j], 0)
        if depth == 0:
            return source[:m.start()] + source[j + 1:]
    raise ValueError("unbalanced braces in solve()")


# ------------------------------------------------------------------------------------------------ the kernels


@dataclasses.dataclass
class Case:
    """A kernel of the table and how a peer launches it directly: ``jit`` (the Triton jit function's name),
    ``to_meta(config, shape)`` (tunables -> constexprs), ``grid(shape)``, ``args(inputs)``; ``cu_kernel`` (the
    ``__global__`` name), ``kt_grid(shape)`` (Kernel Tuner's problem_size, grid_div_x, grid_div_y), ``kt_extra``."""

    name: str
    path: Path
    jit: str = ""
    to_meta: Callable | None = None
    grid: Callable | None = None
    args: Callable | None = None
    cu_kernel: str = ""
    kt_grid: Callable | None = None
    kt_extra: tuple[str, ...] = ()


CASES = {
    "softmax": Case("softmax", EXAMPLES / "softmax.py", jit="_softmax_kernel",
                    to_meta=lambda c, s: {"BLOCK_N": c["BLOCK_N"], "ROWS": c["ROWS_PER_PROGRAM"],
                                          "SINGLE_TILE": s["N"] <= c["BLOCK_N"]},
                    grid=lambda s: (lambda meta: (-(-s["M"] // meta["ROWS"]),)),
                    args=lambda i: (i["x"], i["y"], i["M"], i["N"], i["x"].stride(0), i["y"].stride(0))),
    "layer_norm": Case("layer_norm", EXAMPLES / "layer_norm.py", jit="_layer_norm_kernel",
                       to_meta=lambda c, s: {"BLOCK_N": c["BLOCK_N"], "SINGLE_TILE": s["N"] <= c["BLOCK_N"]},
                       grid=lambda s: (lambda meta: (s["M"],)),
                       args=lambda i: (i["x"], i["w"], i["b"], i["y"], i["N"], i["x"].stride(0), i["y"].stride(0),
                                       float(i["eps"]))),
    # No restriction of its own: a 48 KiB cap on static shared memory, given to Kernel Tuner alone until session 13,
    # removed the space's best config (BM = BN = 128, BK = 32, double buffered: 64 KiB, which nvcc 13 builds for
    # sm_90 and which ran correctly on the H200s of docs/device-runs/2026-11-27-s13).
    "sgemm": Case("sgemm", EXAMPLES / "cuda" / "sgemm_db.cu", cu_kernel="sgemm_tiled",
                  kt_grid=lambda s: ((s["N"], s["M"]), ["BN"], ["BM"])),
}


# ------------------------------------------------------------------------------------------------- the peers


@contextlib.contextmanager
def cold(root: Path, tag: str):
    """Fresh, empty caches for one tool: Triton, Inductor, kernelpilot's build/evaluation caches, experience log."""
    base = root / "caches" / tag
    env = {"TRITON_CACHE_DIR": base / "triton", "TORCHINDUCTOR_CACHE_DIR": base / "inductor",
           "KERNELPILOT_CACHE_DIR": base / "kp", "KERNELPILOT_CACHE": base / "kp-evals",
           "KERNELPILOT_EXPERIENCE": base / "experience.db"}
    old = {k: os.environ.get(k) for k in env}
    for k, v in env.items():
        (v.parent if k == "KERNELPILOT_EXPERIENCE" else v).mkdir(parents=True, exist_ok=True)
        os.environ[k] = str(v)
    try:
        yield
    finally:
        for k, v in old.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)


class Progress:
    """A kernelpilot ``log`` callback: every line to ``sink`` and, for search lines, ``(seconds since start,
    incumbent ns)`` into ``trace``."""

    def __init__(self, sink: Any) -> None:
        self.t0, self.trace, self.sink = time.perf_counter(), [], sink

    def __call__(self, line: str) -> None:
        step = getattr(line, "step", None)
        t = time.perf_counter() - self.t0
        if step is not None and step.phase == "search" and step.best_ns is not None:
            self.trace.append((t, float(step.best_ns)))
        self.sink.write(f"{t:8.2f} {line}\n")
        self.sink.flush()


def common_time(fn: Callable[[], Any]) -> float:
    """µs: ``triton.testing.do_bench`` median of ``fn`` (L2 cleared before each launch)."""
    from triton.testing import do_bench

    fn()
    return float(do_bench(fn, return_mode="median")) * 1e3


def version_clock(run: Path, versions: Iterable[Any]) -> list[tuple[float, float]]:
    """The search's own clock of an ``optimize`` run folder: each version ends at its ``vN/config.json``
    ``search_elapsed_s`` (the budget spent when it started) plus its ``wall_s``; against the best accepted median
    so far. Versions without that field (older runs) are left out."""
    pts = []
    for v in sorted(versions, key=lambda v: v.index or 0):
        f = run / f"v{v.index}" / "config.json"
        start = json.loads(f.read_text()).get("search_elapsed_s") if f.is_file() else None
        if start is not None:
            pts.append((float(start) + float(v.wall_s or 0.0), float(v.duration_ns) if v.ok and v.accepted else None))
    return running_best(pts)


def kp_search(kind: str, case: Case, args: Any, log: Any, constraints: list[str], space_size: int) -> Row:
    """kernelpilot ``tune --strategy exhaustive`` (``kind`` "tune") or ``optimize`` at its defaults (``--budget-s``,
    ``--no-profile`` as given), through the Python API, in a cold environment (:func:`cold`)."""
    from kernelpilot import api

    prog, out = Progress(log), Path(args.out) / f"{case.name}-{kind}"
    t0 = time.perf_counter()
    if kind == "tune":
        res = api.tune(case.path, strategy="exhaustive", constraints=constraints or None, out=out, log=prog)
        evs, space, derived = res.evaluations, res.space_size, cumulative(res.evaluations)
        note, how = f"stopped: {res.stopped}; failures {res.failures or {}}", "Σ worker s"
    else:
        opts = {"budget_s": args.budget_s, "constraints": constraints or None,
                **({"profile": False} if args.no_profile else {})}
        res = api.optimize(case.path, out=out, log=prog, **opts)
        evs, space, derived = res.versions, space_size, version_clock(out, res.versions)
        note, how = f"{len(evs)} versions" + ("; no ncu profile" if args.no_profile else ""), "search clock"
    wall, best = time.perf_counter() - t0, res.best
    target = best.duration_ns if best else None
    return Row("kernelpilot tune exhaustive" if kind == "tune" else "kernelpilot optimize", case.name, space,
               sum(e.ok for e in evs), wall, target / 1e3 if target else None,
               t_1pct_s=time_to_within(prog.trace, target), config=best.config if best else None,
               note=f"{note}; {how} to 1 %: {_cell(time_to_within(derived, target))} s")


def _space(kf: Any, constraints: list[str]) -> Any:
    """The space every tool is given: the kernel file's TUNABLES and CONSTRAINTS plus ``constraints`` (no device
    limits: a tool that adds its own shows it in its ``space`` cell)."""
    from kernelpilot.search.space import SearchSpace

    return SearchSpace(kf.tunables, [*kf.constraints, *constraints])


def triton_autotune(case: Case, mod: Any, inputs: dict, shape: dict, configs: list[dict]) -> Row:
    """``triton.autotune`` over ``configs`` on the kernel's own jit function; the first call's wall, then do_bench."""
    import torch
    import triton

    tcfgs = triton_configs(configs, lambda c: case.to_meta(c, shape))
    tuned = triton.autotune(configs=tcfgs, key=["N"])(getattr(mod, case.jit))
    grid, fargs = case.grid(shape), case.args(inputs)
    t0 = time.perf_counter()
    tuned[grid](*fargs)
    torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    timings = getattr(tuned, "configs_timings", None) or {}
    finite = [v for v in timings.values() if min(v if isinstance(v, (list, tuple)) else [v]) < float("inf")]
    best_cfg = tuned.best_config
    own = timings.get(best_cfg)
    own_us = (own[0] if isinstance(own, (list, tuple)) else own) * 1e3 if own is not None else None
    return Row("triton.autotune", case.name, len(tcfgs), len(finite), wall, own_us,
               common_us=common_time(lambda: tuned[grid](*fargs)), t_1pct_s=wall,
               config={**best_cfg.kwargs, "num_warps": best_cfg.num_warps, "num_stages": best_cfg.num_stages},
               note="best-so-far unknown until all are timed: t_1pct = wall; own timer: autotune's do_bench")


def torch_row(tool: str, case: Case, kf: Any, inputs: dict, mode: str | None) -> Row:
    """PyTorch eager (``mode`` None) or ``torch.compile(reference, mode=...)``: first call's wall, do_bench median."""
    import torch

    fn = kf.reference
    if mode is not None:
        torch._dynamo.reset()
        fn = torch.compile(kf.reference) if mode == "default" else torch.compile(kf.reference, mode=mode)
    t0 = time.perf_counter()
    fn(**inputs)
    torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    us = common_time(lambda: fn(**inputs))
    return Row(tool, case.name, wall_s=wall, best_us=us, common_us=us,
               note="wall = first call (compile)" if mode else "reference row")


def kernel_tuner(case: Case, kf: Any, inputs: dict, out_name: str, shape: dict, space: Any, args: Any) -> Row:
    """Kernel Tuner's brute force over the ``.cu`` file's defines (its ``__global__`` kernel, NVRTC through
    ``args.kt_backend``), verified against the reference at the sidecar's tolerances."""
    import numpy as np
    import torch
    from kernel_tuner import tune_kernel

    expr = str(getattr(kf.module, "THREADS_PER_BLOCK"))
    names = list(space.tunables)
    threads = lambda c: int(eval(expr, {"__builtins__": {}}, dict(c)))  # noqa: E731 - the sidecar's expression
    configs = space.configs()
    extra = [compile(e, "kt_extra", "eval") for e in case.kt_extra]

    def restrict(p: dict) -> bool:
        cfg = {k: p[k] for k in names}
        return (space.is_valid(cfg) and p["block_size_x"] == threads(cfg)
                and all(eval(e, {"__builtins__": {}}, dict(cfg)) for e in extra))

    tune_params = {**{k: list(v) for k, v in space.tunables.items()},
                   "block_size_x": sorted({threads(c) for c in configs})}
    ref = kf.reference(**{k: (v.double() if torch.is_tensor(v) else v) for k, v in inputs.items()})
    host = [v.cpu().numpy() if torch.is_tensor(v) else np.int32(v) for v in inputs.values()]
    want = (ref if torch.is_tensor(ref) else inputs[out_name]).float().cpu().numpy()
    answer = [want if k == out_name else None for k in inputs]
    tol_r, tol_a = kf.rtol or 1e-3, kf.atol or 1e-3

    def verify(ans: list, res: list, atol: float | None = None) -> bool:  # the sidecar's rtol/atol, not KT's 1e-6
        return all(np.allclose(r, a, rtol=tol_r, atol=tol_a) for a, r in zip(ans, res) if a is not None)

    psize, gx, gy = case.kt_grid(shape)
    t0 = time.perf_counter()
    start = dt.datetime.now(dt.timezone.utc)
    results, _env = tune_kernel(case.cu_kernel, kernel_only_source(kf.path.read_text()), psize, host, tune_params,
                                grid_div_x=gx, grid_div_y=gy, restrictions=restrict, answer=answer, verify=verify,
                                lang=args.kt_backend, iterations=args.kt_iterations, strategy="brute_force",
                                quiet=True)
    wall = time.perf_counter() - t0
    good = lambda r: "__error__" not in r and isinstance(r.get("time"), float)  # noqa: E731 - ErrorConfig is a str
    ok = [r for r in results if good(r)]
    best = min(ok, key=lambda r: r["time"]) if ok else None
    pts = [((dt.datetime.fromisoformat(r["timestamp"]) - start).total_seconds() if r.get("timestamp") else wall,
            r["time"] * 1e3 if good(r) else None) for r in results]
    t1 = time_to_within(running_best(pts), best["time"] * 1e3 if best else None)
    n_space = sum(restrict({**c, "block_size_x": threads(c)}) for c in configs)
    # which configs failed, and Kernel Tuner's word for it (session 14: 4 of sgemm's 96, not named then)
    failed = "; ".join(f"{' '.join(str(r.get(k)) for k in names)}: {str(r.get('time'))[:60]}"
                       for r in results if not good(r))
    return Row("Kernel Tuner brute_force", case.name, n_space, len(ok), wall, best["time"] * 1e3 if best else None,
               t_1pct_s=t1, config={k: best[k] for k in names} if best else None,
               note=f"{args.kt_backend}/NVRTC, iterations={args.kt_iterations}, own timer: mean of the iterations;"
                    f" {len(results) - len(ok)} failed{f' ({failed})' if failed else ''}; t_1pct from each "
                    f"result's timestamp")


# ---------------------------------------------------------------------------------------------------- driver


class Table:
    """The rows so far: each printed as it comes (flushed) and the JSON file (``{"env", "rows"}``) rewritten."""

    def __init__(self, json_out: str | None, env: dict[str, Any]) -> None:
        self.rows: list[Row] = []
        self.json_out, self.env = json_out, env

    def add(self, row: Row) -> None:
        self.rows.append(row)
        print(render_row(row), flush=True)
        self.save()

    def save(self) -> None:
        if self.json_out:
            rows = [dataclasses.asdict(r) for r in self.rows]
            Path(self.json_out).write_text(json.dumps({"env": self.env, "rows": rows}, indent=1, default=str))


def environment() -> dict[str, Any]:
    """GPU and versions of what is compared (a package that is missing: None)."""
    from importlib.metadata import PackageNotFoundError, version

    import torch

    def ver(name: str) -> str | None:
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else None
    return {"gpu": gpu, "torch": torch.__version__, "cuda": torch.version.cuda,
            **{n: ver(n) for n in ("triton", "kernel_tuner", "cupy-cuda13x", "kernelpilot")},
            "utc": f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M}"}


def run_case(case: Case, args: Any, table: Table, log: Any) -> None:
    """Every peer on one kernel, each in its own try (a failure is a row with the reason)."""
    import torch

    from kernelpilot.kernels.contract import load_kernel

    constraints = [e.split(":", 1)[1] for e in args.constraint if e.split(":", 1)[0] == case.name]
    kf = load_kernel(case.path)
    shape = dict(kf.shape)
    made = kf.setup(**shape, seed=0, device="cuda")
    inputs, out_name = made["inputs"], list(made["outputs"])[0]
    space = _space(kf, constraints)
    configs = space.configs()
    root = Path(args.out)
    rows: list[Row] = []

    def attempt(tool: str, fn: Callable[[], Row]) -> None:
        if args.tools and not any(t.strip().lower() in tool.lower() for t in args.tools.split(",")):
            return
        with cold(root, f"{case.name}-{tool.split()[-1]}"):
            try:
                row = fn()
            except Interrupted:  # SIGINT/SIGTERM stopped a kernelpilot row: the whole table stops (a time limit)
                table.save()
                raise
            except Exception as exc:  # noqa: BLE001 - fail soft per peer: the row says why
                traceback.print_exc(file=log)
                row = Row(tool, case.name, note=f"failed: {type(exc).__name__}: {str(exc)[:160]}")
        rows.append(row)
        table.add(row)

    attempt("PyTorch eager", lambda: torch_row("PyTorch eager", case, kf, inputs, None))
    attempt("torch.compile default", lambda: torch_row("torch.compile default", case, kf, inputs, "default"))
    attempt("kernelpilot tune exhaustive", lambda: kp_search("tune", case, args, log, constraints, len(space)))
    attempt("kernelpilot optimize", lambda: kp_search("optimize", case, args, log, constraints, len(space)))
    if case.jit:
        attempt("triton.autotune", lambda: triton_autotune(case, kf.module, inputs, shape, configs))
        attempt("Inductor max-autotune", lambda: torch_row("Inductor max-autotune", case, kf, inputs, "max-autotune"))
    if case.cu_kernel:
        attempt("Kernel Tuner brute_force", lambda: kernel_tuner(case, kf, inputs, out_name, shape, space, args))
    # the common timer on every search's best config, in this process
    ref = kf.reference(**inputs)
    ref = ref if torch.is_tensor(ref) else inputs[out_name].clone()
    for row in rows:
        if row.config is None or row.common_us is not None:
            continue
        try:
            cfg = {k: row.config[k] for k in kf.tunables}
            inputs[out_name].fill_(float("nan"))
            kf.run_kernel(**inputs, **cfg)
            err = float((inputs[out_name].float() - ref.float()).abs().max())
            row.common_us = common_time(lambda: kf.run_kernel(**inputs, **cfg))
            row.note += f"; common: run_kernel at its best config, max|Δ| vs reference {err:.2g}"
        except Exception as exc:  # noqa: BLE001
            row.note += f"; common timer failed: {type(exc).__name__}: {str(exc)[:100]}"
    fill_ratios(table.rows)
    table.save()


def main(argv: list[str] | None = None) -> int:
    """Parse the options, run the kernels asked for, print the table (rows as they come, then all with ratios)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", default="softmax,sgemm", help=f"comma list of {sorted(CASES)} (default softmax,sgemm)")
    p.add_argument("--tools", default="", help="comma list of tool-name parts to run (default: every tool), "
                   "e.g. 'kernel tuner,optimize' to finish a table another call began")
    p.add_argument("--budget-s", type=float, default=None, help="optimize's --budget-s (default: optimize's own)")
    p.add_argument("--out", default=None, help="folder for run folders, caches and progress.log (default: a temp dir)")
    p.add_argument("--json-out", default=None, help="write the rows as JSON here")
    p.add_argument("--log", default=None, help="kernelpilot's progress lines and tracebacks (default OUT/progress.log)")
    p.add_argument("--constraint", action="append", default=[], metavar="KERNEL:EXPR",
                   help="an extra constraint for one kernel, given to every tool (a smaller shared space)")
    p.add_argument("--no-profile", action="store_true", help="optimize without ncu (saves ~30 s per kernel)")
    p.add_argument("--kt-backend", default="cupy", choices=["cupy", "nvcuda"], help="Kernel Tuner's backend")
    p.add_argument("--kt-iterations", type=int, default=7, help="Kernel Tuner's iterations (its default: 7)")
    args = p.parse_args(argv)
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    if any(n not in CASES for n in names):
        p.error(f"unknown kernel(s) {[n for n in names if n not in CASES]}; known: {sorted(CASES)}")
    args.out = args.out or tempfile.mkdtemp(prefix="search_peers-")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    log = open(args.log or Path(args.out) / "progress.log", "a", encoding="utf-8")
    table = Table(args.json_out, environment())
    print(f"# search_peers — {json.dumps(table.env)}; out {args.out}", flush=True)
    print(render_table([]), flush=True)
    for name in names:
        try:
            run_case(CASES[name], args, table, log)
        except Exception as exc:  # noqa: BLE001 - a kernel that cannot even load: its row says why
            traceback.print_exc(file=log)
            table.add(Row("(setup)", name, note=f"failed: {type(exc).__name__}: {str(exc)[:160]}"))
    print("\n## With ratios (common timer)\n\n" + render_table(table.rows), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
