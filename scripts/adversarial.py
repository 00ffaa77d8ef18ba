"""Run the adversarial suite (tests/adversarial/cases.json) through `kernelpilot verify` and print the table:
every cheat must be refused at its stage, every honest control accepted.

    python3 scripts/adversarial.py [--jobs N] [--json OUT.json] [--gpu-only] [--shard I/N] [FILE ...]

Cases marked ``needs_gpu`` are skipped without a GPU (their stage can only be reached there). Each case runs in its
own isolated worker (a cheat's patches die with it), with ``strict=True`` (loosened tolerances refused). On a GPU,
run with ``--jobs 1``: concurrent timing on one GPU would disturb the floor and activity checks. Exit 1 when any
case landed elsewhere than expected.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "tests" / "adversarial"


def has_gpu() -> bool:
    """True when NVML counts a GPU (no torch import in this process)."""
    from kernelpilot.search.worker import default_devices

    return default_devices(False)[0] != "cpu"


def run_case(case: dict, gpu: bool = False) -> dict:
    """One case through verify; returns the case with ``observed`` stage, status, ok, message, seconds. On a GPU the
    expected stage is ``stage_gpu`` when the case gives one (a cheat a GPU exposes at an earlier step); a case whose
    catch at that stage rests on a secret sample also passes at its ``stage_sampled``, the later stage that catches
    it when the sample fell on exact launches."""
    from kernelpilot.api import verify

    t0 = time.monotonic()
    try:
        r = verify(SUITE / case["file"], strict=True, timeout_s=240)
        observed, status, message = r.stage, r.status, r.message
    except Exception as exc:  # noqa: BLE001 - a contract error is an answer too, recorded as such
        observed, status, message = "error", type(exc).__name__, str(getattr(exc, "message", exc))
    expected = case.get("stage_gpu", case["stage"]) if gpu else case["stage"]
    ok = observed in (expected, case.get("stage_sampled"))
    return {**case, "stage": expected, "observed": observed, "status": status, "ok": ok, "message": message.splitlines()[0][:160],
            "seconds": round(time.monotonic() - t0, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", help="case files (relative to tests/adversarial); default: all")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--gpu-only", action="store_true", help="only the cases that need a GPU")
    parser.add_argument("--shard", default=None, help="I/N: only every N-th case from the I-th (0-based), so N "
                        "processes on N GPUs (CUDA_VISIBLE_DEVICES) run the suite side by side")
    args = parser.parse_args()
    cases = json.loads((SUITE / "cases.json").read_text())
    if args.files:
        cases = [c for c in cases if c["file"] in args.files or Path(c["file"]).stem in args.files]
    gpu = has_gpu()
    if args.shard:
        i, n = (int(v) for v in args.shard.split("/"))
        cases = cases[i::n]
    todo = [c for c in cases if (gpu or not c["needs_gpu"]) and (c["needs_gpu"] or not args.gpu_only)]
    skipped = [c for c in cases if c not in todo]
    print(f"adversarial suite on {'a GPU' if gpu else 'the CPU (Triton interpreter)'}: {len(todo)} cases to run, "
          f"{len(skipped)} skipped (need a GPU)\n")
    print("| case | kind | must be caught at | caught at (status) | ok | s | what kernelpilot said |")
    print("|---|---|---|---|---|---|---|", flush=True)
    results = []
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for r in pool.map(lambda c: run_case(c, gpu), todo):  # each row as soon as it is known: a run cut short
            results.append(r)                                  # by a time limit still reports what it saw
            print(f"| {r['file']} | {r['kind']} | {r['stage']} | {r['observed']} ({r['status']}) | "
                  f"{'yes' if r['ok'] else '**NO**'} | {r['seconds']} | {r['message'].replace('|', '/')} |", flush=True)
    bad = [r for r in results if not r["ok"]]
    print(f"\n{len(results) - len(bad)} of {len(results)} as expected")
    if args.json:
        args.json.write_text(json.dumps({"gpu": gpu, "results": results, "skipped": [c["file"] for c in skipped]},
                                        indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
