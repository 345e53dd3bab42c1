#!/bin/sh
# Runs one test under a time limit so that a hang fails instead of blocking
# `make check`. PM_TEST_TIMEOUT overrides the limit (seconds). Tests keep no
# performance model between runs unless PMLIB_MODEL_DIR is set, so that what
# one run learned cannot change how the next one schedules.
: "${PMLIB_MODEL_DIR:=off}"
export PMLIB_MODEL_DIR
case $1 in
  *.sh) exec timeout "${PM_TEST_TIMEOUT:-600}" ${SHELL:-/bin/sh} "$@" ;;
  *) exec timeout "${PM_TEST_TIMEOUT:-600}" "$@" ;;
esac
