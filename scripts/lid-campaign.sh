#!/usr/bin/env bash
# lid-campaign.sh runs the speech measurement of docs/results.md ("Measured: speech language
# identification"): the three variants of the paper's Table 2 and nvdp-clipped calibrated to a
# certified epsilon of 64, 3 seeds each, Wav2Vec2 `small` from scratch on the 8-language subset of
# the synthetic stand-in, two cells at a time with one BLAS thread each (about 2 h on 2 cores).
#
#   scripts/lid-campaign.sh CORPUS OUT_DIR      # CORPUS: scripts/make-lid-corpus.sh CORPUS --train 100 --dev 20 --test 20
#
# A cell whose report.json exists is skipped, so the script resumes a campaign; then
# `bin/nvdp report OUT_DIR` prints the tables.
set -euo pipefail
if [[ $# -ne 2 ]]; then
	echo "usage: $0 CORPUS OUT_DIR" >&2
	exit 2
fi
corpus=$(realpath "$1")
mkdir -p "$2"
out=$(realpath "$2")
cd "$(dirname "$0")/.."
go build -tags openblas -o bin/nvdp ./cmd/nvdp

# the subset: hard links (or copies) of 8 language folders
sub=$out/corpus8
for l in Arabic Chinese_Hongkong English French Italian Japanese Russian Turkish; do
	[[ -d $sub/$l ]] || { mkdir -p "$sub" && { cp -al "$corpus/$l" "$sub/$l" 2>/dev/null || cp -a "$corpus/$l" "$sub/$l"; }; }
done

cells=()
for s in 1 2 3; do
	cells+=("baseline $s" "nvdp $s --lambda 1e-2" "nvdp-clipped $s --lambda 1e-6 --c-mu 3 --c-alpha-max 0.7 --hand-set-clipping")
	cells+=("eps64 $s --lambda 1e-6 --c-alpha-max 0.7 --target-epsilon 64")
done
run_cell() {
	set -- $1
	local name=$1 seed=$2 variant=$1
	shift 2
	[[ $name == eps64 ]] && variant=nvdp-clipped
	[[ -f $OUT/$name-s$seed/report.json ]] && return 0
	rm -rf "$OUT/$name-s$seed"
	OPENBLAS_NUM_THREADS=1 GOMAXPROCS=1 bin/nvdp run --task lid --lid-dir "$OUT/corpus8" --encoder scratch:small \
		--max-seconds 1 --epochs 10 --batch-size 16 --eval-batch-size 32 --lr 1e-3 --patience 0 --checkpoint-every 0 \
		--no-progress --json --variant "$variant" --seed "$seed" --out "$OUT/$name-s$seed" "$@" \
		>"$OUT/$name-s$seed.json" 2>"$OUT/$name-s$seed.log"
}
export -f run_cell
export OUT=$out
printf '%s\n' "${cells[@]}" | xargs -P 2 -I{} bash -c 'run_cell "{}"'
bin/nvdp report "$out"
