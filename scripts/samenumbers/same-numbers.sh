#!/usr/bin/env bash
# same-numbers.sh OLD_BIN NEW_BIN RUN_DIR OUT: checks that two builds of nvdp give the same numbers
# on a trained run (a refactoring's proof, issue 32). RUN_DIR is a `nvdp run` output (the main job's
# runs/sst2-nvdp-clipped: its model and posteriors_dev.safetensors); its baseline is RUN_DIR-baseline
# when that exists. Each binary, from RUN_DIR's parent's parent (the GLUE paths in the model's options
# are relative to the clone it was trained in), writes into OUT/old and OUT/new:
#   certify --model (JSON and text) and three constant sets given as flags;
#   audit --json of the posterior file, principled and reference;
#   eval of the model (and of the baseline), with its predictions and posterior files.
# Then compare.py OUT/old OUT/new: JSON equal without the wall-time "seconds" fields (and with the
# output directory masked), every other file byte for byte. Exit status 1 when anything differs.
set -euo pipefail
OLD=$(realpath "$1"); NEW=$(realpath "$2"); RUN=$(realpath "$3"); OUT=$(realpath -m "$4")
HERE=$(dirname "$(realpath "$0")")
cd "$(dirname "$(dirname "$RUN")")"
one() { # one BIN DIR
  local bin=$1 out=$2
  mkdir -p "$out"
  "$bin" certify --model "$RUN" --json > "$out/certify-model.json"
  "$bin" certify --model "$RUN" > "$out/certify-model.txt"
  "$bin" certify --components 129 --dims 128 --c-mu 2 --c-alpha-min 0.3 --c-alpha-max 1 --json > "$out/certify-flags.json"
  "$bin" certify --components 65 --dims 64 --c-mu 0.5 --c-alpha-min 1 --c-alpha-max 1 --logvar-margin 2.3979 \
    --orders 1.1,2,4,8,32 --releases 3 --json > "$out/certify-fixed.json"
  "$bin" certify --components 33 --dims 16 --c-mu 3 --c-alpha-min 0.2 --c-alpha-max 0.7 --logvar-floor -1 --logvar-cap 0 \
    --json > "$out/certify-range.json"
  "$bin" audit --posteriors "$RUN/posteriors_dev.safetensors" --json --no-progress > "$out/audit.json" 2>/dev/null
  "$bin" audit --posteriors "$RUN/posteriors_dev.safetensors" --mode reference --json --no-progress > "$out/audit-ref.json" 2>/dev/null
  "$bin" eval --model "$RUN" --out "$out/eval" --json > "$out/eval.json" 2>/dev/null
  if [ -d "$RUN-baseline" ]; then
    "$bin" eval --model "$RUN-baseline" --out "$out/eval-baseline" --json > "$out/eval-baseline.json" 2>/dev/null
  fi
}
one "$OLD" "$OUT/old"
one "$NEW" "$OUT/new"
python3 "$HERE/compare.py" "$OUT/old" "$OUT/new"
