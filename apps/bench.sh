#!/usr/bin/env bash
# Runs every sample app at a size that takes at least a second serially and
# prints the seed's kind of table: serial time, pmlib on all cores of one
# host, on 2 hosts (mpiexec -n 2 on this machine), and, where GPUs exist,
# pmlib on GPUs and on CPUs+GPUs, with speedups. With gnuplot installed it
# also draws the speedups as PNG charts. Run from the top of the build tree:
#   apps/bench.sh [--out DIR] [--quick]
# --out DIR   where the markdown table and the charts go (default bench-out)
# --quick     smaller sizes (a smoke test of the script itself)
set -uo pipefail

out=bench-out
quick=0
while [ $# -gt 0 ]; do
    case $1 in
    --out) out=$2; shift ;;
    --quick) quick=1 ;;
    -h | --help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIEXEC=${MPIEXEC:-mpiexec}

gpus=$(pmlib/tools/pmlib-info 2>/dev/null | sed -n 's/.* \([0-9]*\) GPUs\{0,1\}$/\1/p' | head -n 1)
gpus=${gpus:-0}

# name | arguments (serial takes >= 1 s here) | quick arguments
apps=(
    "arraysum|-n 1e7|-n 1e6"
    "matmul|-n 2048|-n 512"
    "nbody|-n 16384 --steps 4|-n 4096 --steps 2"
    "fft2d|--rows 4096 --cols 8192|--rows 1024 --cols 1024"
    "pagerank|--pages 2e6 --tol 0 --iters 20|--pages 1e5 --tol 0 --iters 5"
    "montecarlo|--options 1024 --paths 65536|--options 128 --paths 8192"
)

# The value of key=value on a result line.
field() { sed -n "s/^result .* $1=\([^ ]*\).*/\1/p" | tail -n 1; }
speedup() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0) printf "%.2fx", a / b; else printf "-" }'; }

table="$out/apps.md"
{
    echo "| app | arguments | serial | pmlib CPU, 1 host | pmlib CPU, 2 hosts | pmlib GPU | pmlib CPU+GPU |"
    echo "|---|---|---|---|---|---|---|"
} > "$table"
: > "$out/speedups.dat"
i=0
for entry in "${apps[@]}"; do
    IFS='|' read -r app args qargs <<<"$entry"
    [ $quick -eq 1 ] && args=$qargs
    prog=apps/$app/$app
    [ -x "$prog" ] || { echo "== $app: not built, skipped"; continue; }
    echo "== $app $args"
    # shellcheck disable=SC2086
    log=$("$prog" $args --device cpu 2>&1)
    echo "$log"
    serial=$(echo "$log" | field serial_s)
    cpu=$(echo "$log" | field pmlib_s)
    # shellcheck disable=SC2086
    mpi=$(PMLIB_NCPU=1 $MPIEXEC --oversubscribe --bind-to none -n 2 "$prog" $args --device cpu --no-serial 2>&1 | field pmlib_s)
    gpu=- all=-
    if [ "$gpus" -gt 0 ]; then
        # shellcheck disable=SC2086
        gpu=$("$prog" $args --device gpu --no-serial 2>&1 | field pmlib_s)
        # shellcheck disable=SC2086
        all=$("$prog" $args --device all --no-serial 2>&1 | field pmlib_s)
    fi
    cell() { [ -n "$1" ] && [ "$1" != "-" ] && echo "$1 s ($(speedup "$serial" "$1"))" || echo "-"; }
    echo "| $app | \`$args\` | ${serial:-?} s | $(cell "$cpu") | $(cell "$mpi") | $(cell "$gpu") | $(cell "$all") |" >> "$table"
    for v in cpu mpi gpu all; do
        val=${!v}
        s=$(awk -v a="$serial" -v b="$val" 'BEGIN { if (a > 0 && b > 0) printf "%.3f", a / b; else printf "0" }')
        printf '%d %s %s %s\n' "$i" "$app" "$v" "$s" >> "$out/speedups.dat"
    done
    i=$((i + 1))
done

# compress: a file of library code and text, against pigz on the same cores.
if [ -x apps/compress/compress ]; then
    reps=60
    [ $quick -eq 1 ] && reps=5
    for _ in $(seq $reps); do cat pmlib/.libs/libpmlib.so.0 doc/*.md; done > "$out/input.bin"
    echo "== compress $(du -h "$out/input.bin" | cut -f1)"
    log=$(apps/compress/compress "$out/input.bin" -o "$out/input.bin.gz" -f 2>&1)
    echo "$log"
    serial=$(echo "$log" | field serial_s) cpu=$(echo "$log" | field pmlib_s)
    mpi=$(PMLIB_NCPU=1 $MPIEXEC --oversubscribe --bind-to none -n 2 apps/compress/compress "$out/input.bin" \
        -o "$out/input2.bin.gz" -f --no-serial 2>&1 | field pmlib_s)
    pigz_s=-
    if command -v pigz >/dev/null; then
        t0=$(date +%s.%N)
        pigz -6 -p "$(nproc)" -c "$out/input.bin" > "$out/pigz.gz"
        pigz_s=$(echo "$(date +%s.%N) - $t0" | bc)
    fi
    echo "| compress | level 6, $(du -h "$out/input.bin" | cut -f1) | ${serial:-?} s | ${cpu:-?} s ($(speedup "$serial" "$cpu")) | ${mpi:-?} s ($(speedup "$serial" "$mpi")) | - (pigz -6 -p $(nproc): $pigz_s s, wall, file I/O included) | - |" >> "$table"
    rm -f "$out/input.bin" "$out"/*.gz
fi

echo
echo "$(date -u +%F), $(uname -m), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) cores, $gpus GPU(s)"
cat "$table"

if command -v gnuplot >/dev/null; then
    for v in cpu mpi gpu all; do
        awk -v k="$v" '$3 == k { print $1, $2, $4 }' "$out/speedups.dat" > "$out/$v.dat"
    done
    gnuplot <<GP
set terminal pngcairo size 900,500
set output "$out/speedups.png"
set style data histograms
set style fill solid 0.8
set logscale y
set ylabel "speedup over serial"
set key outside right top
set xtics rotate by -30
plot "$out/cpu.dat" using 3:xtic(2) title "CPU, 1 host", \
     "$out/mpi.dat" using 3 title "CPU, 2 hosts", \
     "$out/gpu.dat" using 3 title "GPU", \
     "$out/all.dat" using 3 title "CPU+GPU"
GP
    echo "chart: $out/speedups.png"
else
    echo "(install the Debian package gnuplot-nox for the chart)"
fi
