#!/bin/sh
# montecarlo --verify on CPU stubs, on one host and on two under mpiexec:
# every price within 4 standard errors of Black-Scholes. Where a GPU is
# usable --device gpu must verify too; elsewhere it must fail with a
# nonzero status and one line.
set -e
app=${top_builddir:-.}/apps/montecarlo/montecarlo
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM
# The --verify sizes (128 options, 32768 paths) in 19 subtasks, the last of
# 2 options. The seed's prices pass on CPUs and on GPUs; other sizes may not,
# since each price checked fails a correct run with probability 6e-5.
small="--per 7"

PMLIB_NCPU=2 "$app" --verify --device cpu
PMLIB_NCPU=2 "$app" $small --verify --device cpu
PMLIB_NCPU=2 timeout 120 "${MPIEXEC:-mpiexec}" --oversubscribe -n 2 \
  "$app" $small --verify --device cpu

if out=$(PMLIB_NCPU=2 "$app" $small --verify --device gpu 2>&1); then
  echo "$out"
  echo "$out" | grep -q "verify=OK"
  PMLIB_NCPU=2 "$app" $small --verify --device all
else
  echo "$out"
  if [ "$(echo "$out" | wc -l)" -ne 1 ] || ! echo "$out" | grep -q -- "--device gpu"; then
    echo "FAIL: --device gpu failed, but not with one line about the GPU"
    exit 1
  fi
  echo "ok: --device gpu without a usable GPU failed with one line"
fi
