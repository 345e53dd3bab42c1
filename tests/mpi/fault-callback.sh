#!/bin/sh
# A cpu callback fails on the last of 3 hosts. Host 0 must see PM_ECALLBACK
# naming that host and a subtask it ran, with every other slice written
# (it then prints FAULT-OK and exits 0); the other ranks' pm_finalize reports
# the failure, so the job as a whole exits nonzero, without hanging.
. "$(dirname "$0")/mpi-common.sh"
mpi_fault_job 120 3 "$top_builddir/tests/mpi/fault_callback"
expect_failed_job
expect_stdout "FAULT-OK"
expect_stderr "host 2"
echo "PASS"
