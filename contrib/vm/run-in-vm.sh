#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
# contrib/vm/run-in-vm.sh - vwait's soft-RoCE test bed: run one command inside a
# throw-away QEMU guest that has a real (software) RDMA verbs device, the Debian
# kernel's rdma_rxe (Soft-RoCE) bound to a netdev that exists only inside the guest.
# Adapted from the team's proven vm-rxe recipe (../shared/vm-rxe); same behaviour,
# plus a share default that works for any fresh clone and a host-wide VM lock.
#
#   contrib/vm/run-in-vm.sh [--] CMD [ARGS...]
#
# * The guest boots the host's Debian kernel (/boot/vmlinuz-<ver>, package
#   linux-image-amd64) under QEMU TCG with a tiny busybox initramfs built and
#   cached here.
# * Its root filesystem is the host's "/" (or VM_ROOT) shared read-only over virtio-9p with a
#   tmpfs overlay on top (so the guest can write anywhere; those writes vanish at
#   power-off).  The host binaries/libraries (rdma-core, libfabric, your build)
#   are therefore the ones that run in the guest.
# * One host directory, VM_SHARE, is shared READ-WRITE at the same path, so build
#   outputs and logs persist.  Default: if $PWD is inside a git checkout, the
#   folder holding that checkout (so the clone, its _build/<name> dirs and a
#   sibling ../shared are all visible), or the checkout itself when it sits
#   directly under /; otherwise $PWD.
# * The guest has NO network card (-nodefaults, no -nic/-netdev): nothing it
#   does can reach any network.  rxe0 is bound to VM_RXE_NETDEV (default: a
#   dummy device inside the guest, see below).  VM_NIC gives it one virtio NIC
#   on a qemu netdev (two-node.sh: a private link between two guests).
# * CMD runs as root in $PWD (same path as on the host) with the host's
#   exported environment and stdin /dev/null; its stdout and stderr stream to
#   this script's stdout and stderr (virtio-serial ports); this script exits
#   with CMD's exit status.  Use `run-in-vm.sh bash -c '...'` for shell syntax.
# * Only one VM runs well at a time on a small host: runs of this script take a
#   host-wide lock (VM_LOCK) and wait for each other.
#
# Exit codes besides CMD's own: 124 = VM_TIMEOUT hit, 125 = the VM/setup
# failed before/while running CMD (kernel log and setup log printed to stderr).
#
# Environment knobs (all optional):
#   VM_KERNEL_VER  kernel version under /lib/modules (default: newest having rdma_rxe.ko)
#   VM_MEM         guest memory (default 2G)       VM_CPUS  vCPUs (default 2)
#   VM_ACCEL       auto|kvm|tcg (default auto: kvm if /dev/kvm is writable AND the CPU
#                  flags show vmx/svm, else tcg).  On hosts with /dev/kvm but no
#                  vmx/svm (e.g. nested "kvm_pvm"), a stock kernel hangs under KVM.
#   VM_TIMEOUT     seconds for the whole VM run (default 1200; the lock wait not included)
#   VM_SHARE       host dir shared read-write at the same path (see above)
#   VM_LOCK        lock file serialising VMs on this host (default /tmp/vwait-vm.lock;
#                  "none" disables it)
#   VM_LOCK_WAIT   seconds to wait for that lock (default 1800), then exit 125
#   VM_RDMA        rxe (default) | siw: the software RDMA device, soft-RoCE (rdma_rxe, device
#                  rxe0) or soft-iWARP (siw, device siw0).  Debian's kernel has no siw: the
#                  first siw run builds siw.ko with build-siw.sh (needs linux-source-6.1 and
#                  linux-headers-<kernel>: contrib/deps.sh siw) and caches it in VM_CACHE.
#                  Everything below named rxe0 / RXE_* is then siw0 (RXE_DEV=siw0).
#                  both: rxe0 as with rxe AND siw0 in the same guest, siw0 on a second
#                  netdev of the same kind (dummy: "dummy1"; lo and nic: not supported) holding
#                  VM_SIW_ADDR (default 169.254.77.2): rdma_cm picks the device by the
#                  address, so a test chooses it by the address it listens on / connects to.
#                  The command sees RXE_DEV=rxe0 RXE_ADDR, SIW_DEV=siw0 SIW_ADDR,
#                  RDMA_DEV="rxe0 siw0", RDMA_TYPE=both.
#   VM_SIW_ADDR    siw0's address with VM_RDMA=both (default 169.254.77.2)
#   VM_RXE_NETDEV  netdev for rxe0: dummy (default) | lo | none
#                  dummy: a dummy device "dummy0" holding VM_RXE_ADDR/32 (default
#                  169.254.77.1, link-local, exists only inside the NIC-less guest;
#                  a dummy device drops anything it transmits, rxe short-cuts
#                  same-device traffic internally).  Raw verbs, rdma_cm and
#                  libfabric verbs (msg + rxm) all work.
#                  lo: rxe0 on the loopback device; raw verbs (ibv_*, perftest
#                  without -R) work, but rdma_cm (rping, ucmatose, libfabric
#                  verbs) fails with ENODEV.
#                  none: no rxe device (plain VM).
#                  nic: rxe0 on the guest's virtio NIC (needs VM_NIC), which holds
#                  VM_RXE_ADDR/VM_RXE_PREFIX: traffic really crosses a link.
#   VM_RXE_ADDR    IPv4 address for dummy0 or the NIC (default 169.254.77.1).  Do not use
#                  127.x: rdma_cm rejects loopback-range addresses.
#   VM_RXE_PREFIX  prefix length of VM_RXE_ADDR on the NIC (default 24)
#   VM_RXE_PEER    an address the command is told about as RXE_PEER_ADDR (the other node)
#   VM_NIC         a qemu -netdev spec without id, e.g. "socket,udp=127.0.0.1:P1,localaddr=
#                  127.0.0.1:P0": the guest gets ONE virtio NIC (netdev id nic0) on it; empty
#                  (default): no NIC at all.  contrib/vm/two-node.sh links two guests so.
#   VM_NIC_MAC     its MAC address (default 52:54:00:77:00:01)
#   VM_MONITOR     PATH: a qemu human monitor on the FIFOs PATH.in (commands, e.g.
#                  "set_link nic0 off") and PATH.out (replies, drained into PATH.log)
#   VM_PIDFILE     PATH: qemu writes its pid there (to kill the node)
#   VM_HOSTNAME    the guest's host name (default vm-rxe)
#   VM_APPEND      more kernel command line for the guest (e.g. "idle=poll")
#   VM_PIN_VCPUS   1: pin vCPU thread n to host CPU n (mod the host's CPUs).  On a small host
#                  the scheduler may put a waking vCPU beside the busy one; pinned, two
#                  spinning vCPUs share their cores with qemu's other threads instead
#                  (test/bench/bench-all.sh says what each costs; make bench does not pin).
#   VM_ROOT        DIR: the guest's root file system instead of the host's "/" (read-only,
#                  same tmpfs overlay), e.g. the Debian 13 root of contrib/debian13/mkroot.sh.
#                  The kernel and the initramfs modules stay the host's; DIR needs bash,
#                  iproute2 (ip, rdma), the rdma-core user space and /usr/lib/modules/<ver>.
#                  Inside the guest the command sees RXE_DEV=rxe0 (siw0 with VM_RDMA=siw),
#                  RXE_NETDEV and RXE_ADDR (the address to listen on / connect to), and
#                  the same under generic names: RDMA_DEV, RDMA_TYPE (rxe|siw).
#   VM_CACHE       cache dir for the initramfs (default ${XDG_CACHE_HOME:-$HOME/.cache}/vm-rxe)
#   VM_VERBOSE=1   print the guest setup log, timings and the kernel log tail to stderr
#   VM_KEEP=1      keep the per-run control dir (path printed to stderr)
set -u -o pipefail

