#!/usr/bin/env bash
# Issue 23's GPU verification ("Done when"), from the repository root of a GPU machine:
#   bash scripts/device-observed.sh seed    # the seed's CUDA demo, unmodified (fmh66/kernel-opt-skill demo/cuda/softmax
#                                           # at N=10240 D=1024, demo/cuda/gemm at M=K=N=4096): session start v0, try
#                                           # v1..v3 (one hypothesis each, the seed's own), finish, status --json ->
#                                           # a table per demo beside the seed's own order (its final_report.md)
#   bash scripts/device-observed.sh liger   # benchmarks/observed/liger_cross_entropy.py: bench, optimize at defaults,
#                                           # and ncu's DRAM bytes of one launch of the library's config vs the floor's
#   bash scripts/device-observed.sh fp8     # benchmarks/observed/flaggems_fp8_{act_quant,gemm}.py: check, bench, optimize
#   bash scripts/device-observed.sh all     # the three, each step bounded so the whole fits ~9 minutes on an H100
#                                           # (optimize with a shorter --budget-s: for the issue's numbers run `liger`
#                                           # alone, where optimize runs at its defaults)
# Needs, carried: .whl with kernelpilot's own dependencies that the device image lacks and the libraries, fetched
# here (17 wheels, ~21 MB) with
#   bash ../shared/device/wheels.sh pydantic==2.13.4 pydantic-core==2.46.4 annotated-types==0.7.0 \
#     typing-inspection==0.4.2 GitPython==3.2.1 gitdb==4.0.12 smmap==5.0.3 python-constraint2==2.9.0 optuna==5.0.0 \
#     alembic==1.20.1 colorlog==6.12.0 Mako==1.4.3 plotly==7.1.0 greenlet==3.5.6 \
#     liger-kernel==0.8.5 flag-gems==5.0.2 sqlalchemy==2.0.48
# and installed there by scripts/device-env.sh (the flag-gems kernel files load the kernel modules by path and need
# no sqlalchemy: with it the header also tries `import flag_gems`); and third_party/kernel-opt-skill (ignored), the
# seed's demo unmodified, from github.com/fmh66/kernel-opt-skill:
#   git --git-dir=<clone>/.git archive HEAD demo/cuda/softmax demo/cuda/gemm | tar -x -C third_party/kernel-opt-skill
# Knobs: PROFILE=0 (session without Nsight Compute), OPT_BUDGET_S (optimize --budget-s; unset: the default),
# SEED_STEP_S / STEP_S / OPT_LIMIT_S / NCU_LIMIT_S (timeouts of one session command / one check or bench / one
# optimize / the ncu read), BASELINES=0 (bench without eager/torch.compile), SEED_STAGE_S / LIGER_STAGE_S /
# FP8_STAGE_S (`all`: the hard limit of each stage).
# Everything lands in $OUT: <stage>.log, seed-softmax.md, seed-gemm.md, liger-summary.md, fp8-summary.md and
# observed-json.tgz (the JSON outputs and session records, no ncu reports) -- at most 8 files.
set -uo pipefail
OUT=${OUT:-/tmp/kp-out}; mkdir -p "$OUT"
source scripts/device-env.sh
KP="python3 -m kernelpilot.cli"
RES=runs/observed; mkdir -p "$RES"
# Fail fast (a device minute is dear): kernelpilot's own dependencies are not in the device image either
if ! python3 -c "import kernelpilot.cli" 2> "$OUT/preflight.log"; then
  tail -n 3 "$OUT/preflight.log"
  echo "kernelpilot does not import here: carry its wheels too (pydantic, pydantic-core, annotated-types,"
  echo "typing-inspection, GitPython, gitdb, smmap, python-constraint2, optuna, alembic, colorlog, Mako, plotly,"
  echo "greenlet; see the header of this script)" | tee -a "$OUT/preflight.log"
  exit 3
