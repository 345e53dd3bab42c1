#!/bin/sh
# The MPI suite (test_mpi) on 1 host: every test must pass and every rank exit 0.
. "$(dirname "$0")/mpi-common.sh"
echo "test_mpi on 1 host"
mpi_run 300 1 "$top_builddir/tests/mpi/test_mpi"