die() { echo "run-in-vm: $*" >&2; exit 125; }
log() { [ "${VM_VERBOSE:-0}" = 1 ] && echo "run-in-vm: $*" >&2; return 0; }

[ "${1:-}" = "--" ] && shift
[ $# -ge 1 ] || die "usage: $0 [--] CMD [ARGS...]"

QEMU=${QEMU:-qemu-system-x86_64}
command -v "$QEMU" >/dev/null || die "$QEMU not found (apt-get install qemu-system-x86)"
BUSYBOX=${BUSYBOX:-/bin/busybox}
# (grep reads the whole list: with -q it may exit first, and pipefail would report the
# SIGPIPE of busybox as a missing switch_root)
[ -x "$BUSYBOX" ] && "$BUSYBOX" --list 2>/dev/null | grep -x switch_root >/dev/null ||
  die "static busybox not found at $BUSYBOX (apt-get install busybox-static)"
file_is_static() { ! LC_ALL=C ldd "$1" >/dev/null 2>&1; }
file_is_static "$BUSYBOX" || die "$BUSYBOX is dynamically linked; install busybox-static"

# ---------------------------------------------------------------- kernel
if [ -z "${VM_KERNEL_VER:-}" ]; then
  for d in $(ls -1d /lib/modules/*/ 2>/dev/null | sort -rV); do
    v=$(basename "$d")
    if [ -f "/boot/vmlinuz-$v" ] && find "$d" -name 'rdma_rxe.ko*' | grep . >/dev/null; then
      VM_KERNEL_VER=$v; break
    fi
  done
fi
[ -n "${VM_KERNEL_VER:-}" ] || die "no kernel with rdma_rxe found (apt-get install linux-image-amd64)"
KVER=$VM_KERNEL_VER
KERNEL=/boot/vmlinuz-$KVER
[ -r "$KERNEL" ] || die "$KERNEL not readable"

# ---------------------------------------------------------------- initramfs (cached)
CACHE=${VM_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/vm-rxe}
mkdir -p "$CACHE" || die "cannot create $CACHE"
# modules loaded by the initramfs (with their dependencies, in order)
MODULES="virtio_pci 9pnet_virtio 9p overlay virtio_console virtio_net rdma_rxe rdma_ucm dummy"
RDMA_TYPE=${VM_RDMA:-rxe}
SIW_KO=
case $RDMA_TYPE in
  rxe) ;;
  siw)  # built out of tree (Debian's kernel has none), loaded last, after its dependencies
    SIW_KO=$(VM_KERNEL_VER=$KVER VM_CACHE=$CACHE "$(dirname "$0")/build-siw.sh") ||
      die "VM_RDMA=siw: no siw.ko for kernel $KVER (build-siw.sh said why above)"
    MODULES="$MODULES iw_cm $(modinfo -F depends "$SIW_KO" | tr , ' ')" ;;
  both)  # rxe0 and siw0 side by side, each on its own dummy netdev
    case ${VM_RXE_NETDEV:-dummy} in
      dummy) ;;
      *) die "VM_RDMA=both needs VM_RXE_NETDEV=dummy (two dummy netdevs, one address each)" ;;
    esac
    SIW_KO=$(VM_KERNEL_VER=$KVER VM_CACHE=$CACHE "$(dirname "$0")/build-siw.sh") ||
      die "VM_RDMA=both: no siw.ko for kernel $KVER (build-siw.sh said why above)"
    MODULES="$MODULES iw_cm $(modinfo -F depends "$SIW_KO" | tr , ' ')" ;;
  *) die "VM_RDMA=$RDMA_TYPE: rxe, siw or both" ;;
esac
SELF_SUM=$( { echo "$MODULES"; [ -z "$SIW_KO" ] || md5sum < "$SIW_KO"
  sed -n '/^#==INIT-BEGIN/,/^#==INIT-END/p' "$0"; } | md5sum | cut -c1-8)
INITRD=$CACHE/initrd-$KVER-$SELF_SUM${SIW_KO:+-siw}.cpio.gz

build_initrd() {
  local t; t=$(mktemp -d) || die "mktemp failed"
  mkdir -p "$t"/{bin,proc,sys,dev,mods,lower,ovl,newroot,ctl}
  cp "$BUSYBOX" "$t/bin/busybox"
  : > "$t/mods/order"
  local m line path args deps
  deps=$(for m in $MODULES; do modprobe -S "$KVER" --show-depends "$m" || exit 1; done) ||
    die "modprobe -S $KVER --show-depends failed (is kmod installed, /lib/modules/$KVER/modules.dep present?)"
  while read -r line; do
    case $line in
      insmod\ *) ;;
      *) continue ;;  # builtin
    esac
    path=$(echo "$line" | awk '{print $2}')
    args=$(echo "$line" | cut -d' ' -f3-)
    grep -q "^$(basename "$path") " "$t/mods/order" && continue
    case $path in
      *.ko) cp "$path" "$t/mods/" ;;
      *.ko.xz) xz -dc "$path" > "$t/mods/$(basename "$path" .xz)"; path=${path%.xz} ;;
      *.ko.zst) zstd -qdc "$path" > "$t/mods/$(basename "$path" .zst)"; path=${path%.zst} ;;
      *.ko.gz) gzip -dc "$path" > "$t/mods/$(basename "$path" .gz)"; path=${path%.gz} ;;
      *) false ;;
    esac || die "cannot copy module $path"
    echo "$(basename "$path") $args" >> "$t/mods/order"
  done <<< "$deps"
  if [ -n "$SIW_KO" ]; then
    cp "$SIW_KO" "$t/mods/siw.ko" && echo "siw.ko " >> "$t/mods/order" || die "cannot copy $SIW_KO"
  fi
  # extract the init script embedded below
  sed -n '/^#==INIT-BEGIN/,/^#==INIT-END/p' "$0" | sed '1d;$d' > "$t/init"
  chmod 755 "$t/init"
  (cd "$t" && find . | cpio -o -H newc --quiet | gzip -1) > "$INITRD.tmp.$$" &&
    mv "$INITRD.tmp.$$" "$INITRD" || die "building initramfs failed"
  rm -rf "$t"
  # drop initramfs images of older versions of this script
  find "$CACHE" -maxdepth 1 -name "initrd-$KVER-*${SIW_KO:+-siw}.cpio.gz" ! -name "${INITRD##*/}" -mmin +60 -delete 2>/dev/null
}
[ -s "$INITRD" ] && [ "$INITRD" -nt "$KERNEL" ] || build_initrd

