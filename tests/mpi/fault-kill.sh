#!/bin/sh
# Host 2 of 3 is killed (SIGKILL) in the middle of a task. The job must end
# nonzero well before the limit instead of hanging, pmlib must say why on
# stderr (the launcher stopping the other hosts, or its heartbeat timing out
# a silent host), and host 0 must not have gone on as if nothing happened.
. "$(dirname "$0")/mpi-common.sh"
mpi_fault_job 120 3 "$top_builddir/tests/mpi/fault_kill"
expect_failed_job
expect_stderr "pmlib"
if grep -q "stopping this host" "$err"; then
  echo "ok: stderr has 'stopping this host'"
elif grep -q "has not answered" "$err"; then
  echo "ok: stderr has 'has not answered'"
else
  fail "stderr has neither 'stopping this host' nor 'has not answered'"
fi
if grep -q "FAULT-OK" "$out"; then
  fail "host 0 printed FAULT-OK: it went on after host 2 died"
fi
echo "ok: host 0 did not print FAULT-OK"
echo "PASS"
