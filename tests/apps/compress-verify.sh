#!/bin/sh
# compress --verify on a generated file of a few MB of mixed text and binary,
# on one host with two stubs and on two MPI hosts; every output must also
# round-trip through gunzip and cmp. Then edge cases (empty and one-byte
# files, levels 0 and 9, blocks that divide the file exactly) and clear
# errors (exit 2) for a missing file and GPU devices.
set -e
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PMLIB_NCPU=2
export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM PMLIB_NCPU
app=${top_builddir:-.}/apps/compress/compress
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# Text, already-compressed (incompressible) bytes, a long run of zeros and
# text again: about 4.5 MB, the same on every run.
{ seq 1 300000
  seq 1 120000 | gzip -n -c
  seq 1 40000 | sed 's/$/ lorem ipsum dolor sit amet/'
  head -c 500000 /dev/zero
  seq 1 100000 | gzip -n -1 -c
} >"$dir/in"

roundtrip() { # FILE OUT [OPTIONS]: compress with --verify, then gunzip | cmp
  f=$1 out=$2
  shift 2
  "$@" "$f" -o "$out" --verify --device cpu
  gunzip -c "$out" | cmp - "$f"
  echo "ok: gunzip -c $(basename "$out") | cmp"
}
roundtrip "$dir/in" "$dir/a.gz" "$app" --block 300000
roundtrip "$dir/in" "$dir/b.gz" "$app" --level 9 --block 1M --no-serial
roundtrip "$dir/in" "$dir/c.gz" "$app" --level 0 --block 65536 --no-serial
roundtrip "$dir/in" "$dir/d.gz" ${MPIEXEC:-mpiexec} --oversubscribe -n 2 \
  "$app" --block 200000
: >"$dir/empty"
roundtrip "$dir/empty" "$dir/e.gz" "$app"
printf x >"$dir/one"
roundtrip "$dir/one" "$dir/f.gz" "$app"
head -c 262144 "$dir/in" >"$dir/exact"
roundtrip "$dir/exact" "$dir/g.gz" "$app" --block 65536

expect_exit2() {
  if "$app" "$@" 2>"$dir/err"; then
    echo "FAIL: compress $* succeeded"; exit 1
  else
    rc=$?
  fi
  cat "$dir/err"
  [ "$rc" -eq 2 ] || { echo "FAIL: compress $* exited $rc, not 2"; exit 1; }
}
expect_exit2 "$dir/missing" -o "$dir/x.gz"
expect_exit2 "$dir/in" -o "$dir/x.gz" --device gpu
expect_exit2 "$dir/in" -o "$dir/x.gz" --level 10
expect_exit2 "$dir/in" -o "$dir/no/such/dir/x.gz" --no-serial
echo "PASS"
