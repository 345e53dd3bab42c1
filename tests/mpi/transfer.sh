#!/bin/sh
# Large memories between 2 hosts: 384 MiB read in 40 MiB slices and copied
# back, then a compressed variant, every word and checksum checked on
# host 0. With enough free memory, also one subtask on host 1 reading and
# writing back a 2.25 GiB memory (payloads over 2 GiB both ways); the
# processes then hold several copies of it, hence the 10 GiB floor.
. "$(dirname "$0")/mpi-common.sh"
log=$(mktemp)
trap 'rm -f "$log"' EXIT

echo "transfer on 2 hosts (limit 120 s)"
mpi_expect_ok "" 120 2 TRANSFER-OK "$top_builddir/tests/mpi/transfer"

pass_unless_huge_fits "transfer --huge" 10
echo "transfer --huge on 2 hosts (limit 120 s)"
mpi_expect_ok "--huge: " 120 2 TRANSFER-HUGE-OK "$top_builddir/tests/mpi/transfer" --huge
echo "PASS"
