#!/bin/sh
# arraysum --verify at a small size, with one stub and with several: the pmlib
# result must equal the serial reference exactly.
set -e
app=${top_builddir:-.}/apps/arraysum/arraysum
for n in 1 2 3; do
  PMLIB_NCPU=$n "$app" -n 200000 --repeat 3 --verify
done
PMLIB_NCPU=2 "$app" -n 100003 --repeat 2 --subtasks 7 --sched static --verify
