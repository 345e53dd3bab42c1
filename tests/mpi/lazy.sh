#!/bin/sh
# Lazy memories on 1, 2 and 4 hosts: an iterative sweep in which every
# subtask reads the whole previous vector and writes its slice of the next
# must equal the serial computation with lazy memories and without; on 4
# hosts, with lazy memories no host (host 0 included) may send or receive
# much more than the average, while without them host 0 sends far more:
# two vectors an iteration, the hosts that have the vector relaying it
# further, or all three with PMLIB_RELAY=0.
# Then, on 3 hosts with PMLIB_TRACE, the trace must show payloads that went
# from one host other than 0 straight to another.
. "$(dirname "$0")/mpi-common.sh"
log=$(mktemp)
trace=$(mktemp -d)
trap 'rm -rf "$log" "$trace"' EXIT
for n in 1 2 4; do
  echo "lazy: $n host(s) (limit 120 s)"
  mpi_expect_ok "$n host(s): " 120 "$n" LAZY-OK "$top_builddir/tests/mpi/lazy"
done
echo "lazy: 4 hosts, PMLIB_RELAY=0 (limit 120 s)"
mpi_expect_ok "4 hosts, no relays: " 120 4 LAZY-OK -x PMLIB_RELAY=0 "$top_builddir/tests/mpi/lazy"
echo "lazy: 3 hosts with PMLIB_TRACE (limit 120 s)"
mpi_expect_ok "3 hosts, traced: " 120 3 LAZY-OK -x PMLIB_TRACE="$trace/t.json" \
  "$top_builddir/tests/mpi/lazy" 16384 4
for pair in '"from":1,"to":2' '"from":2,"to":1'; do
  cat "$trace"/t.json* | grep -q "\"name\":\"transfer\".*$pair" ||
    fail "the trace shows no transfer with $pair"
done
echo "PASS"
