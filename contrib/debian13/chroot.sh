#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# contrib/debian13/chroot.sh - run one command inside the Debian 13 root that mkroot.sh made
# (made first when missing or stale), as root, in $PWD, with the folder that holds this
# checkout (and so its _build/ dirs and a sibling ../shared) bind-mounted at the same path.
#
#   contrib/debian13/chroot.sh [--] CMD [ARGS...]
#
# The mounts (/proc, /sys, /dev, a fresh /tmp, the share) live in a private mount namespace
# (unshare -m): they vanish with the command, whatever way it ends. The root's own files stay
# writable (apt-get install of a built .deb works); mkroot.sh --force makes a clean one.
# Environment: VWAIT_DEBIAN13_ROOT (default /var/cache/vwait/debian13), CHROOT_SHARE (the
# folder bind-mounted; default as run-in-vm.sh's VM_SHARE).
set -u -o pipefail
die() {
	echo "debian13/chroot: $*" >&2
	exit 125
}
[ "${1:-}" = "--" ] && shift
[ $# -ge 1 ] || die "usage: $0 [--] CMD [ARGS...]"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
ROOT=${VWAIT_DEBIAN13_ROOT:-/var/cache/vwait/debian13}
[ "$(id -u)" = 0 ] || die "must run as root (chroot)"
"$here/mkroot.sh" >&2 || die "no Debian 13 root at $ROOT"

share=${CHROOT_SHARE:-}
if [ -z "$share" ]; then
	top=$(git rev-parse --show-toplevel 2>/dev/null || true)
	if [ -n "$top" ]; then
		top=$(cd "$top" && pwd -P)
		if [ "$(dirname "$top")" != / ]; then share=$(dirname "$top"); else share=$top; fi
	else
		share=$PWD
	fi
fi
share=$(cd "$share" && pwd -P) || die "share not a directory"
[ "$share" != / ] || die "sharing / is not supported"

# the environment the command gets: a clean one, plus these knobs when set
pass=()
for v in $(compgen -e); do
	case $v in FABTESTS_* | SETUP_* | VWAIT_* | FI_* | MAKEFLAGS) pass+=("$v=${!v}") ;; esac
done
export ROOT share
# shellcheck disable=SC2016 # expanded by the inner bash
exec unshare --mount --propagation private -- bash -c '
	set -e
	mount -t proc proc "$ROOT/proc"
	mount -t sysfs sys "$ROOT/sys"
	mount --rbind /dev "$ROOT/dev"
	mount -t tmpfs -o mode=1777 tmpfs "$ROOT/tmp"
	mkdir -p "$ROOT$share"
	mount --bind "$share" "$ROOT$share"
	cp /etc/resolv.conf "$ROOT/etc/resolv.conf" 2>/dev/null || true
	n=$1
	shift
	envs=("${@:1:n}")
	shift "$n"
	exec chroot "$ROOT" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		LANG=C.UTF-8 "${envs[@]}" \
		bash -c "cd \"\$1\" && shift && exec \"\$@\"" chroot-cd "$PWD" "$@"
' chroot.sh "${#pass[@]}" "${pass[@]}" "$@"
