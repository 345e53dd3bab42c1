# PM_CHECK_CHECK: the Check unit-test framework, required for `make check`.
# --disable-tests builds without it (make check then says how to enable it).
AC_DEFUN([PM_CHECK_CHECK], [
  AC_ARG_ENABLE([tests],
    [AS_HELP_STRING([--disable-tests], [build without the Check test suites])],
    [], [enable_tests=yes])
  pm_check_summary="disabled (--disable-tests)"
  AS_IF([test "x$enable_tests" != "xno"], [
    PKG_CHECK_MODULES([CHECK], [check >= 0.11], [pm_check_summary="yes"],
      [AC_MSG_ERROR([Check is required for the tests: install the Debian package check (or configure --disable-tests)])])
  ])
  AM_CONDITIONAL([PM_TESTS], [test "x$enable_tests" != "xno"])
])
