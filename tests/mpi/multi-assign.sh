#!/bin/sh
# Multi-assign on 3 hosts: copies of a slow host's chunks run elsewhere, the
# first report wins, and the result equals the serial loop.
. "$(dirname "$0")/mpi-common.sh"
PMLIB_NCPU=1 mpi_run 120 3 "$top_builddir/tests/mpi/multi_assign" > multi-assign.out 2>&1
rc=$?
cat multi-assign.out
grep -q MULTI-OK multi-assign.out && [ $rc -eq 0 ] || { rm -f multi-assign.out; echo FAIL; exit 1; }
rm -f multi-assign.out
echo PASS
