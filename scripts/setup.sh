#!/bin/sh
# Sets up a fresh Debian 12 machine to build pmlib: installs the Debian
# packages it needs (only those missing), then generates and runs configure.
# Extra arguments go to configure, e.g. scripts/setup.sh --without-cuda.
set -e
cd "$(dirname "$0")/.."

PACKAGES="build-essential autoconf automake libtool pkg-config \
  libopenmpi-dev openmpi-bin zlib1g-dev check libsubunit-dev \
  libopenblas-dev libfftw3-dev gzip python3 python3-numpy"

missing=""
for p in $PACKAGES; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "setup: installing Debian packages:$missing"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
fi

if [ ! -x configure ] || [ configure.ac -nt configure ] || [ Makefile.am -nt Makefile.in ]; then
  autoreconf -fi
fi
if [ ! -f Makefile ] || [ $# -gt 0 ]; then
  ./configure "$@"
fi
