#!/bin/sh
# GPU tests on two hosts (ranks) sharing this node's GPUs, then with both
# hosts on every GPU, plain and in the checking mode; skipped (77) without
# a GPU.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
prog=${top_builddir:-.}/tests/cuda/test_cuda_mpi
"$prog" >/dev/null 2>&1
rc=$?
[ $rc -eq 77 ] && { echo "no GPU: skipped"; exit 77; }
timeout 300 ${MPIEXEC:-mpiexec} --oversubscribe --bind-to none -n 2 "$prog" || exit 1
# both hosts on every GPU: host 1's GPU streams its chunks (inputs fetched
# ahead, each chunk reported as it completes)
timeout 300 ${MPIEXEC:-mpiexec} --oversubscribe --bind-to none -n 2 -x PMLIB_GPU_SHARE=1 "$prog" || exit 1
exec timeout 300 ${MPIEXEC:-mpiexec} --oversubscribe --bind-to none -n 2 -x PMLIB_CHECK=1 -x PMLIB_GPU_SHARE=1 "$prog"
