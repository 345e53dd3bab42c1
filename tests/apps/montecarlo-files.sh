#!/bin/sh
# montecarlo --input/--output: options read from CSV (with a header line,
# a comment and spaces) are priced, and every call and put written to the
# output lies within 4 of its standard errors of the Black-Scholes price
# computed here in awk; the prices do not depend on the host count. Bad
# lines are refused with one line naming the file, line and field.
set -e
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PMLIB_NCPU=2
export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM PMLIB_NCPU
LC_ALL=C
export LC_ALL
app=${top_builddir:-.}/apps/montecarlo/montecarlo
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
. "${top_srcdir:-.}/tests/apps/files-common.sh"

cat >"$dir/options.csv" <<'CSV'
S,K,T,r,sigma
100, 100, 1, 0.05, 0.2
# a comment, then a blank line

50,60,0.5,0,0.3
120 , 100 , 2 , 0.03 , 0.25
80,75,0.25,0.01,0.4
100,110,1.5,-0.01,0.35
CSV
"$app" --input "$dir/options.csv" --output "$dir/prices.csv" --paths 20000 \
  --per 2 --device cpu --verify | tee "$dir/log"
grep -q "verify=OK" "$dir/log"
[ "$(head -1 "$dir/prices.csv")" = "call,put,call_se,put_se" ] || fail "header"
[ "$(wc -l <"$dir/prices.csv")" -eq 6 ] || fail "not 5 prices"
grep -v '^[#S]' "$dir/options.csv" | grep . | tr -d ' ' >"$dir/opts.txt"
tail -n +2 "$dir/prices.csv" | paste -d, "$dir/opts.txt" - | awk -F, '
  function ncdf(x,   t, y) {  # Abramowitz and Stegun 26.2.17, error < 1e-7
    t = 1 / (1 + 0.2316419 * (x < 0 ? -x : x))
    y = 1.330274429
    y = 0.319381530 + t * (-0.356563782 + t * (1.781477937 + t * (-1.821255978 + t * y)))
    y = exp(-x * x / 2) / sqrt(2 * atan2(0, -1)) * t * y
    return x < 0 ? y : 1 - y
  }
  { s = $1; k = $2; t = $3; r = $4; v = $5
    d1 = (log(s / k) + (r + v * v / 2) * t) / (v * sqrt(t)); d2 = d1 - v * sqrt(t)
    call = s * ncdf(d1) - k * exp(-r * t) * ncdf(d2)
    put = k * exp(-r * t) * ncdf(-d2) - s * ncdf(-d1)
    zc = ($6 - call) / $8; zp = ($7 - put) / $9
    printf "option %d: call %.4f (exact %.4f, z %.2f), put %.4f (exact %.4f, z %.2f)\n",
      NR, $6, call, zc, $7, put, zp
    if (!($8 > 0 && $9 > 0 && zc * zc <= 16 && zp * zp <= 16)) bad++ }
  END { if (bad || NR != 5) exit 1 }' || fail "prices far from Black-Scholes"
${MPIEXEC:-mpiexec} --oversubscribe -n 2 "$app" --input "$dir/options.csv" \
  --output "$dir/prices2.csv" --paths 20000 --per 1 --device cpu >/dev/null
cmp "$dir/prices.csv" "$dir/prices2.csv"
echo "ok: prices of given options, as Black-Scholes says, on 1 and 2 hosts"

refused() { # LINE WHAT: a file holding LINE is refused, naming WHAT
  printf '%s\n' "$1" >"$dir/bad.csv"
  refused_with "bad.csv:1: $2" --input "$dir/bad.csv" --device cpu
}
refused "100,100,1,0.05" "the line has fewer"
refused "100,100,1,0.05,0.2,7" "the line has more"
refused "100,abc,1,0.05,0.2" "K is not"
refused "100,100,0,0.05,0.2" "T must be > 0"
refused "100,100,1,0.05,-0.2" "sigma must be > 0"
refused "-5,100,1,0.05,0.2" "S must be > 0"
refused "100,100,1,inf,0.2" "r is not"
if "$app" --input "$dir/options.csv" --output "$dir/prices.csv" --device cpu \
   >/dev/null 2>"$dir/err"; then
  fail "montecarlo replaced an existing output without -f"
fi
grep -q "use --force" "$dir/err"
echo "PASS"
