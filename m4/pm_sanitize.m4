# PM_ENABLE_SANITIZERS: --enable-sanitizers=address,undefined|thread adds the
# sanitizer flags to every C compile and link of the project.
AC_DEFUN([PM_ENABLE_SANITIZERS], [
  AC_ARG_ENABLE([sanitizers],
    [AS_HELP_STRING([--enable-sanitizers=LIST],
      [build with -fsanitize=LIST, e.g. address,undefined or thread])],
    [], [enable_sanitizers=no])
  SANITIZER_CFLAGS=""
  pm_sanitize_summary="no"
  AS_IF([test "x$enable_sanitizers" != "xno" && test "x$enable_sanitizers" != "x"], [
    AS_IF([test "x$enable_sanitizers" = "xyes"], [enable_sanitizers="address,undefined"])
    SANITIZER_CFLAGS="-fsanitize=$enable_sanitizers -fno-omit-frame-pointer -fno-sanitize-recover=all"
    pm_sanitize_summary="$enable_sanitizers"
  ])
  AC_SUBST([SANITIZER_CFLAGS])
])
