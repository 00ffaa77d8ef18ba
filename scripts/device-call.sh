# Sourced by the multi-lane device scripts (device-s11.sh to device-s16.sh) after `stage` is set: $OUT, the carried
# wheels (device-env.sh), the call's deadline END (CALL_S seconds from the script's start), a header with the GPUs,
# versions and lanes' cores, $L and $EX (the library and example kernels), and helpers: `left [MARGIN]` (seconds to
# END less MARGIN), `gputests GPU FILE...` (the GPU-marked tests in those files on that GPU, ended before END),
# `lanecpus GPU` (a lane's share of the cores), `lane GPU KERNEL...` (table rows), `peers GPU TOOLS TAG [KERNELS]`
# (search_peers.py rows) and `summarize` (what lands in $OUT).
OUT=${OUT:-/tmp/kp-out}; mkdir -p "$OUT"
source scripts/device-env.sh
T0=$(( $(date +%s) - SECONDS )); END=$(( T0 + ${CALL_S:-570} ))
echo "== $stage, $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD 2>/dev/null), $(nproc) cores"
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
L=benchmarks/library
EX=src/kernelpilot/examples
left() { echo $(( END - $(date +%s) - ${1:-0} )); }
gputests() {  # GPU $1, test files ...: the GPU-marked tests in them, ended before the call's limit (PIN=1: on the
  # lane's share of the cores, lanecpus)
  local g=$1; shift
  local pin=(); [ "${PIN:-0}" = 1 ] && pin=(taskset -c "$(lanecpus "$g")")
  CUDA_VISIBLE_DEVICES=$g "${pin[@]}" timeout -k 10 $(left 20) python3 -m pytest -v -m gpu -p no:cacheprovider -rfE --tb=short \
    --durations=8 "$@"
  echo "-- gpu tests rc=$? at $SECONDS s"
}
lanecpus() {  # GPU [LANES]: the CPU range a lane gets when the host's cores are split evenly among LANES lanes
  # (default: the GPUs); `taskset -c $(lanecpus 2) CMD` keeps a lane's compiles off the others' cores, and
  # kernelpilot's pools size themselves to it (childproc.usable_cpus)
  local g=$1 n=${2:-$(nvidia-smi -L | wc -l)} c; c=$(nproc)
  echo "$(( g * c / n ))-$(( (g + 1) * c / n - 1 ))"
}
lane() {  # lane GPU KERNEL...: table.py rows on one GPU, pinned to its cores (paired, cold exhaustive)
  local g=$1; shift
  CUDA_VISIBLE_DEVICES=$g taskset -c "$(lanecpus "$g")" python3 benchmarks/search/table.py "$@" --timeout-s 450 \
    --cold-exhaustive --paired --deadline-unix $(( END - 15 )) --out /tmp/kp-table-$g --json-out "$OUT/rows.jsonl"
}
peers() {  # peers GPU TOOLS TAG [KERNEL]: search_peers.py rows (default sgemm) for those tools, pinned to the lane's cores
  local k=${4:-sgemm}
  CUDA_VISIBLE_DEVICES=$1 taskset -c "$(lanecpus "$1")" timeout -k 10 $(left 15) python3 benchmarks/search_peers.py \
    --only "$k" --tools "$2" --out /tmp/kp-peers-$3 --json-out "$OUT/peers-$3.json" --log /tmp/kp-peers-$3.log
  echo "-- peers $3 rc=$? at $SECONDS s"
}
summarize() {  # after the lanes: their logs, the run logs and a summary of the table rows in $OUT, a digest on stdout
  cat /tmp/lane*.log > "$OUT/lanes.log"
  (cd /tmp && tar czf "$OUT/logs.tgz" kp-table-*/*.log kp-table-*/opt-*/run.json kp-table-*/ex-*/tune.md 2>/dev/null)
  for f in /tmp/lane*.log; do echo "== $f"; grep -E "^\| |<!--|^-- |passed|failed|FAILED|ERROR" "$f" | cut -c1-300 | tail -n 24; done
  [ -f "$OUT/rows.jsonl" ] && python3 - "$OUT/rows.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    print(r["kernel"], "to1%", r.get("to_1pct_s"), "tune wall", r.get("tune_wall_s"))
    print("  opt setup", r.get("opt_setup_s")); print("  tune setup", r.get("tune_setup_s"))
    for t in r.get("timeline", [])[:12]:
        print("  opt", t["index"], t["at_s"], t["accepted"], {k: v for k, v in t["phases_s"].items() if v > 0.2})
    for t in r.get("tune_timeline", [])[:14]:
        print("  tune", t["spent_s"], t["status"], t["accepted"], t["phases_s"])
PY
  ls -la "$OUT"
}
echo "lanes' cores: $(for g in $(seq 0 $(( $(nvidia-smi -L | wc -l) - 1 ))); do printf '%s ' "$(lanecpus "$g")"; done)"
