# apps/montecarlo, included by Makefile.am: Monte Carlo prices of European
# options, a block of options per subtask. Its GPU code is
# kernels/montecarlo.cu (cuRAND device API).
EXTRA_DIST += kernels/montecarlo.cu tests/apps/montecarlo-verify.sh \
	tests/apps/montecarlo-files.sh

pkglibexec_PROGRAMS += apps/montecarlo/montecarlo
apps_montecarlo_montecarlo_SOURCES = apps/montecarlo/montecarlo.c \
	kernels/montecarlo.h
apps_montecarlo_montecarlo_CPPFLAGS = $(AM_CPPFLAGS) \
	-I$(top_srcdir)/apps/common -I$(top_srcdir)/kernels
apps_montecarlo_montecarlo_LDADD = $(APP_LDADD)

if HAVE_CUDA
# A plain object for a program (no libtool, no PIC wrapper). The cuRAND
# device API is header-only: no $(CURAND_LIBS).
apps_montecarlo_montecarlo_LDADD += kernels/montecarlo.$(OBJEXT) \
	$(CUDA_LDFLAGS) $(CUDA_LIBS)
EXTRA_apps_montecarlo_montecarlo_DEPENDENCIES = kernels/montecarlo.$(OBJEXT)
CLEANFILES += kernels/montecarlo.$(OBJEXT)
# --use_fast_math: cuRAND's inline logf and sqrtf (Box-Muller) become one
# instruction each; see kernels/montecarlo.cu.
kernels/montecarlo.$(OBJEXT): kernels/montecarlo.cu kernels/montecarlo.h
	@$(MKDIR_P) kernels
	$(AM_V_GEN)$(NVCC) $(NVCCFLAGS) --use_fast_math -I$(top_srcdir)/include \
	  -I$(top_builddir)/include -I$(top_srcdir)/kernels -c -o $@ $<
endif

if PM_TESTS
TESTS += tests/apps/montecarlo-verify.sh tests/apps/montecarlo-files.sh
endif
