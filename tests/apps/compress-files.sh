#!/bin/sh
# compress never loses data: it refuses to write over its input (the same
# name, a symbolic link or a hard link to it, even with -f) and over an
# existing output without -f, leaving both untouched; with -f it replaces
# the output. A write that fails (file size limit) and a run stopped by a
# signal leave no output and no temporary file, or a complete output.
set -e
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PMLIB_NCPU=2
export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM PMLIB_NCPU
app=${top_builddir:-.}/apps/compress/compress
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
. "${top_srcdir:-.}/tests/apps/files-common.sh"

seq 1 200000 >"$dir/in"
cp "$dir/in" "$dir/in.orig"

refused() { refused_with "" "$@" --no-serial; } # ARGS...: exit 2, one line
nothing_left() { # no temporary file in the directory
  if ls -a "$dir" | grep -q '\.tmp'; then
    ls -a "$dir"; fail "a temporary file was left behind"
  fi
}

# Its own input, under any name, with or without -f.
refused "$dir/in" -o "$dir/in"
refused "$dir/in" -o "$dir/in" -f
ln -s in "$dir/link.gz"
refused "$dir/in" -o "$dir/link.gz" --force
ln "$dir/in" "$dir/hard.gz"
refused "$dir/in" -o "$dir/hard.gz" -f
grep -q "is the input" "$dir/err"
cmp "$dir/in" "$dir/in.orig"
[ -L "$dir/link.gz" ] || fail "the link was replaced"
echo "ok: the input is never the output"

# An existing output: kept without -f, replaced with it.
echo "keep me" >"$dir/old.gz"
refused "$dir/in" -o "$dir/old.gz"
grep -q -- "exists; use --force" "$dir/err"
[ "$(cat "$dir/old.gz")" = "keep me" ] || fail "old.gz was changed"
"$app" "$dir/in" -o "$dir/old.gz" -f --no-serial >/dev/null
gunzip -c <"$dir/old.gz" | cmp - "$dir/in"
mkdir "$dir/sub"
refused "$dir/in" -o "$dir/sub" -f
nothing_left
echo "ok: an existing output needs -f"

# A write that fails: a file size limit far below the output's size.
# (Shells count the limit in 512- or 1024-byte blocks; either is small.)
head -c 300000 /dev/urandom >"$dir/noise"
if (ulimit -f 16 && "$app" "$dir/noise" -o "$dir/big.gz" --no-serial \
    >/dev/null 2>"$dir/err"); then
  fail "compress wrote past the file size limit"
fi
cat "$dir/err"
grep -q "cannot write" "$dir/err" || fail "no error line for the failed write"
[ ! -e "$dir/big.gz" ] || fail "a partial big.gz was left behind"
nothing_left
echo "ok: a failed write leaves nothing"

# Stopped by a signal at some point of the run: whatever the moment, the
# output is absent or complete, and no temporary file is left (SIGTERM).
head -c 4000000 /dev/urandom >"$dir/large"
cat "$dir/large" "$dir/large" "$dir/large" >"$dir/larger"
for delay in 0.05 0.2 0.5; do
  rm -f "$dir/k.gz"
  "$app" "$dir/larger" -o "$dir/k.gz" --level 9 --block 65536 >/dev/null 2>&1 &
  pid=$!
  sleep $delay
  kill -TERM $pid 2>/dev/null || true
  wait $pid || true
  if [ -e "$dir/k.gz" ]; then
    gunzip -c <"$dir/k.gz" | cmp - "$dir/larger" || fail "k.gz is partial"
  fi
  nothing_left
done
echo "ok: SIGTERM leaves no partial output"
echo "PASS"
