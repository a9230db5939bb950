dnl SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
dnl VWAIT_DEP(VAR, PKG, WITH-VALUE, LIB, HEADER, FUNCTION)
dnl
dnl A library vwait needs: VAR_CFLAGS and VAR_LIBS (substituted) from pkg-config's PKG, else
dnl -lLIB from the system; WITH-VALUE is the --with-... value (check/yes: that search, no: an
dnl error, a directory: DIR/include and DIR/lib64 or DIR/lib, with an rpath). HEADER must
dnl compile and FUNCTION link, or configure stops. vwait_VAR_libdir: where LIB was found
dnl (empty from the system).
AC_DEFUN([VWAIT_DEP], [
	AS_CASE([$3],
	[check|yes], [PKG_CHECK_MODULES([$1], [$2],
		[vwait_$1_libdir=`$PKG_CONFIG --variable=libdir "$2"`],
		[$1_CFLAGS=""; $1_LIBS="-l$4"; vwait_$1_libdir=""])],
	[no], [AC_MSG_ERROR([vwait cannot be built without $2])],
	[$1_CFLAGS="-I$3/include"
	 AS_IF([test -d "$3/lib64"], [vwait_$1_libdir="$3/lib64"], [vwait_$1_libdir="$3/lib"])
	 $1_LIBS="-L$vwait_$1_libdir -Wl,-rpath,$vwait_$1_libdir -l$4"])
	save_CPPFLAGS=$CPPFLAGS; save_LIBS=$LIBS
	CPPFLAGS="$CPPFLAGS $$1_CFLAGS"; LIBS="$$1_LIBS $LIBS"
	AC_CHECK_HEADER([$5], [], [AC_MSG_ERROR([$5 not found (install the -dev package of $2 or use --with-...)])])
	AC_MSG_CHECKING([for lib$4])
	AC_LINK_IFELSE([AC_LANG_CALL([], [$6])], [AC_MSG_RESULT([yes])],
		[AC_MSG_RESULT([no]); AC_MSG_ERROR([lib$4 not usable])])
	CPPFLAGS=$save_CPPFLAGS; LIBS=$save_LIBS
	AC_SUBST([$1_CFLAGS]) AC_SUBST([$1_LIBS])
])
