#!/bin/sh
# Straggler copies on host 0 of 2 hosts: a held chunk is copied by another
# stub of the host, and the results equal the serial loop.
. "$(dirname "$0")/mpi-common.sh"
PMLIB_NCPU=2 PMLIB_MODEL_DIR=off mpi_run 120 2 "$top_builddir/tests/mpi/straggler" > straggler.out 2>&1
rc=$?
cat straggler.out
grep -q STRAGGLER-OK straggler.out && [ $rc -eq 0 ] || { rm -f straggler.out; echo FAIL; exit 1; }
rm -f straggler.out
echo PASS
