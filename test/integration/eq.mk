# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# Integration tests of EQs with every wait object on the real device: the rdma_cm channel as
# a source of the EQ's waiter (fi_eq_sread, wait sets, fi_trywait + poll, fi_eq_write).
dist_check_SCRIPTS += \
	test/integration/vwait-eq-sread.test \
	test/integration/vwait-eq-waitset.test \
	test/integration/vwait-eq-trywait.test \
	test/integration/vwait-eq-write.test \
	test/integration/vwait-exit-open.test
check_PROGRAMS += test/integration/eq_test
test_integration_eq_test_SOURCES = test/integration/eq_test.cpp test/integration/harness.h
test_integration_eq_test_LDADD = $(FABRIC_LIBS)
