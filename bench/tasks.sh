#!/bin/bash
# pmlib's cost per task beside StarPU's, measured in the same run.
#
#   bench/tasks.sh [-n TASKS] [--runs R]
#
# Runs bench/tasks (empty independent tasks, tasks sharing one memory at
# several counts in flight, submit-then-wait, and Task Bench-like steps
# with the program thread's CPU time per submit) and, when the Debian package
# starpu-examples is installed, StarPU's tasks_overhead (also -b 1),
# async_tasks_overhead and sync_tasks_overhead with the same task counts
# (STARPU_EXAMPLES names another folder holding those programs, and
# STARPU_LIBS a folder of the libraries they need, for a machine where
# StarPU is not installed). Prints one table: microseconds per task and
# StarPU / pmlib.
set -u
n=100000
runs=3
while [ $# -gt 0 ]; do
    case $1 in
    -n) n=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "tasks.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
    esac
done
here=$(cd "$(dirname "$0")" && pwd)
prog=${TASKS:-$here/tasks}
[ -x "$prog" ] || { echo "tasks.sh: $prog is not built; run make first" >&2; exit 1; }
sync_n=$(( n < 20000 ? n : 20000 ))

log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$prog" -n "$n" --runs "$runs" >"$log" || { cat "$log"; exit 1; }
pm() { # workload count -> us per task
    awk -v w="$1" -v c="$2" '$1 == "result" {
        split("", f); for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
        if (f["workload"] == w && f["n"] == c) print f["us_per_task"] }' "$log"
}

starpu_dir=
for d in ${STARPU_EXAMPLES:-/usr/lib/*/starpu/examples}; do [ -x "$d/tasks_overhead" ] && starpu_dir=$d; done
sp() { # example args... -> "Per task" us, best of $runs
    [ -n "$starpu_dir" ] || return 0
    local best= v
    for _ in $(seq "$runs"); do
        v=$(env -u STARPU_BENCH_DIR STARPU_SILENT=1 STARPU_NCPU=${PMLIB_NCPU:-$(nproc)} \
            ${STARPU_LIBS:+LD_LIBRARY_PATH=$STARPU_LIBS} \
            "$starpu_dir/$1" "${@:2}" 2>&1 | awk '/^Per task:/ {print $3; exit}')
        [ -n "$v" ] || continue
        if [ -z "$best" ] || awk -v a="$v" -v b="$best" 'BEGIN { exit !(a < b) }'; then best=$v; fi
    done
    echo "$best"
}
ratio() { [ -n "$1" ] && [ -n "$2" ] && awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1fx", a / b }' || echo "-"; }

grep -v '^result' "$log"
echo
printf '%-58s %12s %12s %10s\n' "workload (us per task, best of $runs)" pmlib StarPU "StarPU/pmlib"
row() { printf '%-58s %12s %12s %10s\n' "$1" "${2:--}" "${3:--}" "$(ratio "${3:-}" "${2:-}")"; }
e=$(pm empty "$n"); s=$(sp tasks_overhead -i "$n"); a=$(sp async_tasks_overhead -i "$n")
row "$n independent empty tasks, submit all, wait (tasks_overhead)" "$e" "$s"
row "  same, StarPU async_tasks_overhead" "$e" "$a"
row "  same, pmlib's first run alone (task blocks fresh)" "$(pm empty_first "$n")" "$s"
for c in $((n / 100)) $((n / 10)) "$n"; do
    [ "$c" -gt 0 ] || continue
    row "$c tasks on one memory, 16 subtasks each (-b 1: 1 subtask)" "$(pm shared "$c")" "$(sp tasks_overhead -i "$c" -b 1)"
done
row "$sync_n x submit + wait one task (sync_tasks_overhead)" "$(pm sync "$sync_n")" "$(sp sync_tasks_overhead -i "$sync_n")"
[ -n "$starpu_dir" ] || echo "(StarPU columns empty: apt install starpu-examples)"
