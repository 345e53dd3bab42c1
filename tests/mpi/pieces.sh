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

# ThreadSanitizer makes each rank's pass over 2.2 GiB many times slower
# than the other builds that run this part.
case ${PMLIB_TEST_SANITIZER:-} in *thread*)
  echo "SKIP: pieces --huge in a ThreadSanitizer build"
  echo "PASS"
  exit 0 ;;
esac
avail_kb=$(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo 2>/dev/null)
if [ "${avail_kb:-0}" -lt $((8 * 1024 * 1024)) ]; then
  echo "SKIP: pieces --huge needs 8 GiB of available memory, this machine has $((${avail_kb:-0} / 1024)) MiB"
  echo "PASS"
  exit 0
fi
echo "pieces --huge on 2 hosts (limit 180 s)"
mpi_expect_ok "--huge: " 180 2 PIECES-OK "$top_builddir/tests/mpi/pieces" --huge
echo "PASS"
