#!/bin/sh
# pagerank --verify on the CPU: generated graphs on one host with two stubs
# and on two MPI hosts (with and without compression; there the output also
# reports the bytes moved between hosts), an edge-list file, and clear errors
# (exit 2) for missing and malformed files. The default device (all) runs
# whether or not the build has CUDA.
set -e
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PMLIB_NCPU=2
export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM PMLIB_NCPU
app=${top_builddir:-.}/apps/pagerank/pagerank
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

"$app" --verify --device cpu >"$dir/out"
cat "$dir/out"
if grep -q "hosts:\|^result .* hosts=" "$dir/out"; then
  echo "FAIL: bytes between hosts reported on one host"; exit 1
fi
"$app" --pages 3000 --seed 7 --subtasks 13 --tol 1e-6 --device cpu --verify
# the default (all devices) runs in any build, with or without CUDA
"$app" --pages 3000 --iters 10 --verify
${MPIEXEC:-mpiexec} --oversubscribe -n 2 "$app" --verify --device cpu
${MPIEXEC:-mpiexec} --oversubscribe -n 2 "$app" --pages 20000 --iters 20 \
  --compress --device cpu --verify >"$dir/out"
cat "$dir/out"
# on two hosts: the bytes all iterations moved, and the rate
grep -q "^ *hosts: 2, moved .* (sent .*) at .*B/s$" "$dir/out"
num="[0-9][0-9.]*"
grep -q "^result .* hosts=2 moved_mb=$num sent_mb=$num moved_gbs=$num " \
  "$dir/out"

# A small graph with a dangling page (3), a page nobody links to (4) and
# a comment; the ranks must still sum to 1 and match the serial ones.
printf '# tiny web\n0 1\n0 2\n1 2\n2 0\n4 3\n\n2 3\n' >"$dir/tiny.txt"
"$app" --graph "$dir/tiny.txt" --device cpu --verify | tee "$dir/out"
grep -q 'ranks sum to 1.0000000000' "$dir/out"

expect_exit2() {
  if "$app" "$@" --device cpu 2>"$dir/err"; then
    echo "FAIL: pagerank $* succeeded"; exit 1
  else
    rc=$?
  fi
  cat "$dir/err"
  [ "$rc" -eq 2 ] || { echo "FAIL: pagerank $* exited $rc, not 2"; exit 1; }
}
expect_exit2 --graph "$dir/missing.txt"
printf '0 1\n1 x\n' >"$dir/bad.txt"
expect_exit2 --graph "$dir/bad.txt"
grep -q 'bad.txt:2:' "$dir/err"
expect_exit2 --tol -1
echo "PASS"
