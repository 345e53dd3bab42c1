#!/bin/sh
# fft2d --input/--output: the transform of a given complex64 array, written
# as .npy, matches a 2-D DFT computed here in awk (in double, by the
# definition), on one host and on two; a real (float32) array and a 3-D one
# are refused with one line naming the file and field; the output replaces
# the input only with -f.
set -e
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PMLIB_NCPU=2
export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM PMLIB_NCPU
LC_ALL=C
export LC_ALL
app=${top_builddir:-.}/apps/fft2d/fft2d
npy=${top_builddir:-.}/tests/apps/npytool
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
. "${top_srcdir:-.}/tests/apps/files-common.sh"

rows=6 cols=10
awk -v n=$((rows * cols)) 'BEGIN { for (i = 0; i < n; i++)
  printf "%.6f %.6f\n", sin(i * 1.3) + (i % 7) / 8, cos(i * 0.7) - (i % 3) / 4 }' \
  >"$dir/a.txt"
"$npy" write '<c8' $rows,$cols "$dir/a.npy" <"$dir/a.txt"

check() { # FILE: the transform in FILE against the DFT of a.txt
  "$npy" print "$1" >"$dir/f.txt"
  head -2 "$dir/f.txt" | tr -d ' ' | tr '\n' ' ' |
    grep -q "^descr<c8 shape$rows,$cols $" || fail "header: $(head -2 "$dir/f.txt")"
  tail -n +3 "$dir/f.txt" | paste - - | awk -v R=$rows -v C=$cols '
    NR == FNR { re[NR - 1] = $1; im[NR - 1] = $2; next }
    { gr[FNR - 1] = $1; gi[FNR - 1] = $2 }
    END {
      pi = atan2(0, -1)
      for (k = 0; k < R; k++) for (l = 0; l < C; l++) {
        sr = si = 0
        for (r = 0; r < R; r++) for (c = 0; c < C; c++) {
          t = -2 * pi * (k * r / R + l * c / C)
          x = re[r * C + c]; y = im[r * C + c]
          sr += x * cos(t) - y * sin(t); si += x * sin(t) + y * cos(t)
        }
        m = k * C + l
        diff += (gr[m] - sr) ^ 2 + (gi[m] - si) ^ 2; norm += sr ^ 2 + si ^ 2
      }
      err = sqrt(diff / norm)
      printf "relative L2 error against the awk DFT: %.3g\n", err
      if (!(err < 1e-5)) exit 1
    }' "$dir/a.txt" - || fail "the transform differs from the DFT"
}

"$app" --input "$dir/a.npy" --output "$dir/f.npy" --subtasks 3 --device cpu \
  --verify | tee "$dir/log"
grep -q "verify=OK" "$dir/log"
check "$dir/f.npy"
${MPIEXEC:-mpiexec} --oversubscribe -n 2 "$app" --input "$dir/a.npy" \
  --output "$dir/f2.npy" --subtasks 4 --runs 2 --device cpu >/dev/null
check "$dir/f2.npy"
echo "ok: the transform of a given array is the DFT"

refused() { refused_with "$2" --input "$1" --device cpu; } # FILE WHAT
seq 1 60 | "$npy" write '<f4' $rows,$cols "$dir/real.npy"
refused "$dir/real.npy" "descr '<f4' is not complex64"
seq 1 24 | "$npy" write '<c8' 2,2,3 "$dir/cube.npy"
refused "$dir/cube.npy" "shape has 3 dimensions"
if "$app" --input "$dir/a.npy" --output "$dir/f.npy" --device cpu \
   >/dev/null 2>"$dir/err"; then
  fail "fft2d replaced an existing output without -f"
fi
grep -q "use --force" "$dir/err"
# The output may be the input (read in full first), only with -f.
cp "$dir/a.npy" "$dir/g.npy"
if "$app" --input "$dir/g.npy" --output "$dir/g.npy" --device cpu \
   >/dev/null 2>"$dir/err"; then
  fail "fft2d replaced its input without -f"
fi
cat "$dir/err"
grep -q "is the input .*use --force" "$dir/err"
cmp "$dir/a.npy" "$dir/g.npy" || fail "the input changed"
"$app" --input "$dir/g.npy" --output "$dir/g.npy" -f --device cpu >/dev/null
check "$dir/g.npy"
ls -a "$dir" | grep -q tmp && fail "a temporary file was left"
echo "PASS"
