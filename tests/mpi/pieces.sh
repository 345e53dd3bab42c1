#!/bin/sh
# Payloads of several pieces between 2 hosts at the transport's level: each
# way a payload of pieces travels, every byte and the gaps around the
# receiver's pieces checked on host 1.
. "$(dirname "$0")/mpi-common.sh"
log=$(mktemp)
trap 'rm -f "$log"' EXIT

echo "pieces on 2 hosts (limit 120 s)"
mpi_expect_ok "" 120 2 PIECES-OK "$top_builddir/tests/mpi/pieces"
echo "PASS"