# ---------------------------------------------------------------- per-run control dir
CTL=$(mktemp -d "${TMPDIR:-/tmp}/vm-rxe.XXXXXX") || die "mktemp failed"
cleanup() { if [ "${VM_KEEP:-0}" = 1 ]; then echo "run-in-vm: kept $CTL" >&2; else rm -rf "$CTL"; fi; }
trap cleanup EXIT

WORKDIR=$PWD
ROOTFS=${VM_ROOT:-/}
if [ "$ROOTFS" != / ]; then
  ROOTFS=$(cd "$ROOTFS" && pwd -P) || die "VM_ROOT=$VM_ROOT is not a directory"
  [ -x "$ROOTFS/bin/bash" ] || die "VM_ROOT=$ROOTFS has no /bin/bash (not a root file system?)"
  [ -d "$ROOTFS/usr/lib/modules/$KVER" ] || [ -d "$ROOTFS/lib/modules/$KVER" ] ||
    echo "run-in-vm: warning: VM_ROOT=$ROOTFS has no modules for kernel $KVER" >&2
fi
RXE_ADDR=${VM_RXE_ADDR:-169.254.77.1}
if [ -z "${VM_SHARE:-}" ]; then
  # the folder that holds the git checkout (so the clone, its build dirs and a
  # sibling such as ../shared are visible), the checkout itself if it sits
  # directly under /, else $PWD
  top=$(cd "$WORKDIR" && git rev-parse --show-toplevel 2>/dev/null || true)
  if [ -n "$top" ]; then
    top=$(cd "$top" && pwd -P)
    if [ "$(dirname "$top")" != / ]; then VM_SHARE=$(dirname "$top"); else VM_SHARE=$top; fi
  else
    VM_SHARE=$WORKDIR
  fi
