#!/usr/bin/env bash
# A cgroup2 kernel for resctl-bench's io.cost benches, on a host that keeps
# its controllers on cgroup1 (or has no io.cost): a QEMU guest booting
# Debian's own cloud kernel with cgroup v1 switched off (cgroup_no_v1=all),
# a busybox initramfs and a sparse ext4 scratch disk on virtio-blk.
#
#   bash deploy/cgroup2-guest.sh setup
#       installs QEMU, busybox and e2fsprogs from apt and downloads the
#       kernel package (apt-get download; unpacked into the cache, never
#       installed on the host).
#   bash deploy/cgroup2-guest.sh check
#       exit 0 when `run` can start a guest here (what the tests ask).
#   bash deploy/cgroup2-guest.sh run [OPTIONS] BINARY -- 'COMMANDS'
#       boots the guest with BINARY on its PATH as `rackbench` (and as
#       `resctl-bench` and `rd-hashd`), fio beside it, the scratch disk
#       mounted at /mnt/scratch and cgroup2 at /sys/fs/cgroup with cpu, io,
#       memory and pids enabled for its children; runs COMMANDS with sh -e,
#       prints the guest's console and exits with their exit status.
#     --mem MIB       guest memory (default 3072)
#     --cpus N        guest CPUs (default 2)
#     --disk SIZE     scratch disk size, sparse (default 8G)
#     --out DIR       afterwards, copy the guest's /mnt/scratch/out to DIR
#     --timeout SECS  kill the guest after SECS (default 1800): exit 124
#     --rotational    leave the disk rotational (by default the guest
#                     writes 0 to /sys/block/vda/queue/rotational: the
#                     image lives on the host's disk, virtio-blk reports 1)
#
# KVM is used where it works; where /dev/kvm is missing, not accessible,
# or PVM (a software KVM that runs only PVM-enabled guest kernels), QEMU
# emulates the CPU (TCG): both host cores busy and 50-100x slower, so a
# figure measured in such a guest says nothing about the device. It
# checks behaviour. RACKBENCH_GUEST_ACCEL=kvm|tcg forces the choice.
#
# Files: RACKBENCH_GUEST_CACHE (default /var/tmp/rackbench-guest) holds
# the kernel; each run works in a fresh temporary directory under it and
# removes it.
set -euo pipefail

cache="${RACKBENCH_GUEST_CACHE:-/var/tmp/rackbench-guest}"
kpkg="${RACKBENCH_GUEST_KERNEL_PKG:-linux-image-cloud-amd64}"

die() {
  echo "cgroup2-guest: $*" >&2
  exit 2
}

