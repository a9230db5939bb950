# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# Integration tests of the blocking semantics: completion channels as wait objects, and
# Open MPI over vwait (built only when configure finds Open MPI's ompi-c).
dist_check_SCRIPTS += test/integration/mpi-pingpong.test test/integration/mpi-netpipe.test \
	test/integration/mpi-netpipe-integrity.test test/integration/mpi-sos-unit.test
EXTRA_DIST += test/integration/mpi_pingpong.cpp
if HAVE_MPI
check_PROGRAMS += test/integration/mpi_pingpong
test_integration_mpi_pingpong_SOURCES = test/integration/mpi_pingpong.cpp
test_integration_mpi_pingpong_CPPFLAGS = $(AM_CPPFLAGS) $(MPI_CFLAGS)
test_integration_mpi_pingpong_LDADD = $(MPI_LIBS)
endif


# completion channels as wait objects, on the real device
dist_check_SCRIPTS += test/integration/vwait-channel.test \
	test/integration/vwait-wait-objects.test \
	test/integration/vwait-sets-many.test \
	test/integration/vwait-rxm-pingpong.test \
	test/integration/vwait-bench-turns.test
check_PROGRAMS += test/integration/channel_test
test_integration_channel_test_SOURCES = test/integration/channel_test.cpp
test_integration_channel_test_CPPFLAGS = $(AM_CPPFLAGS) $(IBVERBS_CFLAGS)
test_integration_channel_test_LDADD = libvwait_prov.la $(IBVERBS_LIBS) $(FABRIC_LIBS)

# an idle fi_cq_sread sleeps (CPU per 2 s of blocking, per wait object)
dist_check_SCRIPTS += test/integration/vwait-sread-idle.test
check_PROGRAMS += test/integration/sread_idle
test_integration_sread_idle_SOURCES = test/integration/sread_idle.cpp
test_integration_sread_idle_LDADD = $(FABRIC_LIBS)
# ADIOS2's SST engine (Debian's python3-adios2-serial) over vwait;ofi_rxm, verbs beside it
dist_check_SCRIPTS += test/integration/adios2-sst.test
EXTRA_DIST += test/integration/adios2_sst.py