fi
VM_SHARE=$(cd "$VM_SHARE" && pwd -P) || die "VM_SHARE not a directory"
[ "$VM_SHARE" != / ] || die "VM_SHARE=/ is not supported"

{
  printf 'SHARE=%q\n' "$VM_SHARE"
} > "$CTL/vm.conf"

# host environment for the command (minus things that make no sense in the guest)
export -p | grep -vE '^declare -x (BASH_[A-Z_]*|SHLVL|PWD|OLDPWD|_|HOSTNAME|DISPLAY|WAYLAND_DISPLAY|SSH_[A-Z_]*|XDG_RUNTIME_DIR|DBUS_SESSION_BUS_ADDRESS|TERM|VM_[A-Z_]*)(=|$)' \
  > "$CTL/env.sh"
cmd=("$@")
{
  declare -p cmd
  printf 'WORKDIR=%q\n' "$WORKDIR"
  printf 'vm_rdma_type=%q\n' "$RDMA_TYPE"
  printf 'RXE_NETDEV=%q\n' "${VM_RXE_NETDEV:-dummy}"
  printf 'RXE_ADDR=%q\n' "$RXE_ADDR"
  printf 'SIW_ADDR=%q\n' "${VM_SIW_ADDR:-169.254.77.2}"
  printf 'RXE_PREFIX=%q\n' "${VM_RXE_PREFIX:-24}"
  printf 'RXE_PEER_ADDR=%q\n' "${VM_RXE_PEER:-}"
  printf 'VM_HOSTNAME=%q\n' "${VM_HOSTNAME:-}"
} > "$CTL/cmd.sh"

