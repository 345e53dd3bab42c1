# PM_CHECK_ZLIB: zlib is required; sets ZLIB_LIBS.
AC_DEFUN([PM_CHECK_ZLIB], [
  pm_save_LIBS=$LIBS
  AC_CHECK_HEADER([zlib.h], [],
    [AC_MSG_ERROR([zlib.h not found: install the Debian package zlib1g-dev])])
  AC_CHECK_LIB([z], [deflateBound], [ZLIB_LIBS="-lz"],
    [AC_MSG_ERROR([libz not found: install the Debian package zlib1g-dev])])
  LIBS=$pm_save_LIBS
  AC_SUBST([ZLIB_LIBS])
])
