#!/bin/sh
# The cost of the checking mode: each program runs with PMLIB_CHECK=0 and
# with PMLIB_CHECK=1, alternately, ROUNDS times, in one run; prints the
# median of each and the ratio.
#   bench/check-cost.sh [ROUNDS]   (from the build directory)
rounds=${1:-5}
b=${top_builddir:-.}
median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
# The figure of one run: pmlib seconds (apps) or median us per subtask (overhead).
figure() { sed -n 's/^result .*pmlib_s=\([0-9.]*\).*/\1/p; s/^result .*median_us=\([0-9.]*\).*/\1/p'; }
bench() { # NAME COMMAND...
  name=$1; shift
  off=$(mktemp) on=$(mktemp)
  i=0
  while [ $i -lt "$rounds" ]; do
    PMLIB_CHECK=0 "$@" 2>/dev/null | figure >>"$off"
    PMLIB_CHECK=1 "$@" 2>/dev/null | figure >>"$on"
    i=$((i + 1))
  done
  a=$(median <"$off") c=$(median <"$on")
  echo "$name: off $a, on $c, on/off $(awk -v a="$a" -v c="$c" 'BEGIN {printf "%.2f", c / a}')"
  rm -f "$off" "$on"
}
bench "arraysum -n 1000000 --repeat 5 (16 subtasks), s" \
  "$b/apps/arraysum/arraysum" -n 1000000 --repeat 5 --no-serial
bench "arraysum -n 10000000 --repeat 1 (153 subtasks), s" \
  "$b/apps/arraysum/arraysum" -n 10000000 --repeat 1 --no-serial
bench "overhead -n 1000000 (empty subtasks, no memories), us per subtask" \
  "$b/bench/overhead" -n 1000000 --runs 3 --sched pull
