#!/bin/sh
# The MPI suite (test_mpi) on 4 hosts: every test must pass and every rank exit 0.
. "$(dirname "$0")/mpi-common.sh"
echo "test_mpi on 4 hosts"
mpi_run 300 4 "$top_builddir/tests/mpi/test_mpi"
