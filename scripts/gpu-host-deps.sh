#!/bin/sh
# Adds to .device-deps/ the Debian packages an offline GPU host lacks for the
# sample apps (OpenBLAS for matmul, single-precision FFTW for fft2d), next to
# the Check/libtool packages the GPU-host preparation step put there. On the
# GPU host, after sourcing .device-deps/env.sh (which unpacks every package
# there into /opt/pmdeps), configure with the flags this script prints.
set -e
cd "$(dirname "$0")/.."
mkdir -p .device-deps
cd .device-deps
apt-get download libopenblas0-pthread libopenblas-pthread-dev libopenblas-dev libopenblas0 \
  libgfortran5 libfftw3-dev libfftw3-single3 libfftw3-double3 >/dev/null
ob=/opt/pmdeps/usr/lib/x86_64-linux-gnu/openblas-pthread
echo "configure with: BLAS_CFLAGS=-I/opt/pmdeps/usr/include/x86_64-linux-gnu/openblas-pthread" \
  "BLAS_LIBS=\"-L$ob -lopenblas\" and LD_LIBRARY_PATH=$ob:/opt/pmdeps/usr/lib/x86_64-linux-gnu"
