# Sourced by the MPI test wrappers: where the programs are and how to start
# a job. top_builddir comes from `make check`; MPIEXEC may name the launcher.
top_builddir=${top_builddir:-.}
MPIEXEC=${MPIEXEC:-mpiexec}
# Open MPI refuses to start as root without these; CI containers run as root.
OMPI_ALLOW_RUN_AS_ROOT=1
OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM
# The suites check what crosses between the hosts, so by default their
# memories do cross: the ranks of one machine would otherwise share them in
# place. shared.sh runs them with PMLIB_SHM=1.
PMLIB_SHM=${PMLIB_SHM:-0}
export PMLIB_SHM

# mpi_run SECONDS N PROGRAM [ARGS...]: one job under a time limit, so that a
# hang fails the test (status 124) instead of blocking `make check`.
# Jobs of parallel `make -j check` runs take turns (flock, when installed):
# each already oversubscribes the cores, and Open MPI jobs started at the
# same moment have been seen to fail to launch ("could not access or
# execute an executable", status 132).
# Sanitized ranks run several times slower, and more so on a busy machine
# (tests/mpi/prefetch under ThreadSanitizer: 8 s alone, over 100 s beside
# two busy loops), so their limits grow: 4x with ThreadSanitizer, 2x with
# the others. A hang still fails, later.
mpi_run() {
  mpi_limit=$1 mpi_n=$2
  shift 2
  case ${PMLIB_TEST_SANITIZER:-} in
    *thread*) mpi_limit=$((mpi_limit * 4)) ;;
    ?*) mpi_limit=$((mpi_limit * 2)) ;;
  esac
  if command -v flock >/dev/null 2>&1; then
    flock "${TMPDIR:-/tmp}/pmlib-mpi-tests.lock" \
      timeout "$mpi_limit" "$MPIEXEC" --oversubscribe -n "$mpi_n" "$@"
  else
    timeout "$mpi_limit" "$MPIEXEC" --oversubscribe -n "$mpi_n" "$@"
  fi
}

# mpi_expect_ok WHAT SECONDS N MARKER PROGRAM [ARGS...]: a job that must end
# within SECONDS with status 0 and host 0 printing MARKER; its output is
# shown and kept in $log (set by the caller). WHAT starts each failure.
mpi_expect_ok() {
  ok_what=$1 ok_limit=$2 ok_n=$3 ok_marker=$4
  shift 4
  mpi_run "$ok_limit" "$ok_n" "$@" >"$log" 2>&1
  rc=$?
  cat "$log"
  [ $rc -ne 124 ] || fail "${ok_what}timed out after $mpi_limit s"
  [ $rc -eq 0 ] || fail "${ok_what}mpiexec exited $rc"
  grep -q "$ok_marker" "$log" || fail "${ok_what}host 0 did not print $ok_marker"
}

# mpi_fault_job SECONDS N PROGRAM: runs a job expected to fail, keeping its
# output in $out and $err (shown afterwards) and its status in $rc.
mpi_fault_job() {
  out=$(mktemp) err=$(mktemp)
  trap 'rm -f "$out" "$err"' EXIT
  start=$(date +%s)
  mpi_run "$@" >"$out" 2>"$err"
  rc=$?
  elapsed=$(( $(date +%s) - start ))
  echo "---- stdout"; cat "$out"
  echo "---- stderr"; cat "$err"
  echo "----"
  echo "mpiexec exited $rc after ${elapsed} s"
}

# Checks of a failing job: each prints what it checked.
expect_failed_job() {
  [ "$rc" -ne 124 ] || fail "the job timed out instead of ending"
  [ "$rc" -ne 0 ] || fail "the job exited 0; the other hosts should report the failed task"
  echo "ok: the job ended with a nonzero status ($rc), not a timeout"
}

expect_stdout() {
  grep -q -- "$1" "$out" || fail "stdout lacks '$1'"
  echo "ok: stdout has '$1'"
}

expect_stderr() {
  grep -q -- "$1" "$err" || fail "stderr lacks '$1'"
  echo "ok: stderr has '$1'"
}

fail() {
  echo "FAIL: $*"
  exit 1
}

# pass_unless_huge_fits WHAT GIB: ends the test with PASS (and a SKIP line
# saying why) where WHAT, a pass over gigabytes, should not run: in a
# ThreadSanitizer build, which makes each rank's pass many times slower
# than the other builds that run it, or with less than GIB GiB available.
pass_unless_huge_fits() {
  case ${PMLIB_TEST_SANITIZER:-} in *thread*)
    echo "SKIP: $1 in a ThreadSanitizer build"
    echo "PASS"
    exit 0 ;;
  esac
  huge_kb=$(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo 2>/dev/null)
  if [ "${huge_kb:-0}" -lt $(($2 * 1024 * 1024)) ]; then
    echo "SKIP: $1 needs $2 GiB of available memory, this machine has $((${huge_kb:-0} / 1024)) MiB"
    echo "PASS"
    exit 0
  fi
}
