#!/bin/sh
# An idle pmlib uses almost no CPU: after some tasks, every host's process
# (all its threads) must use less than 0.25 s of CPU time over 5 s of idling,
# on 1 host and on 2.
. "$(dirname "$0")/mpi-common.sh"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for n in 1 2; do
  echo "idle: $n host(s), 5 s idle, limit 0.25 s of CPU per host (limit 60 s)"
  mpi_run 60 "$n" "$top_builddir/tests/mpi/idle" 5 0.25 >"$log" 2>&1
  rc=$?
  cat "$log"
  [ $rc -ne 124 ] || fail "$n host(s): timed out after 60 s"
  [ $rc -eq 0 ] || fail "$n host(s): mpiexec exited $rc"
  grep -q IDLE-OK "$log" || fail "$n host(s): host 0 did not print IDLE-OK"
  [ "$(grep -c '^idle: host' "$log")" -eq "$n" ] || fail "$n host(s): not every host reported its CPU time"
done
echo "PASS"
