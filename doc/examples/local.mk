# The tutorial's program (doc/tutorial.md), built and run by `make check`
# so that the code the tutorial quotes keeps compiling and stays right.
# Included from the top-level Makefile.am.
if PM_TESTS
check_PROGRAMS += doc/examples/tutorial
TESTS += doc/examples/tutorial
doc_examples_tutorial_SOURCES = doc/examples/tutorial.c
doc_examples_tutorial_LDADD = pmlib/libpmlib.la -lm
endif
