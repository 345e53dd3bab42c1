#!/bin/sh
# Inputs that change between tasks, read in many small chunks on 2 hosts:
# 50 iterations with host-side writes and touches, and chains of dependent
# tasks, each result equal to the serial loop.
. "$(dirname "$0")/mpi-common.sh"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
echo "prefetch on 2 hosts (limit 120 s)"
mpi_run 120 2 "$top_builddir/tests/mpi/prefetch" >"$log" 2>&1
rc=$?
cat "$log"
[ $rc -ne 124 ] || fail "timed out after 120 s"
[ $rc -eq 0 ] || fail "mpiexec exited $rc"
grep -q PREFETCH-OK "$log" || fail "host 0 did not print PREFETCH-OK"
echo "PASS"
