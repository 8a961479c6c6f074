#!/usr/bin/env bash
# Everything of issue 28 that needs an NVIDIA GPU, in one go (about 5 minutes on an H100/H200).
#
#   bash scripts/gpu-check.sh build            # here (Go toolchain): binaries and data into bin/gpu/
#   bash scripts/gpu-check.sh run OUT          # on the GPU machine (no Go, no network): results into OUT
#   bash scripts/gpu-check.sh dry-run OUT      # here, on the CUDA stand-in (internal/cudaemu), small sizes
#
# build: CGO_ENABLED=0 binaries (nvdp and the test binaries of the packages with device twins:
# cuda, dnn, train, internal/bench), gzipped, with the first 10,000 SST-2 training rows, the dev
# split, the WordPiece vocabulary and the PyTorch peer ../shared/bench/train_step_peer.py: what travels
# with the checkout (bin/gpu, about 30 MiB of the 64 allowed): run(command, carry=["bin/gpu"]).
# run writes into OUT (each step's output as it finishes, so a timeout keeps what was done):
#   env.txt            nvidia-smi, the libraries found, the card as nvdp sees it
#   twins-*.txt        every device twin's forward and backward against its CPU layer (go test -v on the
#                      GPU: NVDP_CUDA_REAL=1), each test's tolerance stated in its source
#   steps-{cpu,cuda}/  200 steps of NVDP-Clipped bert-tiny on SST-2 (batch 32, epsilon 8), the same seed
#                      and the same noise (--host-noise) on both devices; steps.jsonl per step
#   steps-compare.json the largest relative difference of the step losses (the issue's bound: 1e-3)
#   steps-bf16.json    the same run on the GPU in BF16 beside FP32: losses by tenth, dev accuracy (issue 29)
#   bench-*.json       nvdp bench --device cuda and the peer, bert-base batch 32 seq 128, fp32, tf32 and bf16
#   audit-*.json       nvdp audit --device cuda / cpu on synthetic posteriors (872 and 10,000 x 65 x 128),
#                      and the PyTorch peer rd_torch_peer.py (issue 29); times in progress.txt
#   paper/             nvdp run --device cuda with scratch:bert-base (a few hundred steps, evaluation,
#                      the audit's posterior dump and audit), report.json and the epoch extrapolation
#   cpu16-*.json       (if time is left) nvdp bench on the machine's CPU cores vs the peer, pure Go
#   summary.json       the figures docs/performance.md wants
set -uo pipefail
cd "$(dirname "$0")/.."
MODE=${1:?usage: gpu-check.sh build | run OUT | dry-run OUT}
PKG=bin/gpu

