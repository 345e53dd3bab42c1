#!/bin/sh
# Fine-grained iterative task graphs (thousands of tasks of one to four
# subtasks over many memories, all submitted before waiting) on 1 host and
# on 3: every memory must equal the serial computation.
. "$(dirname "$0")/mpi-common.sh"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for run in "1 600" "3 200"; do
  set -- $run
  echo "finegrain: $2 timesteps on $1 host(s) (limit 180 s)"
  mpi_run 180 "$1" "$top_builddir/tests/mpi/finegrain" "$2" >"$log" 2>&1
  rc=$?
  cat "$log"
  [ $rc -ne 124 ] || fail "$1 host(s): timed out after 180 s"
  [ $rc -eq 0 ] || fail "$1 host(s): mpiexec exited $rc"
  grep -q FINEGRAIN-OK "$log" || fail "$1 host(s): host 0 did not print FINEGRAIN-OK"
done
echo "PASS"
