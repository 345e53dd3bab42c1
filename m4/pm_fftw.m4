# PM_CHECK_FFTW: single-precision FFTW for the CPU side of the fft2d app.
# --with-fftw=yes|no, default auto: without it fft2d is not built. Sets
# FFTW_CFLAGS, FFTW_LIBS and the HAVE_FFTW conditional.
AC_DEFUN([PM_CHECK_FFTW], [
  AC_ARG_WITH([fftw],
    [AS_HELP_STRING([--with-fftw], [single-precision FFTW for the fft2d app (default: auto)])],
    [], [with_fftw=auto])
  pm_have_fftw=no
  AS_IF([test "x$with_fftw" != "xno"], [
    PKG_CHECK_MODULES([FFTW], [fftw3f >= 3.3], [pm_have_fftw=yes], [pm_have_fftw=no])
  ])
  AS_IF([test "x$pm_have_fftw" = "xno"], [
    AS_IF([test "x$with_fftw" = "xyes"],
      [AC_MSG_ERROR([single-precision FFTW not found: install the Debian package libfftw3-dev])])
    AS_IF([test "x$with_fftw" = "xauto"],
      [AC_MSG_WARN([single-precision FFTW not found (Debian package libfftw3-dev): the fft2d app is not built])])
  ])
  AM_CONDITIONAL([HAVE_FFTW], [test "x$pm_have_fftw" = "xyes"])
])
