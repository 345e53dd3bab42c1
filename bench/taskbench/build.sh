#!/bin/sh
# Builds Task Bench's core library and pmlib's implementation of Task Bench
# against it, plus Task Bench's own MPI, OpenMP and StarPU implementations
# where they build.
#
#   bench/taskbench/build.sh [TASKBENCH_DIR]
#
# TASKBENCH_DIR (argument or environment): a Task Bench checkout (it must
# hold core/core_c.h). Task Bench's programs are built in place in that
# checkout, with its own Makefiles (StarPU: with pkg-config's flags).
#
# pmlib: by default the build of this source tree (run scripts/setup.sh and
# make first); PMLIB_BUILDDIR names another build directory of it, and
# PMLIB_PREFIX an installed pmlib (found through its pmlib.pc).
#
# Output: OUT_DIR (default bench/taskbench/build) gets pmlib_tb and a file
# `programs` listing every program that was built, one "name path" a line.
# Exits nonzero only when the core library or pmlib_tb cannot be built.
set -u

case ${1:-} in
  -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  -*) echo "build.sh: error: unknown option '$1' (try --help)" >&2; exit 2 ;;
esac

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
tb=${1:-${TASKBENCH_DIR:-}}
out=${OUT_DIR:-$here/build}
jobs=${JOBS:-2}
CC=${CC:-cc}
CXX=${CXX:-c++}
MPICXX=${MPICXX:-mpicxx}

die() {
  echo "build.sh: error: $*" >&2
  exit 1
}

[ -n "$tb" ] || die "give a Task Bench checkout as argument or in TASKBENCH_DIR"
[ -f "$tb/core/core_c.h" ] || die "'$tb' is not a Task Bench checkout (no core/core_c.h)"
tb=$(cd "$tb" && pwd)
mkdir -p "$out" || die "cannot create $out"
out=$(cd "$out" && pwd)
programs=$out/programs
: >"$programs"

# ---- pmlib
if [ -n "${PMLIB_PREFIX:-}" ]; then
  pc=$PMLIB_PREFIX/lib/pkgconfig
  [ -f "$pc/pmlib.pc" ] || pc=$(dirname "$(find "$PMLIB_PREFIX" -name pmlib.pc 2>/dev/null | head -n 1)")
  [ -f "$pc/pmlib.pc" ] || die "no pmlib.pc under PMLIB_PREFIX=$PMLIB_PREFIX"
  pm_cflags=$(PKG_CONFIG_PATH=$pc pkg-config --cflags pmlib) || die "pkg-config pmlib failed"
  pm_libs=$(PKG_CONFIG_PATH=$pc pkg-config --libs pmlib) || die "pkg-config pmlib failed"
  pm_libdir=$(PKG_CONFIG_PATH=$pc pkg-config --variable=libdir pmlib)
  pm_libs="$pm_libs -Wl,-rpath,$pm_libdir"
else
  bd=${PMLIB_BUILDDIR:-$top}
  [ -f "$bd/include/pmlib_config.h" ] && [ -f "$bd/pmlib/.libs/libpmlib.so" ] ||
    die "pmlib is not built in $bd (run scripts/setup.sh && make -j2 in the source tree, or set PMLIB_BUILDDIR or PMLIB_PREFIX)"
  bd=$(cd "$bd" && pwd)
  pm_cflags="-I$top/include -I$bd/include"
  pm_libs="-L$bd/pmlib/.libs -lpmlib -Wl,-rpath,$bd/pmlib/.libs"
fi

# ---- Task Bench's core library (C++)
command -v "$CXX" >/dev/null 2>&1 || die "no C++ compiler ('$CXX'); install g++"
echo "== Task Bench core library"
make -C "$tb/core" -j"$jobs" >"$out/core.log" 2>&1 ||
  { cat "$out/core.log" >&2; die "Task Bench's core library did not build (log above)"; }
[ -f "$tb/core/libcore_s.a" ] || die "no $tb/core/libcore_s.a after make"

# ---- pmlib's implementation
echo "== pmlib_tb"
# shellcheck disable=SC2086
$CC -std=gnu11 -O2 -Wall -Wextra -c "$here/pmlib_tb.c" -o "$out/pmlib_tb.o" \
  -I"$tb/core" $pm_cflags || die "pmlib_tb.c did not compile"
# shellcheck disable=SC2086
$CXX -o "$out/pmlib_tb" "$out/pmlib_tb.o" -L"$tb/core" -lcore_s $pm_libs -lm ||
  die "pmlib_tb did not link"
echo "pmlib $out/pmlib_tb" >>"$programs"
echo "built $out/pmlib_tb"

# ---- Task Bench's own implementations: optional
optional() { # name target-path log command...
  name=$1 path=$2 log=$3
  shift 3
  echo "== $name"
  if "$@" >"$log" 2>&1 && [ -x "$path" ]; then
    echo "$name $path" >>"$programs"
    echo "built $path"
  else
    echo "build.sh: warning: $name did not build (see $log); skipped" >&2
  fi
}

if command -v "$MPICXX" >/dev/null 2>&1; then
  optional mpi "$tb/mpi/nonblock" "$out/mpi.log" \
    make -C "$tb/mpi" MPICXX="$MPICXX" nonblock
else
  echo "build.sh: warning: no MPI C++ compiler ('$MPICXX'); Task Bench's mpi skipped (install libopenmpi-dev)" >&2
fi

optional openmp "$tb/openmp/main" "$out/openmp.log" make -C "$tb/openmp" CXX="$CXX" main

starpu_pc=
for v in ${STARPU_VERSION:-1.4 1.3}; do
  if pkg-config --exists "starpumpi-$v" 2>/dev/null; then
    starpu_pc="starpumpi-$v starpu-$v"
    break
  fi
done
if [ -n "$starpu_pc" ] && command -v "$MPICXX" >/dev/null 2>&1; then
  # Task Bench's StarPU Makefile wants a STARPU_DIR prefix; pkg-config gives
  # the same flags for a distribution's package.
  # shellcheck disable=SC2086
  optional starpu "$tb/starpu/main" "$out/starpu.log" sh -c "
    cd '$tb/starpu' &&
    $MPICXX -O3 -std=c++11 -DADD_ -I../core \$(pkg-config --cflags $starpu_pc) -c data.cc -o data.o &&
    $MPICXX -O3 -std=c++11 -DADD_ -I../core \$(pkg-config --cflags $starpu_pc) -c main.cc -o main.o &&
    $MPICXX -o main main.o data.o -L../core -lcore_s \$(pkg-config --libs $starpu_pc)"
else
  echo "build.sh: warning: StarPU with MPI not found by pkg-config (install libstarpu-dev); Task Bench's starpu skipped" >&2
fi

echo "== programs built (listed in $programs):"
cat "$programs"
