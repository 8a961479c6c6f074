#!/usr/bin/env bash
# The release's throughput under two builds of nvdp, interleaved on one machine (issue 37: the
# exact sampler against the floating-point one it replaced): `nvdp embed` of the SST-2 dev texts
# (texts/s) and `nvdp serve` under `nvdp-load` at 1 and 8 clients (releases/s, p50), ROUNDS rounds
# of A then B, so that drift of the machine's load falls on both. Loopback only (port 18090).
# Usage: bash scripts/release-bench.sh NVDP_A NVDP_B MODEL_DIR OUT_DIR
# (e.g. a build of the previous commit, bin/nvdp, and runs/sst2-nvdp-clipped after
# scripts/main-job.sh). Writes OUT_DIR/{A,B}-r*-{embed.txt,load.json} and prints a summary.
set -eu
A=$(realpath "${1:?usage: release-bench.sh NVDP_A NVDP_B MODEL_DIR OUT_DIR}"); B=$(realpath "${2:?}")
MODEL=$(realpath "${3:?}"); O=${4:?}
mkdir -p "$O"; O=$(realpath "$O")
cd "$(dirname "$0")/.."
go build -o bin/nvdp-load ./cmd/nvdp-load
cut -f1 ../shared/data/glue/SST-2/dev.tsv | tail -n +2 > "$O/sst2-dev.txt"
DUR=${DUR:-15s}
for r in $(seq "${ROUNDS:-2}"); do
  for side in A B; do
    bin=$A; [ "$side" = B ] && bin=$B
    s=$(date +%s.%N)
    "$bin" embed --model "$MODEL" --input "$O/sst2-dev.txt" --out "$O/$side-r$r.safetensors" --max-epsilon 64 --no-progress 2>>"$O/$side-embed.stderr" >/dev/null
    e=$(date +%s.%N)
    echo "$s $e" > "$O/$side-r$r-embed.txt"
    rm -f "$O/$side-r$r.safetensors" "$O/ledger-$side.db" "$O/keys-$side.txt"
    "$bin" serve ledger init --ledger "$O/ledger-$side.db" >/dev/null
    key=$("$bin" serve keygen --keys "$O/keys-$side.txt" --id load --budget-epsilon inf)
    "$bin" serve --model "$MODEL" --max-epsilon 64 --ledger "$O/ledger-$side.db" --keys "$O/keys-$side.txt" \
      --addr 127.0.0.1:18090 --log-level warn 2>>"$O/$side-serve.stderr" & pid=$!
    for i in $(seq 60); do curl -sf http://127.0.0.1:18090/readyz >/dev/null && break; sleep 0.5; done
    NVDP_API_KEY=$key bin/nvdp-load --url http://127.0.0.1:18090 --texts "$O/sst2-dev.txt" --concurrency 1,8 \
      --duration "$DUR" --json > "$O/$side-r$r-load.json" 2>>"$O/$side-load.stderr"
    curl -s http://127.0.0.1:18090/metrics | grep '^nvdp_noise_pool' > "$O/$side-r$r-pool.txt" || true
    kill -TERM $pid; wait $pid || true
  done
done
python3 - "$O" <<'EOF'
import json, sys, glob, os
o = sys.argv[1]
texts = sum(1 for _ in open(os.path.join(o, "sst2-dev.txt")))
for side in "AB":
    rates = []
    for f in sorted(glob.glob(f"{o}/{side}-r*-embed.txt")):
        s, e = map(float, open(f).read().split())
        rates.append(texts / (e - s))
    loads = {}
    for f in sorted(glob.glob(f"{o}/{side}-r*-load.json")):
        d = json.load(open(f))
        for lvl in (d if isinstance(d, list) else d["levels"]):
            loads.setdefault(lvl["concurrency"], []).append((lvl["releases_per_s"], lvl["latency_ms"]["p50"]))
    print(side, "embed texts/s", [round(x, 1) for x in rates],
          "; serve", {c: [(round(r, 1), round(p, 1)) for r, p in v] for c, v in loads.items()})
EOF
