#!/bin/sh
# Builds pmlib with AddressSanitizer + UndefinedBehaviorSanitizer and with
# ThreadSanitizer, and runs the test suites under each. Each build gets its
# own copy of the release tree (make distdir), so the main build is left
# alone. Run from the top of the source tree after scripts/setup.sh.
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
jobs=$(nproc 2>/dev/null || echo 2)
user_ck_scale=${CK_TIMEOUT_MULTIPLIER:-}
user_test_limit=${PM_TEST_TIMEOUT:-}
run() {
  dir=$1 san=$2
  echo "== $san: $top/$dir"
  rm -rf "$top/$dir"
  make -C "$top" -s distdir distdir="$top/$dir" >/dev/null
  cd "$top/$dir"
  ./configure -q --enable-sanitizers="$san" --without-cuda --disable-static
  make -j"$jobs" >/dev/null
  # Under mpiexec, Open MPI (not built with sanitizers) keeps allocations
  # until exit in plug-ins it has unloaded, and its plug-ins lock in ways
  # ThreadSanitizer reports; none of it is pmlib's. Ranks run with leak
  # checks off and with thread reports that involve Open MPI suppressed
  # (tests/tsan-openmpi.supp): races between pmlib's own threads still fail.
  mkdir -p shim
  real=$(command -v mpiexec)
  printf '#!/bin/sh\nASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0" TSAN_OPTIONS="$TSAN_OPTIONS:suppressions=%s" exec %s "$@"\n' "$top/tests/tsan-openmpi.supp" "$real" > shim/mpiexec
  chmod +x shim/mpiexec
  PATH="$PWD/shim:$PATH"
  export PATH
  # Tests that move gigabytes between ranks keep those sizes for plain builds.
  PMLIB_TEST_SANITIZER=$san
  export PMLIB_TEST_SANITIZER
  # Sanitized code runs several times slower: Check's per-test limits and
  # the whole-test limit of tests/run-test.sh grow with it (a user's own
  # settings win), so that a busy machine does not fail a healthy test.
  if [ "$san" = thread ]; then scale=10; else scale=4; fi
  CK_TIMEOUT_MULTIPLIER=${user_ck_scale:-$scale}
  PM_TEST_TIMEOUT=${user_test_limit:-$((600 * scale))}
  export CK_TIMEOUT_MULTIPLIER PM_TEST_TIMEOUT
  # Leaks are checked too; TSan gets a fixed address layout where it needs one.
  if [ "$san" = thread ] && command -v setarch >/dev/null; then
    setarch "$(uname -m)" -R make -j"$jobs" check MPIEXEC="$PWD/shim/mpiexec"
  else
    make -j"$jobs" check MPIEXEC="$PWD/shim/mpiexec"
  fi
  cd "$top"
}
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
run build-asan address,undefined
run build-tsan thread
echo "sanitizers: all suites clean"