fi
rm -f "$OUT/preflight.log"
export KERNELPILOT_EXPERIENCE=$PWD/$RES/experience.db
SEED=third_party/kernel-opt-skill/demo/cuda
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }
# step LIMIT_S NAME CMD...: run CMD under `timeout`, stdout to $RES/NAME.json, stderr to $RES/NAME.err; print rc + tail
step() {
  local lim=$1 name=$2; shift 2
  echo "== [$(elapsed) s] $name (limit ${lim} s): $*"
  timeout "$lim" "$@" > "$RES/$name.json" 2> "$RES/$name.err"; local rc=$?
  echo "rc=$rc$([ $rc = 124 ] && echo ' (TIMED OUT)')"
  grep -E "^(error|hint|Error)|Error:|impossible|stopped|target met|refused" "$RES/$name.err" | tail -n 6
  tail -n 2 "$RES/$name.err"
  grep -oE '^\{"error": "[^"]*", "message": "([^"\\]|\\.){0,300}' "$RES/$name.json" | head -n 1
  return 0
}
header() {
  echo "== $1, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
  python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__)"
  nvcc --version 2>/dev/null | tail -n 1; command -v ncu >/dev/null && ncu --version | tail -n 1
  python3 -c "import importlib.metadata as m; print('liger-kernel', m.version('liger-kernel'), 'flag-gems', m.version('flag-gems'))" 2>&1 | tail -n 1
  # the kernel files load flag_gems' kernel modules by path; whether the whole package imports here is information
  [ "$1" = fp8 ] && timeout 120 python3 -c "import flag_gems; print('import flag_gems: ok, vendor', flag_gems.vendor_name)" 2>&1 | tail -n 1
  return 0
}

