#!/bin/sh
# Host 1 of 2 is killed (SIGKILL) while 256 MiB move between the hosts:
# once while its input arrives, once while its output goes back. Each time
# the job must end nonzero well before the limit instead of hanging, host 0
# must say why on stderr (the launcher stopping it, or its heartbeat timing
# out host 1), and host 0 must not have gone on as if nothing happened.
. "$(dirname "$0")/mpi-common.sh"

check_job() {
  expect_failed_job
  expect_stdout "host 0: waiting"
  if grep -q "stopping this host" "$err"; then
    echo "ok: stderr has 'stopping this host'"
  elif grep -q "host 1 has not answered" "$err"; then
    echo "ok: stderr has 'host 1 has not answered'"
  else
    fail "stderr has neither 'stopping this host' nor 'host 1 has not answered'"
  fi
  if grep -q "FAULT-OK" "$out"; then
    fail "host 0 printed FAULT-OK: it went on after host 1 died"
  fi
  echo "ok: host 0 did not print FAULT-OK"
  rm -f "$out" "$err"
}

echo "== host 1 dies while its input arrives"
mpi_fault_job 60 2 "$top_builddir/tests/mpi/fault_transfer"
check_job
echo "== host 1 dies while its output goes back"
mpi_fault_job 60 2 "$top_builddir/tests/mpi/fault_transfer" --during-write
check_job
echo "PASS"
