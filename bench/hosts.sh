#!/usr/bin/env bash
# Whether a second host ever makes a task slower: each app on one host and
# on two, side by side in one run, with the bytes moved between the hosts
# and MPI's own bandwidth (bench/transport) to weigh them against.
set -uo pipefail

usage() {
    cat <<'EOF'
usage: bench/hosts.sh [--gpu] [--quick]

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
--quick uses small sizes (a smoke test of the script).
EOF
}

gpu=0
quick=0
for a in "$@"; do
    case $a in
    --gpu) gpu=1 ;;
    --quick) quick=1 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "hosts.sh: unknown option '$a' (see --help)" >&2; exit 2 ;;
    esac
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIEXEC=${MPIEXEC:-mpiexec}
mpi2() { "$MPIEXEC" --oversubscribe --bind-to none -n 2 "$@"; }

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

rows=()
# name, limit, command for 1 host (env), command for 2 hosts
compare() {
    local name=$1 limit=$2 kind=$3; shift 3
    local one two
    if [ "$gpu" = 1 ]; then
        one=$("$@" 2>&1)
        two=$(mpi2 "$@" 2>&1)
    else
        one=$(PMLIB_NCPU=2 "$@" 2>&1)
        two=$(PMLIB_NCPU=1 mpi2 "$@" 2>&1)
    fi
    local t1 t2 mb
    if [ "$kind" = steady ]; then
        t1=$(steady "$one"); t2=$(steady "$two")
        t1=$(awk -v v="$t1" 'BEGIN { print v / 1000 }'); t2=$(awk -v v="$t2" 'BEGIN { print v / 1000 }')
        local iters
        iters=$(echo "$two" | awk '/after the first:/ { for (i = 1; i <= NF; i++) if ($i == "iterations:") print $(i-1) }' | tail -1)
        mb=$(field moved_mb "$two")
        mb=$(awk -v m="$mb" -v i="${iters:-1}" 'BEGIN { print m / (i + 1) }')
    else
        t1=$(field pmlib_s "$one"); t2=$(field pmlib_s "$two"); mb=$(field moved_mb "$two")
    fi
    if [ -z "$t1" ] || [ -z "$t2" ]; then
        echo "hosts.sh: $name failed; its output:" >&2
        echo "$one" | tail -5 >&2
        echo "$two" | tail -5 >&2
        rows+=("| $name | failed | | | | | |")
        return
    fi
    rows+=("$(awk -v n="$name" -v a="$t1" -v b="$t2" -v mb="${mb:-0}" -v bw="$mpi_gbs" -v lim="$limit" 'BEGIN {
        wire = bw > 0 ? mb / 1000 / bw : 0
        base = a > wire ? a : wire
        printf "| %s | %.4f | %.4f | %.2fx | %.1f | %.4f | %.2fx (limit %s) |", n, a, b, b / a, mb, wire, b / base, lim }')")
}

if [ "$quick" = 1 ]; then
    compare "fft2d 256 x 512" 1.5 best apps/fft2d/fft2d --rows 256 --cols 512 --runs 2 --no-serial
    compare "pagerank 1e4, per iteration" 1.5 steady apps/pagerank/pagerank --pages 10000 --iters 5 --no-serial
    compare "matmul 256" 1.2 best apps/matmul/matmul -n 256 --runs 2 --no-serial
elif [ "$gpu" = 0 ]; then
    compare "fft2d 4096 x 4096" 1.5 best apps/fft2d/fft2d --rows 4096 --cols 4096 --runs 5 --no-serial
    compare "pagerank 2e6, per iteration" 1.5 steady apps/pagerank/pagerank --pages 2000000 --iters 10 --no-serial
    compare "matmul 2048" 1.2 best apps/matmul/matmul -n 2048 --runs 5 --no-serial
else
    compare "matmul 16384" 1.3 best apps/matmul/matmul -n 16384 --device gpu --runs 3 --no-serial
    compare "fft2d 4096 x 32768" 1.3 best apps/fft2d/fft2d --rows 4096 --cols 32768 --device gpu --runs 3 --no-serial
    compare "pagerank 3e7, per iteration" 1.3 steady apps/pagerank/pagerank --pages 30000000 --device gpu --iters 10 --no-serial
    one=$(PMLIB_NGPU=1 apps/nbody/nbody -n 1048576 --device gpu --steps 3 --no-serial 2>&1)
    two=$(mpi2 apps/nbody/nbody -n 1048576 --device gpu --steps 3 --no-serial 2>&1)
    a=$(field pmlib_s "$one"); b=$(field pmlib_s "$two")
    nbody_row=$(awk -v a="$a" -v b="$b" 'BEGIN { if (a > 0 && b > 0) printf "nbody 2^20, 3 steps: 1 GPU %.4f s, 2 hosts x 1 GPU %.4f s: %.2fx faster (goal >= 1.9x)", a, b, a / b; else print "nbody failed" }')
fi

echo "== 1 host against 2 hosts (MPI bandwidth $mpi_gbs GB/s)"
echo "| run | 1 host s | 2 hosts s | 2 / 1 | MB moved | at MPI bw s | 2 hosts / max(1 host, MPI) |"
echo "|---|---|---|---|---|---|---|"
for r in "${rows[@]}"; do echo "$r"; done
[ -n "${nbody_row:-}" ] && echo "$nbody_row"
exit 0
