#!/usr/bin/env bash
# Runs pmlib's benchmarks beside reference figures and ends with a markdown
# table to paste into doc/benchmarks.md. Run it from the top of the build tree.
set -uo pipefail

usage() {
    cat <<'EOF'
usage: bench/run.sh [--full] [ARRAYSUM [OVERHEAD]]

Prints, in one run:
  (a) pmlib's overhead per subtask for 10^6 empty subtasks (bench/overhead),
      static and pull policies, best and median of 5 runs;
  (b) StarPU's own figure from its tasks_overhead example (Debian package
      starpu-examples; set STARPU_TASKS_OVERHEAD to use another copy) for
      10^6 tasks, and its ratio to pmlib's;
  (c) arraysum serial vs pmlib with -n 1e7 (and 6e7 with --full): on all
      cores (with --verify), then with PMLIB_NCPU=1 and PMLIB_NCPU=2.
ARRAYSUM and OVERHEAD default to apps/arraysum/arraysum and bench/overhead.
Exits 1 if any program failed; the table then says which.
EOF
}

full=0
progs=()
for arg in "$@"; do
    case $arg in
    --full) full=1 ;;
    -h | --help) usage; exit 0 ;;
    -*) echo "run.sh: unknown option '$arg' (see 'bench/run.sh --help')" >&2; exit 2 ;;
    *) progs+=("$arg") ;;
    esac
done
arraysum=${progs[0]:-apps/arraysum/arraysum}
overhead=${progs[1]:-bench/overhead}
for p in "$arraysum" "$overhead"; do
    if [ ! -x "$p" ]; then
        echo "run.sh: '$p' is not an executable; build it with make, or pass its path (see 'bench/run.sh --help')" >&2
        exit 2
    fi
done

N_EMPTY=1000000
failed=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# Runs a program with its output shown indented and kept in $log.
run() {
    echo "\$ $*"
    "$@" >"$log" 2>&1
    local rc=$?
    sed 's/^/    /' "$log"
    if [ $rc -ne 0 ]; then
        echo "    (exit status $rc)"
        failed=1
    fi
    return $rc
}

# The value of key=value on the program's "result" line for $1 (sched or app).
field() {
    sed -n "/^result .*$1/s/.* $2=\([^ ]*\).*/\1/p" "$log" | tail -n 1
}

# a / b as "1.23x", "-" when either is missing.
ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN {
        if (a + 0 > 0 && b + 0 > 0) printf "%.2fx", a / b; else printf "-" }'
}

# Rows of the final table: benchmark, pmlib, reference, ratio.
bench=() pm=() ref=() rat=()
row() { bench+=("$1"); pm+=("$2"); ref+=("$3"); rat+=("$4"); }

echo "== (a) pmlib: per-subtask overhead, $N_EMPTY empty subtasks"
st_best=failed st_med=failed pl_best=failed pl_med=failed
if run "$overhead" -n $N_EMPTY --runs 5; then
    st_best=$(field sched=static best_us) st_med=$(field sched=static median_us)
    pl_best=$(field sched=pull best_us) pl_med=$(field sched=pull median_us)
fi

echo
echo "== (b) StarPU: tasks_overhead -i $N_EMPTY"
starpu=${STARPU_TASKS_OVERHEAD:-}
for f in /usr/lib/*/starpu/examples/tasks_overhead; do
    [ -z "$starpu" ] && [ -x "$f" ] && starpu=$f
done
sp_us=
if [ -z "$starpu" ] || [ ! -x "$starpu" ]; then
    echo "    not installed (Debian: apt install starpu-examples)"
    sp_ref="StarPU: not installed"
# STARPU_BENCH_DIR would make it write .dat files; it prints the same figures.
elif run env -u STARPU_BENCH_DIR STARPU_SILENT=1 "$starpu" -i $N_EMPTY; then
    # "Per task: X usecs" is submit + execution over all tasks.
    sp_us=$(awk '/^Per task:/ {printf "%.3f", $3}' "$log")
    sp_ref="StarPU tasks_overhead: ${sp_us:-?} us/task"
else
    sp_ref="StarPU tasks_overhead: failed"
fi
sp_ratio=$(ratio "$sp_us" "$pl_med")
row "overhead per subtask, $N_EMPTY empty, static, best/median of 5" \
    "$st_best / $st_med us" "-" "-"
row "overhead per subtask, $N_EMPTY empty, pull, best/median of 5" \
    "$pl_best / $pl_med us" "$sp_ref" "StarPU / pmlib median: $sp_ratio"

echo
echo "== (c) arraysum: serial vs pmlib"
sizes=(1e7)
[ $full -eq 1 ] && sizes+=(6e7)
for n in "${sizes[@]}"; do
    serial=
    if run "$arraysum" -n "$n" --verify; then
        serial=$(field app=arraysum serial_s)
        row "arraysum -n $n, all cores, verify $(field app=arraysum verify)" \
            "$(field app=arraysum pmlib_s) s" "serial ${serial} s" \
            "$(ratio "$serial" "$(field app=arraysum pmlib_s)")"
    else
        row "arraysum -n $n, all cores" "failed" "-" "-"
    fi
    for ncpu in 1 2; do
        t=failed
        if run env PMLIB_NCPU=$ncpu "$arraysum" -n "$n" --no-serial; then
            t=$(field app=arraysum pmlib_s)
        fi
        row "arraysum -n $n, PMLIB_NCPU=$ncpu" "$t s" "serial ${serial:-?} s" \
            "$(ratio "$serial" "$t")"
    done
done

echo
echo "== side by side"
for i in "${!bench[@]}"; do
    printf '%-60s  %-20s  %-36s  %s\n' "${bench[i]}" "${pm[i]}" "${ref[i]}" "${rat[i]}"
done

cpu=$(sed -n 's/^model name[[:space:]]*: *//p' /proc/cpuinfo 2>/dev/null | head -n 1)
machine="$(date -u +%F) | $(uname -m) | ${cpu:-unknown CPU} | $(nproc)"
echo
echo "== markdown for doc/benchmarks.md"
echo
echo "| date | arch | CPU | cores | benchmark | pmlib | reference | ratio |"
echo "|---|---|---|---|---|---|---|---|"
for i in "${!bench[@]}"; do
    echo "| $machine | ${bench[i]} | ${pm[i]} | ${ref[i]} | ${rat[i]} |"
done
exit $failed
