# PM_CHECK_CUDA: --with-cuda[=DIR|yes|no], default auto. Finds nvcc and the
# runtime headers; fails only when CUDA was asked for explicitly. Sets NVCC,
# NVCCFLAGS, CUDA_CPPFLAGS, CUDA_LDFLAGS, CUDA_LIBS, PMLIB_HAVE_CUDA and the
# HAVE_CUDA conditional.
AC_DEFUN([PM_CHECK_CUDA], [
  AC_ARG_WITH([cuda],
    [AS_HELP_STRING([--with-cuda@<:@=DIR@:>@],
      [build the CUDA parts (default: auto; DIR is the toolkit root)])],
    [], [with_cuda=auto])
  AC_ARG_VAR([NVCC], [CUDA compiler])
  AC_ARG_VAR([CUDA_ARCHS], [GPU architectures to build, e.g. "75 80 90" (default: those of 70..90 nvcc supports)])
  pm_have_cuda=no
  pm_cuda_summary="no"
  AS_CASE([$with_cuda],
    [no], [pm_cuda_summary="no (--without-cuda)"],
    [yes|auto], [pm_cuda_dirs="/usr/local/cuda /usr"],
    [pm_cuda_dirs="$with_cuda"])
  AS_IF([test "x$with_cuda" != "xno"], [
    AS_IF([test "x$NVCC" = "x"], [
      for pm_d in $pm_cuda_dirs; do
        AS_IF([test -x "$pm_d/bin/nvcc"], [NVCC="$pm_d/bin/nvcc"; CUDA_HOME="$pm_d"; break])
      done
      AS_IF([test "x$NVCC" = "x"], [AC_PATH_PROG([NVCC], [nvcc], [])])
    ])
    AS_IF([test "x$NVCC" != "x" && test "x$CUDA_HOME" = "x"],
      [CUDA_HOME=`dirname "$NVCC"`; CUDA_HOME=`dirname "$CUDA_HOME"`])
    AS_IF([test "x$NVCC" != "x" && test -f "$CUDA_HOME/include/cuda_runtime.h"], [pm_have_cuda=yes])
  ])
  AS_IF([test "x$pm_have_cuda" = "xyes"], [
    CUDA_CPPFLAGS="-I$CUDA_HOME/include"
    pm_cuda_libdir="$CUDA_HOME/lib64"
    AS_IF([test ! -d "$pm_cuda_libdir"], [pm_cuda_libdir="$CUDA_HOME/lib"])
    # The shared runtime, so that the library and the apps' kernels share one
    # CUDA runtime (streams and device pointers pass between them); it loads
    # without a GPU driver, which it opens only when asked for devices.
    CUDA_LDFLAGS="-L$pm_cuda_libdir -Wl,-rpath,$pm_cuda_libdir"
    CUDA_LIBS="-lcudart -lstdc++"
    # The apps' GPU callbacks use these; only the apps link them.
    CUBLAS_LIBS="-lcublas"
    CUFFT_LIBS="-lcufft"
    CURAND_LIBS="-lcurand"
    AS_IF([test "x$CUDA_ARCHS" = "x"], [
      AC_MSG_CHECKING([which GPU architectures $NVCC builds])
      echo '__global__ void pm_probe(void) {}' > conftest.cu
      for pm_a in 70 75 80 86 89 90; do
        AS_IF([$NVCC -gencode arch=compute_$pm_a,code=sm_$pm_a -c conftest.cu -o conftest.o >/dev/null 2>&1],
          [CUDA_ARCHS="$CUDA_ARCHS $pm_a"])
      done
      rm -f conftest.cu conftest.o
      AC_MSG_RESULT([$CUDA_ARCHS])
    ])
    NVCC_GENCODE=""
    pm_last=""
    for pm_a in $CUDA_ARCHS; do
      NVCC_GENCODE="$NVCC_GENCODE -gencode arch=compute_$pm_a,code=sm_$pm_a"
      pm_last=$pm_a
    done
    AS_IF([test "x$pm_last" = "x"], [
      pm_have_cuda=no
      AS_IF([test "x$with_cuda" != "xauto"], [AC_MSG_ERROR([$NVCC builds none of the GPU architectures 70..90])])
    ], [
      # PTX of the newest one too, so newer GPUs can JIT it.
      NVCC_GENCODE="$NVCC_GENCODE -gencode arch=compute_$pm_last,code=compute_$pm_last"
      pm_cuda_summary="yes ($NVCC, sm:$CUDA_ARCHS)"
    ])
  ], [
    AS_IF([test "x$with_cuda" != "xauto" && test "x$with_cuda" != "xno"],
      [AC_MSG_ERROR([CUDA was requested but nvcc or cuda_runtime.h was not found under $pm_cuda_dirs (install the NVIDIA CUDA Toolkit)])])
    AS_IF([test "x$with_cuda" = "xauto"], [pm_cuda_summary="no (nvcc not found)"])
  ])
  AS_IF([test "x$pm_have_cuda" = "xyes"], [PMLIB_HAVE_CUDA=1], [PMLIB_HAVE_CUDA=0])
  NVCCFLAGS="${NVCCFLAGS:--O3} $NVCC_GENCODE"
  AC_SUBST([NVCC])
  AC_SUBST([NVCCFLAGS])
  AC_SUBST([CUDA_HOME])
  AC_SUBST([CUDA_CPPFLAGS])
  AC_SUBST([CUDA_LDFLAGS])
  AC_SUBST([CUDA_LIBS])
  AC_SUBST([CUBLAS_LIBS])
  AC_SUBST([CUFFT_LIBS])
  AC_SUBST([CURAND_LIBS])
  AC_SUBST([PMLIB_HAVE_CUDA])
  AM_CONDITIONAL([HAVE_CUDA], [test "x$pm_have_cuda" = "xyes"])
])
