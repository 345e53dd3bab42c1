#!/bin/sh
# Lazy memories on 1, 2 and 4 hosts: an iterative sweep in which every
# subtask reads the whole previous vector and writes its slice of the next
# must equal the serial computation with lazy memories and without; on 4
# hosts, with lazy memories no host (host 0 included) may send or receive
# much more than the average, while without them host 0 sends far more.
. "$(dirname "$0")/mpi-common.sh"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for n in 1 2 4; do
  echo "lazy: $n host(s) (limit 120 s)"
  mpi_expect_ok "$n host(s): " 120 "$n" LAZY-OK "$top_builddir/tests/mpi/lazy"
done
echo "PASS"
