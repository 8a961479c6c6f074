#!/usr/bin/env bash
# Everything of issues 28, 29 and 38 that needs an NVIDIA GPU, in two stages (each under `timeout`).
#
#   bash scripts/gpu-check.sh build                  # here (Go toolchain): binaries and data into bin/gpu/
#   bash scripts/gpu-check.sh smoke OUT              # on the GPU machine, at most 3 minutes: does it work at all
#   bash scripts/gpu-check.sh run OUT                # on the GPU machine, at most 8 minutes: the figures
#   bash scripts/gpu-check.sh dry-run OUT [STAGE]    # here, both stages (or STAGE) on the CUDA stand-in, small sizes
#
# The GPU machine has no Go and no network: build packs CGO_ENABLED=0 binaries (nvdp and the test binaries,
# `go test -c`, of the packages with device twins: cuda, dnn, train, internal/bench), gzipped, with the first
# 10,000 SST-2 training rows, the dev split, the WordPiece vocabulary and the PyTorch peers of ../shared/bench:
# what travels with the checkout (bin/gpu, about 30 MiB of the 64 allowed): run(command, carry=["bin/gpu"]).
# The limits are SMOKE_LIMIT (180 s) and RUN_LIMIT (480 s), in seconds; each stage's steps get what is left.
#
# smoke writes into OUT (each step's output as it finishes, so a timeout keeps what was done):
#   env.txt            nvidia-smi, uname, cores, the library directories and the kernel cache
#   libs.txt           the CUDA libraries found in each directory searched, and why that directory
#   device.json        the card and the libraries package cuda loaded (cuBLAS/NVRTC paths, the CUDA major
#                      version chosen from the driver's and why, the NVRTC builtins preloaded)
#   device-open.json   nvdp bench --device cuda on bert-tiny: the device opens, the kernel module compiles
#   twins-*.txt        every device twin's test against its CPU layer (go test -v on the GPU: NVDP_CUDA_REAL=1,
#                      CUDA_LAUNCH_BLOCKING=1, -test.timeout: a hang ends with the goroutines' stacks)
# run writes into OUT:
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
# both write:
#   status.tsv         one line per step: stage, step, rc (124: its time ran out), seconds
#   stages.tsv         one line per stage: stage, rc (124: the stage's limit), seconds, limit
#   summary.json       rewritten after every step and every stage: the stages, the steps and the figures
#                      docs/performance.md wants (a plain-shell writer when python3 is missing)
set -uo pipefail
cd "$(dirname "$0")/.."
USAGE="usage: gpu-check.sh build | smoke OUT | run OUT | dry-run OUT [smoke|run]"
MODE=${1:?$USAGE}
PKG=bin/gpu
SELF=scripts/gpu-check.sh

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

# ---------------------------------------------------------------------------------------------------------
# Helpers of both stages (the stage's process: T0, LIMIT and STAGE come from the outer process).

elapsed() { echo $(( $(date +%s) - T0 )); }
left() { echo $(( LIMIT - $(elapsed) )); }
log() { echo "[$STAGE $(elapsed) s] $*" | tee -a "$OUT/progress.txt" >&2; }

# step NAME CAP CMD...: runs CMD (a program or a function below) under `timeout` of at most CAP seconds and what
# is left of the stage (less 10 s: its SIGKILL 5 s after SIGTERM, the summary), records it in status.tsv and rewrites summary.json. Skipped
# (rc "skipped") when under 10 s are left. CMD runs with the step's seconds in $STEP_S (for -test.timeout).
step() {
  local name=$1 cap=$2; shift 2
  local s=$(( $(left) - 10 )); [ "$s" -gt "$cap" ] && s=$cap
  if [ "$s" -lt 10 ]; then
    printf '%s\t%s\t%s\t%s\n' "$STAGE" "$name" skipped 0 >> "$OUT/status.tsv"; log "$name: skipped, $(left) s left"
    return 0
  fi
  local t=$(date +%s)
  STEP_S=$s timeout -k 5 "$s" bash -c '"$@"' "$name" "$@"
  local rc=$?
  printf '%s\t%s\t%s\t%s\n' "$STAGE" "$name" "$rc" $(( $(date +%s) - t )) >> "$OUT/status.tsv"
  log "$name: rc $rc ($(( $(date +%s) - t )) s of $s)"
  summary
  return 0
}

