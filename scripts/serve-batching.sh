#!/usr/bin/env bash
# serve-batching.sh MODEL_DIR OUT_DIR: the release service with --batch-texts 1 (each request alone:
# the release path before batching) and with the default batching, JSON and binary (safetensors)
# responses, interleaved over 2 rounds, the same binary, model and machine, 1/8/32/128 clients for
# DUR (10s) each (docs/performance.md, "Batching"); then nvdp bench's inference texts/s at batch 32
# and the release length (SEQ, 64). Loopback port 18081. Results: OUT_DIR/{alone,batched}-{json,
# binary}-R.json (nvdp-load), .metrics (the batch sizes), bench.json.
set -u
M=$(cd "${1:?usage: serve-batching.sh MODEL_DIR OUT_DIR}" && pwd) || exit 1
O=${2:?usage: serve-batching.sh MODEL_DIR OUT_DIR}; mkdir -p "$O"; O=$(cd "$O" && pwd)
cd "$(dirname "$0")/.."
go build -tags openblas -o bin/nvdp ./cmd/nvdp && go build -o bin/nvdp-load ./cmd/nvdp-load || exit 1
B=bin/nvdp; L=bin/nvdp-load; rm -f $O/l.db $O/k.txt
$B serve ledger init --ledger $O/l.db >/dev/null
export NVDP_API_KEY=$($B serve keygen --keys $O/k.txt --id load --budget-epsilon inf 2>/dev/null)
cut -f1 ../shared/data/glue/SST-2/dev.tsv | tail -n +2 > $O/texts.txt
for round in 1 2; do for mode in alone-json batched-json alone-binary batched-binary; do
  extra=""; [ ${mode%-*} = alone ] && extra="--batch-texts 1"
  accept=""; [ ${mode#*-} = binary ] && accept="--binary"
  $B serve --model $M --max-epsilon 64 --ledger $O/l.db --keys $O/k.txt --addr 127.0.0.1:18081 --log-level warn $extra 2>>$O/server.err & pid=$!
  for i in $(seq 60); do curl -sf http://127.0.0.1:18081/readyz >/dev/null && break; sleep 0.5; done
  $L --url http://127.0.0.1:18081 --texts $O/texts.txt --concurrency 1,8,32,128 --duration ${DUR:-10s} $accept --max-errors 1000000000 --json > $O/$mode-$round.json 2>>$O/load.err
  curl -s http://127.0.0.1:18081/metrics | grep -E "^nvdp_release_batch_(texts|requests)_(sum|count)" > $O/$mode-$round.metrics
  kill -TERM $pid; wait $pid
done; done
$B bench --config bert-tiny --batch 32 --seq ${SEQ:-64} --steps 20 --no-dropout --json > $O/bench.json 2>/dev/null
