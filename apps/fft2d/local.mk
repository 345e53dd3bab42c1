# fft2d: a 2-D FFT as two tasks (rows, then strided columns); FFTW on CPUs,
# cuFFT on GPUs. Included by Makefile.am; built only when configure found
# single-precision FFTW.
EXTRA_DIST += kernels/fft2d.cu kernels/fft2d.h tests/apps/fft2d-verify.sh \
	tests/apps/fft2d-files.sh tests/apps/fft2d-numpy.sh

if HAVE_FFTW
pkglibexec_PROGRAMS += apps/fft2d/fft2d
apps_fft2d_fft2d_SOURCES = apps/fft2d/fft2d.c
apps_fft2d_fft2d_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/apps/common \
	-I$(top_srcdir)/kernels
apps_fft2d_fft2d_CFLAGS = $(AM_CFLAGS) $(FFTW_CFLAGS) $(PTHREAD_CFLAGS)
apps_fft2d_fft2d_LDADD = $(APP_LDADD) $(FFTW_LIBS) $(PTHREAD_LIBS)

if HAVE_CUDA
# The cuFFT launcher is a plain object with its own static CUDA runtime.
apps_fft2d_fft2d_LDADD += kernels/fft2d.$(OBJEXT) $(CUDA_LDFLAGS) \
	$(CUFFT_LIBS) $(CUDA_LIBS)
EXTRA_apps_fft2d_fft2d_DEPENDENCIES = kernels/fft2d.$(OBJEXT)
CLEANFILES += kernels/fft2d.$(OBJEXT)
kernels/fft2d.$(OBJEXT): kernels/fft2d.cu kernels/fft2d.h
	@$(MKDIR_P) kernels
	$(AM_V_GEN)$(NVCC) $(NVCCFLAGS) -I$(top_srcdir)/include \
	  -I$(top_builddir)/include -c -o $@ $<
endif

if PM_TESTS
TESTS += tests/apps/fft2d-verify.sh tests/apps/fft2d-files.sh \
	tests/apps/fft2d-numpy.sh
endif
endif
