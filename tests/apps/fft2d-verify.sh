#!/bin/sh
# fft2d --verify on the CPU: odd sizes and subtask counts on one host with two
# stubs, then on two MPI hosts. The pmlib transform (with --runs, the last
# run's) must match one FFTW 2-D plan of the whole array.
set -e
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PMLIB_NCPU=2
export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM PMLIB_NCPU
app=${top_builddir:-.}/apps/fft2d/fft2d
"$app" --rows 96 --cols 160 --subtasks 7 --device cpu --verify
"$app" --rows 1 --cols 1000 --device cpu --verify
# all devices: runs in any build, with or without CUDA
"$app" --rows 64 --cols 48 --device all --verify
# in place: each run must start again from the input and touch the memory
out=$("$app" --rows 96 --cols 160 --subtasks 7 --runs 3 --device cpu --verify)
echo "$out"
echo "$out" | grep -q "best of 3 runs (first "
"$app" --verify --device cpu
${MPIEXEC:-mpiexec} --oversubscribe -n 2 "$app" --rows 200 --cols 96 \
  --subtasks 9 --runs 2 --device cpu --verify
