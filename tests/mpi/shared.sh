#!/bin/sh
# Memories shared in place by the hosts of one machine (PMLIB_SHM=1): the
# shared program on 2 and 3 hosts (no byte of a large memory moves, every
# result equals the serial one) and on 2 hosts over the wire (PMLIB_SHM=0,
# the same results); then the MPI suite on 2 and 3 hosts, the prefetch
# program on 2 hosts and the lazy one on 3 with their memories shared.
. "$(dirname "$0")/mpi-common.sh"
log=$(mktemp)
trap 'rm -f "$log"' EXIT

export PMLIB_SHM=1
for n in 2 3; do
  echo "shared on $n hosts (limit 120 s)"
  mpi_expect_ok "$n hosts: " 120 $n SHARED-OK "$top_builddir/tests/mpi/shared"
done
echo "shared on 2 hosts over the wire (limit 120 s)"
export PMLIB_SHM=0
mpi_expect_ok "PMLIB_SHM=0: " 120 2 SHARED-OK "$top_builddir/tests/mpi/shared" --wire
export PMLIB_SHM=1
for n in 2 3; do
  echo "test_mpi on $n hosts, memories shared (limit 300 s)"
  mpi_expect_ok "test_mpi, $n hosts: " 300 $n "100%" "$top_builddir/tests/mpi/test_mpi"
done
echo "prefetch on 2 hosts, memories shared (limit 120 s)"
mpi_expect_ok "prefetch: " 120 2 PREFETCH-OK "$top_builddir/tests/mpi/prefetch"
echo "lazy on 3 hosts, memories shared (limit 120 s)"
mpi_expect_ok "lazy: " 120 3 LAZY-OK "$top_builddir/tests/mpi/lazy"
echo "PASS"
