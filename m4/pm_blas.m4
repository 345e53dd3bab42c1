# PM_CHECK_BLAS: a CBLAS for the CPU kernels of the sample apps (OpenBLAS).
# Sets BLAS_LIBS.
AC_DEFUN([PM_CHECK_BLAS], [
  AC_ARG_VAR([BLAS_LIBS], [linker flags of a CBLAS library (default: -lopenblas)])
  pm_save_LIBS=$LIBS
  AC_CHECK_HEADER([cblas.h], [],
    [AC_MSG_ERROR([cblas.h not found: install the Debian package libopenblas-dev])])
  AS_IF([test "x$BLAS_LIBS" = "x"], [
    AC_CHECK_LIB([openblas], [cblas_sgemm], [BLAS_LIBS="-lopenblas"],
      [AC_CHECK_LIB([cblas], [cblas_sgemm], [BLAS_LIBS="-lcblas"],
        [AC_MSG_ERROR([no CBLAS library found: install the Debian package libopenblas-dev])])])
  ])
  LIBS=$pm_save_LIBS
  AC_SUBST([BLAS_LIBS])
])
