#!/usr/bin/env bash
# serve-blas-threads.sh MODEL_DIR OUT_DIR: the release service with --blas-threads 1 (the default)
# and 0 (OpenBLAS's own thread count, the cores), interleaved over ROUNDS (2) rounds, the same
# binary, model and machine, batched (the defaults) with the binary response, 1/8/32/128 clients
# for DUR (8s) each, file ledger (docs/performance.md, "Where a release's time goes"). Loopback port
# 18082. Results: OUT_DIR/threadsT-R.json (nvdp-load) and OUT_DIR/summary.tsv.
set -u
M=$(cd "${1:?usage: serve-blas-threads.sh MODEL_DIR OUT_DIR}" && pwd) || exit 1
O=${2:?usage: serve-blas-threads.sh MODEL_DIR OUT_DIR}; mkdir -p "$O"; O=$(cd "$O" && pwd)
cd "$(dirname "$0")/.."
go build -tags openblas -o bin/nvdp ./cmd/nvdp && go build -o bin/nvdp-load ./cmd/nvdp-load || exit 1
B=bin/nvdp; rm -f $O/l.db $O/k.txt
$B serve ledger init --ledger $O/l.db >/dev/null
export NVDP_API_KEY=$($B serve keygen --keys $O/k.txt --id load --budget-epsilon inf 2>/dev/null)
cut -f1 ../shared/data/glue/SST-2/dev.tsv | tail -n +2 > $O/texts.txt
uptime > $O/uptime.txt
for round in $(seq ${ROUNDS:-2}); do for t in 1 0; do
  $B serve --model $M --max-epsilon 64 --ledger $O/l.db --keys $O/k.txt --addr 127.0.0.1:18082 --log-level warn --blas-threads $t 2>>$O/server.err & pid=$!
  for i in $(seq 60); do curl -sf http://127.0.0.1:18082/readyz >/dev/null && break; sleep 0.5; done
  bin/nvdp-load --url http://127.0.0.1:18082 --texts $O/texts.txt --concurrency 1,8,32,128 --duration ${DUR:-8s} --binary --max-errors 1000000000 --json > $O/threads$t-$round.json 2>>$O/load.err
  kill -TERM $pid; wait $pid
done; done
uptime >> $O/uptime.txt
python3 - "$O" > $O/summary.tsv <<'PY'
import glob, json, os, sys
print("blas_threads\tround\tclients\treleases_per_s\tp50_ms\tp99_ms\terrors")
for f in sorted(glob.glob(f"{sys.argv[1]}/threads*-*.json")):
    t, rnd = os.path.basename(f)[len("threads"):-5].split("-")
    for r in json.load(open(f)):
        errs = ",".join(f"{k}:{v}" for k, v in sorted(r["errors"].items())) or "none"
        print(f"{t}\t{rnd}\t{r['concurrency']}\t{r['releases_per_s']:.1f}\t{r['latency_ms']['p50']}\t{r['latency_ms']['p99']}\t{errs}")
PY
column -t -s $'\t' $O/summary.tsv