cat > "$CTL/guest.sh" <<'GUEST'
#!/bin/bash
# Runs as PID 1 inside the guest (the host's bash, via switch_root).
C=/run/vmctl
exec 0</dev/null >>"$C/setup.log" 2>&1
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
bye() {  # record status and power off; never returns (PID 1 must not exit)
  read -r up _ < /proc/uptime; echo "$up" > "$C/t_end"
  echo "$1" > "$C/rc"
  sync
  umount "$SHARE" 2>/dev/null
  echo o > /proc/sysrq-trigger
  sleep 60
}
source "$C/vm.conf"
source "$C/cmd.sh"
# /dev/pts, /dev/shm, host name, lo and the virtio-serial output ports
# (VMRXE_OUT / VMRXE_ERR; ports, not consoles: no tty processing) were set up
# by the initramfs.
OUT=${VMRXE_OUT:-}; ERR=${VMRXE_ERR:-}
[ -n "$OUT" ] && [ -n "$ERR" ] || { echo "vm-rxe: no output ports"; echo x > "$C/setup_failed"; bye 125; }
unset VMRXE_OUT VMRXE_ERR
ulimit -l unlimited
[ -n "$VM_HOSTNAME" ] && echo "$VM_HOSTNAME" > /proc/sys/kernel/hostname
vm_dev=${vm_rdma_type}0   # rxe0 or siw0 (lower case: the host environment sourced below keeps them)
vm_type=$vm_rdma_type
[ "$vm_rdma_type" = both ] && vm_dev=rxe0 vm_type=rxe   # and siw0 on dummy1, below
# wait_active DEV: until its port is ACTIVE (normally at once)
wait_active() {
  local i st=
  for i in $(seq 50); do
    read -r st < "/sys/class/infiniband/$1/ports/1/state" 2>/dev/null
    case $st in *ACTIVE*) return 0 ;; esac
    sleep 0.1
  done
  echo "$1 port state: $st"; return 1
}
setup_rxe() {
  set -x
  case $RXE_NETDEV in
    dummy)
      ip link add dummy0 type dummy &&
      ip addr add "$RXE_ADDR/32" dev dummy0 &&
      ip link set dummy0 up &&
      rdma link add "$vm_dev" type "$vm_type" netdev dummy0 || return 1
      if [ "$vm_rdma_type" = both ]; then
        ip link add dummy1 type dummy &&
        ip addr add "$SIW_ADDR/32" dev dummy1 &&
        ip link set dummy1 up &&
        rdma link add siw0 type siw netdev dummy1 &&
        wait_active siw0 || return 1
      fi ;;
    lo)
      RXE_ADDR=127.0.0.1
      rdma link add "$vm_dev" type "$vm_type" netdev lo || return 1 ;;
    nic)  # the one virtio NIC (its kernel name: the netdev that has a device)
      local n nic=
      for n in /sys/class/net/*; do [ -e "$n/device" ] && nic=${n##*/} && break; done
      [ -n "$nic" ] || { echo "VM_RXE_NETDEV=nic but the guest has no NIC (VM_NIC unset?)"; return 1; }
      RXE_NETDEV=$nic
      ip addr add "$RXE_ADDR/$RXE_PREFIX" dev "$nic" &&
      ip link set "$nic" up &&
      rdma link add "$vm_dev" type "$vm_type" netdev "$nic" || return 1 ;;
    none) return 0 ;;
    *) echo "unknown VM_RXE_NETDEV=$RXE_NETDEV"; return 1 ;;
  esac
  local rc=0
  wait_active "$vm_dev" || rc=1
  rdma link show; ip -br addr
  [ $rc = 0 ] && [ -c /dev/infiniband/uverbs0 ] && [ -c /dev/infiniband/rdma_cm ]
}
setup_rxe; setup_rc=$?
{ set +x; } 2>/dev/null
if [ "$setup_rc" != 0 ]; then
  echo "vm-rxe: $vm_dev setup failed" > "$C/setup_failed"
  bye 125
