#!/bin/bash
# GPUs of one host that copy from each other, against GPUs that take what
# they lack from the host, side by side in one run.
#
#   bench/peer.sh [--rounds R] [--small]
#
# Runs nbody (2^20 bodies, 3 steps) and pagerank (3x10^7 pages, 10
# iterations) with --device gpu on every GPU of this host, alternately with
# PMLIB_CUDA_PEER=1 (the default: a GPU copies what another GPU wrote from
# that GPU, where cudaDeviceCanAccessPeer says it can) and PMLIB_CUDA_PEER=0,
# R rounds (default 3), each run a fresh process. Prints per run the time
# (nbody: pmlib seconds; pagerank: ms per iteration after the first) and
# the MB copied host to GPU and GPU to GPU, then the medians and off / on.
# --small uses sizes that finish in seconds anywhere (a smoke test).
set -u
rounds=3
small=0
while [ $# -gt 0 ]; do
    case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --small) small=1; shift ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "peer.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
    esac
done
cd "$(dirname "$0")/.." || exit 1
for p in apps/nbody/nbody apps/pagerank/pagerank; do
    [ -x "$p" ] || { echo "peer.sh: $p is not built; run make first" >&2; exit 1; }
done
if [ "$small" = 1 ]; then
    nbody_args=(-n 16384 --steps 3); pr_args=(--pages 200000 --iters 5)
else
    nbody_args=(-n 1048576 --steps 3); pr_args=(--pages 30000000 --iters 10)
fi
export PMLIB_MODEL_DIR=${PMLIB_MODEL_DIR:-off}

# time MB_to_gpu MB_peer of one run
measure() {
    local app=$1 peer=$2 out t
    if [ "$app" = nbody ]; then
        out=$(PMLIB_CUDA_PEER=$peer apps/nbody/nbody "${nbody_args[@]}" --device gpu --no-serial 2>&1)
        t=$(echo "$out" | awk '/^result /{ for (i = 1; i <= NF; i++) if ($i ~ /^pmlib_s=/) { sub("pmlib_s=", "", $i); print $i } }')
    else
        out=$(PMLIB_CUDA_PEER=$peer apps/pagerank/pagerank "${pr_args[@]}" --tol 0 --device gpu --no-serial 2>&1)
        t=$(echo "$out" | awk '/after the first:/ { for (i = 1; i <= NF; i++) if ($i == "ms") print $(i-1) }' | tail -1)
    fi
    local moved
    moved=$(echo "$out" | awk '/to_gpu=/ { for (i = 1; i <= NF; i++) { if ($i ~ /^to_gpu=/) { sub("to_gpu=", "", $i); a = $i } if ($i ~ /^gpu_peer=/) { sub("gpu_peer=", "", $i); b = $i } } } END { print a, b }')
    [ -n "$t" ] || { echo "peer.sh: $app failed:" >&2; echo "$out" | tail -5 >&2; t=nan; }
    echo "$t $moved"
}
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "peer.sh: $(date -u +%Y-%m-%d) $(nvidia-smi -L 2>/dev/null | wc -l) GPU(s), rounds=$rounds"
printf '%-9s %-5s %-6s %12s %12s %12s\n' app round peer time MB_to_gpu MB_gpu_peer
for app in nbody pagerank; do
    on=(); off=()
    for r in $(seq "$rounds"); do
        for peer in 1 0; do
            read -r t a b < <(measure "$app" "$peer")
            printf '%-9s %-5s %-6s %12s %12s %12s\n' "$app" "$r" "$peer" "$t" "${a:--}" "${b:--}"
            if [ "$peer" = 1 ]; then on+=("$t"); else off+=("$t"); fi
        done
    done
    m1=$(printf '%s\n' "${on[@]}" | median)
    m0=$(printf '%s\n' "${off[@]}" | median)
    unit=$([ "$app" = nbody ] && echo "s" || echo "ms per iteration")
    awk -v a="$app" -v on="$m1" -v off="$m0" -v u="$unit" \
        'BEGIN { printf "%s: median %s %s with peer copies, %s without: off / on %.2fx\n", a, on, u, off, (on > 0 ? off / on : 0) }'
done
