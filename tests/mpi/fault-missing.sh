#!/bin/sh
# Host 1 of 3 did not register the task's callbacks: host 0's task must fail
# with PM_ENOCALLBACK and failed_host 1 (FAULT-OK), the log must say which
# host lacks which set, and the job exits nonzero without hanging.
. "$(dirname "$0")/mpi-common.sh"
mpi_fault_job 120 3 "$top_builddir/tests/mpi/fault_missing"
expect_failed_job
expect_stdout "FAULT-OK"
expect_stderr "no callbacks named 'fault-missing' are registered on host 1"
echo "PASS"
