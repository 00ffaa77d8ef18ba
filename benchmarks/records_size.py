"""What one measured version of ``kernelpilot optimize`` costs on disk, files and git objects together, and the
projected size of a run of 1,000 measured configs (issue 25, "Records that scale": under 10 MB, ``.ncu-rep`` aside).

Replays a committed H100 cache through ``optimize`` on the CPU (no GPU: every decision is made again from the stored
samples), twice: a short run (``--iterations``) and a run over the whole cached space (the exhaustive strategy; a
baseline given faster than any config keeps the roofline target from stopping it early). The bytes one version
costs are the difference of the two runs' sizes over the difference of their version counts; the projection is the
long run plus that cost per version up to 1,000. Sizes are bytes on disk of the run folder's files (``.git``
included, ``.ncu-rep`` excluded), counted by their length.

Usage: ``PYTHONPATH=src python3 benchmarks/records_size.py [--cache tests/data/search/matmul-h100.jsonl]``.
Prints a table; not a timed test.

``--folder RUN [RUN ...]`` instead breaks down run folders already written (a live optimize on a GPU, which the
replay cannot stand for: a replay writes no ``correctness.json`` and its cards are lighter): bytes by file name
over the ``vN/`` folders, per measured version, git objects, ``report.html``, the rest, and the projection of the
run to 1,000 measured versions at its own bytes per version over its fixed part (``report.html`` and the run-level
files).
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MATMUL_CONSTRAINTS = ["GROUP_M == 8", "BLOCK_K <= 64", "num_warps >= 4", "num_stages >= 3", "num_stages <= 4"]


def folder_bytes(root: Path) -> dict[str, int]:
    """Bytes of the files under ``root`` (``.ncu-rep`` excluded): ``git`` (under ``.git``), ``versions`` (under
    ``vN/``), ``report_html``, ``other``, and ``total``."""
    out = {"git": 0, "versions": 0, "report_html": 0, "other": 0}
    for dirpath, _dirs, files in os.walk(root):
        rel = Path(dirpath).relative_to(root)
        for name in files:
            if name.endswith(".ncu-rep"):
                continue
            size = (Path(dirpath) / name).stat().st_size
            top = rel.parts[0] if rel.parts else name
            kind = ("git" if top == ".git" else "report_html" if top == "report.html" else
                    "versions" if top.startswith("v") and top[1:].isdigit() else "other")
            out[kind] += size
    out["total"] = sum(out.values())
    return out


def run(cache: Path, out: Path, iterations: int | None) -> tuple[int, dict[str, int]]:
    """One replayed optimize run into ``out``: (versions, :func:`folder_bytes`)."""
    from kernelpilot import api

    name = cache.name.split("-")[0]
    kept = cache.with_name(f"{name}.py")  # the file the cache was measured with, where the example changed since
    kernel = kept if kept.is_file() else ROOT / "src" / "kernelpilot" / "examples" / f"{name}.py"
    result = api.optimize(kernel, out=out,
                          replay=str(cache), constraints=MATMUL_CONSTRAINTS if "matmul" in cache.name else [],
                          strategy="exhaustive", benchmark=False, profile=False, iterations=iterations,
                          baselines_ns={"torch.compile": 1.0})
    versions = sum(1 for v in result.versions if v.index is not None)
    return versions, folder_bytes(out)


def breakdown(root: Path) -> dict[str, float]:
    """Bytes of a run folder (``.ncu-rep`` excluded) by kind: ``versions`` (measured ``vN/`` folders), ``vN/NAME``
    summed per file name, ``git``, ``report_html``, ``other``, ``seals.jsonl`` and ``skipped.jsonl`` (part of
    ``other``), ``total``; ``per_version``: bytes a measured version adds (its folder, its git objects, its line of
    ``seals.jsonl``); ``projected_1000``: the fixed part (``report_html`` and the run-level files) plus the run's
    skipped rows plus 1,000 such versions; ``projected_1000_configs``: 1,000 configs answered at the run's own mix
    of measured versions and skipped rows."""
    out: dict[str, float] = dict(folder_bytes(root))
    versions = [d for d in root.iterdir() if d.is_dir() and d.name[:1] == "v" and d.name[1:].isdigit()]
    for d in versions:
        for f in d.rglob("*"):
            if f.is_file() and not f.name.endswith(".ncu-rep"):
                out[f"vN/{f.relative_to(d)}"] = out.get(f"vN/{f.relative_to(d)}", 0) + f.stat().st_size
    out["n_versions"] = len(versions)
    # seals.jsonl grows by a line per commit (one per version), skipped.jsonl by a row per skipped config
    for name in ("seals.jsonl", "skipped.jsonl"):
        out[name] = (root / name).stat().st_size if (root / name).is_file() else 0
    skipped_rows = len((root / "skipped.jsonl").read_text().splitlines()) if out["skipped.jsonl"] else 0
    out["n_skipped"] = skipped_rows
    per = (out["versions"] + out["git"] + out["seals.jsonl"]) / max(1, len(versions))
    fixed = out["report_html"] + out["other"] - out["seals.jsonl"] - out["skipped.jsonl"]
    out["per_version"] = per
    out["projected_1000"] = fixed + out["skipped.jsonl"] + 1000 * per
    per_config = (out["versions"] + out["git"] + out["seals.jsonl"] + out["skipped.jsonl"]) / max(
        1, len(versions) + skipped_rows)
    out["projected_1000_configs"] = fixed + 1000 * per_config
    return out


def print_breakdown(roots: list[Path]) -> None:
    """Print :func:`breakdown` of each run folder as a table of bytes per measured version."""
    for root in roots:
        b = breakdown(root)
        n = max(1, int(b["n_versions"]))
        print(f"\n{root}: {int(b['n_versions'])} measured versions and {int(b['n_skipped'])} skipped rows, "
              f"{b['total']:,.0f} B (.git {b['git']:,.0f}, report.html {b['report_html']:,.0f}, other "
              f"{b['other']:,.0f}); {b['per_version']:,.0f} B per measured version; projected: 1,000 measured "
              f"versions {b['projected_1000'] / 1e6:.2f} MB, 1,000 configs at this mix "
              f"{b['projected_1000_configs'] / 1e6:.2f} MB")
        print("| file | bytes | per version |\n|---|---|---|")
        rows = sorted(((k, v) for k, v in b.items() if k.startswith("vN/") or k in ("git", "seals.jsonl")),
                      key=lambda kv: -kv[1])
        for k, v in rows:
            print(f"| {k} | {v:,.0f} | {v / n:,.0f} |")


def main() -> None:
    """Run both replays and print the table (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=ROOT / "tests" / "data" / "search" / "matmul-h100.jsonl")
    parser.add_argument("--short", type=int, default=5, help="iterations of the short run")
    parser.add_argument("--folder", type=Path, nargs="+", help="break down these run folders instead")
    args = parser.parse_args()
    if args.folder:
        print_breakdown([f for f in args.folder if f.is_dir()])  # a glob may also name the runs' .log files
        return
    with tempfile.TemporaryDirectory() as tmp:
        n1, b1 = run(args.cache, Path(tmp) / "short", args.short)
        n2, b2 = run(args.cache, Path(tmp) / "long", None)
    per = {k: (b2[k] - b1[k]) / max(1, n2 - n1) for k in b1}
    print(f"| run | versions | total | .git | vN/ folders | report.html | other |\n|---|---|---|---|---|---|---|")
    for name, n, b in (("short", n1, b1), ("long", n2, b2)):
        print(f"| {name} | {n} | {b['total']:,} | {b['git']:,} | {b['versions']:,} | {b['report_html']:,} | "
              f"{b['other']:,} |")
    print(f"| per measured version | 1 | {per['total']:,.0f} | {per['git']:,.0f} | {per['versions']:,.0f} | "
          f"{per['report_html']:,.0f} | {per['other']:,.0f} |")
    projected = b2["total"] + (1000 - n2) * per["total"]
    print(f"\nbytes per measured version: {per['total']:,.0f} (files {per['total'] - per['git']:,.0f}, "
          f"git {per['git']:,.0f})")
    print(f"projected size of a run of 1,000 measured configs: {projected / 1e6:.2f} MB "
          f"({'under' if projected < 10e6 else 'OVER'} the 10 MB of issue 25)")


if __name__ == "__main__":
    main()
