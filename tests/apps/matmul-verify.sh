#!/bin/sh
# matmul --verify on CPU stubs, on one host and on two under mpiexec: every
# element of C within the fp32 error bound of the serial product. Where a
# GPU is usable --device gpu must verify too; elsewhere it must fail with
# a nonzero status and one line.
set -e
app=${top_builddir:-.}/apps/matmul/matmul
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM
small="-n 300 --rows 16" # 19 subtasks, the last one of 12 rows
blocks="-n 300 --rows 40 --cols 70" # 8 x 5 blocks, the last ones narrower

PMLIB_NCPU=2 "$app" --verify --device cpu
PMLIB_NCPU=2 "$app" $small --verify --device cpu
PMLIB_NCPU=2 "$app" $blocks --verify --device cpu
out=$(PMLIB_NCPU=2 "$app" $small --runs 3 --verify --device cpu)
echo "$out"
echo "$out" | grep -q "best of 3 runs (first "
PMLIB_NCPU=2 timeout 120 "${MPIEXEC:-mpiexec}" --oversubscribe -n 2 \
  "$app" $small --verify --device cpu
PMLIB_NCPU=2 timeout 120 "${MPIEXEC:-mpiexec}" --oversubscribe -n 2 \
  "$app" $blocks --verify --device cpu

if out=$(PMLIB_NCPU=2 "$app" $small --verify --device gpu 2>&1); then
  echo "$out"
  echo "$out" | grep -q "verify=OK"
  for kernel in cublas simple; do
    PMLIB_NCPU=2 "$app" $small --kernel $kernel --verify --device all
    PMLIB_NCPU=2 "$app" $blocks --kernel $kernel --verify --device gpu
  done
  # The default blocks with GPUs: square ones.
  PMLIB_NCPU=2 "$app" -n 1000 --verify --device all
else
  echo "$out"
  if [ "$(echo "$out" | wc -l)" -ne 1 ] || ! echo "$out" | grep -q -- "--device gpu"; then
    echo "FAIL: --device gpu failed, but not with one line about the GPU"
    exit 1
  fi
  echo "ok: --device gpu without a usable GPU failed with one line"
fi
