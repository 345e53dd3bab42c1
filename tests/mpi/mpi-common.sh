# Sourced by the MPI test wrappers: where the programs are and how to start
# a job. top_builddir comes from `make check`; MPIEXEC may name the launcher.
top_builddir=${top_builddir:-.}
MPIEXEC=${MPIEXEC:-mpiexec}
# Open MPI refuses to start as root without these; CI containers run as root.
OMPI_ALLOW_RUN_AS_ROOT=1
OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM

# mpi_run SECONDS N PROGRAM [ARGS...]: one job under a time limit, so that a
# hang fails the test (status 124) instead of blocking `make check`.
mpi_run() {
  mpi_limit=$1 mpi_n=$2
  shift 2
  timeout "$mpi_limit" "$MPIEXEC" --oversubscribe -n "$mpi_n" "$@"
}

fail() {
  echo "FAIL: $*"
  exit 1
}
