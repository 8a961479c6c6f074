#!/usr/bin/env bash
# serve-cpu.sh NVDP MODEL_DIR OUT_DIR [CLIENTS]: one level of the release service (CLIENTS, 32) for DUR
# (10s) with the binary response and the file ledger, and where the machine's CPU went over it: the
# server's CPU milliseconds a release (user + system, /proc/PID/stat), the load generator's
# (/usr/bin/time), and the share of the machine left idle (/proc/stat), besides releases/s and the
# latency percentiles (docs/performance.md, "The service at 3.6 ms a release"). SERVE_ARGS are added to
# the server's flags (e.g. "--max-concurrent 4"). Loopback port 18084. Output: OUT_DIR/load.json and
# one summary line on stdout.
set -u
usage="usage: serve-cpu.sh NVDP MODEL_DIR OUT_DIR [CLIENTS]"
B=$(realpath "${1:?$usage}") && M=$(cd "${2:?$usage}" && pwd) || exit 1
O=${3:?$usage}; C=${4:-32}; mkdir -p "$O"; O=$(cd "$O" && pwd)
cd "$(dirname "$0")/.."
go build -o bin/nvdp-load ./cmd/nvdp-load || exit 1
rm -f "$O/l.db" "$O/k.txt"
"$B" serve ledger init --ledger "$O/l.db" >/dev/null || exit 1
export NVDP_API_KEY=$("$B" serve keygen --keys "$O/k.txt" --id load --budget-epsilon inf 2>/dev/null)
cut -f1 ../shared/data/glue/SST-2/dev.tsv | tail -n +2 > "$O/texts.txt"
# shellcheck disable=SC2086
"$B" serve --model "$M" --max-epsilon 64 --ledger "$O/l.db" --keys "$O/k.txt" --addr 127.0.0.1:18084 --log-level warn ${SERVE_ARGS:-} 2>>"$O/server.err" & pid=$!
for _ in $(seq 60); do curl -sf http://127.0.0.1:18084/readyz >/dev/null && break; sleep 0.5; done
cpu() { awk '{print $14 + $15}' "/proc/$pid/stat"; }   # the server's ticks
idle() { awk '/^cpu /{t = 0; for (i = 2; i <= NF; i++) t += $i; print $5, t}' /proc/stat; }
s0=$(cpu); read -r i0 t0 < <(idle)
/usr/bin/time -f "%U %S" -o "$O/load.time" bin/nvdp-load --url http://127.0.0.1:18084 --texts "$O/texts.txt" \
  --concurrency "$C" --duration "${DUR:-10s}" --binary --json > "$O/load.json" 2>>"$O/load.err"
s1=$(cpu); read -r i1 t1 < <(idle)
kill -TERM $pid; wait $pid
python3 - "$O" $((s1 - s0)) "$(getconf CLK_TCK)" $((i1 - i0)) $((t1 - t0)) <<'PY'
import json, sys
o, srv, hz, idle, tot = sys.argv[1], *map(int, sys.argv[2:])
r = json.load(open(o + "/load.json"))[0]
n = max(r["releases"], 1)
lu, ls = map(float, open(o + "/load.time").read().split())
print(f"{r['concurrency']} clients: {r['releases_per_s']:.1f} releases/s, p50 {r['latency_ms']['p50']} ms, p99 {r['latency_ms']['p99']} ms; "
      f"CPU a release: server {1000 * srv / hz / n:.2f} ms, load generator {1000 * (lu + ls) / n:.2f} ms; idle {100 * idle / tot:.1f}% of the machine")
PY
