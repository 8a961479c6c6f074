#!/usr/bin/env bash
# serve-batching.sh MODEL_DIR OUT_DIR: the release service with --batch-texts 1 (each request alone:
# the release path before batching) and with the default batching, JSON and binary (safetensors)
# responses, interleaved over 2 rounds, the same binary, model and machine, 1/8/32/128 clients for
# DUR (10s) each (docs/performance.md, "Batching"); then nvdp bench's inference texts/s at batch 32
# and the release length (SEQ, 64). LEDGERS (default "file") names the ledgers to run on: file (bbolt)
# and pg (a durable PostgreSQL cluster in OUT_DIR/pg, scripts/pgcluster.sh). Loopback port 18081.
# Results: OUT_DIR/LEDGER-{alone,batched}-{json,binary}-R.json (nvdp-load), .metrics (the batch
# sizes), bench.json.
set -u
M=$(cd "${1:?usage: serve-batching.sh MODEL_DIR OUT_DIR}" && pwd) || exit 1
O=${2:?usage: serve-batching.sh MODEL_DIR OUT_DIR}; mkdir -p "$O"; O=$(cd "$O" && pwd)
cd "$(dirname "$0")/.."
go build -tags openblas -o bin/nvdp ./cmd/nvdp && go build -o bin/nvdp-load ./cmd/nvdp-load || exit 1
B=bin/nvdp; L=bin/nvdp-load; rm -f $O/l.db $O/k.txt
$B serve ledger init --ledger $O/l.db >/dev/null
export NVDP_API_KEY=$($B serve keygen --keys $O/k.txt --id load --budget-epsilon inf 2>/dev/null)
cut -f1 ../shared/data/glue/SST-2/dev.tsv | tail -n +2 > $O/texts.txt
for ledger in ${LEDGERS:-file}; do
  loc=$O/l.db
  if [ $ledger = pg ]; then
    source scripts/pgcluster.sh; pg_cluster_start "$O" || exit 1
    $B serve ledger init --ledger env:NVDP_LEDGER_DSN >/dev/null || exit 1; loc=env:NVDP_LEDGER_DSN
  fi
  for round in 1 2; do for mode in alone-json batched-json alone-binary batched-binary; do
    extra=""; [ ${mode%-*} = alone ] && extra="--batch-texts 1"
    accept=""; [ ${mode#*-} = binary ] && accept="--binary"
    $B serve --model $M --max-epsilon 64 --ledger $loc --keys $O/k.txt --addr 127.0.0.1:18081 --log-level warn $extra 2>>$O/server.err & pid=$!
    for i in $(seq 60); do curl -sf http://127.0.0.1:18081/readyz >/dev/null && break; sleep 0.5; done
    $L --url http://127.0.0.1:18081 --texts $O/texts.txt --concurrency 1,8,32,128 --duration ${DUR:-10s} $accept --max-errors 1000000000 --json > $O/$ledger-$mode-$round.json 2>>$O/load.err
    curl -s http://127.0.0.1:18081/metrics | grep -E "^nvdp_release_batch_(texts|requests)_(sum|count)" > $O/$ledger-$mode-$round.metrics
    kill -TERM $pid; wait $pid
  done; done
done
$B bench --config bert-tiny --batch 32 --seq ${SEQ:-64} --steps 20 --no-dropout --json > $O/bench.json 2>/dev/null
# OUT_DIR/summary.tsv: one row per ledger, mode, round and client count; the mean texts of a batch
# over the whole mode-round (from its .metrics), and releases/s against bench's inference texts/s.
python3 - "$O" > $O/summary.tsv <<'PY'
import glob, json, os, sys
o = sys.argv[1]
bench = json.load(open(f"{o}/bench.json"))
infer = 32 / bench["infer_step_seconds"]
print("ledger\tmode\tround\tclients\treleases_per_s\tp50_ms\tp99_ms\tbatch_texts\tratio_to_bench\terrors")
for f in sorted(glob.glob(f"{o}/*-*-*-[0-9].json")):
    ledger, mode, fmt, rnd = os.path.basename(f)[:-5].split("-")
    m = dict(l.split() for l in open(f[:-5] + ".metrics") if l.strip())
    per = float(m.get("nvdp_release_batch_texts_sum", 0)) / max(1.0, float(m.get("nvdp_release_batch_texts_count", 0)))
    for r in json.load(open(f)):
        errs = ",".join(f"{k}:{v}" for k, v in sorted(r["errors"].items())) or "none"
        print(f"{ledger}\t{mode}-{fmt}\t{rnd}\t{r['concurrency']}\t{r['releases_per_s']:.1f}\t{r['latency_ms']['p50']}\t{r['latency_ms']['p99']}\t{per:.2f}\t{r['releases_per_s'] / infer:.2f}\t{errs}")
PY
echo "bench inference at batch 32: $(python3 -c "import json; print(round(32 / json.load(open('$O/bench.json'))['infer_step_seconds']))") texts/s"
column -t -s $'\t' $O/summary.tsv
