#!/usr/bin/env bash
# Installs the C library of the fast BLAS path (Debian libopenblas-dev) when it is missing.
# Sourced by test.sh and main-job.sh. Without root or apt, nvdp still builds with pure-Go BLAS
# (drop -tags openblas).
if ! ldconfig -p 2>/dev/null | grep -q 'libopenblas\.so ' && ! [ -e /usr/lib/x86_64-linux-gnu/libopenblas.so ]; then
  echo "installing libopenblas-dev (Debian)" >&2
  export DEBIAN_FRONTEND=noninteractive
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq libopenblas-dev >/dev/null
fi