seed_session() {  # $1 = softmax | gemm
  local demo=$1 run=$RES/seed-$1 lim=${SEED_STEP_S:-150} shape prof=()
  [ "${PROFILE:-1}" = 0 ] && prof=(--no-profile)
  if [ "$demo" = softmax ]; then
    shape=(--shape N=10240 --shape D=1024)
    h1="one block per row: coalesced loads, warp-shuffle + shared-memory reduction (v0: one thread per row, stride-D access, 40 blocks)"
    h2="online softmax fuses the max and sum passes, plus float4 loads and 256-thread blocks: 2 DRAM reads + 1 write instead of 3 reads"
    h3="the row cached in shared memory (one float4 DRAM read, one write) + __launch_bounds__(256, 4) for occupancy"
  else
    shape=(--shape M=4096 --shape K=4096 --shape N=4096)
    h1="32x32 shared-memory tiles: each A/B element loaded from DRAM once per tile instead of once per output, coalesced"
    h2="2D register tiling (BM=BN=64, BK=8, TM=TN=4, 256 threads): 16 outputs per thread, more FMAs per shared-memory load"
    h3="BK 8->16 and TM 4->8 (128 threads), padded sA against bank conflicts, float4 C stores: more compute per __syncthreads"
  fi
  rm -rf "$run"
  if [ ! -f "$SEED/$demo/v0/v0.cu" ]; then echo "== $demo: SKIPPED ($SEED/$demo/v0/v0.cu missing: carry third_party/kernel-opt-skill)"; return; fi
  step "$lim" "seed-$demo-start" $KP session start "$SEED/$demo/v0/v0.cu" --ref "$SEED/$demo/ref.py" --out "$run" \
    "${shape[@]}" --kernel-type "$demo" "${prof[@]}" --json
  local i h
  for i in 1 2 3; do
    eval "h=\$h$i"
    step "$lim" "seed-$demo-try-v$i" $KP session try "$run" "$SEED/$demo/v$i/v$i.cu" --hypothesis "$h" \
      --expect duration:down "${prof[@]}" --json
  done
  step "$lim" "seed-$demo-finish" $KP session finish "$run" --json
  step 60 "seed-$demo-status" $KP session status "$run" --json
  python3 - "$RES/seed-$demo-status.json" "$SEED/$demo/final_report.md" "$demo" "$RES" <<'PY' | tee "$OUT/seed-$demo.md"
import json, re, sys
from pathlib import Path
status_path, seed_report, demo, res = sys.argv[1:5]
try:
    st = json.load(open(status_path))
    if st.get("error"):
        st = {"versions": [], "_error": f"{st['error']}: {str(st.get('message')).splitlines()[0]}"}
except Exception as exc:
    st = {"versions": [], "_error": f"{type(exc).__name__}: {exc}"}
print(f"## seed demo {demo}: kernelpilot session vs the seed's own report (RTX A6000)\n")
for step in ("start", "try-v1", "try-v2", "try-v3", "finish"):  # a command that failed before recording says why
    try:
        got = json.loads(Path(res, f"seed-{demo}-{step}.json").read_text())
    except Exception:
        continue
    if isinstance(got, dict) and got.get("error"):
        print(f"- `session {step}`: {got['error']}: {str(got.get('message')).splitlines()[0][:300]}")
seed = {}
try:  # the seed's own "Version Iteration Comparison": execution time (ms) and bottleneck per version
    for line in open(seed_report, encoding="utf-8"):
        cells = [c.strip().strip("*") for c in line.strip().strip("|").split("|")]
        if cells and cells[0] in ("Execution Time (ms)", "Bottleneck"):
            seed[cells[0]] = cells[1:5]
except OSError:
    pass
if "_error" in st:
    print(f"session status unreadable: {st['_error']}\n")
print("| version | outcome | status | median (µs) | IQR (µs) | A/B ratio vs parent | % roofline | bottleneck | "
      "seed: time (ms) | seed: bottleneck | message |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
byv = {m.get("version"): m for m in st.get("versions", [])}
for v in range(4):
    m = byv.get(v, {})
    us = lambda ns: f"{ns / 1e3:.1f}" if isinstance(ns, (int, float)) else "—"
    ratio = (m.get("vs_parent") or {}).get("ratio")
    pct = m.get("pct_of_roofline")
    t = seed.get("Execution Time (ms)", ["—"] * 4)
    b = seed.get("Bottleneck", ["—"] * 4)
    msg = re.sub(r"\s+", " ", str(m.get("message", "")))[:160].replace("|", "/")
    print(f"| v{v} | {m.get('outcome', 'not run')} | {m.get('status', '—')} | {us(m.get('duration_ns'))} | "
          f"{us(m.get('iqr_ns'))} | {f'{ratio:.3f}' if isinstance(ratio, (int, float)) else '—'} | "
          f"{f'{pct:.1f}' if isinstance(pct, (int, float)) else '—'} | {m.get('bottleneck_after') or '—'} | "
          f"{t[v] if v < len(t) else '—'} | {b[v] if v < len(b) else '—'} | {msg} |")
print(f"\nincumbent: v{st.get('incumbent')}, target met: {st.get('target_met')}, baselines (ns): {st.get('baselines_ns')}")
if st.get("table_md"):
    print("\n### kernelpilot's own table (session status)\n\n" + st["table_md"])
PY
}

liger() {
  local f=benchmarks/observed/liger_cross_entropy.py lim=${STEP_S:-150} budget=()
  [ -n "${OPT_BUDGET_S:-}" ] && budget=(--budget-s "$OPT_BUDGET_S")
  step "$lim" liger-roofline $KP roofline "$f" --json
  step "$lim" liger-bench $KP bench "$f" $([ "${BASELINES:-1}" = 0 ] && echo --no-baselines || echo --baselines) --json
  rm -rf "$RES/liger-opt"
  step "${OPT_LIMIT_S:-300}" liger-optimize $KP optimize "$f" "${budget[@]}" --json --out "$RES/liger-opt"
  echo "== [$(elapsed) s] ncu DRAM bytes of one launch of the library's config (DEFAULT_CONFIG)"
  cat > /tmp/kpo_ncu_driver.py <<'PY'
import importlib.util, sys, torch
spec = importlib.util.spec_from_file_location("kpo_kernel", sys.argv[1])
kf = importlib.util.module_from_spec(spec); spec.loader.exec_module(kf)
inputs = kf.setup(**kf.SHAPE, seed=0, device="cuda")["inputs"]
kf.run_kernel(**inputs, **kf.DEFAULT_CONFIG)          # compile + warm-up launch (skipped by ncu)
torch.cuda.synchronize()
inputs = kf.setup(**kf.SHAPE, seed=0, device="cuda")["inputs"]   # pristine x again
kf.run_kernel(**inputs, **kf.DEFAULT_CONFIG)          # the profiled launch
torch.cuda.synchronize()
print("launched", kf.DEFAULT_CONFIG, kf.SHAPE)
PY
  local ncu; ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1)
  timeout "${NCU_LIMIT_S:-120}" "${ncu:-ncu}" --clock-control none --metrics dram__bytes_read.sum,dram__bytes_write.sum \
    -k regex:liger_cross_entropy_kernel --launch-skip 1 --launch-count 1 --csv \
    "$(command -v python3)" /tmp/kpo_ncu_driver.py "$f" > "$RES/liger-ncu.csv" 2> "$RES/liger-ncu.err"
  echo "ncu rc=$?"; tail -n 5 "$RES/liger-ncu.err"; grep -v '^==PROF==' "$RES/liger-ncu.csv" | tail -n 4
  python3 - "$RES" <<'PY' | tee "$OUT/liger-summary.md"
import csv, io, json, sys
from pathlib import Path
res = Path(sys.argv[1])
def load(name):
    try:
        return json.loads((res / name).read_text())
    except Exception as exc:
        return {"_error": f"{type(exc).__name__}: {exc}"}
def find(obj, key):
    if isinstance(obj, dict):
        if key in obj:
            return obj[key]
        obj = list(obj.values())
    if isinstance(obj, list):
        for item in obj:
            got = find(item, key)
            if got is not None:
                return got
    return None
us = lambda ns: f"{ns / 1e3:.1f} µs" if isinstance(ns, (int, float)) else "—"
roof, bench, opt = load("liger-roofline.json"), load("liger-bench.json"), load("liger-optimize.json")
floor_bytes = find(roof, "bytes_moved")
UNITS = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "KB": 1e3, "MB": 1e6, "GB": 1e9}
dram = {}
text = (res / "liger-ncu.csv").read_text() if (res / "liger-ncu.csv").exists() else ""
rows = [l for l in text.splitlines() if l.startswith('"')]
for row in csv.DictReader(io.StringIO("\n".join(rows))):
    name, unit, value = row.get("Metric Name"), row.get("Metric Unit"), row.get("Metric Value")
    if name in ("dram__bytes_read.sum", "dram__bytes_write.sum") and value:
        dram[name] = float(value.replace(",", "")) * UNITS.get(unit, float("nan"))
