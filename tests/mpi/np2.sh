#!/bin/sh
# The MPI suite (test_mpi) on 2 hosts: every test must pass and every rank exit 0.
. "$(dirname "$0")/mpi-common.sh"
echo "test_mpi on 2 hosts"
mpi_run 300 2 "$top_builddir/tests/mpi/test_mpi"
