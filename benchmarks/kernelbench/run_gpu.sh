#!/usr/bin/env bash
# Evaluate benchmarks/kernelbench/solutions against KernelBench's own problem files on a GPU machine.
#
# Usage (from the repository root, on a machine with a GPU):
#   benchmarks/kernelbench/run_gpu.sh [PROBLEMS_DIR] [SOLUTIONS_DIR]
# PROBLEMS_DIR defaults to third_party/KernelBench/KernelBench (the ignored checkout of
# ScalingIntelligence/KernelBench; on the device machine carry it: it is 1.2 MiB). Results go to $OUT (default
# ./kb-out): $OUT/kb from `kernelpilot kernelbench run` when that command exists, else $OUT/pairs/ with one
# check and one bench JSON per solution, and $OUT/summary.tsv (solution, problem, check status, bench summary).
# The wrong (level_1_problem_21_sample_1) and library-calling (level_1_problem_19_sample_2) solutions are meant to
# fail: benchmarks/kernelbench/README.md.
set -u
PROBLEMS=${1:-third_party/KernelBench/KernelBench}
SOLUTIONS=${2:-benchmarks/kernelbench/solutions}
OUT=${OUT:-$PWD/kb-out}
mkdir -p "$OUT"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
[ "${KB_KEEP_INTERPRET:-0}" = 1 ] || unset TRITON_INTERPRET  # 1: a CPU dry run of the plumbing
KP="python3 -m kernelpilot.cli"

if [ ! -d "$PROBLEMS/level1" ]; then
  echo "no KernelBench problems at $PROBLEMS (expected $PROBLEMS/level1, level2)" >&2
  exit 2
fi

if $KP kernelbench run --help >/dev/null 2>&1; then
  echo "== kernelpilot kernelbench run" >&2
  $KP kernelbench run "$PROBLEMS" "$SOLUTIONS" --out "$OUT/kb" --json > "$OUT/kernelbench_run.json" \
    2> "$OUT/kernelbench_run.stderr"
  echo "kernelbench run: exit $?" | tee "$OUT/kernelbench_run.rc" >&2
else
  echo "kernelpilot kernelbench run is not available on this branch: falling back to check + bench per pair" >&2
fi

# Fallback (and cross-check): check and bench each pair, paired by KernelBench's naming
# level_{L}_problem_{ID}_sample_{S}_kernel.py (scripts/eval_from_generations.py).
mkdir -p "$OUT/pairs"
printf "solution\tproblem\tcheck\tbench\n" > "$OUT/summary.tsv"
for sol in "$SOLUTIONS"/level_*_problem_*_sample_*_kernel.py; do
  name=$(basename "$sol" .py)
  level=$(echo "$name" | sed -E 's/^level_([0-9]+)_problem_.*/\1/')
  pid=$(echo "$name" | sed -E 's/^level_[0-9]+_problem_([0-9]+)_sample_.*/\1/')
  prob=$(ls "$PROBLEMS/level$level/${pid}_"*.py 2>/dev/null | head -1)
  if [ -z "$prob" ]; then
    printf "%s\t-\tno problem\t-\n" "$name" >> "$OUT/summary.tsv"
    continue
  fi
  echo "== $name vs $prob" >&2
  timeout 900 $KP check "$sol" --ref "$prob" --json --timeout-s 600 > "$OUT/pairs/$name.check.json" \
    2> "$OUT/pairs/$name.check.stderr"
  check_rc=$?
  status=$(python3 - "$OUT/pairs/$name.check.json" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:  # no JSON: the command failed before writing one
    print(f"no report ({type(e).__name__})"); sys.exit()
if d.get("passed"):
    print("passed")
else:
    err = " ".join(str(s.get("error") or "") for s in d.get("seeds", []))
    print("kernel_not_launched" if "KernelNotLaunched" in err else "error" if err.strip() else "incorrect")
PY
)
  bench="-"
  if [ "$status" = "passed" ]; then
    timeout 900 $KP bench "$sol" --ref "$prob" --baselines --json --timeout-s 600 > "$OUT/pairs/$name.bench.json" \
      2> "$OUT/pairs/$name.bench.stderr"
    bench=$(python3 - "$OUT/pairs/$name.bench.json" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"no report ({type(e).__name__})"); sys.exit()
rows = {r["name"]: (r.get("timing") or {}).get("median_ns") for r in (d.get("baselines") or {}).get("rows", [])}
mine = next((v for k, v in rows.items() if "(reference)" not in k), None)
eager = next((v for k, v in rows.items() if k.startswith("PyTorch eager")), None)
comp = next((v for k, v in rows.items() if k.startswith("torch.compile")), None)
mine = mine or (d.get("timing") or {}).get("median_ns")
fmt = lambda v: "-" if v is None else f"{v / 1e3:.1f}us"
sp = lambda b: "-" if not (b and mine) else f"{b / mine:.2f}x"
print(f"median {fmt(mine)}; eager {fmt(eager)} (speedup {sp(eager)}); compile {fmt(comp)} (speedup {sp(comp)}); "
      f"roofline {d.get('pct_of_roofline')}%")
PY
)
  fi
  printf "%s\t%s\t%s (rc %s)\t%s\n" "$name" "$(basename "$prob")" "$status" "$check_rc" "$bench" >> "$OUT/summary.tsv"
done
cat "$OUT/summary.tsv"
