#!/bin/sh
# arraysum --verify on 3 and 4 hosts with one stub each: the result gathered
# from several hosts must equal the serial reference exactly.
. "$(dirname "$0")/mpi-common.sh"
PMLIB_NCPU=1
export PMLIB_NCPU
for n in 3 4; do
  echo "arraysum -n 3000000 --verify on $n hosts, PMLIB_NCPU=1"
  mpi_run 300 "$n" "$top_builddir/apps/arraysum/arraysum" -n 3000000 --verify ||
    fail "arraysum on $n hosts exited $?"
done
echo "PASS"
