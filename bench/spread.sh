#!/usr/bin/env bash
# Whether lazy memories take host 0 out of the middle of an iterative
# task's traffic, from 2 to 16 ranks.
#
#   bench/spread.sh [--ranks "2 4 8 16"] [SPREAD OPTIONS...]
#
# Runs bench/spread --both (lazy memories, then eager ones) under
# mpiexec -n R --oversubscribe --bind-to none with PMLIB_NCPU=1, for each R,
# shows each run's output, then prints a markdown table, one row per rank
# count: MB sent by host 0 per iteration and the busiest host's bytes over
# the average (bytes moved / hosts) in each mode, the MB the busiest lazy
# host sent, and the seconds per iteration. Other options (--words N, --iters K,
# --subtasks S) go to bench/spread. Run from the top of the build tree, or
# name the program in SPREAD; MPIEXEC names the launcher (default mpiexec).
set -uo pipefail

ranks="2 4 8 16"
args=()
while [ $# -gt 0 ]; do
    case $1 in
    --ranks)
        [ $# -ge 2 ] || { echo "spread.sh: --ranks needs a list such as \"2 4 8\"" >&2; exit 2; }
        ranks=$2; shift 2 ;;
    -h | --help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) args+=("$1"); shift ;;
    esac
done
for r in $ranks; do
    case $r in ''|*[!0-9]*|0) echo "spread.sh: '$r' is not a rank count" >&2; exit 2 ;; esac
done

here=$(cd "$(dirname "$0")" && pwd)
if [ -n "${SPREAD:-}" ]; then
    prog=$SPREAD
elif [ -x bench/spread ]; then
    prog=bench/spread
else
    prog=$here/spread
fi
[ -x "$prog" ] || { echo "spread.sh: $prog is not built; run make first" >&2; exit 2; }

# Open MPI refuses to start as root without these; CI containers run as root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export PMLIB_NCPU=1
MPIEXEC=${MPIEXEC:-mpiexec}

# col MODE N: field N of MODE's row (mode hosts moved_MB home_sent_MB
# max_sent_MB max_recv_MB busiest/avg s/iter gather_s)
col() { echo "$out" | awk -v m="$1" -v n="$2" '$1 == m { print $n; exit }'; }

rows=()
failed=0
for r in $ranks; do
    echo "== $r ranks"
    out=$("$MPIEXEC" -n "$r" --oversubscribe --bind-to none "$prog" --both ${args[@]+"${args[@]}"} 2>&1)
    rc=$?
    echo "$out"
    if [ $rc -ne 0 ] || ! echo "$out" | grep -q '^verify: ok' || [ -z "$(col lazy 4)" ] ||
        [ -z "$(col eager 4)" ]; then
        echo "spread.sh: $r ranks failed (status $rc)" >&2
        rows+=("| $r | failed | | | | | | |")
        failed=1
        continue
    fi
    rows+=("| $r | $(col eager 4) | $(col eager 7) | $(col lazy 4) | $(col lazy 5) | $(col lazy 7) | $(col eager 8) | $(col lazy 8) |")
done

echo
echo "| ranks | eager: host 0 sent MB/iter | eager: busiest/avg | lazy: host 0 sent MB/iter | lazy: busiest sent MB/iter | lazy: busiest/avg | eager: s/iter | lazy: s/iter |"
echo "|---|---|---|---|---|---|---|---|"
for row in "${rows[@]}"; do echo "$row"; done
exit $failed
