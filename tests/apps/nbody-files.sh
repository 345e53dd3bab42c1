#!/bin/sh
# nbody --input/--output and the .npy reader and writer of apps/common:
# bodies at rest and without mass come back exactly (a round trip, in
# versions 1.0, 2.0 and 3.0 and both byte orders); one step from given
# bodies matches the same step computed here in awk; two steps equal one
# step, saved, and one more from the saved file, bit for bit, also when the
# output is the input (with -f; refused without). Every broken header field
# is refused with one line naming the file and the field.
set -e
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PMLIB_NCPU=2
export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM PMLIB_NCPU
LC_ALL=C
export LC_ALL
app=${top_builddir:-.}/apps/nbody/nbody
npy=${top_builddir:-.}/tests/apps/npytool
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
. "${top_srcdir:-.}/tests/apps/files-common.sh"
run() { "$app" --device cpu --no-serial "$@" >"$dir/log" || { cat "$dir/log"; fail "nbody $*"; }; }

# Round trip: massless bodies at rest do not move. (Values exact in float.)
printf '%s\n' "0.5 -1.25 3 0 0 0 0" "0.0009765625 2.5e6 -7.75 0 0 0 0" \
  "-0.125 0.375 1e-30 0 0 0 0" >"$dir/rest.txt"
tr ' ' '\n' <"$dir/rest.txt" | awk '{ printf "%.9g\n", $1 }' >"$dir/rest.values"
for v in 1 2 3; do
  for order in '<' '>'; do
    "$npy" write "${order}f4" 3,7 "$dir/rest.npy" "$v" <"$dir/rest.txt"
    run --input "$dir/rest.npy" --output "$dir/back.npy" --steps 1 -f
    "$npy" print "$dir/back.npy" >"$dir/back.txt"
    head -2 "$dir/back.txt" | tr -d ' ' | tr '\n' ' ' | grep -q "^descr<f4 shape3,7 $" ||
      fail "header of the output: $(head -2 "$dir/back.txt")"
    tail -n +3 "$dir/back.txt" | cmp - "$dir/rest.values" ||
      fail "version $v, order $order: the bodies changed"
  done
done
echo "ok: .npy round trip (versions 1, 2, 3; both byte orders)"

# One step (dt 0.01, eps^2 1e-4, G = 1) against awk in double.
cat >"$dir/three.txt" <<'BODIES'
0 0 0 0 0 0 1
1 0 0 0 0.5 0 0.5
0 2 0.5 0.1 0 0 0.25
-0.5 -0.5 0.25 0 -0.2 0.1 0.125
BODIES
"$npy" write '<f4' 4,7 "$dir/three.npy" <"$dir/three.txt"
"$app" --input "$dir/three.npy" --output "$dir/one.npy" --steps 1 \
  --device cpu --verify | tee "$dir/log"
grep -q "verify=OK" "$dir/log"
"$npy" print "$dir/one.npy" | tail -n +3 >"$dir/one.txt"
awk -v dt=0.01 -v eps2=1e-4 '
  NR == FNR { for (k = 1; k <= 7; k++) b[NR, k] = $k; n = NR; next }
  { got[FNR] = $1 }
  END {
    for (i = 1; i <= n; i++) {
      a[1] = a[2] = a[3] = 0
      for (j = 1; j <= n; j++) {
        d2 = eps2
        for (k = 1; k <= 3; k++) { d[k] = b[j, k] - b[i, k]; d2 += d[k] * d[k] }
        s = b[j, 7] / (d2 * sqrt(d2))
        for (k = 1; k <= 3; k++) a[k] += d[k] * s
      }
      for (k = 1; k <= 3; k++) {
        v = b[i, k + 3] + a[k] * dt
        want[(i - 1) * 7 + k + 3] = v
        want[(i - 1) * 7 + k] = b[i, k] + v * dt
      }
      want[(i - 1) * 7 + 7] = b[i, 7]
    }
    for (m = 1; m <= 7 * n; m++) {
      e = got[m] - want[m]; if (e < 0) e = -e
      t = want[m]; if (t < 0) t = -t
      if (e > 1e-6 + 1e-5 * t) { printf "value %d: %.9g, awk %.9g\n", m, got[m], want[m]; bad++ }
    }
    if (bad) exit 1
    printf "ok: one step matches awk (%d values)\n", 7 * n
  }' "$dir/three.txt" "$dir/one.txt"

