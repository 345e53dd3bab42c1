# AX_PTHREAD_LITE: POSIX threads through -pthread (gcc and clang on Linux).
AC_DEFUN([AX_PTHREAD_LITE], [
  PTHREAD_CFLAGS="-pthread"
  PTHREAD_LIBS="-pthread"
  pm_save_CFLAGS=$CFLAGS
  CFLAGS="$CFLAGS -pthread"
  AC_CHECK_FUNC([pthread_create], [],
    [AC_MSG_ERROR([POSIX threads are required (install the Debian package libc6-dev)])])
  CFLAGS=$pm_save_CFLAGS
  AC_SUBST([PTHREAD_CFLAGS])
  AC_SUBST([PTHREAD_LIBS])
])