# The commands of the steps (functions, exported: step runs them in `bash -c`) end with exec, so that the
# program itself is what `timeout` watches: it gets SIGTERM at the step's limit (nvdp then stops after its
# current step) and SIGKILL 5 s later, instead of outliving its step.

# twin BIN RUN OUTFILE: a test binary of bin/gpu, run in $BIN, -test.timeout a little under its step's time.
twin() {
  cd "$BIN" || return
  CUDA_LAUNCH_BLOCKING=1 exec "./$1" -test.v -test.count=1 -test.run "$2" -test.timeout "$(( STEP_S - 3 ))s" > "$OUT/$3" 2>&1
}

# twin_nofmad BIN RUN OUTFILE: twin with the kernels compiled --fmad=false (NVDP_CUDA_FMAD=0): a twin that fails
# under twin but passes here differs by FMA contraction (its tolerance's derivation, docs/engine.md), one that
# fails both is a bug.
twin_nofmad() { export NVDP_CUDA_FMAD=0; twin "$@"; }

# into OUTFILE ERRFILE CMD...: CMD with its standard output in OUT/OUTFILE, its standard error in OUT/ERRFILE
# (both in one when they are the same name; ERRFILE - discards it).
into() {
  local o=$1 e=$2; shift 2
  if [ "$o" = "$e" ]; then exec > "$OUT/$o" 2>&1
  elif [ "$e" = - ]; then exec > "$OUT/$o" 2> /dev/null
  else exec > "$OUT/$o" 2> "$OUT/$e"; fi
  if [ "$(type -t "$1")" = function ]; then "$@"; else exec "$@"; fi
}

# peer ARGS...: a PyTorch peer (python3 ARGS), with the caller's LD_LIBRARY_PATH (not the CUDA directories set
# for nvdp: PyTorch brings its own libraries).
peer() { LD_LIBRARY_PATH=$ORIG_LD_LIBRARY_PATH exec "$PY" "$@"; }

have_py() { [ -n "$PY" ]; }
export -f twin twin_nofmad into peer have_py

# summary: OUT/summary.json from what OUT holds, python3 or else plain shell.
summary() {
  if have_py; then
    "$PY" - "$OUT" "$PAPER_ROWS" > "$OUT/summary.json.tmp" 2>> "$OUT/progress.txt" <<'EOF' && mv "$OUT/summary.json.tmp" "$OUT/summary.json" && return
import json, os, sys
out, rows = sys.argv[1], int(sys.argv[2])
def load(name):
    try:
        return json.load(open(os.path.join(out, name)))
    except Exception:
        return None
def table(name, keys):
    rs = []
    try:
        for line in open(os.path.join(out, name)):
            f = line.rstrip("\n").split("\t")
            r = dict(zip(keys, f))
            for k in keys:
                if k in ("stage", "step"):
                    continue
                try:
                    r[k] = int(r[k])
                except (KeyError, ValueError):
                    pass
            rs.append(r)
    except OSError:
        pass
    return rs
s = {"stages": table("stages.tsv", ["stage", "rc", "seconds", "limit"]),
     "steps_run": table("status.tsv", ["stage", "step", "rc", "seconds"]),
     "device": load("device.json"), "steps": load("steps-compare.json"), "bf16_vs_fp32": load("steps-bf16.json")}
twins = {}
for f in sorted(os.listdir(out)):
    if f.startswith("twins-") and f.endswith(".txt"):
        text = open(os.path.join(out, f), errors="replace").read().splitlines()
        twins[f[6:-4]] = {"pass": sum(l.lstrip().startswith("--- PASS") for l in text),
                          "fail": sum(l.lstrip().startswith("--- FAIL") for l in text),
                          "skip": sum(l.lstrip().startswith("--- SKIP") for l in text),
                          "timed_out": any("panic: test timed out" in l for l in text),
                          "failed": [l.split()[2] for l in text if l.lstrip().startswith("--- FAIL")][:20]}
s["twins"] = twins
for prec in ("fp32", "tf32", "bf16"):
    n, p = load(f"bench-nvdp-{prec}.json"), load(f"bench-peer-{prec}.json")
    if n and p:
        s[f"bench_{prec}"] = {"nvdp_train_s": n.get("train_step_seconds"), "peer_train_s": p["train_step_seconds"],
                              "train_ratio_peer_over_nvdp": p["train_step_seconds"] / n["train_step_seconds"],
                              "nvdp_infer_s": n.get("infer_step_seconds"), "peer_infer_s": p["infer_step_seconds"],
                              "infer_ratio_peer_over_nvdp": p["infer_step_seconds"] / n["infer_step_seconds"]}
    elif n:
        s[f"bench_{prec}"] = {"nvdp_train_s": n.get("train_step_seconds"), "nvdp_infer_s": n.get("infer_step_seconds")}
for m in (872, 10000, 16):
    g, c = load(f"audit-cuda-{m}.json"), load(f"audit-cpu-{m}.json")
    if g:
        s[f"audit_{m}"] = {"rd_max_cuda": g.get("rd_max"), "rd_max_cpu": c.get("rd_max") if c else None}
r = load("paper/report.json")
if r:
    tr = r.get("training") or {}
    secs = tr.get("seconds")
    s["paper"] = {"accuracy": (r.get("utility") or {}).get("accuracy"), "train_seconds": secs, "train_rows": rows,
                  "total_seconds": r.get("seconds"), "backend": r.get("backend"),
                  "epoch_seconds_extrapolated": secs * 67349 / rows if secs else None}
print(json.dumps(s, indent=1))
EOF
  fi
  summary_sh > "$OUT/summary.json.tmp" && mv "$OUT/summary.json.tmp" "$OUT/summary.json"
}

