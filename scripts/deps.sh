#!/usr/bin/env bash
# Installs what the build and the tests need from Debian when it is missing: the C library of the
# fast BLAS path (libopenblas-dev), PostgreSQL's server (postgresql: the tests of the PostgreSQL
# ledger start throwaway clusters with its initdb and pg_ctl, internal/pgtest) and numpy for the
# Python client example of docs/serving.md (python3-numpy; its test skips without it); and, where
# npm is, Redocly's CLI for the lint of api/openapi.yaml (REDOCLY; its test skips without it).
# Sourced by test.sh and main-job.sh. Without root or apt, nvdp still builds with pure-Go BLAS
# (drop -tags openblas), and the PostgreSQL tests skip, saying so.
NVDP_APT=()
if ! ldconfig -p 2>/dev/null | grep -q 'libopenblas\.so ' && ! [ -e /usr/lib/x86_64-linux-gnu/libopenblas.so ]; then
  NVDP_APT+=(libopenblas-dev)
fi
if ! command -v pg_ctl >/dev/null 2>&1 && ! ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1; then
  NVDP_APT+=(postgresql)
fi
if ! /usr/bin/python3 -c 'import numpy' >/dev/null 2>&1; then
  NVDP_APT+=(python3-numpy)
fi
if [ ${#NVDP_APT[@]} -gt 0 ]; then
  echo "installing ${NVDP_APT[*]} (Debian)" >&2
  export DEBIAN_FRONTEND=noninteractive
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${NVDP_APT[@]}" >/dev/null
fi
unset NVDP_APT
# Redocly's CLI for the lint of api/openapi.yaml (api/lint_test.go, api/redocly.yaml): one npm
# package, installed outside the repository where npm is (about 4 s and 15 MB cold), and named by
# REDOCLY. Without npm, or when the install fails, TestRedoclyLint skips, saying so.
NVDP_REDOCLY_VERSION=2.77.0
NVDP_REDOCLY_DIR="${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/nvdp/redocly-$NVDP_REDOCLY_VERSION"
if [ -z "${REDOCLY:-}" ] && command -v npm >/dev/null 2>&1; then
  if ! [ -x "$NVDP_REDOCLY_DIR/node_modules/.bin/redocly" ]; then
    echo "installing @redocly/cli@$NVDP_REDOCLY_VERSION (npm) in $NVDP_REDOCLY_DIR" >&2
    { mkdir -p "$NVDP_REDOCLY_DIR" &&
      timeout 60 npm install --prefix "$NVDP_REDOCLY_DIR" --no-audit --no-fund --loglevel=error \
        "@redocly/cli@$NVDP_REDOCLY_VERSION" >/dev/null; } ||
      echo "npm install @redocly/cli failed: TestRedoclyLint will skip" >&2
  fi
  if "$NVDP_REDOCLY_DIR/node_modules/.bin/redocly" --version >/dev/null 2>&1; then
    export REDOCLY="$NVDP_REDOCLY_DIR/node_modules/.bin/redocly"
  fi
fi
unset NVDP_REDOCLY_VERSION NVDP_REDOCLY_DIR