fi
read -r up _ < /proc/uptime; echo "$up" > "$C/t_start"
(
  source "$C/env.sh"
  export RXE_DEV=$vm_dev RXE_NETDEV RXE_ADDR RDMA_DEV=$vm_dev RDMA_TYPE=$vm_rdma_type
  [ "$vm_rdma_type" = both ] && export SIW_DEV=siw0 SIW_ADDR RDMA_DEV="rxe0 siw0"
  [ -n "$RXE_PEER_ADDR" ] && export RXE_PEER_ADDR
  cd "$WORKDIR" || { echo "run-in-vm: cannot cd to $WORKDIR in the guest (not under VM_SHARE=$SHARE and hidden by a guest tmpfs?)" >&2; exit 125; }
  exec "${cmd[@]}"
) </dev/null >"$OUT" 2>"$ERR"
bye $?
GUEST
chmod 755 "$CTL/guest.sh"

# ---------------------------------------------------------------- qemu
MEM=${VM_MEM:-2G}
CPUS=${VM_CPUS:-2}
APPEND="console=ttyS0 loglevel=4 quiet panic=-1 mitigations=off random.trust_cpu=on tsc=reliable rdinit=/init${VM_APPEND:+ $VM_APPEND}"

qemu_args() {  # $1 = accel
  local accel=$1 cpu=max
  [ "$accel" = kvm ] && cpu=host
  echo -nodefaults -no-user-config -machine pc -accel "$accel" -cpu "$cpu" -m "$MEM" -smp "$CPUS"
}

common=(
  -kernel "$KERNEL" -initrd "$INITRD" -append "$APPEND"
  -display none -monitor none -no-reboot -name vwait,debug-threads=on
  -serial "file:$CTL/kernel.log"
  -device virtio-serial-pci
  -chardev "pipe,id=out,path=$CTL/out" -device virtserialport,chardev=out,name=vmrxe.out
  -chardev "pipe,id=err,path=$CTL/err" -device virtserialport,chardev=err,name=vmrxe.err
  -fsdev "local,id=fsroot,path=$ROOTFS,security_model=none,readonly=on,multidevs=remap"
  -device virtio-9p-pci,fsdev=fsroot,mount_tag=hostroot
  -fsdev "local,id=fsshare,path=$VM_SHARE,security_model=passthrough,multidevs=remap"
  -device virtio-9p-pci,fsdev=fsshare,mount_tag=vmshare
  -fsdev "local,id=fsctl,path=$CTL,security_model=passthrough"
  -device virtio-9p-pci,fsdev=fsctl,mount_tag=vmctl
)

if [ -n "${VM_NIC:-}" ]; then
  common+=(-netdev "$VM_NIC,id=nic0" -device "virtio-net-pci,netdev=nic0,mac=${VM_NIC_MAC:-52:54:00:77:00:01}")
fi
if [ -n "${VM_MONITOR:-}" ]; then
  rm -f "$VM_MONITOR.in" "$VM_MONITOR.out"
  mkfifo "$VM_MONITOR.in" "$VM_MONITOR.out" || die "mkfifo $VM_MONITOR.{in,out} failed"
  common+=(-chardev "pipe,id=mon,path=$VM_MONITOR" -mon chardev=mon,mode=readline)
