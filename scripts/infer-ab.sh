#!/usr/bin/env bash
# infer-ab.sh OLD_NVDP NEW_NVDP OUT_DIR: one inference step of bert-tiny at the release length (seq
# 64), batch 1 and 32, on 1 and 2 threads, by two builds of nvdp (`nvdp bench --no-dropout`) and the
# PyTorch peer (../shared/bench/train_step_peer.py), interleaved over ROUNDS (3) rounds, with
# OPENBLAS_NUM_THREADS and PEER_THREADS set alike (docs/performance.md, "The service at 3.6 ms a
# release"). The table, with the load average before each run: OUT_DIR/infer.tsv.
set -u
usage="usage: infer-ab.sh OLD_NVDP NEW_NVDP OUT_DIR"
OLD=$(realpath "${1:?$usage}") && NEW=$(realpath "${2:?$usage}") || exit 1
O=${3:?$usage}; mkdir -p "$O"
PEER=$(cd "$(dirname "$0")/../.." && pwd)/shared/bench/train_step_peer.py
ms() { python3 -c "import json,sys; print(round(1000*json.load(sys.stdin)['infer_step_seconds'], 3))"; }
printf "round\tthreads\twhat\tbatch\tinfer_ms\tload1\n" > "$O/infer.tsv"
for r in $(seq "${ROUNDS:-3}"); do for th in 1 2; do for B in 1 32; do
  steps=300; [ "$B" = 32 ] && steps=20
  for w in old new peer; do
    l=$(cut -d' ' -f1 /proc/loadavg)
    case $w in
      peer) v=$(PEER_THREADS=$th /usr/bin/python3 "$PEER" bert-tiny "$B" 64 $steps 2>/dev/null | ms) ;;
      old) v=$(OPENBLAS_NUM_THREADS=$th "$OLD" bench --config bert-tiny --batch "$B" --seq 64 --steps $steps --no-dropout --json 2>/dev/null | ms) ;;
      new) v=$(OPENBLAS_NUM_THREADS=$th "$NEW" bench --config bert-tiny --batch "$B" --seq 64 --steps $steps --no-dropout --json 2>/dev/null | ms) ;;
    esac
    printf "%s\t%s\t%s\t%s\t%s\t%s\n" "$r" "$th" "$w" "$B" "$v" "$l" >> "$O/infer.tsv"
  done
done; done; done
column -t "$O/infer.tsv"
