#!/bin/sh
# Inputs that change between tasks, read in many small chunks on 2 hosts:
# 50 iterations with host-side writes and touches, and chains of dependent
# tasks, each result equal to the serial loop.
. "$(dirname "$0")/mpi-common.sh"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
echo "prefetch on 2 hosts (limit 120 s)"
mpi_expect_ok "" 120 2 PREFETCH-OK "$top_builddir/tests/mpi/prefetch"
echo "PASS"
