#!/usr/bin/env bash
# walks.sh MODDIR: issue 39's three walks (nvdp run, POST /v1/embed, nvdp certify) over the tree at
# MODDIR: the files and packages a reader opens on each (walk.py says how they are counted).
# The roots are the functions each walk starts from in that tree; give others with ROOTS_RUN,
# ROOTS_EMBED, ROOTS_CERTIFY when a refactoring renames them.
set -euo pipefail
HERE=$(dirname "$(realpath "$0")")
DIR=$(realpath "$1")
R=github.com/nvdp-project/nvdp
TSV=$(mktemp)
trap 'rm -f "$TSV"' EXIT
(cd "$DIR" && go run golang.org/x/tools/cmd/callgraph@v0.52.0 -algo=cha \
  -format='{{.Caller}}	{{.Callee}}	{{.Filename}}	{{.Description}}' ./cmd/nvdp > "$TSV")
for w in "run:${ROOTS_RUN:-(*$R/cmd/nvdp.runCmdFlags).run}" \
         "embed:${ROOTS_EMBED:-(*$R/serve.Server).embed}" \
         "certify:${ROOTS_CERTIFY:-$R/cmd/nvdp.newCertifyCmd\$1}"; do
  echo "== ${w%%:*}"
  # shellcheck disable=SC2086
  python3 "$HERE/walk.py" "$DIR" "$TSV" ${w#*:}
done
