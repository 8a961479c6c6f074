#!/usr/bin/env bash
# The audit's figures of docs/performance.md ("One pass for every order"), side by side in one run:
# the PyTorch peer of the single order (../shared/bench/rd_torch_peer.py), the Go benchmark
# BenchmarkAuditOrders (single order 1.1, the default grid, the default grid with the clip set) and
# `nvdp audit` on the peer's file (default grid, single order), interleaved, REPS times (default 3);
# prints each run (wall and CPU seconds), the medians, the ratios and the load average at the start
# of each repetition. CPU time (user + sys) is the steadier figure on a machine shared with other
# jobs.
#
#   scripts/bench-audit.sh [REPS]
#
# Shapes: M = 872, N = 65, P = 128 (QNLI-dev-like). Needs /usr/bin/python3 with torch and numpy,
# /usr/bin/time and bc.
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-3}
BENCH=${NVDP_SHARED:-../shared}/bench
TMP=${TMPDIR:-/tmp}/nvdp-bench-audit
mkdir -p "$TMP"
FILE=$TMP/p872.safetensors
[ -e "$FILE" ] || /usr/bin/python3 "$BENCH/make_synth.py" "$FILE" 872 65 128 0 >/dev/null
go build -o "$TMP/nvdp" ./cmd/nvdp
go test -c -o "$TMP/audit.test" ./audit
LOG=$TMP/runs.tsv
: >"$LOG"
# run NAME CMD...: appends "repetition, name, wall s, CPU s (user + sys), load average" to $LOG.
run() {
  local name=$1 t0 t1 cpu
  shift
  t0=$(date +%s.%N)
  /usr/bin/time -o "$TMP/time.txt" -f "cpu %U %S" "$@" >/dev/null 2>&1
  cpu=$(awk '/^cpu /{print $2 + $3}' "$TMP/time.txt")
  t1=$(date +%s.%N)
  echo -e "$r\t$name\t$(echo "$t1 - $t0" | bc)\t$cpu\t$load" >>"$LOG"
}
for r in $(seq 1 "$REPS"); do
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  run peer /usr/bin/python3 "$BENCH/rd_torch_peer.py" "$FILE"
  # Wall: the benchmark's own figure (s/audit, without building the posteriors); CPU: the whole
  # test process (building the posteriors included, about 0.5 s).
  for b in single default certified; do
    out=$(cd audit && { /usr/bin/time -f "cpu %U %S" "$TMP/audit.test" -test.run XXX -test.bench "AuditOrders/$b\$" -test.benchtime 1x; } 2>&1)
    wall=$(echo "$out" | awk '/^BenchmarkAuditOrders\//{printf "%.3f", $3/1e9}')
    cpu=$(echo "$out" | awk '/^cpu /{print $2 + $3}')
    echo -e "$r\tgo-$b\t$wall\t$cpu\t$load" >>"$LOG"
  done
  run cli-default "$TMP/nvdp" audit --posteriors "$FILE" --json --no-progress
  run cli-single "$TMP/nvdp" audit --posteriors "$FILE" --json --no-progress --bdp-orders 0.1
  echo "repetition $r done (load average at its start: $load)" >&2
done
cat "$LOG"
/usr/bin/python3 - "$LOG" <<'PY'
import sys, statistics, collections
wall, cpu = collections.defaultdict(list), collections.defaultdict(list)
for line in open(sys.argv[1]):
    r, k, w, c, load = line.rstrip("\n").split("\t")
    wall[k].append(float(w))
    cpu[k].append(float(c))
for name, t in (("wall", wall), ("CPU", cpu)):
    med = {k: statistics.median(v) for k, v in t.items()}
    print(f"-- {name} seconds, medians of {len(t['peer'])}")
    for k in sorted(med):
        print(f"median {k:14s} {med[k]:8.2f} s  (runs {', '.join(f'{x:.2f}' for x in t[k])})")
    for a, b, what in (("peer", "go-single", "peer / engine, single order"),
                       ("peer", "cli-single", "peer / nvdp audit, single order"),
                       ("go-default", "go-single", "default / single, engine"),
                       ("go-certified", "go-single", "default with the clip set / single, engine"),
                       ("cli-default", "cli-single", "default / single, nvdp audit"),
                       ("peer", "cli-default", "peer / nvdp audit default (the command a user runs)")):
        print(f"{name} {what}: {med[a] / med[b]:.2f}x")
PY