build() {
  set -e
  rm -rf "$PKG" && mkdir -p "$PKG/data/glue/SST-2"
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$PKG/nvdp" ./cmd/nvdp
  for p in cuda dnn train internal/bench; do
    CGO_ENABLED=0 go test -c -trimpath -ldflags "-s -w" -o "$PKG/$(basename $p).test" "./$p"
  done
  gzip -9 "$PKG"/nvdp "$PKG"/*.test
  head -n 10001 ../shared/data/glue/SST-2/train.tsv > "$PKG/data/glue/SST-2/train.tsv"
  cp ../shared/data/glue/SST-2/dev.tsv ../shared/data/glue/SST-2/test.tsv "$PKG/data/glue/SST-2/"
  cp ../shared/models/bert-base-uncased-vocab/vocab.txt "$PKG/data/vocab.txt"
  cp ../shared/bench/train_step_peer.py ../shared/bench/rd_torch_peer.py ../shared/bench/make_synth.py ../shared/bench/safetensors_io.py "$PKG/"
  du -sh "$PKG"
}

if [ "$MODE" = build ]; then build; exit; fi
OUT=${2:?usage: gpu-check.sh run OUT}
mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)
T0=$(date +%s)
elapsed() { echo $(( $(date +%s) - T0 )); }
log() { echo "[$(elapsed) s] $*" | tee -a "$OUT/progress.txt" >&2; }

BIN=$(mktemp -d)
for f in "$PKG"/*.gz; do gunzip -c "$f" > "$BIN/$(basename "${f%.gz}")"; chmod +x "$BIN/$(basename "${f%.gz}")"; done
NVDP="$BIN/nvdp"
DATA=$PKG/data
PY=${PYTHON:-python3}

if [ "$MODE" = dry-run ]; then
  # the stand-in: the C libraries of internal/cudaemu, kernels compiled as C; everything small
  STANDIN=$(go run ./internal/cudaemu/standin)
  export NVDP_CUDA_LIB_DIR=$STANDIN NVDP_EMU_INCLUDE=$STANDIN
  STEPS=${STEPS:-4}; PAPER_CONFIG=bert-tiny; PAPER_ROWS=64; BENCH_CONFIG=bert-tiny; BENCH_STEPS=1; BENCH_B=4; BENCH_S=16
  DEV_LIMIT=16; AUDIT=16; SEQ=16
  PY=/usr/bin/python3
else
  export NVDP_CUDA_REAL=1
  # the driver from the loader path or /usr/local/nvidia; cuBLAS and NVRTC from the CUDA toolkit or the
  # pip wheels nvidia-cublas and nvidia-cuda-nvrtc beside PyTorch
  dirs=$("$PY" - <<'EOF' 2>/dev/null
import glob, os, site
ds = []
for sp in site.getsitepackages():
    for pat in ("nvidia/*/lib", "nvidia/*/*/lib", "nvidia/cu13/lib"):
        for d in glob.glob(os.path.join(sp, pat)):
            if glob.glob(d + "/libcublas.so.*") or glob.glob(d + "/libnvrtc.so.*"):
                ds.append(d)
print(":".join(dict.fromkeys(ds)))
EOF
)
  export NVDP_CUDA_LIB_DIR=${NVDP_CUDA_LIB_DIR:-/usr/local/nvidia/lib64:/usr/local/cuda/lib64:$dirs}
  STEPS=${STEPS:-200}; PAPER_CONFIG=bert-base; PAPER_ROWS=${PAPER_ROWS:-9600}; BENCH_CONFIG=bert-base; BENCH_STEPS=20; BENCH_B=32; BENCH_S=128
  DEV_LIMIT=0; AUDIT=300; SEQ=64
fi

{ nvidia-smi 2>&1 || echo "no nvidia-smi"; echo "NVDP_CUDA_LIB_DIR=$NVDP_CUDA_LIB_DIR"; uname -a; nproc; } > "$OUT/env.txt"
"$NVDP" bench --device cuda --config bert-tiny --batch 2 --seq 8 --steps 1 --json > "$OUT/device-open.json" 2>> "$OUT/env.txt" || log "the GPU did not open: see env.txt"
log "env written"

# 1. the twins, each against its CPU layer (go test -v on the GPU)
for t in cuda dnn; do
  (cd "$BIN" && ./$t.test -test.v -test.count=1 > "$OUT/twins-$t.txt" 2>&1); log "twins $t: rc $?"
done
(cd "$BIN" && ./train.test -test.v -test.count=1 -test.run 'Device' > "$OUT/twins-train.txt" 2>&1); log "twins train: rc $?"
(cd "$BIN" && ./bench.test -test.v -test.count=1 -test.run 'Device' > "$OUT/twins-bench.txt" 2>&1); log "twins bench: rc $?"

# 2. the same training on both devices, step by step
common=(--task sst2 --glue-dir "$DATA/glue" --vocab "$DATA/vocab.txt" --encoder scratch:bert-tiny --variant nvdp-clipped
  --lambda 1e-2 --lr 5e-4 --target-epsilon 8 --epochs 1 --batch-size 32 --train-limit $((STEPS * 32)) --max-seq-len $SEQ
  --dev-limit $((DEV_LIMIT > 0 ? DEV_LIMIT : 200)) --audit-limit 100 --seed 1 --host-noise --log-steps --no-progress)
for dev in cpu cuda; do
  "$NVDP" run "${common[@]}" --device $dev --out "$OUT/steps-$dev" > "$OUT/steps-$dev.txt" 2>&1; log "steps on $dev: rc $?"
done
"$PY" - "$OUT" <<'EOF' > "$OUT/steps-compare.json"; log "steps compared: $(cat "$OUT/steps-compare.json")"
import json, sys
out = sys.argv[1]
def read(d):
    return [json.loads(l) for l in open(f"{out}/steps-{d}/steps.jsonl")]
