#!/bin/sh
# Payloads of several pieces between 2 hosts at the transport's level: each
# way a payload of pieces travels, every byte and the gaps around the
# receiver's pieces checked on host 1. With enough free memory, also pieces
# over 1 GiB (2.2 GiB in all), split among messages; each process then
# holds one such buffer, hence the 8 GiB floor.
. "$(dirname "$0")/mpi-common.sh"
log=$(mktemp)
trap 'rm -f "$log"' EXIT

echo "pieces on 2 hosts (limit 120 s)"
mpi_expect_ok "" 120 2 PIECES-OK "$top_builddir/tests/mpi/pieces"
echo "pieces on 2 hosts, packed instead of read by the receiver (limit 120 s)"
export PMLIB_CMA=0
mpi_expect_ok "PMLIB_CMA=0: " 120 2 PIECES-OK "$top_builddir/tests/mpi/pieces"
unset PMLIB_CMA

pass_unless_huge_fits "pieces --huge" 8
echo "pieces --huge on 2 hosts (limit 180 s)"
mpi_expect_ok "--huge: " 180 2 PIECES-OK "$top_builddir/tests/mpi/pieces" --huge
echo "PASS"
