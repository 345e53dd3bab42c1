# apps/matmul, included by Makefile.am: C = A x B with cblas_sgemm on CPU
# cores and cuBLAS on GPUs. Needs a CBLAS; its GPU code is kernels/matmul.cu.
EXTRA_DIST += kernels/matmul.cu tests/apps/matmul-verify.sh \
	tests/apps/matmul-files.sh tests/apps/matmul-numpy.sh

if HAVE_BLAS
pkglibexec_PROGRAMS += apps/matmul/matmul
apps_matmul_matmul_SOURCES = apps/matmul/matmul.c kernels/matmul.h
apps_matmul_matmul_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/apps/common \
	-I$(top_srcdir)/kernels $(BLAS_CFLAGS)
apps_matmul_matmul_LDADD = $(APP_LDADD) $(BLAS_LIBS)

if HAVE_CUDA
# A plain object for a program (no libtool, no PIC wrapper); cuBLAS is
# linked into this program only.
apps_matmul_matmul_LDADD += kernels/matmul.$(OBJEXT) \
	$(CUDA_LDFLAGS) $(CUBLAS_LIBS) $(CUDA_LIBS)
EXTRA_apps_matmul_matmul_DEPENDENCIES = kernels/matmul.$(OBJEXT)
CLEANFILES += kernels/matmul.$(OBJEXT)
kernels/matmul.$(OBJEXT): kernels/matmul.cu kernels/matmul.h
	@$(MKDIR_P) kernels
	$(AM_V_GEN)$(NVCC) $(NVCCFLAGS) -I$(top_srcdir)/include \
	  -I$(top_builddir)/include -I$(top_srcdir)/kernels -c -o $@ $<
endif

if PM_TESTS
TESTS += tests/apps/matmul-verify.sh tests/apps/matmul-files.sh \
	tests/apps/matmul-numpy.sh
endif
endif
