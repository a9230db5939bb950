#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# layering.sh fails a small tree with one breach of each of its rules, and passes it clean.
exec sh "$(dirname "$0")/layering.sh" --self-test
