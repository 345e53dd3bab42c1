#!/bin/sh
# METG(50%) of pmlib and of Task Bench's own MPI, OpenMP and StarPU
# implementations, measured side by side in one run.
#
#   bench/taskbench/metg.sh [TASKBENCH_DIR]
#
# Run bench/taskbench/build.sh first: this script runs the programs listed in
# its OUT_DIR/programs file (default bench/taskbench/build/programs).
#
# Method (Task Bench's minimum effective task granularity): for each pattern
# and system, run the compute_bound kernel at ITER_MAX, ITER_MAX/2, ... kernel
# iterations, best of REPS runs at each. For a run,
#   FLOP/s           = Total FLOPs / Elapsed Time           (Task Bench's report)
#   granularity (us) = Elapsed Time * CORES / Total Tasks   (time per task on one core)
#   efficiency       = FLOP/s / peak FLOP/s
# where the peak is the highest FLOP/s measured in the whole run (every
# system and pattern; the largest tasks of the best system). METG(50%) is the
# smallest granularity whose efficiency is at least 50%, interpolated
# linearly towards the next smaller granularity as Task Bench's scripts do.
# A series stops once its FLOP/s falls below a quarter of its own best.
#
# Environment (defaults in brackets):
#   PATTERNS  [trivial stencil_1d nearest all_to_all]
#   SYSTEMS   [pmlib-1x2 pmlib-2x1 mpi openmp starpu]  (the pmlib-RxS names
#             mean R ranks of S stubs; any RxS works; pmlib-RxS-point runs
#             pmlib_tb's point mapping, one pmlib task per point)
#   CORES     [nproc]   cores of the machine; also the graph width (WIDTH)
#   WIDTH     [CORES]   points per timestep
#   STEPS     [1000]    timesteps
#   RADIX     [5]       dependencies per point of nearest
#   REPS      [3]       runs per iteration count; the best one counts
#   ITER_MAX  [1048576] largest kernel iteration count (halved each level)
#   ITER_MIN  [1]       smallest iteration count tried
#   LOG_DIR   [a new temporary folder]  raw outputs and results.tsv
#   MPIEXEC   [mpiexec]
#   LIMIT     [300]     seconds one run may take before it counts as failed
#   OUT_DIR   [bench/taskbench/build]  where build.sh wrote `programs`
#   PMLIB_MODEL_DIR [a folder per system and pattern in LOG_DIR]  pmlib's
#             performance model files (off: none)
#   ANALYZE   [unset]   a results.tsv (or several, space-separated) of earlier
#             runs: skip the runs and print the table of those results
#
# Prints one table of METG in microseconds (rows: patterns, columns: systems)
# and keeps the raw logs, a results.tsv of every run and metg.tsv in LOG_DIR.
set -u

case ${1:-} in
  -h|--help) sed -n '2,44p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  -*) echo "metg.sh: error: unknown option '$1' (try --help)" >&2; exit 2 ;;
esac

here=$(cd "$(dirname "$0")" && pwd)
out=${OUT_DIR:-$here/build}
list=$out/programs
[ -f "$list" ] || { echo "metg.sh: error: no $list; run bench/taskbench/build.sh first" >&2; exit 1; }
command -v python3 >/dev/null 2>&1 || { echo "metg.sh: error: python3 is needed for the analysis" >&2; exit 1; }

prog() { awk -v n="$1" '$1 == n { print $2 }' "$list"; }

