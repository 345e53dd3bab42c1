#!/bin/sh
# Read after write, write after read and write after write between thousands
# of small tasks over four memories, on 1 host and on 3: all submitted before
# waiting, then in batches with host writes between them; every memory must
# equal the serial replay.
. "$(dirname "$0")/mpi-common.sh"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# The last run gives a third of the tasks static shares (no stealing), so a
# chunk's owner must be woken, not just any sleeping stub.
for run in "1 3000" "3 1000" "3 1000 --static"; do
  set -- $run
  echo "dependencies: $2 tasks and $2 more on $1 host(s) $3 (limit 120 s)"
  mpi_run 120 "$1" "$top_builddir/tests/mpi/dependencies" $3 "$2" >"$log" 2>&1
  rc=$?
  cat "$log"
  [ $rc -ne 124 ] || fail "$1 host(s): timed out after 120 s"
  [ $rc -eq 0 ] || fail "$1 host(s): mpiexec exited $rc"
  grep -q DEPS-OK "$log" || fail "$1 host(s): host 0 did not print DEPS-OK"
done
echo "PASS"
