#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# Regenerates configure and the Makefile.in files from configure.ac / Makefile.am.
set -e
cd "$(dirname "$0")"
autoreconf -fi
