#!/usr/bin/env bash
# Installs what the build and the tests need from Debian when it is missing: the C library of the
# fast BLAS path (libopenblas-dev), PostgreSQL's server (postgresql: the tests of the PostgreSQL
# ledger start throwaway clusters with its initdb and pg_ctl, internal/pgtest) and numpy for the
# Python client example of docs/serving.md (python3-numpy; its test skips without it).
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
