#!/usr/bin/env bash
# The audit's figures of docs/performance.md ("One pass for every order"), side by side in one run:
# the PyTorch peer of the single order (../shared/bench/rd_torch_peer.py), the Go benchmark
# BenchmarkAuditOrders (single order 1.1, the default grid, the default grid with the clip set) and
# `nvdp audit` on the peer's file (default grid, single order), interleaved, REPS times (default 3);
# prints each run, the medians, the ratios and the load average of each repetition.
#
#   scripts/bench-audit.sh [REPS]
#
# Shapes: M = 872, N = 65, P = 128 (QNLI-dev-like). Needs /usr/bin/python3 with torch and numpy.
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-3}
BENCH=${NVDP_SHARED:-../shared}/bench
TMP=${TMPDIR:-/tmp}/nvdp-bench-audit
mkdir -p "$TMP"
FILE=$TMP/p872.safetensors
[ -e "$FILE" ] || /usr/bin/python3 "$BENCH/make_synth.py" "$FILE" 872 65 128 0 >/dev/null
go build -o "$TMP/nvdp" ./cmd/nvdp
go test -c -o "$TMP/privacy.test" ./privacy
LOG=$TMP/runs.tsv
: >"$LOG"
now() { date +%s.%N; }
for r in $(seq 1 "$REPS"); do
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  t0=$(now); /usr/bin/python3 "$BENCH/rd_torch_peer.py" "$FILE" >/dev/null; t1=$(now)
  echo -e "$r\tpeer\t$(echo "$t1 - $t0" | bc)\t$load" >>"$LOG"
  (cd privacy && "$TMP/privacy.test" -test.run XXX -test.bench AuditOrders -test.benchtime 1x) |
    awk -v r="$r" -v load="$load" '/^BenchmarkAuditOrders\//{split($1, a, "/"); sub(/-[0-9]+$/, "", a[2]); printf "%s\tgo-%s\t%.3f\t%s\n", r, a[2], $3/1e9, load}' >>"$LOG"
  for o in default single; do
    args=(); [ $o = single ] && args=(--bdp-orders 0.1)
    t0=$(now); "$TMP/nvdp" audit --posteriors "$FILE" --json --no-progress "${args[@]}" >/dev/null; t1=$(now)
    echo -e "$r\tcli-$o\t$(echo "$t1 - $t0" | bc)\t$load" >>"$LOG"
  done
  echo "repetition $r done (load average at its start: $load)" >&2
done
cat "$LOG"
/usr/bin/python3 - "$LOG" <<'EOF'
import sys, statistics, collections
t = collections.defaultdict(list)
for line in open(sys.argv[1]):
    r, k, s, load = line.rstrip("\n").split("\t")
    t[k].append(float(s))
med = {k: statistics.median(v) for k, v in t.items()}
for k in sorted(med):
    print(f"median {k:14s} {med[k]:8.2f} s  (runs {', '.join(f'{x:.2f}' for x in t[k])})")
print(f"peer / go-single (engine, single order): {med['peer'] / med['go-single']:.2f}x")
print(f"peer / cli-single (whole command, single order): {med['peer'] / med['cli-single']:.2f}x")
print(f"go-default / go-single: {med['go-default'] / med['go-single']:.2f}x")
print(f"go-certified / go-single: {med['go-certified'] / med['go-single']:.2f}x")
print(f"cli-default / cli-single: {med['cli-default'] / med['cli-single']:.2f}x")
print(f"peer / cli-default (the command a user runs): {med['peer'] / med['cli-default']:.2f}x")
EOF