# summary_sh: the plain-shell summary (no python3, or its writer failed): the stages, the steps and each
# twins file's counts. Every value is a number or a name of this script's, so nothing needs escaping.
summary_sh() {
  local sep="" f n st name rc secs lim
  jv() { case $1 in '' | *[!0-9]*) printf '"%s"' "$1" ;; *) printf '%s' "$1" ;; esac; } # a number, else a string
  echo '{"writer": "shell", "stages": ['
  [ -f "$OUT/stages.tsv" ] && while IFS=$'\t' read -r st rc secs lim; do
    printf '%s {"stage": "%s", "rc": %s, "seconds": %s, "limit": %s}\n' "$sep" "$st" "$(jv "$rc")" "$(jv "$secs")" "$(jv "$lim")"; sep=,
  done < "$OUT/stages.tsv"
  echo '], "steps_run": ['; sep=""
  [ -f "$OUT/status.tsv" ] && while IFS=$'\t' read -r st name rc secs; do
    printf '%s {"stage": "%s", "step": "%s", "rc": %s, "seconds": %s}\n' "$sep" "$st" "$name" "$(jv "$rc")" "$(jv "$secs")"; sep=,
  done < "$OUT/status.tsv"
  echo '], "twins": {'; sep=""
  for f in "$OUT"/twins-*.txt; do
    [ -f "$f" ] || continue
    n=$(basename "$f" .txt); n=${n#twins-}
    printf '%s "%s": {"pass": %d, "fail": %d, "skip": %d, "timed_out": %s}\n' "$sep" "$n" \
      "$(grep -c -- '--- PASS' "$f")" "$(grep -c -- '--- FAIL' "$f")" "$(grep -c -- '--- SKIP' "$f")" \
      "$(grep -q 'panic: test timed out' "$f" && echo true || echo false)"; sep=,
  done
  echo '}}'
}

# ---------------------------------------------------------------------------------------------------------
# The stages (run by the outer process under `timeout`, in a process of their own).

stage_smoke() {
  { echo "== nvidia-smi"; timeout 20 nvidia-smi 2>&1 || echo "no nvidia-smi (rc $?)"
    echo "== machine"; uname -a; echo "cores: $(nproc)"
    echo "== libraries"; echo "NVDP_CUDA_LIB_DIR=$NVDP_CUDA_LIB_DIR"; echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
    echo "NVDP_CUDA_CACHE=$NVDP_CUDA_CACHE"; echo "NVDP_CUDA_REAL=${NVDP_CUDA_REAL:-}"; echo "python: ${PY:-none}"
  } > "$OUT/env.txt" 2>&1
  log "env written"
  # the card and the libraries as package cuda loads them (the test logs Info as JSON)
  step device 30 twin cuda.test '^TestDeviceInfoAndMemory$' device.txt
  sed -n 's/.*device \({.*}\)$/\1/p' "$OUT/device.txt" | head -n 1 > "$OUT/device.json"
  [ -s "$OUT/device.json" ] || { rm -f "$OUT/device.json"; log "the GPU did not open: see device.txt"; }
  # the device opens in nvdp and the kernel module compiles (into the cache the twins then use)
  step device-open 60 into device-open.json device-open.log "$NVDP" bench --device cuda --config bert-tiny --batch 2 --seq 8 --steps 1 --json
  # the twins, each against its CPU layer
  step twins-cuda 45 twin cuda.test . twins-cuda.txt
  step twins-dnn 90 twin dnn.test . twins-dnn.txt
  step twins-train 90 twin train.test Device twins-train.txt
  step twins-bench 60 twin bench.test Device twins-bench.txt
}

