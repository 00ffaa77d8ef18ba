"""Issue 25's table, one kernel per row, on the GPU this runs on: ``optimize`` at its defaults beside an exhaustive
``tune`` of the same space, PyTorch eager, torch.compile and (where torch.compile was faster than the search's best)
the imported Inductor kernel after tuning.

    python3 benchmarks/search/table.py KERNEL [KERNEL ...] [--out DIR] [--json-out FILE] [--skip-exhaustive]
        [--timeout-s S] [--deadline-unix T] [--cold-exhaustive] [--paired]

Each kernel runs ``kernelpilot optimize KERNEL --json`` on empty Triton and Inductor caches, and after every kernel's
optimize, ``kernelpilot tune KERNEL --strategy exhaustive --no-cache --json`` on the caches optimize filled (the exhaustive run compiles nothing
optimize compiled: its wall is a lower bound of a cold one, so comparing optimize with it is conservative; with
``--cold-exhaustive`` it gets empty caches of its own, as a user's first exhaustive tune does). Columns:

- ``v0 (library default)``: the kernel file as given (a library's own config, or its autotuner's pick for the
  shape), timed as version 0 of the optimize run; the final must be no slower.
- ``optimize best`` / ``wall``: the run's best median and the command's wall seconds (set-up, search, baselines,
  Inductor candidate, final profile, reports); ``to 1 %``: seconds from the command's start to the git commit of the
  first version within 1 % of the exhaustive best (commit times have 1 s resolution); ``versions`` / ``skipped``:
  version folders (measured configs) and rows of the skipped-config table; ``MB``: the run folder's size without
  ``.ncu-rep`` files, git objects included.
- ``--json-out`` rows also carry ``timeline``: each version's commit time from the command's start, median,
  status and phases (where optimize's time went); ``tune_timeline``: the exhaustive tune's lines with their search
  seconds; ``opt_setup_s`` / ``tune_setup_s``: where each command's seconds before its search went.
- ``exhaustive best`` / ``wall`` / ``measured``: the exhaustive tune's best, command wall seconds, configs measured
  (not pruned, not invalid). The tune writes a folder of its own (``OUT/ex-KERNEL``); a deadline ends it with
  SIGTERM, and the row then gives the best of what the folder holds, marked "cut: N of M answered". When that
  folder is already there (carried back from an earlier call), the tune resumes it; its wall is then this call's.
- ``eager`` / ``torch.compile``: the optimize run's baselines (timed once, after its search, round-robin with the
  incumbent).
- ``Inductor (tuned)``: the best of the imported Inductor kernel's search, when there was one, with how many
  evaluations that search made of how many configs (run.json's ``final.inductor``); ``final``: the run's
  final choice and where it came from; ``vs compile``: torch.compile's median / the final's (>= 0.98 is the bar),
  "(round-robin)" when both come from one round-robin timing (run.json's ``final.vs_torch_compile``), else from
  timings taken at different moments.

By default every optimize of the command runs before any exhaustive tune (a deadline then cuts an exhaustive tune,
not an optimize). With ``--paired`` each kernel's exhaustive tune runs right after its optimize: on a host whose
CPUs other work shares (the device scripts' lanes, one per GPU), the two searches of a row then run under about the
same load. Session 13's call 3 shows why it matters: layer_norm's optimize ran beside the other lanes' compiles,
every phase 3-5x slower than in call 2, and its exhaustive tune minutes later on a quieter host.

Rows are printed as they finish (a timeout still leaves the rows done); ``--json-out`` appends one JSON object per
kernel. Numbers are those of this GPU: compare within a row.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from kernelpilot.app.candidates import torch_compile_ns
from kernelpilot.app.tune_run import RUN_FILE

#: Seconds a command gets between SIGTERM and SIGKILL: time to record and print its JSON.
TERM_GRACE_S = 25.0

HEAD = ("| kernel | space | v0 (library default) µs | optimize best µs | wall s | to 1 % s | versions | skipped | MB | exhaustive best µs | wall s "
        "| measured | eager µs | torch.compile µs | Inductor (tuned) µs | final | vs compile |")


def _us(ns: float | None) -> str:
    return f"{ns / 1000:.2f}" if ns else "—"


def _inductor(cand: dict[str, Any]) -> str:
    """The Inductor column: its tuned best in µs, and "(N of M)" evaluations of configs where the record has them."""
    searched = f" ({cand['evaluations']} of {cand['space_size']})" if cand.get("space_size") else ""
    return _us(cand.get("duration_ns")) + (searched if cand.get("duration_ns") else "")


def run_json(cmd: list[str], env: dict[str, str], timeout_s: float, log: Path) -> tuple[dict[str, Any], float, str]:
    """Run a kernelpilot command with ``--json`` (its progress lines go to ``log``): (its JSON object, wall
    seconds, the last lines of its progress when it gave no JSON). At ``timeout_s`` the command gets SIGTERM, which
    kernelpilot answers by recording what it decided and printing its JSON (an interrupted run), then SIGKILL after
    :data:`TERM_GRACE_S`. Raises nothing."""
    t0 = time.monotonic()
    why = ""
    with log.open("w") as err_fh:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err_fh, text=True, env=env)
        try:
            out, _ = p.communicate(timeout=max(1.0, timeout_s))
        except subprocess.TimeoutExpired:
            p.terminate()
            why = f"SIGTERM after {timeout_s:.0f} s; "
            try:
                out, _ = p.communicate(timeout=TERM_GRACE_S)
            except subprocess.TimeoutExpired:
                p.kill()
                out, _ = p.communicate()
                why += f"SIGKILL {TERM_GRACE_S:.0f} s later; "
    wall = time.monotonic() - t0
    try:
        return json.loads(out or ""), wall, why
    except json.JSONDecodeError:
        tail = log.read_text(errors="replace").splitlines()[-6:] if log.is_file() else []
        return {}, wall, why + " / ".join(tail)[-900:]


def folder_best(folder: Path) -> dict[str, Any]:
    """What a tune folder cut before its end holds (its ``evaluations.jsonl``): answered lines, configs timed in
    full (status ok and not raced out) and the best of those (ns, config). Empty when there is no folder."""
    path = folder / "evaluations.jsonl"
    if not path.is_file():
        return {}
    evs = []
    for line in path.read_text().splitlines():
        try:
            evs.append(json.loads(line)["evaluation"])
        except (ValueError, KeyError, TypeError):
            continue  # a line cut by the kill
    full = [e for e in evs if e.get("status") == "ok" and e.get("duration_ns")
            and not str(e.get("message", "")).startswith("raced out")]
    best = min(full, key=lambda e: e["duration_ns"]) if full else None
    skipped = sum(1 for e in evs if e.get("status") in ("pruned", "invalid_config"))
    return {"answered": len(evs), "measured": len(evs) - skipped, "timed_in_full": len(full),
            "best_ns": best["duration_ns"] if best else None, "best_config": best["config"] if best else None}


def tune_timeline(folder: Path) -> list[dict[str, Any]]:
    """An exhaustive tune's own timeline (its ``evaluations.jsonl``): per line, the search seconds spent when it was
    decided (``spent_s``: after the set-up, which ``tune --json``'s ``setup_s`` gives), median (ns), status,
    whether it led, and the phases over 0.2 s. Empty without the file."""
    path = folder / "evaluations.jsonl"
    rows: list[dict[str, Any]] = []
    for line in (path.read_text().splitlines() if path.is_file() else []):
        try:
            got = json.loads(line)
            e = got["evaluation"]
        except (ValueError, KeyError, TypeError):
            continue
        rows.append({"spent_s": round(got.get("spent_s") or 0.0, 3), "duration_ns": e.get("duration_ns"),
                     "status": e.get("status"), "accepted": e.get("accepted"),
                     "phases_s": {k: round(x, 3) for k, x in (e.get("phases_s") or {}).items()
                                  if isinstance(x, (int, float)) and x > 0.2}})
    return rows


def folder_bytes(root: Path) -> int:
    """Bytes under ``root`` without ``.ncu-rep`` files (git objects included)."""
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file() and p.suffix != ".ncu-rep")


def commit_times(run: Path) -> dict[int, int]:
    """Version index -> unix time of its git commit (``vN: ...`` subjects) in an optimize run folder."""
    try:
        log = subprocess.run(["git", "-C", str(run), "log", "--format=%ct %s"], capture_output=True, text=True,
                             timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    found: dict[int, int] = {}
    for line in log.splitlines():
        ts, _, subject = line.partition(" ")
        head = subject.split(":", 1)[0]
        if head.startswith("v") and head[1:].isdigit():
            found.setdefault(int(head[1:]), int(ts))
    return found


def time_to_within(run: Path, versions: list[dict[str, Any]], target_ns: float, start_unix: float) -> float | None:
    """Seconds from ``start_unix`` to the commit of the first version whose median is within ``target_ns``."""
    times = commit_times(run)
    hits = [times[v["index"]] for v in versions if v.get("index") in times and v.get("status") == "ok"
            and v.get("duration_ns") and v["duration_ns"] <= target_ns]
    return (min(hits) - start_unix) if hits else None


def timeline(run: Path, versions: list[dict[str, Any]], start_unix: float) -> list[dict[str, Any]]:
    """Where an optimize run's time went, one entry per version: its index, seconds from ``start_unix`` to its git
    commit (1 s resolution; None without one), median (ns), status, whether it was accepted, and its phases (seconds
    per stage, ``Evaluation.phases_s``: check, timing, ``ab``, ``audit``, ``evidence``, ``record`` ...)."""
    times = commit_times(run)
    return [{"index": v.get("index"), "at_s": (times[v["index"]] - start_unix) if v.get("index") in times else None,
             "duration_ns": v.get("duration_ns"), "status": v.get("status"), "accepted": v.get("accepted"),
             "phases_s": {k: round(x, 3) for k, x in (v.get("phases_s") or {}).items() if isinstance(x, (int, float))}}
            for v in versions]


class Row:
    """One kernel's row, made in two phases so that a lane of several kernels runs every ``optimize`` before any
    exhaustive tune (a call's limit then cuts an exhaustive tune, never an optimize run): :meth:`optimize`, then
    :meth:`exhaustive`, then :meth:`numbers` (see the module docstring). Each command gets at most ``timeout_s`` and,
    with ``deadline_unix``, ends by then; an exhaustive tune with under 30 s left is not run (``tune_error`` says so)."""

    def __init__(self, kernel: str, out: Path, timeout_s: float, deadline_unix: float | None = None,
                 cold_exhaustive: bool = False) -> None:
        self.kernel, self.out, self.timeout_s, self.deadline_unix = kernel, out, timeout_s, deadline_unix
        self.cold_exhaustive = cold_exhaustive
        self.name = Path(kernel).stem
        self.kp = [sys.executable, "-m", "kernelpilot.cli"]
        # optimize first, on empty Triton and Inductor caches; the exhaustive tune after it, on the caches optimize
        # filled: its wall is then a lower bound of a cold exhaustive run, so "optimize met 1 % sooner" is conservative
        self.caches = {**os.environ, "TRITON_CACHE_DIR": str(out / f"tc-{self.name}"),
                       "TORCHINDUCTOR_CACHE_DIR": str(out / f"ic-{self.name}")}
        self.run = out / f"opt-{self.name}"
        self.res: dict[str, Any] = {"kernel": kernel}
        self.opt: dict[str, Any] = {}
        self.tune: dict[str, Any] = {}
        self.start = time.time()

    def limit(self) -> float:
        """Seconds the next command may take."""
        if self.deadline_unix is None:
            return self.timeout_s
        return min(self.timeout_s, self.deadline_unix - time.time())

    def optimize(self) -> None:
        """``kernelpilot optimize KERNEL`` at its defaults."""
        self.start = time.time()
        self.opt, self.res["opt_wall_s"], err = run_json(
            [*self.kp, "optimize", self.kernel, "--out", str(self.run), "--json"], self.caches,
            max(1.0, self.limit() - TERM_GRACE_S), self.out / f"opt-{self.name}.log")
        if not self.opt:
            self.res["opt_error"] = err

    def exhaustive(self) -> None:
        """``kernelpilot tune KERNEL --strategy exhaustive`` on the caches optimize filled (empty ones of its own with
        ``cold_exhaustive``)."""
        if self.limit() < 30:
            self.res["tune_error"] = f"not run: {max(0.0, self.limit()):.0f} s left before the deadline"
            return
        caches = self.caches
        if self.cold_exhaustive:  # empty caches of its own: what a user's first exhaustive tune pays
            caches = {**self.caches, "TRITON_CACHE_DIR": str(self.out / f"tc-ex-{self.name}"),
                      "TORCHINDUCTOR_CACHE_DIR": str(self.out / f"ic-ex-{self.name}"),
                      "KERNELPILOT_CACHE_DIR": str(self.out / f"kp-ex-{self.name}")}
        self.res["exhaustive_caches"] = "cold" if self.cold_exhaustive else "optimize's"
        # a folder of its own, so a cut tune leaves what it answered (resumed when its tune-run.json is there: a
        # later call carried the cut folder back; a cut folder has no tune.json)
        folder = self.out / f"ex-{self.name}"
        cmd = ([*self.kp, "tune", "--resume", str(folder), "--json"] if (folder / RUN_FILE).is_file() else
               [*self.kp, "tune", self.kernel, "--strategy", "exhaustive", "--no-cache", "--out", str(folder), "--json"])
        self.res["exhaustive_resumed"] = "--resume" in cmd
        self.tune, self.res["tune_wall_s"], err = run_json(cmd, caches, self.limit() - TERM_GRACE_S,
                                                          self.out / f"tune-{self.name}.log")
        if err or not self.tune.get("best"):
            self.res["tune_error"] = err or str(self.tune.get("error", ""))[:300]
            self.res["exhaustive_partial"] = folder_best(folder)

    def numbers(self) -> dict[str, Any]:
        """The row's numbers from what ran."""
        res, opt, tune, run = self.res, self.opt, self.tune, self.run
        best_t = (tune.get("best") or {}).get("duration_ns") or (res.get("exhaustive_partial") or {}).get("best_ns")
        skipped = sum((tune.get("failures") or {}).get(s, 0) for s in ("pruned", "invalid_config"))
        res.update(space=tune.get("space_size") or (opt.get("run") or {}).get("space_size"), exhaustive_ns=best_t,
                   measured=(tune.get("evaluations_total") or len(tune.get("evaluations", []))) - skipped
                   if tune.get("best") else (res.get("exhaustive_partial") or {}).get("measured"))
        info = opt.get("run") or {}
        versions = opt.get("versions") or []
        best = next((v for v in versions if v.get("index") == info.get("best_version")), None)
        v0 = next((v for v in versions if v.get("index") == 0), None)
        res.update(opt_ns=best.get("duration_ns") if best else None, versions=len(versions),
                   v0_ns=v0.get("duration_ns") if v0 else None,
                   baselines=info.get("baselines_ns") or {}, final=info.get("final") or {},
                   strategy=info.get("strategy"), stop=info.get("stop_reason", "")[:200])
        skipped = run / "skipped.jsonl"
        res["skipped"] = sum(1 for _ in skipped.open()) if skipped.is_file() else 0
        res["mb"] = folder_bytes(run) / 1e6 if run.is_dir() else None
        ref = min(x for x in (best_t, res["opt_ns"]) if x) if (best_t or res["opt_ns"]) else None
        res["to_1pct_s"] = time_to_within(run, versions, 1.01 * ref, self.start) if ref else None
        res["timeline"] = timeline(run, versions, self.start)
        res["opt_setup_s"], res["tune_setup_s"] = info.get("setup_s") or {}, tune.get("setup_s") or {}
        res["tune_timeline"] = tune_timeline(self.out / f"ex-{self.name}")
        return res


def render(r: dict[str, Any]) -> str:
    """One markdown row of :data:`HEAD`."""
    b = r.get("baselines") or {}
    eager = next((v for k, v in b.items() if k.startswith("PyTorch eager")), None)
    comp = torch_compile_ns(b)
    final = r.get("final") or {}
    final_ns = final.get("duration_ns") or r.get("opt_ns")
    if final.get("vs_torch_compile"):  # both from one round-robin timing (drift-free)
        vs = f"{final['vs_torch_compile']:.3f} (round-robin)"
    else:
        vs = f"{comp / final_ns:.3f}" if comp and final_ns else "—"
    f = lambda x, d=1: f"{x:.{d}f}" if isinstance(x, (int, float)) else "—"  # noqa: E731
    part = r.get("exhaustive_partial") or {}
    cut = f" (cut: {part.get('answered')} of {r.get('space') or '?'} answered)" if part else ""
    return (f"| {r['kernel']} | {r.get('space') or '—'} | {_us(r.get('v0_ns'))} | {_us(r.get('opt_ns'))} | {f(r.get('opt_wall_s'))} "
            f"| {f(r.get('to_1pct_s'), 0)} | {r.get('versions')} | {r.get('skipped')} | {f(r.get('mb'), 2)} "
            f"| {_us(r.get('exhaustive_ns'))}{cut} | {f(r.get('tune_wall_s'))} | {r.get('measured')} "
            f"| {_us(eager)} | {_us(comp)} | {_inductor(final.get('inductor') or {})} "
            f"| {_us(final_ns)} ({final.get('source', 'search')}) | {vs} |")


def main() -> None:
    """The command line (see the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kernels", nargs="+")
    ap.add_argument("--out", default="/tmp/kp-table", help="folder for run folders and caches")
    ap.add_argument("--json-out", help="append one JSON object per kernel to this file")
    ap.add_argument("--skip-exhaustive", action="store_true", help="optimize only")
    ap.add_argument("--timeout-s", type=float, default=900.0, help="per command")
    ap.add_argument("--deadline-unix", type=float, help="every command ends by this unix time (a call's limit)")
    ap.add_argument("--cold-exhaustive", action="store_true",
                    help="the exhaustive tune on empty Triton/Inductor caches of its own (default: optimize's)")
    ap.add_argument("--paired", action="store_true",
                    help="each kernel's exhaustive tune right after its optimize, not every optimize first")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    print(HEAD)
    print("|" + "---|" * HEAD.count(" | ") + "---|")
    rows = [Row(k, out, args.timeout_s, args.deadline_unix, args.cold_exhaustive) for k in args.kernels]
    steps = ([(r, s) for r in rows for s in ("optimize", "exhaustive")] if args.paired else
             [(r, "optimize") for r in rows] + [(r, "exhaustive") for r in rows])
    for r, step in steps:
        if step == "optimize":
            r.optimize()
        elif not args.skip_exhaustive:
            r.exhaustive()
    for k, row in zip(args.kernels, rows):
        r = row.numbers()
        print(render(r), flush=True)
        for key in ("tune_error", "opt_error"):
            if r.get(key):
                print(f"<!-- {k} {key}: {r[key]!r} -->", flush=True)
        if args.json_out:
            with open(args.json_out, "a") as fh:
                fh.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
