# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# contrib/packaging.mk: fi_vwait(7), the RPM spec and the Debian packaging.
# Included at the end of contrib/Makefile.include.
#   make rpm              RPMs of libfabric-vwait{,-devel} from "make dist", into packages/
#   make deb              .deb of libfabric-vwait{,-dev} from "make dist", into packages/
#   make check-packaging  both, then install the .deb into this system, check fi_info -l, remove
#                         it and check nothing is left (root; restores the system on failure)

vwait_subst = $(SED) -e 's|@PACKAGE_VERSION[@]|$(PACKAGE_VERSION)|g' \
	-e 's|@PACKAGE_TARNAME[@]|$(PACKAGE_TARNAME)|g'

# The license (BSD-2-Clause OR GPL-2.0-only, as libfabric): automake ships COPYING by itself,
# the GPL-2 text it points at is named here; the RPM's %license takes both from the tarball.
EXTRA_DIST += COPYING COPYING.GPL-2

# The man page: roff with the version filled in; installed, so both packages ship it.
man7_MANS += prov/vwait/man/fi_vwait.7
EXTRA_DIST += prov/vwait/man/fi_vwait.7.in
CLEANFILES += prov/vwait/man/fi_vwait.7
prov/vwait/man/fi_vwait.7: $(srcdir)/prov/vwait/man/fi_vwait.7.in Makefile
	$(AM_V_GEN)$(MKDIR_P) prov/vwait/man && \
	$(vwait_subst) $(srcdir)/prov/vwait/man/fi_vwait.7.in >$@-t && mv $@-t $@

# The RPM spec travels in the tarball ("rpmbuild -ta vwait-X.Y.Z.tar.gz"), filled in once by
# make dist; it depends on configure.ac, where the version is set.
EXTRA_DIST += contrib/rpm/libfabric-vwait.spec.in contrib/rpm/libfabric-vwait.spec
contrib/rpm/libfabric-vwait.spec: $(srcdir)/contrib/rpm/libfabric-vwait.spec.in $(top_srcdir)/configure.ac
	$(AM_V_GEN)$(MKDIR_P) contrib/rpm && \
	$(vwait_subst) $(srcdir)/contrib/rpm/libfabric-vwait.spec.in >$@-t && mv $@-t $@

# Debian packaging: contrib/packaging/build-deb.sh copies contrib/debian/ to debian/ in the
# unpacked tarball.
EXTRA_DIST += \
	contrib/debian/changelog \
	contrib/debian/control \
	contrib/debian/copyright \
	contrib/debian/rules \
	contrib/debian/source/format \
	contrib/debian/libfabric-vwait.install \
	contrib/debian/libfabric-vwait-dev.install \
	contrib/debian/libfabric-vwait-utils.install

EXTRA_DIST += \
	contrib/packaging/build-deb.sh \
	contrib/packaging/build-rpm.sh \
	contrib/packaging/check-packaging.sh \
	contrib/packaging/man-wait-objects.sh

# The man page against the built plugin and the packaging files (no root, no network);
# wait_report prints the wait objects the plugin reports, in the man page's table format.
check_PROGRAMS += contrib/packaging/wait_report
contrib_packaging_wait_report_SOURCES = contrib/packaging/wait_report.cpp
contrib_packaging_wait_report_LDADD = $(FABRIC_LIBS)
dist_check_SCRIPTS += contrib/packaging/check-man.sh
TESTS += contrib/packaging/check-man.sh

vwait_pkgdir = $(abs_builddir)/packages
rpm: dist
	$(srcdir)/contrib/packaging/build-rpm.sh $(distdir).tar.gz $(vwait_pkgdir)
deb: dist
	$(srcdir)/contrib/packaging/build-deb.sh $(distdir).tar.gz $(vwait_pkgdir)
check-packaging: dist contrib/packaging/wait_report$(EXEEXT)
	$(srcdir)/contrib/packaging/check-packaging.sh $(abs_builddir)/$(distdir).tar.gz \
		$(abs_builddir)/contrib/packaging/wait_report$(EXEEXT)
.PHONY: rpm deb check-packaging
CLEANFILES += packages/*.rpm packages/*.deb packages/*.ddeb packages/*.buildinfo packages/*.changes
