#!/bin/sh
# An idle pmlib uses almost no CPU: after some tasks, every host's process
# (all its threads) must use less than 0.25 s of CPU time over 5 s of idling,
# on 1 host and on 2.
. "$(dirname "$0")/mpi-common.sh"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for n in 1 2; do
  echo "idle: $n host(s), 5 s idle, limit 0.25 s of CPU per host (limit 60 s)"
  mpi_expect_ok "$n host(s): " 60 "$n" IDLE-OK "$top_builddir/tests/mpi/idle" 5 0.25
  [ "$(grep -c '^idle: host' "$log")" -eq "$n" ] || fail "$n host(s): not every host reported its CPU time"
done
echo "PASS"
