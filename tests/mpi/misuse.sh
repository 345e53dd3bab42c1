#!/bin/sh
# Misuse is caught, not left to crash, hang or corrupt quietly:
# - PMLIB_CHECK=1 on 1 host and on 2 hosts: a stray read sees the poison,
#   a stray write, a write into a PM_READ memory and a write past the
#   subscription of a reduced memory fail the task naming subtask, memory
#   and bytes (tests/mpi/misuse.c checks codes and messages);
# - pm_init after pm_finalize under mpiexec: PM_EINIT and a message on
#   both hosts, not an MPI abort;
# - PMLIB_HOST_TIMEOUT below two heartbeats or not finite is refused with a
#   one-line warning;
# - PMLIB_TRACE streams to its file: over 20000 tasks the process grows by
#   less than 4 MB more than without it, and the file is valid JSON with
#   every task.
. "$(dirname "$0")/mpi-common.sh"
prog=$top_builddir/tests/mpi/misuse
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

echo "---- checking mode, 1 host"
"$prog" check >"$dir/out" 2>&1
st=$?
cat "$dir/out"
[ "$st" -eq 0 ] && grep -q MISUSE-OK "$dir/out" || fail "checking mode on 1 host"

echo "---- checking mode, 2 hosts"
mpi_run 120 2 "$prog" check >"$dir/out" 2>&1
st=$?
cat "$dir/out"
# Host 1's pm_finalize reports the failed tasks, so the job exits nonzero.
[ "$st" -ne 124 ] || fail "the 2-host job timed out"
grep -q MISUSE-OK "$dir/out" || fail "checking mode on 2 hosts"
grep -q "pmlib\[1\]: error: task 2 failed: subtask 7 wrote bytes 48..55 of memory 1 outside its subscriptions (host 1," "$dir/out" ||
  fail "host 1 did not report the stray write"

echo "---- pm_init after pm_finalize, 2 hosts"
mpi_run 120 2 "$prog" reinit >"$dir/out" 2>&1
st=$?
cat "$dir/out"
[ "$st" -eq 0 ] || fail "pm_init after pm_finalize under mpiexec: status $st"
[ "$(grep -c '^host reinit: PM_EINIT$' "$dir/out")" -eq 2 ] || fail "not refused on both hosts"
grep -q "pm_init called after pm_finalize (or MPI_Finalize) in a process started by mpirun" "$dir/out" ||
  fail "no message says why"
echo "ok: refused with PM_EINIT on both hosts"

echo "---- PMLIB_HOST_TIMEOUT refusals"
for v in 1 1.5 inf nan -5 abc 1e400; do
  PMLIB_HOST_TIMEOUT=$v "$prog" tasks 10 >"$dir/out" 2>"$dir/err" || fail "PMLIB_HOST_TIMEOUT=$v: the program failed"
  grep -q "^pmlib\[0\]: warn: PMLIB_HOST_TIMEOUT=$v is not a finite number of seconds of at least 2 (twice the 1 s heartbeat); using 30$" "$dir/err" ||
    { cat "$dir/err"; fail "PMLIB_HOST_TIMEOUT=$v was not refused"; }
  echo "ok: PMLIB_HOST_TIMEOUT=$v refused"
done
PMLIB_HOST_TIMEOUT=2 "$prog" tasks 10 >"$dir/out" 2>"$dir/err" || fail "PMLIB_HOST_TIMEOUT=2: the program failed"
[ ! -s "$dir/err" ] || { cat "$dir/err"; fail "PMLIB_HOST_TIMEOUT=2 was refused"; }
echo "ok: PMLIB_HOST_TIMEOUT=2 accepted"

echo "---- PMLIB_TRACE memory"
n=20000
plain=$(PMLIB_NCPU=2 "$prog" tasks $n | sed -n 's/^rss-growth-kb //p')
traced=$(PMLIB_NCPU=2 PMLIB_TRACE="$dir/t.json" "$prog" tasks $n | sed -n 's/^rss-growth-kb //p')
echo "resident memory growth over $n tasks: ${plain} KB without trace, ${traced} KB with"
[ -n "$plain" ] && [ -n "$traced" ] || fail "no measurement"
[ $((traced - plain)) -lt 4096 ] || fail "the trace kept $((traced - plain)) KB in memory"
tasks=$(python3 -c '
import json, sys
print(sum(e.get("name") == "task" for e in json.load(open(sys.argv[1]))))' "$dir/t.json") ||
  fail "the trace is not valid JSON"
echo "trace: $tasks task spans, $(wc -c <"$dir/t.json") bytes"
[ "$tasks" -eq "$n" ] || fail "expected $n task spans"
echo "PASS"
