# Sourced by tests/apps/*-numpy.sh: the settings of the other app tests,
# a scratch directory, and $py, a Python 3 that has NumPy (Debian's first:
# another python3 earlier in PATH may lack it). Without one the test is
# skipped (exit 77).
set -e
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PMLIB_NCPU=2
export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM PMLIB_NCPU
LC_ALL=C
export LC_ALL
py=
for p in /usr/bin/python3 python3; do
  if "$p" -c 'import numpy' >/dev/null 2>&1; then
    py=$p
    break
  fi
done
if [ -z "$py" ]; then
  echo "SKIP: no python3 with NumPy (Debian's python3-numpy)"
  exit 77
fi
check="$py ${top_srcdir:-.}/tests/apps/numpy-check.py"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
