#!/usr/bin/env bash
# Load and fault tests of `nvdp serve` on a trained model (docs/performance.md, "Release service"):
# 1, 8 and 32 clients for DUR (30s) each, 50 requests of 32 texts, budget exhaustion, malformed
# requests, kill -9 under load and the ledger after the restart, the PyTorch peer's inference step.
# Loopback only (port 18080). Usage: bash scripts/serve-load.sh MODEL_DIR OUT_DIR
# (e.g. runs/sst2-nvdp-clipped after scripts/main-job.sh). Everything lands in OUT_DIR as JSON/text.
set -u
MODEL=${1:?usage: serve-load.sh MODEL_DIR OUT_DIR}; O=${2:?usage: serve-load.sh MODEL_DIR OUT_DIR}
MODEL=$(cd "$MODEL" && pwd) || exit 1
mkdir -p "$O"; O=$(cd "$O" && pwd)
cd "$(dirname "$0")/.."
go build -tags openblas -o bin/nvdp ./cmd/nvdp && go build -o bin/nvdp-load ./cmd/nvdp-load || exit 1
rm -f $O/keys.txt $O/ledger.db
bin/nvdp serve ledger init --ledger $O/ledger.db > $O/ledger-init.json || exit 1
export NVDP_API_KEY=$(bin/nvdp serve keygen --keys $O/keys.txt --id load --budget-epsilon inf)
SMALL=$(bin/nvdp serve keygen --keys $O/keys.txt --id small --budget-epsilon 150)
cut -f1 ../shared/data/glue/SST-2/dev.tsv | tail -n +2 > $O/sst2-dev.txt
uptime > $O/uptime.txt
start_server() { bin/nvdp serve --model $MODEL --max-epsilon ${MAX_EPSILON:-64} --ledger $O/ledger.db --keys $O/keys.txt --addr 127.0.0.1:18080 --log-level warn 2>>$O/server.stderr & echo $! > $O/server.pid
  for i in $(seq 60); do curl -sf http://127.0.0.1:18080/readyz >/dev/null && break; sleep 0.5; done; }
start_server
curl -s http://127.0.0.1:18080/v1/info > $O/info.json
bin/nvdp-load --url http://127.0.0.1:18080 --texts $O/sst2-dev.txt --concurrency 1,8,32 --duration ${DUR:-30s} --json > $O/load.json 2> $O/load.stderr; echo "load rc $?" >> $O/rc.txt
curl -s http://127.0.0.1:18080/metrics > $O/metrics-after-load.txt
bin/nvdp-load --url http://127.0.0.1:18080 --texts $O/sst2-dev.txt --concurrency 1 --texts-per-request 32 --requests ${BREQ:-50} --json > $O/batch32.json 2> $O/batch32.stderr; echo "batch rc $?" >> $O/rc.txt
curl -s http://127.0.0.1:18080/metrics > $O/metrics-after-batch.txt
uptime >> $O/uptime.txt
for i in 1 2 3 4 5 6; do curl -s -o $O/budget-$i.json -w "%{http_code}\n" http://127.0.0.1:18080/v1/embed -H "Authorization: Bearer $SMALL" -H 'Content-Type: application/json' -d '{"texts":["a gripping, funny film"]}'; done > $O/budget-codes.txt
curl -s http://127.0.0.1:18080/v1/budget -H "Authorization: Bearer $SMALL" > $O/budget-small.json
m() { curl -s -o $O/mal-$1.json -w "$1 %{http_code}\n" http://127.0.0.1:18080/v1/embed -H "Authorization: Bearer $NVDP_API_KEY" -H 'Content-Type: application/json' --data-binary "$2"; }
{ m badjson '{"texts": [' ; m wrongtype '{"texts": "x"}'; m empty '{"texts": [""]}'; m unknown '{"texts": ["a"], "x": 1}'; m none '{}';
  curl -s -o $O/mal-nokey.json -w "nokey %{http_code}\n" http://127.0.0.1:18080/v1/embed -d '{"texts":["a"]}'; } > $O/malformed-codes.txt
curl -s http://127.0.0.1:18080/v1/budget -H "Authorization: Bearer $NVDP_API_KEY" > $O/budget-load-before-kill.json
bin/nvdp-load --url http://127.0.0.1:18080 --texts $O/sst2-dev.txt --concurrency 8 --duration ${KDUR:-20s} --json > $O/kill-load.json 2> $O/kill-load.stderr &
LP=$!; sleep ${KSLEEP:-8}; kill -9 $(cat $O/server.pid); wait $LP; echo "kill-load rc $?" >> $O/rc.txt
start_server
curl -s http://127.0.0.1:18080/v1/budget -H "Authorization: Bearer $NVDP_API_KEY" > $O/budget-load-after-kill.json
kill -TERM $(cat $O/server.pid); wait
# the peer (the encoder's inference step at the release's length) needs Debian's PyTorch:
# apt-get install -y python3-torch python3-numpy python3-scipy
/usr/bin/python3 ../shared/bench/train_step_peer.py bert-tiny 32 64 5 > $O/peer32.json 2> $O/peer.stderr
/usr/bin/python3 ../shared/bench/train_step_peer.py bert-tiny 1 64 5 > $O/peer1.json 2>> $O/peer.stderr
uptime >> $O/uptime.txt
echo done >> $O/rc.txt