print("## Liger-Kernel 0.8.5 cross-entropy (BT=8192, V=32000 fp32, 1/8 rows ignored)\n")
for label, obj in (("roofline", roof), ("bench", bench), ("optimize", opt)):
    if "_error" in obj:
        print(f"- {label}: no JSON ({obj['_error']})")
    elif obj.get("error"):
        print(f"- {label}: {obj['error']}: {str(obj.get('message')).splitlines()[0][:300]}")
print(f"- floor bytes (kernelpilot roofline): {floor_bytes!r}; floor {us(find(roof, 'floor_ns'))}")
print(f"- bench (library config): median {us(find(bench.get('timing') or {}, 'median_ns'))}, "
      f"{find(bench, 'pct_of_roofline')} % of roofline, impossible={bench.get('impossible')}")
base = bench.get("baselines") or {}
for r in base.get("rows", []) if isinstance(base, dict) else []:
    print(f"  - baseline {r.get('name') or r.get('label')}: {us((r.get('timing') or {}).get('median_ns'))}")
best_i = find(opt, "best_version")
versions = opt.get("versions", []) if isinstance(opt, dict) else []
v0 = next((v for v in versions if v.get("index") == 0), {})
best = next((v for v in versions if v.get("index") == best_i), {})
print(f"- optimize: v0 {v0.get('config')} {v0.get('status')} {us(v0.get('duration_ns'))}; best v{best_i} "
      f"{best.get('config')} {us(best.get('duration_ns'))}; stop: {find(opt, 'stop_reason')}")
for v in versions:
    print(f"  - v{v.get('index')}: {v.get('config')} {v.get('status')} {us(v.get('duration_ns'))} "
          f"accepted={v.get('accepted')} {str(v.get('decision') or v.get('message') or '')[:120]}")
if dram:
    moved = sum(dram.values())
    print(f"- ncu (one launch, library config): DRAM read {dram.get('dram__bytes_read.sum', 0):.4g} B, "
          f"write {dram.get('dram__bytes_write.sum', 0):.4g} B, total {moved:.4g} B")
    if isinstance(floor_bytes, (int, float)):
        print(f"- floor bytes / ncu DRAM bytes = {floor_bytes / moved:.3f} (issue 23: within 10 % means 0.90..1.10)")
    print(f"- ncu DRAM bytes / the source's count = {moved / (8192 * 32000 * 4 + 8192 * 12):.3f} (DRAM writes can "
          "fall short by what is still dirty in the write-back L2, at most its 50 MB, when the kernel ends)")
else:
    print("- ncu: no DRAM bytes read (see liger.log)")
print("- by the kernel's source: x read for 7/8 of the rows + written for 1/8 + target + loss = "
      f"{8192 * 32000 * 4 + 8192 * 8 + 8192 * 4:.4g} B")
PY
}

