# The CUDA device kind: the GPU stub and its kernels, its test suite, and the
# pmlib-info tool. Included by Makefile.am after the library, CUDA_SOURCES
# and the test variables are defined.

# Distributed whether or not this build has CUDA; compiled only with it.
pmlib_libpmlib_core_la_SOURCES += pmlib/exec/cuda.h pmlib/exec/cuda_int.h
CUDA_SOURCES += pmlib/cuda/stub_kernels.cu
EXTRA_DIST += tests/cuda/kernels.cu tests/cuda/kernels.h tests/cuda/mpi-np2.sh tests/cuda/test_cuda_mpi.c

if HAVE_CUDA
pmlib_libpmlib_core_la_SOURCES += pmlib/exec/cuda.c pmlib/exec/cuda_dir.c pmlib/exec/cuda_copy.c \
	pmlib/exec/cuda_reduce.c pmlib/exec/cuda_node.c
pmlib_libpmlib_core_la_CPPFLAGS += $(CUDA_CPPFLAGS)
endif

# Built always: without CUDA it reports 0 GPUs. ('=' because Makefile.am
# has no other bin_PROGRAMS yet; automake refuses '+=' on an unset one.)
bin_PROGRAMS = pmlib/tools/pmlib-info
pmlib_tools_pmlib_info_SOURCES = pmlib/tools/pmlib-info.c
pmlib_tools_pmlib_info_LDADD = pmlib/libpmlib.la

if PM_TESTS
if HAVE_CUDA
check_PROGRAMS += tests/cuda/test_cuda
TESTS += tests/cuda/test_cuda
tests_cuda_test_cuda_SOURCES = tests/cuda/test_cuda.c tests/cuda/kernels.h
tests_cuda_test_cuda_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(PTHREAD_CFLAGS)
# The test kernels launch through their own static CUDA runtime.
tests_cuda_test_cuda_LDADD = tests/cuda/kernels.$(OBJEXT) pmlib/libpmlib.la $(CHECK_LIBS) \
	$(CUDA_LDFLAGS) $(CUDA_LIBS) $(PTHREAD_LIBS) -lm
EXTRA_tests_cuda_test_cuda_DEPENDENCIES = tests/cuda/kernels.$(OBJEXT)
check_PROGRAMS += tests/cuda/test_cuda_mpi
TESTS += tests/cuda/mpi-np2.sh
tests_cuda_test_cuda_mpi_SOURCES = tests/cuda/test_cuda_mpi.c tests/cuda/kernels.h
tests_cuda_test_cuda_mpi_CPPFLAGS = $(AM_CPPFLAGS) -I$(srcdir)/tests/cuda
tests_cuda_test_cuda_mpi_LDADD = tests/cuda/kernels.$(OBJEXT) pmlib/libpmlib.la \
	$(CUDA_LDFLAGS) $(CUDA_LIBS) -lm
EXTRA_tests_cuda_test_cuda_mpi_DEPENDENCIES = tests/cuda/kernels.$(OBJEXT)
CLEANFILES += tests/cuda/kernels.$(OBJEXT)

# A plain object (the test is a program), so no libtool wrapper is needed.
tests/cuda/kernels.$(OBJEXT): tests/cuda/kernels.cu tests/cuda/kernels.h
	@$(MKDIR_P) tests/cuda
	$(AM_V_GEN)$(NVCC) $(NVCCFLAGS) -I$(srcdir)/tests/cuda -c -o $@ $(srcdir)/tests/cuda/kernels.cu
endif
endif
