# pagerank: PageRank, one task per iteration, pull over in-edges in CSR.
# Included by Makefile.am.
EXTRA_DIST += kernels/pagerank.cu kernels/pagerank.h \
	tests/apps/pagerank-verify.sh \
	tests/apps/pagerank-files.sh tests/apps/pagerank-numpy.sh

pkglibexec_PROGRAMS += apps/pagerank/pagerank
apps_pagerank_pagerank_SOURCES = apps/pagerank/pagerank.c apps/pagerank/pagefiles.c \
	apps/pagerank/pagefiles.h
apps_pagerank_pagerank_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/apps/common \
	-I$(top_srcdir)/kernels
apps_pagerank_pagerank_LDADD = $(APP_LDADD)

if HAVE_CUDA
# The pull kernel is a plain object with its own static CUDA runtime.
apps_pagerank_pagerank_LDADD += kernels/pagerank.$(OBJEXT) $(CUDA_LDFLAGS) \
	$(CUDA_LIBS)
EXTRA_apps_pagerank_pagerank_DEPENDENCIES = kernels/pagerank.$(OBJEXT)
CLEANFILES += kernels/pagerank.$(OBJEXT)
kernels/pagerank.$(OBJEXT): kernels/pagerank.cu kernels/pagerank.h
	@$(MKDIR_P) kernels
	$(AM_V_GEN)$(NVCC) $(NVCCFLAGS) -I$(top_srcdir)/include \
	  -I$(top_builddir)/include -c -o $@ $<
endif

if PM_TESTS
TESTS += tests/apps/pagerank-verify.sh tests/apps/pagerank-files.sh \
	tests/apps/pagerank-numpy.sh
endif
