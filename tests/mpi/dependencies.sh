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
  mpi_expect_ok "$1 host(s): " 120 "$1" DEPS-OK "$top_builddir/tests/mpi/dependencies" $3 "$2"
done
# More stubs than cores on one host: a task a stub makes ready is kept for
# that stub and run next, and listed for the others when it declines
# chunks of it; the tasks still run in their order.
echo "dependencies: 3000 tasks and 3000 more on 1 host with 8 CPU stubs (limit 120 s)"
(PMLIB_NCPU=8 && export PMLIB_NCPU &&
  mpi_expect_ok "1 host, 8 stubs: " 120 1 DEPS-OK "$top_builddir/tests/mpi/dependencies" 3000) || exit 1
echo "PASS"
