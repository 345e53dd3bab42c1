#!/bin/sh
# PMLIB_TRACE writes a Chrome trace: valid JSON, one span per chunk of the
# task on the stubs' tracks, a span for the task; with 2 hosts the two files
# concatenate into one trace holding every chunk once.
set -e
app=${top_builddir:-.}/apps/arraysum/arraysum
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
count() { # FILE... : prints "chunks tasks" of the concatenated trace
  cat "$@" | python3 -c '
import json, sys
text = sys.stdin.read().rstrip()
ev = json.loads(text if text.endswith("]") else text + "]")
print(sum(e.get("name") == "chunk" for e in ev), sum(e.get("name") == "task" for e in ev))'
}
# 200000 elements at 20000 per subtask: 10 subtasks, 10 chunks.
PMLIB_NCPU=2 PMLIB_TRACE="$dir/one.json" "$app" -n 200000 --repeat 1 --subtasks 10 --no-serial >/dev/null
got=$(count "$dir/one.json")
echo "one host: chunks, tasks = $got"
[ "$got" = "10 1" ]
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
PMLIB_NCPU=1 PMLIB_TRACE="$dir/two.json" timeout 120 ${MPIEXEC:-mpiexec} --oversubscribe -n 2 \
  "$app" -n 200000 --repeat 1 --subtasks 10 --no-serial >/dev/null
got=$(count "$dir/two.json" "$dir/two.json.1")
echo "two hosts: chunks, tasks = $got"
[ "$got" = "10 1" ]
echo PASS
