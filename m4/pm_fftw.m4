# PM_CHECK_FFTW: single-precision FFTW for the CPU side of the fft2d app.
# Sets FFTW_CFLAGS and FFTW_LIBS.
AC_DEFUN([PM_CHECK_FFTW], [
  PKG_CHECK_MODULES([FFTW], [fftw3f >= 3.3], [],
    [AC_MSG_ERROR([single-precision FFTW not found: install the Debian package libfftw3-dev])])
])
