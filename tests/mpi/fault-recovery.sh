#!/bin/sh
# Host 2 of 3 is killed mid-task under a launcher that does not stop the
# other processes (Open MPI's --enable-recovery). pmlib's heartbeat must
# notice, host 0 must tell host 1, and both must exit nonzero on their own
# instead of waiting out a second timeout or exiting 0. With
# --enable-recovery Open MPI's mpirun exits 0 whatever its processes
# return, so pmlib stops the launcher: the job's status must be nonzero
# too. Each rank's status is printed and checked as well.
. "$(dirname "$0")/mpi-common.sh"
if ! "$MPIEXEC" --version 2>&1 | grep -Eq "Open MPI|OpenRTE"; then
  echo "SKIP: needs Open MPI's mpiexec --enable-recovery"
  exit 77
fi
PMLIB_HOST_TIMEOUT=3
export PMLIB_HOST_TIMEOUT
mpi_fault_job 120 3 --enable-recovery sh -c \
  "$top_builddir/tests/mpi/fault_kill; echo \"rank \$OMPI_COMM_WORLD_RANK exited \$?\""
expect_failed_job
for r in 0 1; do
  st=$(sed -n "s/^rank $r exited //p" "$out")
  [ -n "$st" ] || fail "rank $r printed no exit status"
  [ "$st" -ne 0 ] || fail "rank $r exited 0 after host 2 died"
  echo "ok: rank $r exited $st"
done
expect_stderr "host 2 has not answered"
expect_stderr "host 0 ended the job: host 2 has not answered"
expect_stderr "stopping it"
if grep -q "FAULT-OK" "$out"; then
  fail "host 0 printed FAULT-OK: it went on after host 2 died"
fi
echo "ok: host 0 did not print FAULT-OK"
echo "PASS"
