#!/bin/sh
# matmul --a/--b/--output: the product of given float32 matrices, written as
# .npy, matches the product computed here in awk (in double), on one host
# with several blocks and on two hosts; mismatched orders and non-square
# matrices are refused with one line, and the output is never an input.
set -e
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PMLIB_NCPU=2
export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM PMLIB_NCPU
LC_ALL=C
export LC_ALL
app=${top_builddir:-.}/apps/matmul/matmul
npy=${top_builddir:-.}/tests/apps/npytool
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

n=37
# small integers and halves: every product and sum is exact in float
awk -v n=$n 'BEGIN { for (i = 0; i < n * n; i++) print (i * 7 % 13) - 6 }' >"$dir/a.txt"
awk -v n=$n 'BEGIN { for (i = 0; i < n * n; i++) print ((i * 5 % 11) - 5) / 2 }' >"$dir/b.txt"
"$npy" write '<f4' $n,$n "$dir/a.npy" <"$dir/a.txt"
"$npy" write '>f4' $n,$n "$dir/b.npy" <"$dir/b.txt"
awk -v n=$n '
  FILENAME == ARGV[1] { a[FNR - 1] = $1; next }
  { b[FNR - 1] = $1 }
  END { for (i = 0; i < n; i++) for (j = 0; j < n; j++) {
          s = 0; for (k = 0; k < n; k++) s += a[i * n + k] * b[k * n + j]
          printf "%.9g\n", s } }' "$dir/a.txt" "$dir/b.txt" >"$dir/c.txt"

check() { # FILE: exactly the awk product
  "$npy" print "$1" >"$dir/got.txt"
  head -2 "$dir/got.txt" | tr -d ' ' | tr '\n' ' ' |
    grep -q "^descr<f4 shape$n,$n $" || fail "header: $(head -2 "$dir/got.txt")"
  tail -n +3 "$dir/got.txt" | cmp - "$dir/c.txt" || fail "C differs from awk"
}
"$app" --a "$dir/a.npy" --b "$dir/b.npy" --output "$dir/c.npy" --rows 8 \
  --cols 16 --device cpu --verify | tee "$dir/log"
grep -q "verify=OK" "$dir/log"
check "$dir/c.npy"
${MPIEXEC:-mpiexec} --oversubscribe -n 2 "$app" --a "$dir/a.npy" \
  --b "$dir/b.npy" --output "$dir/c2.npy" --rows 5 --device cpu >/dev/null
check "$dir/c2.npy"
echo "ok: C = A x B of given matrices, as awk computes it"

refused() { # WHAT ARGS...
  what=$1
  shift
  if "$app" "$@" --device cpu >/dev/null 2>"$dir/err"; then
    fail "matmul $* succeeded"
  else
    rc=$?
  fi
  cat "$dir/err"
  [ "$rc" -eq 2 ] && [ "$(wc -l <"$dir/err")" -eq 1 ] || fail "not exit 2, one line"
  grep -q -- "$what" "$dir/err" || fail "'$what' is not named"
}
seq 1 6 | "$npy" write '<f4' 2,3 "$dir/wide.npy"
refused "is not N x N" --a "$dir/wide.npy" --b "$dir/b.npy"
seq 1 4 | "$npy" write '<f4' 2,2 "$dir/two.npy"
refused "give matrices of one order" --a "$dir/a.npy" --b "$dir/two.npy"
refused "give both --a and --b" --a "$dir/a.npy"
refused "is the input" --a "$dir/a.npy" --b "$dir/b.npy" --output "$dir/b.npy" -f
refused "use --force" --a "$dir/a.npy" --b "$dir/b.npy" --output "$dir/c.npy"
"$npy" write '>f4' $n,$n "$dir/b.again" <"$dir/b.txt"
cmp "$dir/b.npy" "$dir/b.again"
echo "PASS"