fi
[ -n "${VM_PIDFILE:-}" ] && common+=(-pidfile "$VM_PIDFILE")

ACCEL=${VM_ACCEL:-auto}
if [ "$ACCEL" = auto ]; then
  ACCEL=tcg
  # KVM only helps if a guest really boots with it (nested PVM/odd hosts hang).
  if [ -w /dev/kvm ] && grep -qE 'vmx|svm' /proc/cpuinfo; then ACCEL=kvm; fi
fi

# one VM at a time on this host: wait for any other run of this script
LOCK=${VM_LOCK:-/tmp/vwait-vm.lock}
if [ "$LOCK" != none ] && command -v flock >/dev/null; then
  # another user's lock file may be read-only for us: flock works on a read fd too
  { exec 9>>"$LOCK" && chmod a+rw "$LOCK"; } 2>/dev/null || exec 9<"$LOCK" || die "cannot open lock file $LOCK"
  if ! flock -n 9; then
    echo "run-in-vm: another VM is running on this host; waiting for $LOCK" >&2
    flock -w "${VM_LOCK_WAIT:-1800}" 9 || die "gave up waiting for $LOCK after ${VM_LOCK_WAIT:-1800}s"
  fi
fi

TIMEOUT=${VM_TIMEOUT:-1200}
log "kernel $KVER, accel $ACCEL, mem $MEM, cpus $CPUS, share $VM_SHARE, cwd $WORKDIR"
# guest stdout/stderr: virtio-serial port -> qemu pipe chardev -> FIFO -> cat.
# (qemu opens the FIFOs read-write, so a port never looks "closed" to the
# guest; a stdio chardev with stdin at EOF would block the guest's writes.)
mkfifo "$CTL/out.in" "$CTL/out.out" "$CTL/err.in" "$CTL/err.out" || die "mkfifo failed"
cat "$CTL/out.out" &
outpid=$!
cat "$CTL/err.out" >&2 &
errpid=$!
monpid=
if [ -n "${VM_MONITOR:-}" ]; then cat "$VM_MONITOR.out" > "$VM_MONITOR.log" & monpid=$!; fi
t0=$(date +%s.%N)
# shellcheck disable=SC2046
timeout -k 10 "$TIMEOUT" "$QEMU" $(qemu_args "$ACCEL") "${common[@]}" </dev/null &
qpid=$!
# VM_PIN_VCPUS=1: each vCPU thread ("CPU n/TCG", named by debug-threads) on host CPU n mod the
# host's count, once qemu started them (within 30 s)
pin_vcpus() {
  local q= t c n host i
  host=$(nproc)
  for i in $(seq 300); do
    q=$(pgrep -P "$qpid" | head -n 1)
    if [ -n "$q" ]; then
      n=0
      for t in /proc/"$q"/task/*; do
        c=$(cat "$t/comm" 2>/dev/null) || continue
        case $c in
        "CPU "*/*) c=${c#CPU }; c=${c%%/*}
          taskset -pc $((c % host)) "${t##*/}" >/dev/null 2>&1 && n=$((n + 1)) ;;
        esac
      done
      [ "$n" -ge "$CPUS" ] && { log "pinned $n vCPU threads to host CPUs"; return 0; }
    fi
    sleep 0.1
  done
  echo "run-in-vm: VM_PIN_VCPUS: found no vCPU threads to pin" >&2
}
[ "${VM_PIN_VCPUS:-0}" = 1 ] && pin_vcpus &
# timeout(1) sits in its own process group: forward our INT/TERM/HUP to it
trap 'kill -TERM "$qpid" 2>/dev/null' INT TERM HUP
while :; do
  wait "$qpid"; qrc=$?
  kill -0 "$qpid" 2>/dev/null || break
done
trap - INT TERM HUP
t1=$(date +%s.%N)
# each cat ends at EOF once qemu closed its FIFO; if qemu never opened it, stop it
for _ in $(seq 50); do
  kill -0 "$outpid" 2>/dev/null || kill -0 "$errpid" 2>/dev/null || break; sleep 0.1
