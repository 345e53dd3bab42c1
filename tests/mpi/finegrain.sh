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
  mpi_expect_ok "$1 host(s): " 180 "$1" FINEGRAIN-OK "$top_builddir/tests/mpi/finegrain" "$2"
done
echo "PASS"
