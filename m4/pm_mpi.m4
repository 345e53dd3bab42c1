# PM_CHECK_MPI: Open MPI is required. Takes the compile and link flags from
# the MPI wrapper compiler so that CC stays the plain C compiler and only
# libpmlib links MPI. Sets MPI_CFLAGS, MPI_LIBS, MPIEXEC.
AC_DEFUN([PM_CHECK_MPI], [
  AC_ARG_VAR([MPICC], [MPI C wrapper compiler used to find MPI flags])
  AC_ARG_VAR([MPIEXEC], [MPI launcher used by the tests])
  AC_PATH_PROGS([MPICC], [mpicc mpicc.openmpi], [no])
  AS_IF([test "x$MPICC" = "xno"],
    [AC_MSG_ERROR([MPI is required: install the Debian packages libopenmpi-dev and openmpi-bin])])
  AS_IF([test "x$MPI_CFLAGS" = "x"], [MPI_CFLAGS=`$MPICC --showme:compile 2>/dev/null`])
  AS_IF([test "x$MPI_LIBS" = "x"], [MPI_LIBS=`$MPICC --showme:link 2>/dev/null`])
  pm_save_CFLAGS=$CFLAGS
  pm_save_LIBS=$LIBS
  CFLAGS="$CFLAGS $MPI_CFLAGS"
  LIBS="$MPI_LIBS $LIBS"
  AC_MSG_CHECKING([whether MPI programs compile and link])
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>]],
      [[int p; MPI_Init_thread(0, 0, MPI_THREAD_MULTIPLE, &p); MPI_Finalize();]])],
    [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no])
     AC_MSG_ERROR([cannot build MPI programs: install the Debian package libopenmpi-dev])])
  CFLAGS=$pm_save_CFLAGS
  LIBS=$pm_save_LIBS
  AC_PATH_PROGS([MPIEXEC], [mpiexec mpirun], [no])
  AS_IF([test "x$MPIEXEC" = "xno"],
    [AC_MSG_ERROR([mpiexec not found: install the Debian package openmpi-bin])])
  pm_mpi_summary="$MPICC ($MPIEXEC)"
  AC_SUBST([MPI_CFLAGS])
  AC_SUBST([MPI_LIBS])
])
