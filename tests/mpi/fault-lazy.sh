#!/bin/sh
# Host 2 of 3 dies holding the only copy of a lazy memory's slice, under a
# launcher that does not stop the other processes (Open MPI's
# --enable-recovery). Host 0's heartbeat must notice, name the bytes that
# were lost and the host that held them, and the job must end nonzero.
. "$(dirname "$0")/mpi-common.sh"
if ! "$MPIEXEC" --version 2>&1 | grep -Eq "Open MPI|OpenRTE"; then
  echo "SKIP: needs Open MPI's mpiexec --enable-recovery"
  exit 77
fi
PMLIB_HOST_TIMEOUT=3 PMLIB_NCPU=1
export PMLIB_HOST_TIMEOUT PMLIB_NCPU
mpi_fault_job 120 3 --enable-recovery "$top_builddir/tests/mpi/fault_lazy"
expect_failed_job
expect_stderr "host 2 has not answered"
# Subtasks 8 to 11 ran on host 2: bytes 64 to 95 of the lazy memory.
expect_stderr "host 2 held the only copy of bytes 64..95 of memory"
if grep -q "FAULT-OK" "$out"; then
  fail "host 0 printed FAULT-OK: it went on after host 2 died"
fi
echo "ok: host 0 did not print FAULT-OK"
echo "PASS"
