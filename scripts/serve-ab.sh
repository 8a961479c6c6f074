#!/usr/bin/env bash
# serve-ab.sh OLD_NVDP NEW_NVDP MODEL_DIR OUT_DIR: two builds of nvdp, old and new, on the same
# machine and model, interleaved over ROUNDS (2) rounds (old, new, old, new, ...) because other
# jobs may share the cores: per build and round, `nvdp bench --config bert-tiny --batch 1 --seq 64
# --steps BENCH_STEPS (300) --no-dropout` (BENCH_STEPS=0 skips it), then the release service,
# batched (the defaults) with the binary response (RESPONSE=json: JSON) and the file ledger, under CLIENTS (8,32)
# clients for DUR (10s) each (docs/performance.md, "Buffer reuse"). The load average is recorded
# before each run, and the server's CPU time (user + system, /proc/PID/stat) over each level: its
# CPU milliseconds per release depend less on what else runs on the cores than releases/s do.
# Loopback port 18083. Results: OUT_DIR/serve-BUILD-ROUND-cCLIENTS.{json,cpu,uptime},
# OUT_DIR/bench-BUILD-ROUND.{json,uptime} and OUT_DIR/summary.tsv.
set -u
usage="usage: serve-ab.sh OLD_NVDP NEW_NVDP MODEL_DIR OUT_DIR"
OLD=$(realpath "${1:?$usage}") && NEW=$(realpath "${2:?$usage}") || exit 1
M=$(cd "${3:?$usage}" && pwd) || exit 1
O=${4:?$usage}; mkdir -p "$O"; O=$(cd "$O" && pwd)
cd "$(dirname "$0")/.."
go build -o bin/nvdp-load ./cmd/nvdp-load || exit 1
rm -f $O/l.db $O/k.txt
$NEW serve ledger init --ledger $O/l.db >/dev/null
export NVDP_API_KEY=$($NEW serve keygen --keys $O/k.txt --id load --budget-epsilon inf 2>/dev/null)
cut -f1 ../shared/data/glue/SST-2/dev.tsv | tail -n +2 > $O/texts.txt
for round in $(seq ${ROUNDS:-2}); do for v in old new; do
  B=$OLD; [ $v = new ] && B=$NEW
  if [ "${BENCH_STEPS:-300}" != 0 ]; then
    uptime > $O/bench-$v-$round.uptime
    $B bench --config bert-tiny --batch 1 --seq 64 --steps ${BENCH_STEPS:-300} --no-dropout --json > $O/bench-$v-$round.json 2>>$O/bench.err
  fi
  $B serve --model $M --max-epsilon 64 --ledger $O/l.db --keys $O/k.txt --addr 127.0.0.1:18083 --log-level warn 2>>$O/server.err & pid=$!
  for i in $(seq 60); do curl -sf http://127.0.0.1:18083/readyz >/dev/null && break; sleep 0.5; done
  for c in $(echo ${CLIENTS:-8,32} | tr , ' '); do
    f=$O/serve-$v-$round-c$c
    uptime > $f.uptime
    t0=$(awk '{print $14 + $15}' /proc/$pid/stat)
    bin/nvdp-load --url http://127.0.0.1:18083 --texts $O/texts.txt --concurrency $c --duration ${DUR:-10s} $([ "${RESPONSE:-binary}" = binary ] && echo --binary) --max-errors 1000000000 --json > $f.json 2>>$O/load.err
    echo $(( $(awk '{print $14 + $15}' /proc/$pid/stat) - t0 )) $(getconf CLK_TCK) > $f.cpu # ticks, ticks per second
  done
  kill -TERM $pid; wait $pid
done; done
python3 - "$O" > $O/summary.tsv <<'PY'
import glob, json, os, re, sys
def load1(f):
    return re.search(r"load average: ([0-9.]+)", open(f).read()).group(1)
o = sys.argv[1]
print("what\tbuild\tround\tclients\treleases_per_s\tp50_ms\tp99_ms\tcpu_ms_per_release\terrors\tload1")
def key(f):
    v, rnd, c = os.path.basename(f)[len("serve-"):-5].split("-")
    return int(c[1:]), int(rnd), v != "old"
for f in sorted(glob.glob(f"{o}/serve-*-*-c*.json"), key=key):
    v, rnd, _ = os.path.basename(f)[len("serve-"):-5].split("-")
    ticks, hz = map(int, open(f[:-5] + ".cpu").read().split())
    for r in json.load(open(f)):
        errs = ",".join(f"{k}:{n}" for k, n in sorted(r["errors"].items())) or "none"
        cpu = 1000 * ticks / hz / max(r["releases"], 1)
        print(f"serve\t{v}\t{rnd}\t{r['concurrency']}\t{r['releases_per_s']:.1f}\t{r['latency_ms']['p50']}\t{r['latency_ms']['p99']}\t{cpu:.2f}\t{errs}\t{load1(f[:-5] + '.uptime')}")
for f in sorted(glob.glob(f"{o}/bench-*-*.json"), key=lambda f: (int(f.split("-")[-1][:-5]), "new" in f)):
    v, rnd = os.path.basename(f)[len("bench-"):-5].split("-")
    r = json.load(open(f))
    print(f"bench_infer_ms\t{v}\t{rnd}\t-\t{1000 * r['infer_step_seconds']:.3f}\t-\t-\t-\t-\t{load1(f[:-5] + '.uptime')}")
PY
column -t -s $'\t' $O/summary.tsv
