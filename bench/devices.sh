#!/bin/bash
# CPU cores, GPUs, or both: each sample app at its benchmark size with
# --device gpu, cpu and all, each run a fresh process, side by side.
#
#   bench/devices.sh [--runs R] [--quick] [APP ...]
#
# For each app and device: the first run with an empty performance-model
# directory (what a new user meets), then R-1 more runs (default 3 in all)
# that read the model the earlier ones wrote; prints pmlib's seconds of the
# first run and the median of the rest, and `all` over the faster of `gpu`
# and `cpu` (the CPU+GPU goal: at most 1.05). Run from the top of the build
# tree on a machine with a GPU. --quick: small sizes (a smoke test).
set -u
runs=3
quick=0
only=()
while [ $# -gt 0 ]; do
    case $1 in
    --runs) runs=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "devices.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
    *) only+=("$1"); shift ;;
    esac
done
[ "$runs" -ge 2 ] 2>/dev/null || { echo "devices.sh: --runs must be at least 2" >&2; exit 2; }

# name | arguments | quick arguments
apps=(
    "arraysum|-n 6e7|-n 1e6"
    "matmul|-n 8192|-n 512"
    "nbody|-n 262144 --steps 3|-n 4096 --steps 2"
    "fft2d|--rows 4096 --cols 32768|--rows 512 --cols 1024"
    "pagerank|--pages 3e7 --tol 0 --iters 5|--pages 1e5 --tol 0 --iters 3"
    "montecarlo|--options 65536 --paths 262144|--options 256 --paths 8192"
)

models=$(mktemp -d)
trap 'rm -rf "$models"' EXIT

# Seconds of one fresh run (pmlib_s of its result line), or "fail".
one() {
    local app=$1 dev=$2 args=$3 line
    line=$(PMLIB_MODEL_DIR="$models/$app-$dev" "apps/$app/$app" $args --device "$dev" --no-serial 2>/dev/null |
        grep '^result ' | tail -n 1)
    local s=${line##*pmlib_s=}
    s=${s%% *}
    [ -n "$line" ] && [ -n "$s" ] && echo "$s" || echo fail
}

median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

ratio() { # all over the faster of gpu and cpu
    awk -v a="$1" -v g="$2" -v c="$3" 'BEGIN {
        if (a == "fail" || g == "fail" || c == "fail") { print "-"; exit }
        m = g < c ? g : c; printf "%.2f", a / m }'
}

echo "| app | arguments | gpu first / steady | cpu first / steady | all first / steady | all / best, first | all / best, steady |"
echo "|---|---|---|---|---|---|---|"
for entry in "${apps[@]}"; do
    IFS='|' read -r app args qargs <<<"$entry"
    if [ ${#only[@]} -gt 0 ] && [[ ! " ${only[*]} " == *" $app "* ]]; then continue; fi
    [ "$quick" -eq 1 ] && args=$qargs
    declare -A first steady
    for dev in gpu cpu all; do
        mkdir -p "$models/$app-$dev"
        first[$dev]=$(one "$app" "$dev" "$args")
        rest=()
        for ((r = 1; r < runs; r++)); do rest+=("$(one "$app" "$dev" "$args")"); done
        if printf '%s\n' "${rest[@]}" | grep -q fail; then steady[$dev]=fail; else steady[$dev]=$(median "${rest[@]}"); fi
    done
    echo "| $app | \`$args\` | ${first[gpu]} / ${steady[gpu]} | ${first[cpu]} / ${steady[cpu]} |" \
         "${first[all]} / ${steady[all]} | $(ratio "${first[all]}" "${first[gpu]}" "${first[cpu]}") |" \
         "$(ratio "${steady[all]}" "${steady[gpu]}" "${steady[cpu]}") |"
    unset first steady
done
