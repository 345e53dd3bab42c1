#!/usr/bin/env bash
# Whether a second host ever makes a task slower: each app on one host and
# on two, side by side in one run, with the bytes moved between the hosts
# and MPI's own bandwidth (bench/transport) to weigh them against.
set -uo pipefail

usage() {
    cat <<'EOF'
usage: bench/hosts.sh [--gpu] [--stubs N] [--rounds R] [--bind] [--quick]

Runs, from the top of the build tree, each sample app once on one host and
once on two (mpiexec -n 2), best of its --runs where it has them, and prints
a table: time on 1 host, on 2 hosts, their ratio, bytes moved between the
hosts, and that volume's time at MPI's bandwidth measured first by
bench/transport in the same run. The goal column is the limit for 2 hosts:
  CPU:  1 host with 2 stubs against 2 hosts with 1 stub each, on this
        machine (fft2d 4096 x 4096, pagerank 2e6 pages: at most 1.5x;
        matmul 2048: at most 1.2x);
  GPU (--gpu): 1 host driving both GPUs against 2 hosts with one GPU each
        (matmul 16384, fft2d 4096 x 32768, pagerank 3e7 pages: at most
        1.3 x max(1-host time, bytes moved / MPI bandwidth)); nbody 2^20 on
        2 hosts against one GPU: at least 1.9x faster.
--stubs N: CPU stubs per host (default 1): 1 host with 2N against 2 hosts
        with N each.
Each row also runs 1 host with host 0's devices alone (N stubs, or one
GPU): the hosts rule is that 2 hosts are never more than 1.10x slower than
that (column "2 / host 0 alone").
--rounds R runs the three configurations of each row R times, one after
        the other in turn, and reports the median of each (default 1): on a
        busy or small machine one run of each is often not enough to tell.
--bind binds each of the 2 ranks to cores of its own, N each (mpiexec
        --map-by slot:PE=N --bind-to core; mpiexec binds 2 ranks to a core
        each by default); without it they are left unbound (--bind-to
        none) and share all the cores. CPU runs only.
--quick uses small sizes (a smoke test of the script).
EOF
}

gpu=0
bind=0
quick=0
stubs=1
rounds=1
while [ $# -gt 0 ]; do
    case $1 in
    --gpu) gpu=1 ;;
    --quick) quick=1 ;;
    --bind) bind=1 ;;
    --stubs)
        shift
        case ${1:-} in ''|*[!0-9]*|0) echo "hosts.sh: --stubs needs a positive number (see --help)" >&2; exit 2 ;; esac
        stubs=$1 ;;
    --rounds)
        shift
        case ${1:-} in ''|*[!0-9]*|0) echo "hosts.sh: --rounds needs a positive number (see --help)" >&2; exit 2 ;; esac
        rounds=$1 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "hosts.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIEXEC=${MPIEXEC:-mpiexec}
if [ "$bind" = 1 ] && [ "$gpu" = 1 ]; then
    echo "hosts.sh: --bind is for CPU runs (the GPU runs leave the ranks unbound)" >&2
    exit 2
fi
if [ "$bind" = 1 ]; then
    mpi2() { "$MPIEXEC" --oversubscribe --map-by "slot:PE=$stubs" --bind-to core -n 2 "$@"; }
else
    mpi2() { "$MPIEXEC" --oversubscribe --bind-to none -n 2 "$@"; }
fi

for p in bench/transport apps/fft2d/fft2d apps/pagerank/pagerank apps/matmul/matmul apps/nbody/nbody; do
    [ -x "$p" ] || { echo "hosts.sh: $p is not built; run make first" >&2; exit 2; }
done

echo "== MPI and pmlib between 2 hosts (bench/transport)"
tr=$(mpi2 bench/transport 2>&1)
echo "$tr"
mpi_gbs=$(echo "$tr" | awk '$1 == 268435456 { print $2 }')
[ -n "$mpi_gbs" ] || mpi_gbs=$(echo "$tr" | awk '$1 ~ /^[0-9]+$/ && $1 > 4096 { v = $2 } END { print v }')
echo

# field KEY from the result line of an app's output
field() { echo "$2" | awk -v k="$1" '/^result /{ for (i = 1; i <= NF; i++) { split($i, kv, "="); if (kv[1] == k) print kv[2] } }'; }
# pagerank: the steady time per iteration (ms), from 'after the first'
steady() { echo "$1" | awk '/after the first:/ { for (i = 1; i <= NF; i++) if ($i == "ms") print $(i-1) }' | tail -1; }

# the median of its arguments (numbers)
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

rows=()
# name, limit, kind (best or steady), the app's command: each configuration
# `rounds` times in turn, the median of each
compare() {
    local name=$1 limit=$2 kind=$3; shift 3
    local r a=() b=() z=() t1 t2 t0 mb
    for ((r = 0; r < rounds; r++)); do
        measure "$name" "$kind" "$@" || { rows+=("| $name | failed | | | | | | | |"); return; }
        a+=("$t1"); b+=("$t2"); z+=("${t0:-0}")
    done
    t1=$(median "${a[@]}"); t2=$(median "${b[@]}"); t0=$(median "${z[@]}")
    rows+=("$(awk -v n="$name" -v a="$t1" -v b="$t2" -v z="${t0:-0}" -v mb="${mb:-0}" -v bw="$mpi_gbs" -v lim="$limit" 'BEGIN {
        wire = bw > 0 ? mb / 1000 / bw : 0
        base = a > wire ? a : wire
        alone = z > 0 ? sprintf("%.4f | %.2fx", z, b / z) : "- | -"
        printf "| %s | %.4f | %.4f | %.2fx | %s | %.1f | %.4f | %.2fx (limit %s) |", n, a, b, b / a, alone, mb, wire, b / base, lim }')")
}