done
kill "$outpid" "$errpid" $monpid 2>/dev/null; wait "$outpid" "$errpid" $monpid 2>/dev/null

dump_logs() {
  echo "----- guest setup log -----" >&2; cat "$CTL/setup.log" >&2 2>/dev/null
  echo "----- kernel log (tail) -----" >&2; tail -n 40 "$CTL/kernel.log" >&2 2>/dev/null
}
if [ "${VM_VERBOSE:-0}" = 1 ]; then
  dump_logs
  if [ -f "$CTL/t_start" ] && [ -f "$CTL/t_end" ]; then
    awk -v t0="$t0" -v t1="$t1" -v s="$(cat "$CTL/t_start")" -v e="$(cat "$CTL/t_end")" 'BEGIN{
      w=t1-t0; c=e-s;
      printf "run-in-vm: wall %.2fs; guest uptime at command start %.2fs; command %.2fs; boot+teardown overhead %.2fs\n", w, s, c, w-c }' >&2
  fi
fi
if [ "$qrc" = 124 ] || [ "$qrc" = 137 ]; then
  echo "run-in-vm: timed out after ${TIMEOUT}s" >&2; dump_logs; exit 124
fi
if [ ! -f "$CTL/rc" ]; then
  echo "run-in-vm: guest did not report an exit status (qemu rc=$qrc)" >&2; dump_logs; exit 125
fi
if [ -f "$CTL/setup_failed" ]; then
  echo "run-in-vm: guest setup failed; command not run" >&2; dump_logs; exit 125
fi
exit "$(cat "$CTL/rc")"

# ------------------------------------------------------------------------------
# initramfs /init (busybox sh); extracted by build_initrd
#==INIT-BEGIN
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
fail() { echo "vm-init: $*" > /dev/ttyS0; echo o > /proc/sysrq-trigger; sleep 30; }
while read -r m args; do
  insmod "/mods/$m" $args || echo "vm-init: insmod $m failed" > /dev/ttyS0
done < /mods/order
O=trans=virtio,version=9p2000.L,msize=512000
mount -t 9p -o "$O" vmctl /ctl || fail "mount vmctl failed"
. /ctl/vm.conf
mount -t 9p -o "$O,ro,cache=loose" hostroot /lower || fail "mount hostroot failed"
mount -t tmpfs -o mode=755 tmpfs /ovl
mkdir -p /ovl/upper /ovl/work
if ! mount -t overlay -o lowerdir=/lower,upperdir=/ovl/upper,workdir=/ovl/work overlay /newroot; then
  echo "vm-init: overlay failed, using read-only root" > /dev/ttyS0
  mount --bind /lower /newroot
  mount -t tmpfs tmpfs /newroot/var/tmp
fi
mount -t tmpfs -o mode=1777 tmpfs /newroot/tmp
mount -t tmpfs -o mode=755 tmpfs /newroot/run
mkdir -p /newroot/run/vmctl
mount --move /ctl /newroot/run/vmctl
mkdir -p "/newroot$SHARE"
mount -t 9p -o "$O,cache=mmap" vmshare "/newroot$SHARE" || fail "mount vmshare failed"
# basic /dev, host name, loopback, output ports: done here with static busybox
# from RAM, which is much cheaper under TCG than exec'ing host binaries over 9p
mkdir -p /dev/pts /dev/shm
mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts /dev/pts
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
ln -sfn /proc/self/fd /dev/fd; ln -sfn fd/0 /dev/stdin; ln -sfn fd/1 /dev/stdout; ln -sfn fd/2 /dev/stderr
[ -e /dev/ptmx ] || ln -sfn pts/ptmx /dev/ptmx
hostname vm-rxe
ip link set lo up
for n in /sys/class/virtio-ports/*/name; do
  read -r pn < "$n"; d=${n%/name}; d=/dev/${d##*/}
  case $pn in vmrxe.out) export VMRXE_OUT=$d ;; vmrxe.err) export VMRXE_ERR=$d ;; esac
done
mount --move /dev /newroot/dev
mount --move /proc /newroot/proc
mount --move /sys /newroot/sys
exec switch_root /newroot /bin/bash /run/vmctl/guest.sh
#==INIT-END