# The kernel's version directory under $cache/kernel/lib/modules, or "".
kernel_version() {
  local d
  for d in "$cache"/kernel/lib/modules/*; do
    [ -d "$d" ] && [ -n "$(ls "$cache"/kernel/boot/vmlinuz-"$(basename "$d")" 2>/dev/null)" ] && {
      basename "$d"
      return
    }
  done
  echo ""
}

qemu_bin() {
  command -v qemu-system-x86_64 || true
}

busybox_bin() {
  local b
  for b in /bin/busybox /usr/bin/busybox; do
    # A static busybox: the initramfs has no loader for a dynamic one
    # unless the binary's libraries are copied (they are, but keep it lean).
    [ -x "$b" ] && { echo "$b"; return; }
  done
  command -v busybox || true
}

# Why `run` cannot start here ("" when it can).
why_not() {
  [ "$(uname -m)" = x86_64 ] || { echo "the guest runner is for x86_64 hosts (this is $(uname -m))"; return; }
  [ -n "$(qemu_bin)" ] || { echo "qemu-system-x86_64 is not installed (bash deploy/cgroup2-guest.sh setup)"; return; }
  [ -n "$(busybox_bin)" ] || { echo "busybox is not installed (bash deploy/cgroup2-guest.sh setup)"; return; }
  command -v mkfs.ext4 >/dev/null || { echo "mkfs.ext4 is not installed (e2fsprogs)"; return; }
  command -v debugfs >/dev/null || { echo "debugfs is not installed (e2fsprogs)"; return; }
  command -v cpio >/dev/null || { echo "cpio is not installed"; return; }
  [ -n "$(kernel_version)" ] || { echo "no guest kernel in $cache/kernel (bash deploy/cgroup2-guest.sh setup)"; return; }
  echo ""
}

setup() {
  [ "$(id -u)" = 0 ] || die "setup installs packages with apt: run it as root"
  local need=()
  [ -n "$(qemu_bin)" ] || need+=(qemu-system-x86)
  [ -x /bin/busybox ] || need+=(busybox-static)
  command -v mkfs.ext4 >/dev/null || need+=(e2fsprogs)
  command -v cpio >/dev/null || need+=(cpio)
  command -v fio >/dev/null || need+=(fio)
  if [ "${#need[@]}" -gt 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  fi
  if [ -z "$(kernel_version)" ]; then
    mkdir -p "$cache/dl"
    # The meta package names the current kernel image package.
    local img
    img="$(apt-cache depends "$kpkg" 2>/dev/null | awk '/Depends: linux-image-/ {print $2; exit}')"
    [ -n "$img" ] || {
      apt-get update -qq
      img="$(apt-cache depends "$kpkg" | awk '/Depends: linux-image-/ {print $2; exit}')"
    }
    [ -n "$img" ] || die "apt does not know $kpkg"
    (cd "$cache/dl" && apt-get download "$img" 2>&1 | grep -v 'unsandboxed' || true)
    local deb
    deb="$(ls "$cache"/dl/"$img"_*.deb 2>/dev/null | head -1)"
    [ -n "$deb" ] || die "apt-get download $img wrote no package"
    rm -rf "$cache/kernel.tmp"
    dpkg-deb -x "$deb" "$cache/kernel.tmp"
    rm -rf "$cache/kernel"
    mv "$cache/kernel.tmp" "$cache/kernel"
    rm -f "$deb"
  fi
  local kv
  kv="$(kernel_version)"
  grep -q '^CONFIG_BLK_CGROUP_IOCOST=y' "$cache/kernel/boot/config-$kv" ||
    die "kernel $kv has no io.cost (CONFIG_BLK_CGROUP_IOCOST)"
  echo "cgroup2-guest: ready: kernel $kv, $(qemu_bin), accel $(accel)"
}

# kvm where it works, else tcg.
accel() {
  case "${RACKBENCH_GUEST_ACCEL:-}" in
    kvm | tcg)
      echo "$RACKBENCH_GUEST_ACCEL"
      return
      ;;
    "") ;;
    *) die "RACKBENCH_GUEST_ACCEL=$RACKBENCH_GUEST_ACCEL: expected kvm or tcg" ;;
  esac
  if [ -r /dev/kvm ] && [ -w /dev/kvm ] && [ ! -d /sys/module/kvm_pvm ] &&
    { [ -d /sys/module/kvm_intel ] || [ -d /sys/module/kvm_amd ]; }; then
    echo kvm
  else
    echo tcg
  fi
}

# Copies FILE and the shared libraries it loads into ROOT (same paths).
copy_with_libs() {
  local root="$1" file="$2" lib
  mkdir -p "$root$(dirname "$file")"
  cp -L "$file" "$root$file"
  ldd "$file" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' | while read -r lib; do
    [ -e "$root$lib" ] && continue
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
  done
}

# The kernel modules the guest needs (virtio-blk over PCI, loop for tests
# that want one), with their dependencies, in load order.
MODULES="virtio virtio_ring virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci virtio_blk loop"

run() {
  local mem=3072 cpus=2 disk=8G out="" timeout=1800 rotational=0
  while [ $# -gt 0 ]; do
    case "$1" in
      --mem) mem="$2"; shift 2 ;;
      --cpus) cpus="$2"; shift 2 ;;
      --disk) disk="$2"; shift 2 ;;
      --out) out="$2"; shift 2 ;;
      --timeout) timeout="$2"; shift 2 ;;
      --rotational) rotational=1; shift ;;
      --) die "run: BINARY comes before --" ;;
      -*) die "run: unknown option $1" ;;
      *) break ;;
    esac
  done
  [ $# -eq 3 ] && [ "$2" = "--" ] || die "usage: run [OPTIONS] BINARY -- 'COMMANDS' (options before BINARY, COMMANDS one word)"
  local bin="$1" cmds="$3"
  [ -x "$bin" ] || die "run: $bin is not an executable file"
  local why
  why="$(why_not)"
  [ -z "$why" ] || die "$why"
  local kv work
  kv="$(kernel_version)"
  mkdir -p "$cache"
  work="$(mktemp -d "$cache/run.XXXXXX")"
  # shellcheck disable=SC2064
  trap "rm -rf '$work'" EXIT

  # The initramfs: busybox, the modules, the binary and fio with their
  # libraries, and /init.
  local root="$work/root"
  mkdir -p "$root"/{bin,sbin,proc,sys,dev,tmp,mnt/scratch,lib/modules,usr/bin,etc}
  cp "$(busybox_bin)" "$root/bin/busybox"
  local applet
  for applet in sh mount umount mkdir cat echo insmod sleep poweroff sync ls grep sed awk \
    head tail wc cp rm mv ln df free ps kill dd test tr cut sort uniq seq date env id \
    chmod touch stat timeout printf true false mkswap swapon swapoff blockdev nproc uname find \
    fallocate truncate dmesg hexdump xxd basename dirname readlink sh; do
    ln -sf busybox "$root/bin/$applet"
  done
  local m f
  for m in $MODULES; do
    f="$(find "$cache/kernel/lib/modules/$kv" -name "$m.ko*" | head -1)"
    [ -n "$f" ] || continue # built in
    case "$f" in
      *.xz) xz -dc "$f" >"$root/lib/modules/$m.ko" ;;
      *.zst) zstd -qdc "$f" >"$root/lib/modules/$m.ko" ;;
      *) cp "$f" "$root/lib/modules/$m.ko" ;;
    esac
  done
  mkdir -p "$root/usr/local/bin"
  copy_with_libs "$root" "$(readlink -f "$bin")"
  mv "$root$(readlink -f "$bin")" "$root/usr/local/bin/rackbench"
  # Debug info only makes the initramfs larger (a test build's binary
  # carries hundreds of MB of it).
  if command -v strip >/dev/null; then
    strip --strip-debug "$root/usr/local/bin/rackbench" 2>/dev/null || true
  fi
  ln -sf rackbench "$root/usr/local/bin/resctl-bench"
  ln -sf rackbench "$root/usr/local/bin/rd-hashd"
  # What iocost-params needs (its DepsIoCostCoefGen sysreq): fio, and
  # findmnt and stdbuf as upstream's coefficient generator uses them.
  local tool
  for tool in fio findmnt stdbuf; do
    if command -v "$tool" >/dev/null; then
      copy_with_libs "$root" "$(command -v "$tool")"
    fi
  done
  # stdbuf preloads its library.
  if [ -e /usr/libexec/coreutils/libstdbuf.so ]; then
    copy_with_libs "$root" /usr/libexec/coreutils/libstdbuf.so
  fi
  printf '%s\n' "$cmds" >"$root/commands.sh"
  cat >"$root/init" <<EOF
#!/bin/sh
export PATH=/usr/local/bin:/usr/bin:/bin:/sbin HOME=/root TERM=dumb
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /tmp
# No modules.dep: insert in passes until each module's dependencies are in.
for pass in 1 2 3 4 5 6; do
  for m in $MODULES; do
    [ -f /lib/modules/\$m.ko ] && [ ! -d /sys/module/\$m ] && insmod /lib/modules/\$m.ko 2>/dev/null
  done
done
for m in $MODULES; do
  [ -f /lib/modules/\$m.ko ] && [ ! -d /sys/module/\$m ] && echo "guest: module \$m would not load" >&2
done
mount -t cgroup2 -o memory_recursiveprot cgroup2 /sys/fs/cgroup
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
echo '+cpu +io +memory +pids' >/sys/fs/cgroup/cgroup.subtree_control
i=0
while [ ! -b /dev/vda ] && [ \$i -lt 100 ]; do sleep 0.1; i=\$((i+1)); done
[ "$rotational" = 1 ] || echo 0 >/sys/block/vda/queue/rotational
mount -t ext4 /dev/vda /mnt/scratch || echo "guest: cannot mount the scratch disk" >&2
mkdir -p /mnt/scratch/out
echo "guest: up: kernel \$(uname -r), \$(nproc) CPUs, cgroup2 controllers: \$(cat /sys/fs/cgroup/cgroup.controllers)"
cd /mnt/scratch
sh -e /commands.sh
rc=\$?
echo "\$rc" >/mnt/scratch/.guest-rc
cd /
swapoff -a 2>/dev/null
sync
umount /mnt/scratch
echo "guest: commands exited with \$rc"
poweroff -f
EOF
  chmod +x "$root/init"
  (cd "$root" && find . | cpio -o -H newc --quiet >"$work/initrd")

  truncate -s "$disk" "$work/scratch.img"
  mkfs.ext4 -q -F -E lazy_itable_init=1,lazy_journal_init=1 "$work/scratch.img"

  local acc
  acc="$(accel)"
  local qargs=(-machine q35 -accel "$acc" -cpu max -smp "$cpus" -m "$mem"
    -nodefaults -no-reboot -display none -serial stdio -nic none
    -kernel "$cache/kernel/boot/vmlinuz-$kv" -initrd "$work/initrd"
    -append "console=ttyS0 cgroup_no_v1=all panic=-1 loglevel=4 rdinit=/init"
    -drive "file=$work/scratch.img,if=virtio,format=raw,cache=unsafe")
  echo "cgroup2-guest: booting kernel $kv ($acc, $cpus CPUs, ${mem}M, ${disk} scratch)" >&2
  local qrc=0
  timeout --kill-after=10 "$timeout" "$(qemu_bin)" "${qargs[@]}" </dev/null || qrc=$?
  if [ "$qrc" = 124 ] || [ "$qrc" = 137 ]; then
    echo "cgroup2-guest: the guest did not finish within ${timeout}s" >&2
    exit 124
  fi
  local rc
  rc="$(debugfs -R 'cat /.guest-rc' "$work/scratch.img" 2>/dev/null | tr -dc 0-9)"
  if [ -n "$out" ]; then
    mkdir -p "$out"
    if debugfs -R "rdump /out $work" "$work/scratch.img" >/dev/null 2>&1 && [ -d "$work/out" ]; then
      cp -a "$work/out/." "$out/"
    else
      echo "cgroup2-guest: could not copy the guest's /mnt/scratch/out" >&2
    fi
  fi
  if [ -z "$rc" ]; then
    echo "cgroup2-guest: the guest ended without an exit status (QEMU exited with $qrc)" >&2
    exit 125
  fi
  exit "$rc"
}

case "${1:-}" in
  setup) setup ;;
  check)
    why="$(why_not)"
    [ -z "$why" ] || { echo "$why"; exit 1; }
    echo "ok ($(accel))"
    ;;
  run)
    shift
    run "$@"
    ;;
  *)
    sed -n '2,33p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
