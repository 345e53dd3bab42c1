# MPI tests, included at the end of Makefile.am: the suite on 1 to 4 hosts,
# failure handling between hosts, arraysum on several hosts, and large and
# iterative data movement between hosts, the order of many dependent
# tasks, fine-grained iterative graphs and the CPU use of an idle runtime.
# Every job runs under `mpiexec --oversubscribe` through the wrappers below.
MPI_TEST_WRAPPERS = tests/mpi/np1.sh tests/mpi/np2.sh tests/mpi/np3.sh \
	tests/mpi/np4.sh tests/mpi/fault-callback.sh tests/mpi/fault-missing.sh \
	tests/mpi/fault-kill.sh tests/mpi/arraysum-np.sh tests/mpi/multi-assign.sh \
	tests/mpi/transfer.sh tests/mpi/prefetch.sh tests/mpi/fault-transfer.sh \
	tests/mpi/misuse.sh tests/mpi/fault-recovery.sh \
	tests/mpi/dependencies.sh tests/mpi/finegrain.sh tests/mpi/idle.sh \
	tests/mpi/lazy.sh tests/mpi/straggler.sh tests/mpi/pieces.sh tests/mpi/fault-lazy.sh \
	tests/mpi/shared.sh
EXTRA_DIST += $(MPI_TEST_WRAPPERS) tests/mpi/mpi-common.sh

if PM_TESTS
check_PROGRAMS += tests/mpi/test_mpi tests/mpi/fault_callback \
	tests/mpi/fault_missing tests/mpi/fault_kill tests/mpi/multi_assign \
	tests/mpi/transfer tests/mpi/prefetch tests/mpi/fault_transfer tests/mpi/misuse \
	tests/mpi/dependencies tests/mpi/finegrain tests/mpi/idle tests/mpi/lazy \
	tests/mpi/straggler tests/mpi/pieces tests/mpi/fault_lazy tests/mpi/shared
TESTS += $(MPI_TEST_WRAPPERS)
AM_TESTS_ENVIRONMENT += MPIEXEC='$(MPIEXEC)'; export MPIEXEC;

tests_mpi_test_mpi_SOURCES = tests/mpi/test_mpi.c tests/unit/testutil.h
tests_mpi_test_mpi_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_mpi_test_mpi_LDADD = pmlib/libpmlib.la $(CHECK_LIBS) -lm
tests_mpi_fault_callback_SOURCES = tests/mpi/fault_callback.c
tests_mpi_fault_callback_LDADD = pmlib/libpmlib.la
tests_mpi_fault_missing_SOURCES = tests/mpi/fault_missing.c
tests_mpi_fault_missing_LDADD = pmlib/libpmlib.la
tests_mpi_fault_kill_SOURCES = tests/mpi/fault_kill.c
tests_mpi_fault_kill_LDADD = pmlib/libpmlib.la
tests_mpi_fault_lazy_SOURCES = tests/mpi/fault_lazy.c
tests_mpi_fault_lazy_LDADD = pmlib/libpmlib.la
tests_mpi_straggler_SOURCES = tests/mpi/straggler.c
tests_mpi_straggler_LDADD = pmlib/libpmlib.la
tests_mpi_multi_assign_SOURCES = tests/mpi/multi_assign.c
tests_mpi_multi_assign_LDADD = pmlib/libpmlib.la
tests_mpi_transfer_SOURCES = tests/mpi/transfer.c tests/mpi/mpitest.h
tests_mpi_transfer_LDADD = pmlib/libpmlib.la
tests_mpi_shared_SOURCES = tests/mpi/shared.c tests/mpi/mpitest.h
tests_mpi_shared_LDADD = pmlib/libpmlib.la
tests_mpi_prefetch_SOURCES = tests/mpi/prefetch.c tests/mpi/mpitest.h
tests_mpi_prefetch_LDADD = pmlib/libpmlib.la
tests_mpi_fault_transfer_SOURCES = tests/mpi/fault_transfer.c
tests_mpi_fault_transfer_LDADD = pmlib/libpmlib.la
tests_mpi_misuse_SOURCES = tests/mpi/misuse.c
tests_mpi_misuse_LDADD = pmlib/libpmlib.la
tests_mpi_dependencies_SOURCES = tests/mpi/dependencies.c tests/mpi/mpitest.h
tests_mpi_dependencies_LDADD = pmlib/libpmlib.la
tests_mpi_finegrain_SOURCES = tests/mpi/finegrain.c tests/mpi/mpitest.h
tests_mpi_finegrain_LDADD = pmlib/libpmlib.la
tests_mpi_lazy_SOURCES = tests/mpi/lazy.c tests/mpi/mpitest.h
tests_mpi_lazy_LDADD = pmlib/libpmlib.la
# It calls the transport itself, so it links the convenience library.
tests_mpi_pieces_SOURCES = tests/mpi/pieces.c
tests_mpi_pieces_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/pmlib $(MPI_CFLAGS)
tests_mpi_pieces_CFLAGS = $(AM_CFLAGS) $(PTHREAD_CFLAGS)
tests_mpi_pieces_LDADD = pmlib/libpmlib_core.la
tests_mpi_idle_SOURCES = tests/mpi/idle.c tests/mpi/mpitest.h
tests_mpi_idle_CFLAGS = $(AM_CFLAGS) $(PTHREAD_CFLAGS)
tests_mpi_idle_LDADD = pmlib/libpmlib.la $(PTHREAD_LIBS)
endif