stage_run() {
  # 1. the dnn twins again without FMA contraction (smoke ran them with NVRTC's default, which contracts)
  step twins-dnn-nofmad 90 twin_nofmad dnn.test . twins-dnn-nofmad.txt
  # 2. the same training on both devices, step by step
  common=(--task sst2 --glue-dir "$DATA/glue" --vocab "$DATA/vocab.txt" --encoder scratch:bert-tiny --variant nvdp-clipped
    --lambda 1e-2 --lr 5e-4 --target-epsilon 8 --epochs 1 --batch-size 32 --train-limit $((STEPS * 32)) --max-seq-len $SEQ
    --dev-limit $((DEV_LIMIT > 0 ? DEV_LIMIT : 200)) --audit-limit 100 --seed 1 --host-noise --log-steps --no-progress)
  for dev in cpu cuda; do
    step steps-$dev 120 into steps-$dev.txt steps-$dev.txt "$NVDP" run "${common[@]}" --device $dev --out "$OUT/steps-$dev"
  done
  if have_py; then
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
  fi

  # 2b. issue 29: the same run in BF16 on the GPU beside FP32 (loss curves and dev accuracy side by side)
  step steps-bf16 90 into steps-cuda-bf16.txt steps-cuda-bf16.txt "$NVDP" run "${common[@]}" --device cuda --precision bf16 --out "$OUT/steps-cuda-bf16"
  if have_py; then
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
  fi

  # 3. the step benchmark against the PyTorch peer, same card, same run
  for prec in fp32 tf32 bf16; do
    step bench-nvdp-$prec 60 into bench-nvdp-$prec.json bench-nvdp-$prec.log "$NVDP" bench \
      --device cuda --precision $prec --config $BENCH_CONFIG --batch $BENCH_B --seq $BENCH_S --steps $BENCH_STEPS --no-dropout --json
    if [ "$DRY" = 0 ] && have_py; then
      step bench-peer-$prec 60 into bench-peer-$prec.json bench-peer-$prec.log peer \
        "$PKG/train_step_peer.py" $BENCH_CONFIG $BENCH_B $BENCH_S $BENCH_STEPS cuda $prec
    fi
  done

  # 3b. issue 29: the all-pairs audit on the device (FP64) against the CPU engine and the PyTorch peer
  #     (one order, float32 on the GPU): synthetic posteriors of SST-2 dev's size and of 10,000 texts
  if [ "$DRY" = 0 ]; then SYN="872 10000"; SYN_N=65; SYN_P=128; else SYN="16"; SYN_N=9; SYN_P=8; fi
  have_py || { SYN=""; log "no python3: no synthetic posteriors, no audit"; }
  for m in $SYN; do
    f="$BIN/syn$m.safetensors"
    (peer "$PKG/make_synth.py" "$f" "$m" $SYN_N $SYN_P 0 > "$OUT/make_synth-$m.log" 2>&1) || { log "make_synth $m failed: see make_synth-$m.log"; continue; }
    for dev in cuda cpu; do
      [ "$dev" = cpu ] && [ "$m" != "${SYN%% *}" ] && continue # the CPU only at the smaller size
      step audit-$dev-$m 90 into audit-$dev-$m.json audit-$dev-$m.log "$NVDP" audit \
        --posteriors "$f" --device $dev --gaussian-direction paper --bdp-orders 0.1 --json
    done
    if [ "$DRY" = 0 ]; then
      step audit-peer-$m 60 into audit-peer-$m.txt audit-peer-$m.txt peer "$PKG/rd_torch_peer.py" "$f" 1.1 cuda
    fi
  done

  # 4. paper scale: bert-base NVDP-Clipped on SST-2 through the whole pipeline
  step paper 240 into paper.txt paper.txt "$NVDP" run --task sst2 --glue-dir "$DATA/glue" --vocab "$DATA/vocab.txt" \
    --encoder scratch:$PAPER_CONFIG --variant nvdp-clipped --lambda 1e-2 --lr 5e-5 --target-epsilon 64 --epochs 1 --batch-size 32 \
    --train-limit $PAPER_ROWS --max-seq-len $SEQ --dev-limit $DEV_LIMIT --audit-limit $AUDIT --seed 1 --device cuda --no-progress --out "$OUT/paper"

  # 5. if time is left: the CPU engine on every core of this machine against the peer (pure Go build)
  if [ "$DRY" = 0 ] && [ "$(left)" -gt 90 ]; then
    step cpu16-nvdp 40 into cpu16-nvdp.json - "$NVDP" bench --config bert-base --batch 32 --seq 128 --steps 3 --no-dropout --json
    export PEER_THREADS; PEER_THREADS=$(nproc)
    have_py && step cpu16-peer 40 into cpu16-peer.json - peer "$PKG/train_step_peer.py" bert-base 32 128 3 cpu fp32
  fi
}

