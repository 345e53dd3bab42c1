#!/bin/sh
# pagerank against NumPy: the ranks written by --output for a random graph
# (fixed seed; dangling pages, self-links, repeated links), a cycle (every
# rank 1/n) and a star into a dangling hub (a closed form) equal a power
# iteration written apart in NumPy within 1e-12, and the limit found by one
# linear solve (and the closed form) within 1e-11, on one host and on two.
# Skips (77) without NumPy.
. "${top_srcdir:-.}/tests/apps/numpy-env.sh"
app=${top_builddir:-.}/apps/pagerank/pagerank
tol=1e-14
iters=1000

for graph in "random 300" "cycle 11" "star 9"; do
  set -- $graph
  $check pagerank-graph "$dir" $1 $1 $2
  "$app" --graph "$dir/$1.txt" --output "$dir/$1-ranks.txt" --tol $tol \
    --iters $iters --device cpu --no-serial >"$dir/log" ||
    { cat "$dir/log"; fail "pagerank on $1"; }
  $check pagerank "$dir" $1.txt $1-ranks.txt $tol $iters
  ${MPIEXEC:-mpiexec} --oversubscribe -n 2 "$app" --graph "$dir/$1.txt" \
    --output "$dir/$1-ranks2.txt" --tol $tol --iters $iters --subtasks 3 \
    --device cpu --no-serial >"$dir/log" ||
    { cat "$dir/log"; fail "pagerank on $1, two hosts"; }
  $check pagerank "$dir" $1.txt $1-ranks2.txt $tol $iters
done
echo "PASS"
