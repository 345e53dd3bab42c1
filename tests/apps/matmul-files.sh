#!/bin/sh
# matmul --a/--b/--output: the product of given float32 matrices, written as
# .npy, matches the product computed here in awk (in double), on one host
# with several blocks and on two hosts, square and M x K times K x N;
# mismatched shapes are refused with one line, and an input is replaced by
# the output only with -f (after it was read in full).
set -e
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PMLIB_NCPU=2
export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM PMLIB_NCPU
LC_ALL=C
export LC_ALL
app=${top_builddir:-.}/apps/matmul/matmul
npy=${top_builddir:-.}/tests/apps/npytool
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
. "${top_srcdir:-.}/tests/apps/files-common.sh"

# Matrices of small integers and halves: every product and sum is exact in
# float. A: M x K, B: K x N, written as a.npy, b.npy; C = A x B in c.txt.
matrices() { # M K N
  awk -v n=$(($1 * $2)) 'BEGIN { for (i = 0; i < n; i++) print (i * 7 % 13) - 6 }' >"$dir/a.txt"
  awk -v n=$(($2 * $3)) 'BEGIN { for (i = 0; i < n; i++) print ((i * 5 % 11) - 5) / 2 }' >"$dir/b.txt"
  "$npy" write '<f4' $1,$2 "$dir/a.npy" <"$dir/a.txt"
  "$npy" write '>f4' $2,$3 "$dir/b.npy" <"$dir/b.txt"
  awk -v m=$1 -v kk=$2 -v n=$3 '
    FILENAME == ARGV[1] { a[FNR - 1] = $1; next }
    { b[FNR - 1] = $1 }
    END { for (i = 0; i < m; i++) for (j = 0; j < n; j++) {
            s = 0; for (k = 0; k < kk; k++) s += a[i * kk + k] * b[k * n + j]
            printf "%.9g\n", s } }' "$dir/a.txt" "$dir/b.txt" >"$dir/c.txt"
  shape=$1,$3
}

check() { # FILE: exactly the awk product
  "$npy" print "$1" >"$dir/got.txt"
  head -2 "$dir/got.txt" | tr -d ' ' | tr '\n' ' ' |
    grep -q "^descr<f4 shape$shape $" || fail "header: $(head -2 "$dir/got.txt")"
  tail -n +3 "$dir/got.txt" | cmp - "$dir/c.txt" || fail "C differs from awk"
}

# M x K times K x N, every size different, blocks cut in both directions
matrices 23 41 19
"$app" --a "$dir/a.npy" --b "$dir/b.npy" --output "$dir/c.npy" --rows 5 \
  --cols 7 --device cpu --verify | tee "$dir/log"
grep -q "m=23 k=41 n=19 " "$dir/log"
grep -q "verify=OK" "$dir/log"
check "$dir/c.npy"
${MPIEXEC:-mpiexec} --oversubscribe -n 2 "$app" --a "$dir/a.npy" \
  --b "$dir/b.npy" --output "$dir/c2.npy" --rows 4 --device cpu >/dev/null
check "$dir/c2.npy"
# a row times a column, and a column times a row
matrices 1 41 1
"$app" --a "$dir/a.npy" --b "$dir/b.npy" --output "$dir/c.npy" -f \
  --device cpu --verify >/dev/null
check "$dir/c.npy"
matrices 17 1 9
"$app" --a "$dir/a.npy" --b "$dir/b.npy" --output "$dir/c.npy" -f \
  --rows 4 --cols 4 --device cpu --verify >/dev/null
check "$dir/c.npy"
echo "ok: C = A x B of M x K and K x N matrices, as awk computes it"
rm "$dir/c.npy" "$dir/c2.npy"

n=37
matrices $n $n $n
"$app" --a "$dir/a.npy" --b "$dir/b.npy" --output "$dir/c.npy" --rows 8 \
  --cols 16 --device cpu --verify | tee "$dir/log"
grep -q "verify=OK" "$dir/log"
check "$dir/c.npy"
${MPIEXEC:-mpiexec} --oversubscribe -n 2 "$app" --a "$dir/a.npy" \
  --b "$dir/b.npy" --output "$dir/c2.npy" --rows 5 --device cpu >/dev/null
check "$dir/c2.npy"
echo "ok: C = A x B of given matrices, as awk computes it"

refused() { what=$1; shift; refused_with "$what" "$@" --device cpu; } # WHAT ARGS...
seq 1 6 | "$npy" write '<f4' 2,3 "$dir/wide.npy"
refused "a.npy is 37 x 37 but .*wide.npy is 2 x 3; the columns of --a must be as many as the rows of --b" \
  --a "$dir/a.npy" --b "$dir/wide.npy"
refused "wide.npy is 2 x 3 but .*a.npy is 37 x 37; the columns" \
  --a "$dir/wide.npy" --b "$dir/a.npy"
seq 1 3 | "$npy" write '<f4' 3 "$dir/vector.npy"
refused "shape has 1 dimension" --a "$dir/vector.npy" --b "$dir/b.npy"
refused "give both --a and --b" --a "$dir/a.npy"
refused "use --force" --a "$dir/a.npy" --b "$dir/b.npy" --output "$dir/c.npy"
refused "is the input .*use --force" --a "$dir/a.npy" --b "$dir/b.npy" \
  --output "$dir/b.npy"
"$npy" write '>f4' $n,$n "$dir/b.again" <"$dir/b.txt"
cmp "$dir/b.npy" "$dir/b.again" || fail "the input changed"
# With -f, C replaces B once both are read: B's name then holds A x B.
"$app" --a "$dir/a.npy" --b "$dir/b.npy" --output "$dir/b.npy" -f \
  --device cpu >/dev/null
check "$dir/b.npy"
ls -a "$dir" | grep -q tmp && fail "a temporary file was left"
echo "PASS"
