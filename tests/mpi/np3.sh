#!/bin/sh
# The MPI suite (test_mpi) on 3 hosts: every test passes and every rank exits 0.
. "$(dirname "$0")/mpi-common.sh"
echo "test_mpi on 3 hosts (limit 300 s)"
mpi_run 300 3 "$top_builddir/tests/mpi/test_mpi"
rc=$?
case $rc in
  0) echo "PASS: every test passed on 3 hosts and every rank exited 0" ;;
  124) echo "FAIL: timed out after 300 s" ;;
  *) echo "FAIL: mpiexec exited $rc" ;;
esac
exit $rc