# One round of a row: sets t1 (1 host), t2 (2 hosts), t0 (host 0 alone)
# and mb (MB moved between the hosts); false when a run failed.
measure() {
    local name=$1 kind=$2; shift 2
    local one two alone
    if [ "$gpu" = 1 ]; then
        one=$("$@" 2>&1)
        alone=$(PMLIB_NGPU=1 "$@" 2>&1)
        two=$(mpi2 "$@" 2>&1)
    else
        one=$(PMLIB_NCPU=$((2 * stubs)) "$@" 2>&1)
        alone=$(PMLIB_NCPU=$stubs "$@" 2>&1)
        two=$(PMLIB_NCPU=$stubs mpi2 "$@" 2>&1)
    fi
    if [ "$kind" = steady ]; then
        t1=$(steady "$one"); t2=$(steady "$two"); t0=$(steady "$alone")
        t1=$(awk -v v="$t1" 'BEGIN { print v / 1000 }'); t2=$(awk -v v="$t2" 'BEGIN { print v / 1000 }')
        t0=$(awk -v v="$t0" 'BEGIN { print v / 1000 }')
        local iters
        iters=$(echo "$two" | awk '/after the first:/ { for (i = 1; i <= NF; i++) if ($i == "iterations:") print $(i-1) }' | tail -1)
        mb=$(field moved_mb "$two")
        mb=$(awk -v m="$mb" -v i="${iters:-1}" 'BEGIN { print m / (i + 1) }')
    else
        t1=$(field pmlib_s "$one"); t2=$(field pmlib_s "$two"); t0=$(field pmlib_s "$alone")
        mb=$(field moved_mb "$two")
    fi
    if [ -z "$t1" ] || [ -z "$t2" ]; then
        echo "hosts.sh: $name failed; its output:" >&2
        echo "$one" | tail -5 >&2
        echo "$two" | tail -5 >&2
        return 1
    fi
}

# matmul's rows per block for `parts` blocks: a multiple of 16, at least 16.
rows() { awk -v n="$1" -v p="$parts" 'BEGIN { r = int(n / p / 16) * 16; print r < 16 ? 16 : r }'; }
# The same task in every configuration: subtasks fixed by the devices of
# the two-host run (4 per core, 16 per GPU), not by those each run has.
if [ "$gpu" = 1 ]; then parts=32; else parts=$((8 * stubs)); fi
if [ "$quick" = 1 ]; then
    compare "fft2d 256 x 512" 1.5 best apps/fft2d/fft2d --rows 256 --cols 512 --subtasks $parts --runs 2 --no-serial
    compare "pagerank 1e4, per iteration" 1.5 steady apps/pagerank/pagerank --pages 10000 --subtasks $parts --iters 5 --no-serial
    compare "matmul 256" 1.2 best apps/matmul/matmul -n 256 --rows $(rows 256) --runs 2 --no-serial
elif [ "$gpu" = 0 ]; then
    compare "fft2d 4096 x 4096" 1.5 best apps/fft2d/fft2d --rows 4096 --cols 4096 --subtasks $parts --runs 5 --no-serial
    compare "pagerank 2e6, per iteration" 1.5 steady apps/pagerank/pagerank --pages 2000000 --subtasks $parts --iters 10 --no-serial
    compare "matmul 2048" 1.2 best apps/matmul/matmul -n 2048 --rows $(rows 2048) --runs 5 --no-serial
else
    compare "matmul 16384" 1.3 best apps/matmul/matmul -n 16384 --rows $(rows 16384) --device gpu --runs 3 --no-serial
    compare "fft2d 4096 x 32768" 1.3 best apps/fft2d/fft2d --rows 4096 --cols 32768 --subtasks $parts --device gpu --runs 3 --no-serial
    compare "pagerank 3e7, per iteration" 1.3 steady apps/pagerank/pagerank --pages 30000000 --subtasks $parts --device gpu --iters 10 --no-serial
    one=$(PMLIB_NGPU=1 apps/nbody/nbody -n 1048576 --device gpu --steps 3 --no-serial 2>&1)
    two=$(mpi2 apps/nbody/nbody -n 1048576 --device gpu --steps 3 --no-serial 2>&1)
    a=$(field pmlib_s "$one"); b=$(field pmlib_s "$two")
    nbody_row=$(awk -v a="$a" -v b="$b" 'BEGIN { if (a > 0 && b > 0) printf "nbody 2^20, 3 steps: 1 GPU %.4f s, 2 hosts x 1 GPU %.4f s: %.2fx faster (goal >= 1.9x)", a, b, a / b; else print "nbody failed" }')
fi

echo "== 1 host against 2 hosts (MPI bandwidth $mpi_gbs GB/s)"
echo "| run | 1 host s | 2 hosts s | 2 / 1 | host 0 alone s | 2 / host 0 alone (limit 1.10x) | MB moved | at MPI bw s | 2 hosts / max(1 host, MPI) |"
echo "|---|---|---|---|---|---|---|---|---|"
for r in "${rows[@]}"; do echo "$r"; done
[ -n "${nbody_row:-}" ] && echo "$nbody_row"
exit 0