PATTERNS=${PATTERNS:-trivial stencil_1d nearest all_to_all}
SYSTEMS=${SYSTEMS:-pmlib-1x2 pmlib-2x1 mpi openmp starpu}
CORES=${CORES:-$(nproc)}
WIDTH=${WIDTH:-$CORES}
STEPS=${STEPS:-1000}
RADIX=${RADIX:-5}
REPS=${REPS:-3}
ITER_MAX=${ITER_MAX:-1048576}
ITER_MIN=${ITER_MIN:-1}
MPIEXEC=${MPIEXEC:-mpiexec}
LIMIT=${LIMIT:-300}
LOG_DIR=${LOG_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/metg.XXXXXX")}
mkdir -p "$LOG_DIR" || exit 1
results=$LOG_DIR/results.tsv
if [ -n "${ANALYZE:-}" ]; then
  head -n 1 $(echo "$ANALYZE" | cut -d' ' -f1) >"$results"
  for f in $ANALYZE; do tail -n +2 "$f"; done >>"$results"
  SYSTEMS_RUN=
else
  SYSTEMS_RUN=$SYSTEMS
fi
[ -n "${ANALYZE:-}" ] || printf 'system\tpattern\titerations\trep\telapsed\ttasks\tflops\n' >"$results"

# Open MPI refuses to run as root without these (containers run as root).
OMPI_ALLOW_RUN_AS_ROOT=1
OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM
STARPU_SILENT=1
export STARPU_SILENT

# run SYSTEM ARGS...: one run of one system, Task Bench's report on stdout.
run() {
  sys=$1
  shift
  case $sys in
    pmlib-*x*)
      ranks=${sys#pmlib-}
      case $ranks in
        *-point) ranks=${ranks%-point}; set -- "$@" -pm-mapping point ;;
      esac
      stubs=${ranks#*x}
      ranks=${ranks%x*}
      p=$(prog pmlib)
      # pmlib's performance model is kept in a folder of this series (one
      # system and pattern, all grains), unless PMLIB_MODEL_DIR is set: a
      # model left by another pattern or an earlier run would seed it.
      md=${PMLIB_MODEL_DIR:-}
      [ -n "$md" ] || { md=$LOG_DIR/model-$sys-$pat; mkdir -p "$md"; }
      if [ "$ranks" -eq 1 ]; then
        PMLIB_MODEL_DIR=$md PMLIB_NCPU=$stubs timeout "$LIMIT" "$p" "$@"
      else
        PMLIB_MODEL_DIR=$md PMLIB_NCPU=$stubs timeout "$LIMIT" "$MPIEXEC" --oversubscribe -n "$ranks" \
          -x PMLIB_NCPU -x PMLIB_MODEL_DIR "$p" "$@"
      fi ;;
    mpi)
      timeout "$LIMIT" "$MPIEXEC" --oversubscribe -n "$CORES" "$(prog mpi)" "$@" ;;
    openmp)
      OMP_NUM_THREADS=$CORES timeout "$LIMIT" "$(prog openmp)" "$@" ;;
    starpu)
      STARPU_NCPU=$CORES timeout "$LIMIT" "$(prog starpu)" "$@" -core "$CORES" -p 1 ;;
    *)
      echo "metg.sh: error: unknown system '$sys'" >&2
      return 1 ;;
  esac
}

for sys in $SYSTEMS_RUN; do
  case $sys in
    pmlib-*x*) need=pmlib ;;
    *) need=$sys ;;
  esac
  if [ -z "$(prog "$need")" ]; then
    echo "metg.sh: warning: $sys was not built (see build.sh's output); skipped" >&2
    continue
  fi
  for pat in $PATTERNS; do
    log=$LOG_DIR/${sys}_${pat}.log
    : >"$log"
    best=0
    iter=$ITER_MAX
    while [ "$iter" -ge "$ITER_MIN" ]; do
      level_best=0
      level_start=$(date +%s)
      rep=1
      while [ "$rep" -le "$REPS" ]; do
        args="-kernel compute_bound -iter $iter -type $pat -radix $RADIX -steps $STEPS -width $WIDTH"
        # shellcheck disable=SC2086
        text=$(run "$sys" $args 2>&1)
        rc=$?
        printf '%s\n' "$text" >>"$log"
        el=$(printf '%s\n' "$text" | awk '/^Elapsed Time/ { print $3 }')
        tasks=$(printf '%s\n' "$text" | awk '/^Total Tasks/ { print $3 }')
        flops=$(printf '%s\n' "$text" | awk '/^Total FLOPs/ { print $3 }')
        if [ $rc -ne 0 ] || [ -z "$el" ] || [ -z "$tasks" ] || [ -z "$flops" ]; then
          echo "metg.sh: warning: $sys $pat -iter $iter failed (status $rc); see $log" >&2
        else
          printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$sys" "$pat" "$iter" "$rep" "$el" "$tasks" "$flops" >>"$results"
          level_best=$(awk -v a="$level_best" -v f="$flops" -v e="$el" 'BEGIN { r = f / e; print (r > a ? r : a) }')
        fi
        rep=$((rep + 1))
      done
      echo "$sys $pat iter=$iter best FLOP/s=$level_best ($(( $(date +%s) - level_start )) s)" >&2
      best=$(awk -v a="$best" -v b="$level_best" 'BEGIN { print (b > a ? b : a) }')
      stop=$(awk -v a="$best" -v b="$level_best" 'BEGIN { print (b < 0.25 * a ? 1 : 0) }')
      [ "$stop" -eq 1 ] && break
      iter=$((iter / 2))
    done
  done
