# Shared by tests/apps/*-files.sh, sourced once $app (the program) and $dir
# (a scratch directory) are set.

fail() { echo "FAIL: $*"; exit 1; }

# refused_with WHAT ARGS...: "$app" ARGS must exit 2 with one line on
# stderr that names WHAT (empty: anything); the line is left in $dir/err.
refused_with() {
  what=$1
  shift
  if "$app" "$@" >/dev/null 2>"$dir/err"; then
    fail "$(basename "$app") $* succeeded"
  else
    rc=$?
  fi
  cat "$dir/err"
  [ "$rc" -eq 2 ] || fail "$(basename "$app") $*: exit $rc, not 2"
  [ "$(wc -l <"$dir/err")" -eq 1 ] || fail "$(basename "$app") $*: not one line"
  [ -z "$what" ] || grep -q -- "$what" "$dir/err" || fail "'$what' is not named"
}
