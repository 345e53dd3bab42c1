# PM_CHECK_OPENMP: OpenMP is required; sets OPENMP_CFLAGS.
AC_DEFUN([PM_CHECK_OPENMP], [
  AC_OPENMP
  AS_IF([test "x$ac_cv_prog_c_openmp" = "xunsupported" || test "x$ac_cv_prog_c_openmp" = "x"],
    [AC_MSG_ERROR([OpenMP is required: use gcc (Debian package gcc) or clang with libomp-dev])])
  AC_SUBST([OPENMP_CFLAGS])
])
