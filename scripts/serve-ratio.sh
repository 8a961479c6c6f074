#!/usr/bin/env bash
# serve-ratio.sh NVDP MODEL_DIR OUT_DIR [ROUNDS]: the issue-40 ratio, the service's releases/s at 32
# clients (serve-cpu.sh: binary responses, file ledger) to the engine's batched inference at the
# release length (`nvdp bench --config bert-tiny --batch 32 --seq 64`), in ROUNDS (3) interleaved
# rounds on the same machine. The engine is measured two ways: as `nvdp bench` runs by default
# (OpenBLAS's threads, one forward pass on every core) and at its best on this machine, one
# single-threaded bench per core at once, their texts/s added (the server's own setting: one BLAS
# thread a forward pass, a pass a core). Output: OUT_DIR/ratio.tsv and a line a round on stdout
# (docs/performance.md, "The ratio to the engine").
set -u
usage="usage: serve-ratio.sh NVDP MODEL_DIR OUT_DIR [ROUNDS]"
B=$(realpath "${1:?$usage}") && M=$(cd "${2:?$usage}" && pwd) || exit 1
O=${3:?$usage}; R=${4:-3}; mkdir -p "$O"; O=$(cd "$O" && pwd)
cd "$(dirname "$0")/.."
texts() { python3 -c 'import json, sys; print(32 / json.load(open(sys.argv[1]))["infer_step_seconds"])' "$1"; }
bench() { "$B" bench --config bert-tiny --batch 32 --seq 64 --steps "${BENCH_STEPS:-40}" --no-dropout --json > "$1" 2>>"$O/bench.err"; }
printf 'round\treleases_per_s\tengine_default\tengine_per_core_sum\tratio_default\tratio_per_core\n' > "$O/ratio.tsv"
cores=$(nproc)
for r in $(seq "$R"); do
  line=$(bash scripts/serve-cpu.sh "$B" "$M" "$O/serve-$r" 32) || exit 1
  rel=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[0]["releases_per_s"])' "$O/serve-$r/load.json")
  bench "$O/bench-default-$r.json" || exit 1
  pids=()
  for c in $(seq "$cores"); do OPENBLAS_NUM_THREADS=1 bench "$O/bench-one-$r-$c.json" & pids+=($!); done
  for p in "${pids[@]}"; do wait "$p" || exit 1; done
  def=$(texts "$O/bench-default-$r.json")
  sum=$(for c in $(seq "$cores"); do texts "$O/bench-one-$r-$c.json"; done | awk '{s += $1} END {print s}')
  awk -v r="$r" -v s="$rel" -v d="$def" -v p="$sum" 'BEGIN {printf "%d\t%.1f\t%.1f\t%.1f\t%.3f\t%.3f\n", r, s, d, p, s / d, s / p}' >> "$O/ratio.tsv"
  echo "round $r: $line"
  tail -1 "$O/ratio.tsv" | awk -F'\t' '{printf "  engine %s texts/s by default, %s on one thread a core; ratio %s and %s\n", $3, $4, $5, $6}'
done