if [ "$MODE" = build ]; then build; exit; fi
if [ "$MODE" = stage ]; then # internal: one stage, in the process `timeout` runs
  STAGE=$2
  case $STAGE in smoke) stage_smoke ;; run) stage_run ;; *) echo "$USAGE" >&2; exit 2 ;; esac
  exit 0
fi

# ---------------------------------------------------------------------------------------------------------
# The outer process: the binaries, the libraries, the environment; then each stage under `timeout`.

OUT=${2:?$USAGE}
case $MODE in
  smoke | run) STAGES=$MODE; DRY=0 ;;
  dry-run) STAGES=${3:-smoke run}; DRY=1 ;;
  *) echo "$USAGE" >&2; exit 2 ;;
esac
mkdir -p "$OUT" || exit 1
OUT=$(cd "$OUT" && pwd)
[ -d "$PKG" ] || { echo "gpu-check: no $PKG: run 'gpu-check.sh build' first (and carry bin/gpu)" >&2; exit 1; }

BIN=$(mktemp -d)
trap 'rm -rf "$BIN"' EXIT
for f in "$PKG"/*.gz; do gunzip -c "$f" > "$BIN/$(basename "${f%.gz}")" && chmod +x "$BIN/$(basename "${f%.gz}")"; done
NVDP="$BIN/nvdp"
DATA=$PKG/data
PY=${PYTHON:-python3}
[ "$DRY" = 1 ] && [ -z "${PYTHON:-}" ] && [ -x /usr/bin/python3 ] && PY=/usr/bin/python3 # numpy, for make_synth.py
command -v "$PY" > /dev/null 2>&1 || PY=""
ORIG_LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}

# the library directories, each with why it is searched (libs.txt)
LIBS="$OUT/libs.txt"
: > "$LIBS.tmp"
libdir() { # DIR WHY: a directory of CUDA libraries, when it exists (the first reason given is kept)
  [ -d "$1" ] || return 0
  grep -q "^$1	" "$LIBS.tmp" || printf '%s\t%s\n' "$1" "$2" >> "$LIBS.tmp"
}
if [ "$DRY" = 1 ]; then
  # the stand-in: the C libraries of internal/cudaemu, kernels compiled as C; everything small
  STANDIN=$(go run ./internal/cudaemu/standin) || { echo "gpu-check: the stand-in did not build" >&2; exit 1; }
  export NVDP_EMU_INCLUDE=$STANDIN
  libdir "$STANDIN" "the CUDA stand-in (internal/cudaemu, dry run)"
  STEPS=${STEPS:-4}; PAPER_CONFIG=bert-tiny; PAPER_ROWS=64; BENCH_CONFIG=bert-tiny; BENCH_STEPS=1; BENCH_B=4; BENCH_S=16
  DEV_LIMIT=16; AUDIT=16; SEQ=16
  SMOKE_LIMIT=${SMOKE_LIMIT:-900}; RUN_LIMIT=${RUN_LIMIT:-1200} # the stand-in is slow: a bert-tiny step takes seconds
else
  export NVDP_CUDA_REAL=1
  # the driver from the loader path or /usr/local/nvidia; cuBLAS and NVRTC from NVDP_CUDA_LIB_DIR, the CUDA
  # toolkit or the pip wheels nvidia-cublas and nvidia-cuda-nvrtc beside PyTorch
  for d in ${NVDP_CUDA_LIB_DIR//:/ }; do libdir "$d" "NVDP_CUDA_LIB_DIR given"; done
  libdir /usr/local/nvidia/lib64 "the driver's directory of NVIDIA's containers"
  libdir /usr/local/cuda/lib64 "the CUDA toolkit"
  sites=""
  [ -n "$PY" ] && sites=$("$PY" -c 'import site; print(" ".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null)
  for sp in $sites /usr/local/lib/python3*/dist-packages /usr/local/lib/python3*/site-packages /usr/lib/python3*/dist-packages \
    "$HOME"/.local/lib/python3*/site-packages /opt/conda/lib/python3*/site-packages; do
    for d in "$sp"/nvidia/*/lib "$sp"/nvidia/*/*/lib; do
      ls "$d"/libcublas.so.* "$d"/libnvrtc.so.* > /dev/null 2>&1 && libdir "$d" "a pip wheel of $sp"
    done
  done
  STEPS=${STEPS:-200}; PAPER_CONFIG=bert-base; PAPER_ROWS=${PAPER_ROWS:-9600}; BENCH_CONFIG=bert-base; BENCH_STEPS=20; BENCH_B=32; BENCH_S=128
  DEV_LIMIT=0; AUDIT=300; SEQ=64
  SMOKE_LIMIT=${SMOKE_LIMIT:-180}; RUN_LIMIT=${RUN_LIMIT:-480}
