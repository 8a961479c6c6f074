#!/usr/bin/env bash
# The release service on its two ledgers, same machine, same run (docs/performance.md, "The
# ledgers"): nvdp serve on the bbolt file (1 server) and on PostgreSQL (1 and 3 replicas, keys from
# a file; 3 replicas with the keys in the database), nvdp-load at 1, 8 and 32 clients for DUR (10s)
# each (one text per request; the clients spread over the replicas), and the mean time of a charge
# at each level from the servers' nvdp_ledger_charge_duration_seconds. PostgreSQL runs durable (its
# defaults: fsync, synchronous_commit on) from a cluster this script makes in OUT/pg
# (scripts/pgcluster.sh); it is stopped at the end.
#
# Usage: bash scripts/serve-ledgers.sh OUT [MODEL_DIR]
# Without MODEL_DIR the servers release from the fake model of N = 65, P = 128 (the main job's
# shape; no model work, through the test binary's TestServeHelper): the service's and the ledger's
# cost alone. With MODEL_DIR (e.g. runs/sst2-nvdp-clipped) they release from the model.
# MAX_EPSILON (unset: serve's default) is passed as --max-epsilon, e.g. 64 for the main job's model;
# CLIENTS (1,8,32) the levels; RESPONSE=binary asks for the safetensors response (default JSON).
# SERVE_ARGS are added to every server's flags (e.g. "--ledger-commit-window 0").
# Loopback only (ports 18100-18103). Every output lands in OUT as JSON; OUT/summary.tsv the table.
set -u
O=${1:?usage: serve-ledgers.sh OUT [MODEL_DIR]}; MODEL=${2:-}
mkdir -p "$O"; O=$(cd "$O" && pwd)
[ -n "$MODEL" ] && MODEL=$(cd "$MODEL" && pwd)
cd "$(dirname "$0")/.."
source scripts/deps.sh
DUR=${DUR:-10s}
go build -tags openblas -o bin/nvdp ./cmd/nvdp && go build -o bin/nvdp-load ./cmd/nvdp-load || exit 1
[ -z "$MODEL" ] && { go test -c -o bin/nvdp-serve.test ./cmd/nvdp || exit 1; }
source scripts/pgcluster.sh
pg_cluster_start "$O" || exit 1
nvdp=(bin/nvdp)
uptime > "$O/uptime.txt"; nproc >> "$O/uptime.txt"; grep -m1 'model name' /proc/cpuinfo >> "$O/uptime.txt"
printf "ledger\treplicas\tkeys\tclients\trequests\treleases_per_s\tp50_ms\tp99_ms\tcharge_ms\terrors\n" > "$O/summary.tsv"

# serve_one NAME PORT LEDGER KEYARGS...: one server in the background (pid in $O/NAME.pid).
serve_one() {
  local name=$1 port=$2 ledger=$3; shift 3
  local args=(serve --model "${MODEL:-fake:65x128}" --addr "127.0.0.1:$port" --ledger "$ledger" --log-level warn --replica "$name" ${MAX_EPSILON:+--max-epsilon "$MAX_EPSILON"} "$@" ${SERVE_ARGS:-})
  if [ -n "$MODEL" ]; then
    bin/nvdp "${args[@]}" 2>>"$O/$name.stderr" &
  else
    NVDP_SERVE_HELPER=1 NVDP_SERVE_LATENCY=0s NVDP_SERVE_ARGS=$(printf '%s\n' "${args[@]}" | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read().split("\n")[:-1]))') \
      bin/nvdp-serve.test -test.run '^TestServeHelper$' 2>>"$O/$name.stderr" &
  fi
  echo $! > "$O/$name.pid"
  for i in $(seq 120); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && return 0; sleep 0.5; done
  echo "server $name did not start" >&2; return 1
}

# charge_stats PORTS...: the sum and count of nvdp_ledger_charge_duration_seconds over the servers.
charge_stats() {
  for p in "$@"; do curl -s "http://127.0.0.1:$p/metrics"; done |
    awk '/^nvdp_ledger_charge_duration_seconds_sum/{s+=$2} /^nvdp_ledger_charge_duration_seconds_count/{c+=$2} END{printf "%.9f %d\n", s, c}'
}

# run_config NAME LEDGER REPLICAS KEYS: the load at 1, 8, 32 clients on REPLICAS servers.
run_config() {
  local name=$1 ledger=$2 n=$3 keys=$4 ports=() urls=() keyargs=()
  if [ "$keys" = file ]; then
    rm -f "$O/keys-$name.txt"
    export NVDP_API_KEY=$(bin/nvdp serve keygen --keys "$O/keys-$name.txt" --id load --budget-epsilon inf 2>/dev/null)
    keyargs=(--keys "$O/keys-$name.txt")
  else
    export NVDP_API_KEY=$(bin/nvdp serve keys add --ledger "$ledger" --id "load-$name" --budget-epsilon inf 2>/dev/null)
    keyargs=(--keys-in-ledger)
  fi
  for i in $(seq 0 $((n-1))); do
    ports+=($((18100+i))); urls+=("http://127.0.0.1:$((18100+i))")
    serve_one "$name-r$i" $((18100+i)) "$ledger" "${keyargs[@]}" || return 1
  done
  local url; url=$(IFS=,; echo "${urls[*]}")
  for c in $(echo ${CLIENTS:-1,8,32} | tr , " "); do
    read s0 n0 < <(charge_stats "${ports[@]}")
    bin/nvdp-load --url "$url" --concurrency $c --duration "$DUR" $([ "${RESPONSE:-json}" = binary ] && echo --binary) --json > "$O/$name-c$c.json" 2>>"$O/$name-load.stderr"
    read s1 n1 < <(charge_stats "${ports[@]}")
    python3 - "$O/$name-c$c.json" "$name" "$n" "$keys" "$s0" "$n0" "$s1" "$n1" >> "$O/summary.tsv" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))[0]
s0, n0, s1, n1 = map(float, sys.argv[5:9])
charge = 1000 * (s1 - s0) / max(1, n1 - n0)
errs = ",".join(f"{k}:{v}" for k, v in sorted(r["errors"].items())) or "none"
print("\t".join(map(str, [sys.argv[2], sys.argv[3], sys.argv[4], r["concurrency"], r["requests"], round(r["releases_per_s"], 1),
      r["latency_ms"]["p50"], r["latency_ms"]["p99"], round(charge, 3), errs])))
EOF
  done
  for i in $(seq 0 $((n-1))); do kill -TERM "$(cat "$O/$name-r$i.pid")"; done; wait 2>/dev/null
}

rm -f "$O/ledger.db"
bin/nvdp serve ledger init --ledger "$O/ledger.db" > "$O/ledger-init-file.json"
bin/nvdp serve ledger init --ledger env:NVDP_LEDGER_DSN > "$O/ledger-init-pg.json"
run_config file "$O/ledger.db" 1 file
run_config pg1 env:NVDP_LEDGER_DSN 1 file
run_config pg3 env:NVDP_LEDGER_DSN 3 file
run_config pg3db env:NVDP_LEDGER_DSN 3 db
bin/nvdp serve ledger --ledger env:NVDP_LEDGER_DSN > "$O/accounts-pg.json"
bin/nvdp serve ledger --ledger "$O/ledger.db" > "$O/accounts-file.json"
uptime >> "$O/uptime.txt"
column -t -s $'\t' "$O/summary.tsv"
