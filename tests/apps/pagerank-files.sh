#!/bin/sh
# pagerank --output/--top/--names and Matrix Market graphs: the ranks
# written for a small graph match a power iteration computed here in awk
# (on one host and on two); the same graph as Matrix Market (ids from 1)
# and a symmetric one give the same ranks as the edge lists they stand for;
# --top prints the highest, in order, by name where --names gives one. Bad
# files are refused with one line naming the file and line.
set -e
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PMLIB_NCPU=2
export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM PMLIB_NCPU
LC_ALL=C
export LC_ALL
app=${top_builddir:-.}/apps/pagerank/pagerank
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
. "${top_srcdir:-.}/tests/apps/files-common.sh"
opts="--tol 1e-15 --iters 500 --device cpu"

# 7 pages: 3 dangling, 6 linked by nobody, a self-link, a repeated link.
printf '%s\n' '# a small web' '0 1' '0 2' '1 2' '2 0' '2 3' '4 3' '4 4' \
  '5 0' '5 1' '5 1' '0 6' >"$dir/web.txt"
"$app" --graph "$dir/web.txt" --output "$dir/ranks.txt" $opts --verify \
  >"$dir/log"
grep -q "verify=OK" "$dir/log" || { cat "$dir/log"; fail "verify"; }
awk 'NF == 2 && $1 !~ /^#/ { print }' "$dir/web.txt" | awk -v d=0.85 '
  NR == FNR { s[NR] = $1; t[NR] = $2; out[$1]++; if ($1 >= n) n = $1 + 1
              if ($2 >= n) n = $2 + 1; m = NR; next }
  { got[$1] = $2 }
  END {
    for (v = 0; v < n; v++) r[v] = 1 / n
    for (it = 0; it < 500; it++) {
      dang = 0
      for (v = 0; v < n; v++) { x[v] = 0; if (!out[v]) dang += r[v] }
      for (e = 1; e <= m; e++) x[t[e]] += r[s[e]] / out[s[e]]
      for (v = 0; v < n; v++) r[v] = (1 - d) / n + d * (dang / n + x[v])
    }
    for (v = 0; v < n; v++) {
      e = got[v] - r[v]; if (e < 0) e = -e
      if (!(e < 1e-12)) { printf "page %d: %.17g, awk %.17g\n", v, got[v], r[v]; bad++ }
    }
    if (bad || length(got) != n) exit 1
    printf "ok: %d ranks match the awk power iteration\n", n
  }' - "$dir/ranks.txt"
${MPIEXEC:-mpiexec} --oversubscribe -n 2 "$app" --graph "$dir/web.txt" \
  --output "$dir/ranks2.txt" $opts --subtasks 3 >/dev/null
cmp "$dir/ranks.txt" "$dir/ranks2.txt"

# The same links as Matrix Market, ids from 1, with values and a comment.
{ echo '%%MatrixMarket matrix coordinate real general'
  echo '% the small web'
  echo '7 7 11'
  awk 'NF == 2 && $1 !~ /^#/ { print $1 + 1, $2 + 1, 0.5 }' "$dir/web.txt"
} >"$dir/web.mtx"
"$app" --graph "$dir/web.mtx" --output "$dir/ranks.mtx.txt" $opts >/dev/null
awk '{ print $1 - 1, $2 }' "$dir/ranks.mtx.txt" | cmp - "$dir/ranks.txt"
echo "ok: Matrix Market gives the same ranks, ids from 1"

# Symmetric: each entry is a link both ways.
printf '%s\n' '%%MatrixMarket matrix coordinate pattern symmetric' '4 4 3' \
  '2 1' '3 1' '4 4' >"$dir/sym.mtx"
printf '%s\n' '1 0' '0 1' '2 0' '0 2' '3 3' >"$dir/sym.txt"
"$app" --graph "$dir/sym.mtx" --output "$dir/sym1.txt" $opts >/dev/null
"$app" --graph "$dir/sym.txt" --output "$dir/sym0.txt" $opts >/dev/null
awk '{ print $1 - 1, $2 }' "$dir/sym1.txt" | cmp - "$dir/sym0.txt"
echo "ok: a symmetric matrix links both ways"

# --top and --names.
printf '%s\n' '0 home page' '2 news' '3 dead end' '# not a name' '99 beyond'\
  >"$dir/names.txt"
"$app" --graph "$dir/web.txt" --top 3 --names "$dir/names.txt" \
  --output "$dir/named.txt" $opts --no-serial >"$dir/log"
sort -k2 -g -r "$dir/ranks.txt" | head -3 >"$dir/best.txt"
sed -n '/^top 3 pages by rank:$/,$p' "$dir/log" | sed -n 2,4p |
  awk '{ $1 = ""; print }' >"$dir/top.txt"
cat "$dir/top.txt"
awk 'NR == FNR { id[NR] = $1; next }
     { name = $0; sub(/ [^ ]*$/, "", name); sub(/^ /, "", name)
       want = id[FNR]
       if (want == 0) want = "home page"
       if (want == 2) want = "news"
       if (want == 3) want = "dead end"
       if (name != want) { print "line " FNR ": " name ", not " want; exit 1 } }' \
  "$dir/best.txt" "$dir/top.txt" || fail "--top is not the highest, by name"
grep -q "^home page 0\.[0-9]*$" "$dir/named.txt" || fail "no 'home page' line"
grep -q "^1 0\.[0-9]*$" "$dir/named.txt" || fail "page 1 is not by id"
awk '{ print $NF }' "$dir/named.txt" >"$dir/named.r"
awk '{ print $2 }' "$dir/ranks.txt" | cmp - "$dir/named.r"
echo "ok: --top and --names"

refused() { what=$1; shift; refused_with "$what" "$@" --device cpu; } # WHAT ARGS...
bad() { printf '%s\n' "$@" >"$dir/bad.mtx"; }
bad '%%MatrixMarket matrix coordinate pattern general' '3 3 2' '1 2'
refused "says 2 entries, the file has 1" --graph "$dir/bad.mtx"
bad '%%MatrixMarket matrix coordinate pattern general' '3 3 1' '1 2' '2 3'
refused "bad.mtx:4: more entries" --graph "$dir/bad.mtx"
bad '%%MatrixMarket matrix coordinate pattern general' '3 3 1' '1 4'
refused "bad.mtx:3: expected 'row col'" --graph "$dir/bad.mtx"
bad '%%MatrixMarket matrix coordinate pattern general' '3 4 1' '1 2'
refused "bad.mtx:2: the matrix must be square" --graph "$dir/bad.mtx"
bad '%%MatrixMarket matrix array real general' '3 3'
refused "bad.mtx:1: Matrix Market format" --graph "$dir/bad.mtx"
bad '%%MatrixMarket matrix coordinate complex general' '3 3 1' '1 2 1 1'
refused "bad.mtx:1: Matrix Market field" --graph "$dir/bad.mtx"
printf '%s\n' '0 a' '0 b' >"$dir/dup.txt"
refused "dup.txt:2: a second name" --graph "$dir/web.txt" --names "$dir/dup.txt"
printf '%s\n' '0 a' '1' >"$dir/noname.txt"
refused "noname.txt:2:" --graph "$dir/web.txt" --names "$dir/noname.txt"
refused "is the input" --graph "$dir/web.txt" --output "$dir/web.txt" -f
refused "use --force" --graph "$dir/web.txt" --output "$dir/ranks.txt"
echo "PASS"
