# apps/nbody, included by Makefile.am: all-pairs gravity, one task per time
# step, double-buffered positions. Its GPU code is kernels/nbody.cu.
EXTRA_DIST += kernels/nbody.cu tests/apps/nbody-verify.sh \
	tests/apps/nbody-files.sh

pkglibexec_PROGRAMS += apps/nbody/nbody
apps_nbody_nbody_SOURCES = apps/nbody/nbody.c kernels/nbody.h
apps_nbody_nbody_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/apps/common \
	-I$(top_srcdir)/kernels
# `omp simd` (no OpenMP runtime calls) and no errno from sqrtf let the
# compiler vectorize the force loop.
apps_nbody_nbody_CFLAGS = $(AM_CFLAGS) $(OPENMP_CFLAGS) -fno-math-errno
apps_nbody_nbody_LDADD = $(APP_LDADD)

if HAVE_CUDA
# A plain object for a program (no libtool, no PIC wrapper).
apps_nbody_nbody_LDADD += kernels/nbody.$(OBJEXT) $(CUDA_LDFLAGS) \
	$(CUDA_LIBS)
EXTRA_apps_nbody_nbody_DEPENDENCIES = kernels/nbody.$(OBJEXT)
CLEANFILES += kernels/nbody.$(OBJEXT)
kernels/nbody.$(OBJEXT): kernels/nbody.cu kernels/nbody.h
	@$(MKDIR_P) kernels
	$(AM_V_GEN)$(NVCC) $(NVCCFLAGS) -I$(top_srcdir)/include \
	  -I$(top_builddir)/include -I$(top_srcdir)/kernels -c -o $@ $<
endif

if PM_TESTS
TESTS += tests/apps/nbody-verify.sh tests/apps/nbody-files.sh
endif
