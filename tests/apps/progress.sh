#!/bin/sh
# PMLIB_PROGRESS=1 on host 0: off a terminal it prints plain lines with the
# subtasks done across all hosts, the total and the elapsed time, ending with
# the task complete; on 2 hosts the count includes the other host's share.
set -e
app=${top_builddir:-.}/apps/arraysum/arraysum
err=$(mktemp)
trap 'rm -f "$err"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Shown at once (PMLIB_PROGRESS_AFTER_MS=0, looked at every 5 ms), so that
# the line appears however fast the machine is; on the CPU cores, which
# take far longer than 5 ms for this anywhere.
PMLIB_NCPU=1 PMLIB_PROGRESS=1 PMLIB_PROGRESS_AFTER_MS=0 timeout 120 ${MPIEXEC:-mpiexec} --oversubscribe -n 2 \
  -x PMLIB_NCPU -x PMLIB_PROGRESS -x PMLIB_PROGRESS_AFTER_MS \
  "$app" -n 2e6 --repeat 25 --subtasks 12 --device cpu --no-serial >/dev/null 2>"$err"
cat "$err"
grep -q "^pmlib: task 1  12/12 subtasks  100.0%" "$err"
echo PASS
