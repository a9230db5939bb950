/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* cmocka for C++ test files: cmocka.h has no extern "C" guards of its own, and needs the
 * C headers it relies on included before it. Include this instead of <cmocka.h>. */
#ifndef VWAIT_TEST_CMOCKA_H
#define VWAIT_TEST_CMOCKA_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

extern "C" {
#include <cmocka.h>
}

#endif
