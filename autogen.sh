#!/bin/sh
# Regenerates configure and the Makefile.in files from configure.ac / Makefile.am.
set -e
cd "$(dirname "$0")"
autoreconf -fi
