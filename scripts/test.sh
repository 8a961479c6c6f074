#!/usr/bin/env bash
# The test command: every package with OpenBLAS, then the engine and encoder again on pure-Go BLAS
# and the pinned-number tests of train and mlm (pure-Go's numbers), then the release package under
# the race detector.
# Slow work is gated behind -short-aware tests and benchmarks; this runs the normal (CI) suite.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
go vet ./...
go vet -tags openblas ./...
go test -tags openblas -timeout 20m ./...
go test -timeout 10m ./nn/... ./encoder/...
# the pinned numbers of train and mlm are the pure-Go backend's (they skip on OpenBLAS): about 30 s
go test -timeout 10m -run 'TestPinnedShortRun|TestResumeVersion0' ./train/ ./mlm/
go test -race -tags openblas -timeout 10m ./release/...   # concurrent releases share one model (release.Releaser)
