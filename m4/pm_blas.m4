# PM_CHECK_BLAS: a CBLAS (OpenBLAS) for the CPU kernels of the sample apps.
# --with-blas=yes|no, default auto: without it the apps that need it are not
# built. Sets BLAS_CFLAGS, BLAS_LIBS and the HAVE_BLAS conditional.
AC_DEFUN([PM_CHECK_BLAS], [
  AC_ARG_WITH([blas],
    [AS_HELP_STRING([--with-blas], [CBLAS for the matmul app (default: auto; set BLAS_CFLAGS/BLAS_LIBS to choose one)])],
    [], [with_blas=auto])
  AC_ARG_VAR([BLAS_CFLAGS], [compiler flags to find cblas.h])
  AC_ARG_VAR([BLAS_LIBS], [linker flags of a CBLAS library (default: -lopenblas)])
  pm_have_blas=no
  AS_IF([test "x$with_blas" != "xno"], [
    pm_save_CPPFLAGS=$CPPFLAGS
    pm_save_LIBS=$LIBS
    CPPFLAGS="$CPPFLAGS $BLAS_CFLAGS"
    AS_IF([test "x$BLAS_LIBS" = "x"], [BLAS_LIBS="-lopenblas"])
    LIBS="$BLAS_LIBS $LIBS"
    AC_CHECK_HEADER([cblas.h], [
      AC_MSG_CHECKING([for cblas_sgemm with $BLAS_LIBS])
      AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <cblas.h>]],
          [[cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 0, 0, 0, 1.0f, 0, 1, 0, 1, 0.0f, 0, 1);]])],
        [pm_have_blas=yes], [])
      AC_MSG_RESULT([$pm_have_blas])
    ], [], [AC_INCLUDES_DEFAULT])
    CPPFLAGS=$pm_save_CPPFLAGS
    LIBS=$pm_save_LIBS
  ])
  AS_IF([test "x$pm_have_blas" = "xno"], [
    BLAS_LIBS=""
    AS_IF([test "x$with_blas" = "xyes"],
      [AC_MSG_ERROR([no CBLAS found: install the Debian package libopenblas-dev])])
    AS_IF([test "x$with_blas" = "xauto"],
      [AC_MSG_WARN([no CBLAS found (Debian package libopenblas-dev): the matmul app is not built])])
  ])
  AM_CONDITIONAL([HAVE_BLAS], [test "x$pm_have_blas" = "xyes"])
])
