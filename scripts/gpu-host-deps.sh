#!/bin/sh
# Adds to .device-deps/ (the folder of Debian packages carried to an offline
# GPU host) the packages such a host lacks for the sample apps: OpenBLAS for
# matmul, single-precision FFTW for fft2d. There, once they are unpacked
# under a prefix (PMDEPS_PREFIX), configure with the flags this prints.
set -e
cd "$(dirname "$0")/.."
mkdir -p .device-deps
cd .device-deps
apt-get download libopenblas0-pthread libopenblas-pthread-dev libopenblas-dev libopenblas0 \
  libgfortran5 libfftw3-dev libfftw3-single3 libfftw3-double3 >/dev/null
p=${PMDEPS_PREFIX:-/opt/pmdeps}
ob=$p/usr/lib/x86_64-linux-gnu/openblas-pthread
echo "configure with: BLAS_CFLAGS=-I$p/usr/include/x86_64-linux-gnu/openblas-pthread" \
  "BLAS_LIBS=\"-L$ob -lopenblas\" and LD_LIBRARY_PATH=$ob:$p/usr/lib/x86_64-linux-gnu"