# Two steps = one step, saved, then one more: the file holds the whole state.
run --input "$dir/three.npy" --output "$dir/two.npy" --steps 2
run --input "$dir/one.npy" --output "$dir/two-again.npy" --steps 1
cmp "$dir/two.npy" "$dir/two-again.npy"
echo "ok: a saved state continues exactly"

refused() { # FILE WHAT: nbody --input FILE exits 2 with one line naming both
  refused_with "$2" --input "$1" --device cpu
  grep -q "$(basename "$1")" "$dir/err" || fail "the file is not named"
}
broken() { # NAME SED-EXPR: three.npy with its header edited (same length)
  sed "$2" "$dir/three.npy" >"$dir/$1.npy"
  cmp -s "$dir/three.npy" "$dir/$1.npy" && fail "the edit $2 changed nothing"
  echo "$dir/$1.npy"
}
refused "$(broken descr "s/'<f4'/'<f8'/")" "descr"
refused "$(broken fortran "s/False/True /")" "fortran_order"
refused "$(broken key "s/'shape'/'shapx'/")" "shapx"
refused "$(broken shape "s/(4,7)/(4,6)/")" "bytes of data"
refused "$(broken dims "s/(4,7)/(28,)/")" "dimension"
refused "$(broken nodescr "s/'descr'/'descx'/")" "descx"
refused "$(broken tuple "s/(4,7)/[4,7]/")" "shape"
refused "$(broken magic "s/NUMPY/NUMPX/")" "magic"
cp "$dir/three.npy" "$dir/version.npy"
printf '\004' | dd of="$dir/version.npy" bs=1 seek=6 conv=notrunc 2>/dev/null
refused "$dir/version.npy" "version 4.0"
head -c 150 "$dir/three.npy" >"$dir/short.npy"
refused "$dir/short.npy" "bytes of data"
head -c 20 "$dir/three.npy" >"$dir/header.npy"
refused "$dir/header.npy" "header"
printf '1 2 3 4 5 6 -1\n' | "$npy" write '<f4' 1,7 "$dir/negative.npy"
refused "$dir/negative.npy" "m is -1"
printf 'x' >>"$dir/three.npy.long"
cat "$dir/three.npy" "$dir/three.npy.long" >"$dir/long.npy"
refused "$dir/long.npy" "bytes of data"
echo "ok: broken headers and data are refused"

if "$app" --input "$dir/three.npy" --output "$dir/three.npy" --device cpu \
   >/dev/null 2>"$dir/err"; then
  fail "nbody wrote over its input without -f"
fi
cat "$dir/err"
grep -q "is the input .*use --force" "$dir/err"
"$npy" write '<f4' 4,7 "$dir/three.again" <"$dir/three.txt"
cmp "$dir/three.npy" "$dir/three.again" || fail "the input changed"
# With -f the bodies file advances in place, step by step, through a link
# to it too: two runs of one step leave the state of one run of two.
cp "$dir/three.npy" "$dir/state.npy"
ln -s state.npy "$dir/link.npy"
run --input "$dir/state.npy" --output "$dir/state.npy" --steps 1 -f
cmp "$dir/state.npy" "$dir/one.npy" || fail "one step in place differs"
run --input "$dir/link.npy" --output "$dir/state.npy" --steps 1 --force
cmp "$dir/state.npy" "$dir/two.npy" || fail "two steps in place differ"
[ -L "$dir/link.npy" ] && cmp "$dir/link.npy" "$dir/two.npy" || fail "the link"
${MPIEXEC:-mpiexec} --oversubscribe -n 2 "$app" --input "$dir/three.npy" \
  --output "$dir/three.npy" --steps 2 -f --device cpu --no-serial >/dev/null
cmp "$dir/three.npy" "$dir/two.npy" || fail "two steps in place on two hosts differ"
ls -a "$dir" | grep -q tmp && fail "a temporary file was left"
echo "ok: the output replaces the input only with -f"
if "$app" --input "$dir/three.npy" --output "$dir/one.npy" --device cpu \
   >/dev/null 2>"$dir/err"; then
  fail "nbody replaced an existing output without -f"
fi
grep -q "use --force" "$dir/err"
echo "PASS"