done

python3 - "$results" "$CORES" "$LOG_DIR/metg.tsv" "$PATTERNS" "$SYSTEMS" <<'EOF'
import sys
from collections import defaultdict

results, cores, metg_out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
patterns, systems = sys.argv[4].split(), sys.argv[5].split()

# best (smallest) elapsed time per system, pattern and iteration count
best = {}
with open(results) as f:
    next(f)
    for line in f:
        sysname, pat, it, rep, el, tasks, flops = line.split('\t')
        key = (sysname, pat, int(it))
        el, tasks, flops = float(el), int(tasks), int(flops)
        if key not in best or el < best[key][0]:
            best[key] = (el, tasks, flops)

if not best:
    print('metg.sh: no successful run to analyze', file=sys.stderr)
    sys.exit(1)

peak = max(flops / el for el, tasks, flops in best.values())
series = defaultdict(list)
for (sysname, pat, it), (el, tasks, flops) in best.items():
    series[(sysname, pat)].append((it, el * cores / tasks * 1e6, flops / el / peak))

def metg(points):
    # points: (iterations, granularity in us, efficiency), largest tasks first
    points.sort(key=lambda p: -p[0])
    ok = [i for i, p in enumerate(points) if p[2] >= 0.5]
    if not ok:
        return None, 'never reaches 50%'
    i = min(ok, key=lambda i: points[i][1])
    if i + 1 >= len(points):
        return points[i][1], 'above 50% at the smallest tasks tried'
    g, e = points[i][1], points[i][2]
    g2, e2 = points[i + 1][1], points[i + 1][2]
    if g2 < g and e2 < e:
        # interpolate the granularity at efficiency 0.5 between the points
        g = g2 + (g - g2) * (0.5 - e2) / (e - e2)
    return g, ''

notes = []
table = {}
with open(metg_out, 'w') as out:
    out.write('system\tpattern\tmetg_us\tnote\n')
    for (sysname, pat), pts in sorted(series.items()):
        g, note = metg(pts)
        table[(sysname, pat)] = g
        out.write('%s\t%s\t%s\t%s\n' % (sysname, pat, '' if g is None else '%.3f' % g, note))
        if note:
            notes.append('%s %s: %s' % (sysname, pat, note))

cols = [s for s in systems if any((s, p) in table for p in patterns)]
print('METG(50%%) in microseconds (peak %.4g FLOP/s, %d cores; lower is better)' % (peak, cores))
print()
print('| pattern | ' + ' | '.join(cols) + ' |')
print('|---|' + '---:|' * len(cols))
for p in patterns:
    cells = []
    for s in cols:
        g = table.get((s, p))
        cells.append('n/a' if (s, p) not in table else ('>max' if g is None else '%.2f' % g))
    print('| %s | %s |' % (p, ' | '.join(cells)))
print()
print('Best FLOP/s per system (fraction of the peak):')
for s in cols:
    b = max(e for (sysname, pat), pts in series.items() if sysname == s for _, _, e in pts)
    print('  %-12s %.3f' % (s, b))
for n in notes:
    print('note: ' + n)
EOF
echo "logs and tables in $LOG_DIR" >&2
