#!/bin/sh
# Builds pmlib with AddressSanitizer + UndefinedBehaviorSanitizer and with
# ThreadSanitizer, and runs the test suites under each. Each build gets its
# own copy of the release tree (make distdir), so the main build is left
# alone. Run from the top of the source tree after scripts/setup.sh.
set -e
top=$(cd "$(dirname "$0")/.." && pwd)
jobs=$(nproc 2>/dev/null || echo 2)
run() {
  dir=$1 san=$2
  echo "== $san: $top/$dir"
  rm -rf "$top/$dir"
  make -C "$top" -s distdir distdir="$top/$dir" >/dev/null
  cd "$top/$dir"
  ./configure -q --enable-sanitizers="$san" --without-cuda --disable-static
  make -j"$jobs" >/dev/null
  # Leaks are checked too; TSan gets a fixed address layout where it needs one.
  if [ "$san" = thread ] && command -v setarch >/dev/null; then
    setarch "$(uname -m)" -R make -j"$jobs" check
  else
    make -j"$jobs" check
  fi
  cd "$top"
}
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
run build-asan address,undefined
run build-tsan thread
echo "sanitizers: all suites clean"
