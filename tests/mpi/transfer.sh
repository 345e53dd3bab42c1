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

# ThreadSanitizer makes each rank's pass over 2.25 GiB many times slower
# than the plain build that runs this part; its builds run part (a) only.
case ${PMLIB_TEST_SANITIZER:-} in *thread*)
  echo "SKIP: transfer --huge in a ThreadSanitizer build"
  echo "PASS"
  exit 0 ;;
esac
avail_kb=$(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo 2>/dev/null)
if [ "${avail_kb:-0}" -lt $((10 * 1024 * 1024)) ]; then
  echo "SKIP: transfer --huge needs 10 GiB of available memory, this machine has $((${avail_kb:-0} / 1024)) MiB"
  echo "PASS"
  exit 0
fi
echo "transfer --huge on 2 hosts (limit 120 s)"
mpi_expect_ok "--huge: " 120 2 TRANSFER-HUGE-OK "$top_builddir/tests/mpi/transfer" --huge
echo "PASS"
