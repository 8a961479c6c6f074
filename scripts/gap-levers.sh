#!/usr/bin/env bash
# The levers of docs/results.md, "Closing the gap" (issue 31): NVDP-Clipped on the main job's budget
# (SST-2, the first 20,000 training rows, one epoch, max-seq-len 64, from-scratch BERT-Tiny, lambda
# 1e-2, lr 5e-4), its clipping calibrated exactly to each certified epsilon, one lever changed, over
# seeds. One run at a time; a cell whose report.json exists is skipped (rerun to resume).
# Usage: bash scripts/gap-levers.sh ROOT LEVER "EPSILONS" "SEEDS"
#   LEVER: baseline (non-private, the warm start's source), or levers joined by +: base | warm (encoder
#   from the baseline of the same seed) | pretrained (encoder PRETRAINED=DIR) | release (--head-reads
#   release) | radius=START:FRACTION | lr=X | epochs=K; extra `nvdp run` flags in EXTRA
# NVDP=bin (default bin/nvdp) names the binary; VARIANT (default nvdp-clipped; gaussian for the
# Gaussian-mechanism baseline at the same recipe: --lambda does not apply to it) the variant; runs land
# in ROOT/LEVER/epsilon=E/seed=S.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=${1:?usage: gap-levers.sh ROOT LEVER EPSILONS SEEDS}; LEVER=${2:?lever}; EPS=${3:-"8 16 32"}; SEEDS=${4:-"1 2 3"}
NVDP=${NVDP:-bin/nvdp}
VARIANT=${VARIANT:-nvdp-clipped}
GLUE_DIR=${GLUE_DIR:-../shared/data/glue}
VOCAB=${VOCAB:-../shared/models/bert-base-uncased-vocab/vocab.txt}
common=(--task sst2 --glue-dir "$GLUE_DIR" --epochs 1 --train-limit 20000 --max-seq-len 64 --no-progress)
for s in $SEEDS; do
  if [ "$LEVER" = baseline ]; then
    out=$ROOT/baseline/seed=$s
    [ -f "$out/report.json" ] || "$NVDP" run "${common[@]}" --vocab "$VOCAB" --encoder scratch:bert-tiny --variant baseline --seed "$s" --out "$out" >/dev/null
    continue
  fi
  for e in $EPS; do
    out=$ROOT/$LEVER/epsilon=$e/seed=$s
    [ -f "$out/report.json" ] && continue
    enc=(--vocab "$VOCAB" --encoder scratch:bert-tiny)
    args=(--lr 5e-4)
    IFS=+ read -ra parts <<< "$LEVER" # levers combine: warm+release
    for part in "${parts[@]}"; do
      case $part in
        base) ;;
        warm) enc=(--encoder "hf:$ROOT/baseline/seed=$s" --dropout 0.1) ;; # the scratch runs' dropout, to change one thing
        pretrained) enc=(--encoder "hf:${PRETRAINED:?PRETRAINED=DIR of an nvdp pretrain model}" --vocab "$VOCAB" --dropout 0.1) ;;
        release) args+=(--head-reads release) ;;
        radius=*) args+=(--radius-schedule "${part#radius=}") ;;
        lr=*) args+=(--lr "${part#lr=}") ;;
        epochs=*) args+=(--epochs "${part#epochs=}") ;;
        *) echo "unknown lever $part" >&2; exit 2 ;;
      esac
    done
    # shellcheck disable=SC2086
    "$NVDP" run "${common[@]}" "${enc[@]}" "${args[@]}" --variant "$VARIANT" --lambda 1e-2 --target-epsilon "$e" \
      --seed "$s" --out "$out" ${EXTRA:-} >/dev/null
  done
done