try:
    c, g = read("cpu"), read("cuda")
    rel = [abs(a["loss"] - b["loss"]) / max(abs(a["loss"]), abs(b["loss"])) for a, b in zip(c, g)]
    rc = json.load(open(f"{out}/steps-cpu/report.json")); rg = json.load(open(f"{out}/steps-cuda/report.json"))
    print(json.dumps({"steps_cpu": len(c), "steps_cuda": len(g), "max_rel_loss_diff": max(rel),
                      "worst_step": rel.index(max(rel)) + 1, "within_1e-3": len(c) == len(g) and max(rel) <= 1e-3,
                      "accuracy_cpu": rc["utility"]["accuracy"], "accuracy_cuda": rg["utility"]["accuracy"],
                      "seconds_cpu": rc["seconds"], "seconds_cuda": rg["seconds"]}))
except Exception as e:
    print(json.dumps({"error": repr(e)}))
EOF

# 2b. issue 29: the same run in BF16 on the GPU beside FP32 (loss curves and dev accuracy side by side)
"$NVDP" run "${common[@]}" --device cuda --precision bf16 --out "$OUT/steps-cuda-bf16" > "$OUT/steps-cuda-bf16.txt" 2>&1; log "steps bf16: rc $?"
"$PY" - "$OUT" <<'EOF' > "$OUT/steps-bf16.json"; log "bf16 vs fp32: $(cat "$OUT/steps-bf16.json")"
import json, sys
out = sys.argv[1]
try:
    f = [json.loads(l)["loss"] for l in open(f"{out}/steps-cuda/steps.jsonl")]
    b = [json.loads(l)["loss"] for l in open(f"{out}/steps-cuda-bf16/steps.jsonl")]
    ra = json.load(open(f"{out}/steps-cuda/report.json")); rb = json.load(open(f"{out}/steps-cuda-bf16/report.json"))
    k = max(1, len(f) // 10)
    print(json.dumps({"loss_fp32_by_tenth": [sum(f[i:i + k]) / len(f[i:i + k]) for i in range(0, len(f), k)],
                      "loss_bf16_by_tenth": [sum(b[i:i + k]) / len(b[i:i + k]) for i in range(0, len(b), k)],
                      "accuracy_fp32": ra["utility"]["accuracy"], "accuracy_bf16": rb["utility"]["accuracy"],
                      "seconds_fp32": ra["seconds"], "seconds_bf16": rb["seconds"]}))
except Exception as e:
    print(json.dumps({"error": repr(e)}))
EOF

# 3. the step benchmark against the PyTorch peer, same card, same run
for prec in fp32 tf32 bf16; do
  "$NVDP" bench --device cuda --precision $prec --config $BENCH_CONFIG --batch $BENCH_B --seq $BENCH_S --steps $BENCH_STEPS --no-dropout --json \
    > "$OUT/bench-nvdp-$prec.json" 2> "$OUT/bench-nvdp-$prec.log"; log "nvdp bench $prec: rc $? $(cat "$OUT/bench-nvdp-$prec.json")"
  if [ "$MODE" = run ]; then
    "$PY" "$PKG/train_step_peer.py" $BENCH_CONFIG $BENCH_B $BENCH_S $BENCH_STEPS cuda $prec > "$OUT/bench-peer-$prec.json" 2> "$OUT/bench-peer-$prec.log"
    log "peer $prec: rc $? $(cat "$OUT/bench-peer-$prec.json")"
  fi
done

# 3b. issue 29: the all-pairs audit on the device (FP64) against the CPU engine and the PyTorch peer
#     (one order, float32 on the GPU): synthetic posteriors of SST-2 dev's size and of 10,000 texts
if [ "$MODE" = run ]; then SYN="872 10000"; SYN_N=65; SYN_P=128; else SYN="16"; SYN_N=9; SYN_P=8; fi
for m in $SYN; do
  f="$BIN/syn$m.safetensors"
  "$PY" "$PKG/make_synth.py" "$f" "$m" $SYN_N $SYN_P 0 > /dev/null 2>&1 || { log "make_synth $m failed"; continue; }
  for dev in cuda cpu; do
    [ "$dev" = cpu ] && [ "$m" != "${SYN%% *}" ] && continue # the CPU only at the smaller size
    s0=$(date +%s%N)
    "$NVDP" audit --posteriors "$f" --device $dev --gaussian-direction paper --bdp-orders 0.1 --json > "$OUT/audit-$dev-$m.json" 2> "$OUT/audit-$dev-$m.log"
    rc=$?; log "audit $dev M=$m: rc $rc $(( ($(date +%s%N) - s0) / 1000000 )) ms"
  done
  if [ "$MODE" = run ]; then
    s0=$(date +%s%N)
    "$PY" "$PKG/rd_torch_peer.py" "$f" 1.1 cuda > "$OUT/audit-peer-$m.txt" 2>&1; log "audit peer M=$m: rc $? $(( ($(date +%s%N) - s0) / 1000000 )) ms"
  fi
done

# 4. paper scale: bert-base NVDP-Clipped on SST-2 through the whole pipeline
"$NVDP" run --task sst2 --glue-dir "$DATA/glue" --vocab "$DATA/vocab.txt" --encoder scratch:$PAPER_CONFIG --variant nvdp-clipped \
  --lambda 1e-2 --lr 5e-5 --target-epsilon 64 --epochs 1 --batch-size 32 --train-limit $PAPER_ROWS --max-seq-len $SEQ \
  --dev-limit $DEV_LIMIT --audit-limit $AUDIT --seed 1 --device cuda --no-progress --out "$OUT/paper" > "$OUT/paper.txt" 2>&1
log "paper scale: rc $?"

# 5. if time is left: the CPU engine on every core of this machine against the peer (pure Go build)
if [ "$MODE" = run ] && [ "$(elapsed)" -lt 420 ]; then
  "$NVDP" bench --config bert-base --batch 32 --seq 128 --steps 3 --no-dropout --json > "$OUT/cpu16-nvdp.json" 2>/dev/null
  PEER_THREADS=$(nproc) "$PY" "$PKG/train_step_peer.py" bert-base 32 128 3 cpu fp32 > "$OUT/cpu16-peer.json" 2>/dev/null
  log "cpu bench: $(cat "$OUT/cpu16-nvdp.json") peer $(cat "$OUT/cpu16-peer.json")"
fi

"$PY" - "$OUT" "$PAPER_ROWS" <<'EOF' > "$OUT/summary.json"
import json, os, sys
out, rows = sys.argv[1], int(sys.argv[2])
def load(name):
    try:
        return json.load(open(os.path.join(out, name)))
    except Exception:
        return None
s = {"steps": load("steps-compare.json"), "bf16_vs_fp32": load("steps-bf16.json")}
for prec in ("fp32", "tf32", "bf16"):
    n, p = load(f"bench-nvdp-{prec}.json"), load(f"bench-peer-{prec}.json")
    if n and p:
        s[f"bench_{prec}"] = {"nvdp_train_s": n.get("train_step_seconds"), "peer_train_s": p["train_step_seconds"],
                              "train_ratio_peer_over_nvdp": p["train_step_seconds"] / n["train_step_seconds"],
                              "nvdp_infer_s": n.get("infer_step_seconds"), "peer_infer_s": p["infer_step_seconds"],
                              "infer_ratio_peer_over_nvdp": p["infer_step_seconds"] / n["infer_step_seconds"]}
for m in (872, 10000, 16):
    g, c = load(f"audit-cuda-{m}.json"), load(f"audit-cpu-{m}.json")
    if g:
        s[f"audit_{m}"] = {"rd_max_cuda": g.get("rd_max"), "rd_max_cpu": c.get("rd_max") if c else None}
r = load("paper/report.json")
if r:
    tr = r.get("training") or {}
    secs = tr.get("seconds")
    s["paper"] = {"accuracy": r["utility"].get("accuracy"), "train_seconds": secs, "train_rows": rows, "total_seconds": r.get("seconds"),
                  "epoch_seconds_extrapolated": secs * 67349 / rows if secs else None, "backend": r.get("backend")}
print(json.dumps(s, indent=1))
EOF
log "done: $OUT/summary.json"
rm -rf "$BIN"
