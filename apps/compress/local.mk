# compress: gzip a file in blocks (one deflate stream, gathered with
# pm_redistribute). CPU only. Included by Makefile.am.
EXTRA_DIST += tests/apps/compress-verify.sh \
	tests/apps/compress-files.sh

pkglibexec_PROGRAMS += apps/compress/compress
apps_compress_compress_SOURCES = apps/compress/compress.c
apps_compress_compress_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/apps/common
apps_compress_compress_LDADD = $(APP_LDADD) $(ZLIB_LIBS)

if PM_TESTS
TESTS += tests/apps/compress-verify.sh tests/apps/compress-files.sh
endif
