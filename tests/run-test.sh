#!/bin/sh
# Runs one test under a time limit so that a hang fails instead of blocking
# `make check`. PM_TEST_TIMEOUT overrides the limit (seconds).
case $1 in
  *.sh) exec timeout "${PM_TEST_TIMEOUT:-600}" ${SHELL:-/bin/sh} "$@" ;;
  *) exec timeout "${PM_TEST_TIMEOUT:-600}" "$@" ;;
esac