fp8() {
  local lim=${STEP_S:-150} budget=() name
  [ -n "${OPT_BUDGET_S:-}" ] && budget=(--budget-s "$OPT_BUDGET_S")
  for name in flaggems_fp8_act_quant flaggems_fp8_gemm; do
    local f=benchmarks/observed/$name.py
    step "$lim" "$name-check" $KP check "$f" --json
    step "$lim" "$name-bench" $KP bench "$f" $([ "${BASELINES:-1}" = 0 ] && echo --no-baselines || echo --baselines) --json
    rm -rf "$RES/$name-opt"
    step "${OPT_LIMIT_S:-300}" "$name-optimize" $KP optimize "$f" "${budget[@]}" --json --out "$RES/$name-opt"
  done
  python3 - "$RES" <<'PY' | tee "$OUT/fp8-summary.md"
import json, sys
from pathlib import Path
res = Path(sys.argv[1])
us = lambda ns: f"{ns / 1e3:.1f}" if isinstance(ns, (int, float)) else "—"
def load(name):
    try:
        return json.loads((res / name).read_text())
    except Exception as exc:
        return {"_error": f"{type(exc).__name__}: {exc}"}
print("## flag-gems 5.0.2 FP8\n")
print("| kernel | check | bench median (µs) | % roofline | optimize v0 (µs) | best (µs) | best config | stop | errors |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for name in ("flaggems_fp8_act_quant", "flaggems_fp8_gemm"):
    check, bench, opt = (load(f"{name}-{k}.json") for k in ("check", "bench", "optimize"))
    run = opt.get("run") or {}
    versions = opt.get("versions") or []
    v0 = next((v for v in versions if v.get("index") == 0), {})
    best = next((v for v in versions if v.get("index") == run.get("best_version")), {})
    errs = []
    for k, obj in (("check", check), ("bench", bench), ("optimize", opt)):
        if obj.get("error") or obj.get("_error"):
            errs.append(f"{k}: {obj.get('error') or ''} {str(obj.get('message') or obj.get('_error')).splitlines()[0][:160]}")
    print(f"| {name} | {check.get('passed', check.get('_error', '?'))} | {us((bench.get('timing') or {}).get('median_ns'))} | "
          f"{bench.get('pct_of_roofline', '—')} | {us(v0.get('duration_ns'))} ({v0.get('status', '—')}) | "
          f"{us(best.get('duration_ns'))} | {json.dumps(best.get('config'))} | {run.get('stop_reason', '—')} | "
          f"{'; '.join(errs).replace('|', '/')} |")
PY
}

run_stage() {
  case "$1" in
    seed) { header seed; seed_session softmax; seed_session gemm; echo "== seed done in $(elapsed) s"; } 2>&1 | tee "$OUT/seed.log" ;;
    liger) { header liger; liger; echo "== liger done in $(elapsed) s"; } 2>&1 | tee "$OUT/liger.log" ;;
    fp8) { header fp8; fp8; echo "== fp8 done in $(elapsed) s"; } 2>&1 | tee "$OUT/fp8.log" ;;
    *) echo "usage: bash scripts/device-observed.sh seed|liger|fp8|all" >&2; return 2 ;;
  esac
}

stage=${1:-all}
if [ "$stage" = all ]; then
  # ~9 minutes on an H100: each stage in its own process under a hard `timeout` (seed 250 s, liger 150 s, fp8 140 s),
  # sessions without ncu cards, bench without baselines, optimize with a 30 s search budget
  export PROFILE=${PROFILE:-0} BASELINES=${BASELINES:-0} SEED_STEP_S=${SEED_STEP_S:-40} STEP_S=${STEP_S:-45} \
         OPT_BUDGET_S=${OPT_BUDGET_S:-30} OPT_LIMIT_S=${OPT_LIMIT_S:-60} NCU_LIMIT_S=${NCU_LIMIT_S:-45} KPO_NO_TAR=1
  timeout "${SEED_STAGE_S:-250}" bash "$0" seed; echo "seed stage rc=$?"
  timeout "${LIGER_STAGE_S:-150}" bash "$0" liger; echo "liger stage rc=$?"
  timeout "${FP8_STAGE_S:-140}" bash "$0" fp8; echo "fp8 stage rc=$?"
else
  run_stage "$stage"
fi
if [ -z "${KPO_NO_TAR:-}" ] || [ "$stage" = all ]; then
  tar czf "$OUT/observed-json.tgz" --exclude='*.ncu-rep' --exclude='*.so' --exclude='.git' \
    $(ls -d $RES/*.json $RES/*.err $RES/*.csv $RES/seed-*/ 2>/dev/null) 2>/dev/null
  echo "== [$(elapsed) s] files in $OUT:"; ls -la "$OUT"
fi