fi
LIBDIRS=$(cut -f1 "$LIBS.tmp" | paste -sd: -)
export NVDP_CUDA_LIB_DIR=$LIBDIRS
# the system loader finds what libnvrtc and cuBLAS open by soname (the NVRTC builtins, cuBLASLt) there too
export LD_LIBRARY_PATH=$LIBDIRS${ORIG_LD_LIBRARY_PATH:+:$ORIG_LD_LIBRARY_PATH}
{ while IFS=$'\t' read -r d why; do
    echo "$d: $why"
    (cd "$d" && ls -l libcuda.so* libcublas.so* libcublasLt.so* libnvrtc.so* libnvrtc-builtins.so* 2>/dev/null | sed 's/^/  /')
  done < "$LIBS.tmp"
  echo "the loader path (ldconfig -p):"
  ldconfig -p 2>/dev/null | grep -E 'libcuda\.so|libcublas(Lt)?\.so|libnvrtc(-builtins)?\.so' | sed 's/^/ /'
  echo "package cuda loads them from NVDP_CUDA_LIB_DIR=$NVDP_CUDA_LIB_DIR first (the CUDA major version the driver runs: device.json)"
} > "$LIBS" 2>&1
rm -f "$LIBS.tmp"

# the kernel cache: kept between calls on the same machine (bin/ is ignored by git), else in OUT
NVDP_CUDA_CACHE=${NVDP_CUDA_CACHE:-bin/gpu-kernels}
mkdir -p "$NVDP_CUDA_CACHE" 2> /dev/null && [ -w "$NVDP_CUDA_CACHE" ] || NVDP_CUDA_CACHE=$OUT/kernel-cache
mkdir -p "$NVDP_CUDA_CACHE"
NVDP_CUDA_CACHE=$(cd "$NVDP_CUDA_CACHE" && pwd)
export NVDP_CUDA_CACHE OUT BIN NVDP DATA PY ORIG_LD_LIBRARY_PATH PKG DRY STEPS PAPER_CONFIG PAPER_ROWS BENCH_CONFIG BENCH_STEPS \
  BENCH_B BENCH_S DEV_LIMIT AUDIT SEQ

for STAGE in $STAGES; do
  case $STAGE in smoke) LIMIT=$SMOKE_LIMIT ;; run) LIMIT=$RUN_LIMIT ;; *) echo "$USAGE" >&2; exit 2 ;; esac
  T0=$(date +%s)
  export STAGE LIMIT T0
  log "stage $STAGE: at most $LIMIT s"
  timeout -k 10 "$LIMIT" bash "$SELF" stage "$STAGE"
  rc=$?
  printf '%s\t%s\t%s\t%s\n' "$STAGE" "$rc" "$(elapsed)" "$LIMIT" >> "$OUT/stages.tsv"
  summary
  log "stage $STAGE: rc $rc; $OUT/summary.json"
done
