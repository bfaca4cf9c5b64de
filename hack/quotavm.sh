#!/usr/bin/env bash
# Runs Go test binaries as root inside a small VM whose kernel has project
# quotas, for the node tests that need them (XFS prjquota, ext4 project
# quota) on machines whose own kernel cannot give them.
#
#   hack/quotavm.sh [-t TIMEOUT] [-f FILE]... [-i FILE:PATH]... [-e NAME=VALUE]...
#                   [-m MODULE]... [-s SCRIPT] [-R] TESTBIN... [-- TEST FLAGS...]
#
# -f copies FILE into the VM as /quotavm/files/<its name> (a binary the
# tests start, e.g. hpp-csi; its libraries come along); -i copies FILE to
# the absolute PATH in the VM (its libraries come along); -e sets an
# environment variable for the tests (CI is passed on as the host has it);
# -m loads one of the optional kernel modules (overlay, bridge, veth);
# -s runs SCRIPT in the guest as root before the tests (a non-zero exit
# stops the VM); -R first moves the guest's root from the initramfs to a
# tmpfs (runc cannot pivot_root out of an initramfs).
# Each TESTBIN (a `go test -c` binary; static, or dynamic with its libraries
# found by ldd) runs in turn in one VM, in a directory of its own, as
# `TESTBIN -test.v -test.count=1 [TEST FLAGS]`; its output is printed live.
# The script exits with the first non-zero exit status of the binaries, or
# non-zero if the VM does not boot or report in time (the console's last lines,
# kernel messages included, and qemu's stderr are printed with the error), or
# when hack/tier-count.sh finds that no test ran, or fewer than test/tiers.txt
# declares for the tier HPP_TIER_NAME.
#
# What it makes and where (never in git; all of it is made again when missing):
#   $HPP_CACHE/quotavm/<kernel version>/vmlinuz     Debian's kernel (apt-get download)
#   $HPP_CACHE/quotavm/<kernel version>/base.cpio   busybox, mkfs.xfs, mkfs.ext4,
#       losetup, mount, xfs_quota, xfs_io, the kernel modules for loop, xfs,
#       ext4 and the quota formats, and /init
#   _output/quotavm/initrd.img                      base.cpio + the test binaries
# Debian packages it needs (qemu-system-x86, busybox-static, xfsprogs,
# e2fsprogs, util-linux, mount) are installed when missing, as root.
#
# Without a prerequisite (not root and a package missing, no package index)
# it prints the reason and exits 0 (skipped); under CI=true it fails.
#
# Environment:
#   HPP_QUOTAVM_KERNEL_PKG  Debian package whose kernel boots the VM; a
#                           metapackage is resolved to its image package
#                           (default linux-image-cloud-amd64: Debian's 6.1
#                           kernel for VMs, XFS_QUOTA=y, QFMT_V2=m, and it
#                           boots faster under emulation than linux-image-amd64)
#   HPP_QUOTAVM_MEM         guest memory (default 2G: the loop images and what
#                           is written to them live in it; qemu takes host
#                           memory only as the guest touches it)
#   HPP_QUOTAVM_SMP         guest CPUs (default 1; qemu runs one thread each).
#                           One, not 2: until 2026-11-29 the guest booted
#                           with acpi=off and so had one CPU whatever this
#                           said; with two, on this 2-core machine shared
#                           with other runs, the cluster tier's cluster took
#                           6 min 15 s to be ready against 4 min 42 s with
#                           one (each vCPU thread preempted on the host while
#                           the other spins, and MTTCG's cross-CPU work)
#   HPP_QUOTAVM_TIMEOUT     seconds the whole VM may run (default 600; -t too)
#   HPP_QUOTAVM_BOOT_TIMEOUT seconds until the guest's init must report (default
#                           300: 20 s on a machine with 2 busy cores, more
#                           when it is overloaded)
#   HPP_QUOTAVM_TB_SIZE     MiB of TCG's translated-code cache (default:
#                           qemu's, 1 GiB); when it fills, qemu drops every
#                           translation and translates again
#   HPP_QUOTAVM_QEMU_ARGS   more qemu flags, split at blanks (e.g. a
#                           -chardev/-mon pair: a monitor socket to read
#                           TCG's `info jit` from during a run)
#   HPP_QUOTAVM_STALL       seconds of console silence before the kernel runs
#                           /init after which qemu is killed and booted again,
#                           3 boots at most (default 60; see "stalled" below)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cache=${HPP_CACHE:-$HOME/.cache/hpp}/quotavm
out=$root/_output/quotavm
kernel_pkg=${HPP_QUOTAVM_KERNEL_PKG:-linux-image-cloud-amd64}
mem=${HPP_QUOTAVM_MEM:-2G}
smp=${HPP_QUOTAVM_SMP:-1}
timeout_s=${HPP_QUOTAVM_TIMEOUT:-600}
boot_timeout_s=${HPP_QUOTAVM_BOOT_TIMEOUT:-300}
# Modules the guest loads (with their dependencies) when the kernel does not
# have them built in: loop devices, the two filesystems, the quota file
# formats ext4's hidden quota inodes use, and crc32c for XFS v5 and ext4
# metadata checksums (libcrc32c asks the crypto API for it by name).
modules=(loop xfs ext4 quota_v2 quota_tree crc32c_generic)
# Modules the initramfs carries but the guest loads only when a run asks
# (-m): containerd's overlayfs snapshotter, the CNI bridge and its veths.
optional_modules=(overlay bridge veth)
# Programs copied into the guest with the libraries ldd names for them.
programs=(mkfs.xfs xfs_quota xfs_io xfs_db mkfs.ext4 mke2fs tune2fs dumpe2fs losetup mount umount blkid)

log() { echo "quotavm: $*" >&2; }
# shell_quote S: S in single quotes for the guest's busybox sh.
shell_quote() { printf "'%s'" "${1//\'/\'\\\'\'}"; }
die() { log "error: $*"; exit 1; }
# missing: a prerequisite this machine lacks. Skip (exit 0) with the reason,
# except under CI=true, where a skipped tier would pass without running.
missing() {
  if [[ ${CI:-} == true ]]; then die "prerequisite missing under CI=true: $*"; fi
  log "SKIP: prerequisite missing: $*"
  exit 0
}

usage() { sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

bins=()
files=()
installs=()
extra_modules=()
setup_script=
switch_root=
envs=()
test_args=()
while (($#)); do
  case $1 in
    -t) timeout_s=${2:?-t needs seconds}; shift 2 ;;
    -f) files+=("${2:?-f needs a file}"); shift 2 ;;
    -i) [[ ${2:-} =~ ^[^:]+:/.+ ]] || die "-i needs FILE:/PATH, got '${2:-}'"
        installs+=("$2"); shift 2 ;;
    -m) [[ " ${optional_modules[*]} " == *" ${2:-} "* ]] || die "-m ${2:-}: not one of the optional modules (${optional_modules[*]})"
        extra_modules+=("$2"); shift 2 ;;
    -s) setup_script=${2:?-s needs a script}; shift 2 ;;
    -R) switch_root=1; shift ;;
    -e) [[ ${2:-} =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || die "-e needs NAME=VALUE, got '${2:-}'"
        envs+=("$2"); shift 2 ;;
    -h|--help) usage ;;
    --) shift; test_args=("$@"); break ;;
    -*) log "unknown option $1"; usage ;;
    *) bins+=("$1"); shift ;;
  esac
done
((${#bins[@]})) || usage
for b in "${bins[@]}"; do
  [[ -f $b && -x $b ]] || die "test binary $b: not an executable file"
done
for f in "${files[@]}"; do
  [[ -f $f ]] || die "-f $f: not a file"
done
for f in "${installs[@]}"; do
  [[ -f ${f%%:*} ]] || die "-i ${f%%:*}: not a file"
done
[[ -z $setup_script || -f $setup_script ]] || die "-s $setup_script: not a file"
for v in timeout_s boot_timeout_s smp; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer, got '${!v}'"
done

# --- Debian packages -------------------------------------------------------
declare -A need=(
  [qemu-system-x86_64]=qemu-system-x86
  [/bin/busybox]=busybox-static
  [mkfs.xfs]=xfsprogs
  [xfs_quota]=xfsprogs
  [mkfs.ext4]=e2fsprogs
  [losetup]=mount
  [blkid]=util-linux
)
pkgs=()
for probe in "${!need[@]}"; do
  if [[ $probe == /* ]]; then [[ -e $probe ]] && continue
  else PATH=$PATH:/usr/sbin:/sbin command -v "$probe" >/dev/null 2>&1 && continue; fi
  pkgs+=("${need[$probe]}")
done
apt_updated=
apt_update() {
  [[ -n $apt_updated ]] && return
  log "apt-get update"
  apt-get update -qq || missing "apt-get update failed: no Debian package index"
  apt_updated=1
}
if ((${#pkgs[@]})); then
  mapfile -t pkgs < <(printf '%s\n' "${pkgs[@]}" | sort -u)
  [[ $(id -u) == 0 ]] || missing "Debian packages ${pkgs[*]} are not installed and installing them needs root"
  apt_update
  log "installing ${pkgs[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >&2 ||
    missing "apt-get install ${pkgs[*]} failed"
fi
export PATH=$PATH:/usr/sbin:/sbin

# --- the kernel ------------------------------------------------------------
# image_pkg: the linux-image-<version> package that kernel_pkg stands for.
resolve_image_pkg() {
  local p=$kernel_pkg dep
  for _ in 1 2 3; do
    if [[ $p =~ ^linux-image-[0-9] ]]; then echo "$p"; return 0; fi
    dep=$(apt-cache depends "$p" 2>/dev/null | awk '$1 == "Depends:" && $2 ~ /^linux-image-/ {print $2; exit}')
    [[ -n $dep ]] || return 1
    p=$dep
  done
  return 1
}
image_pkg=$(resolve_image_pkg) || {
  apt_update
  image_pkg=$(resolve_image_pkg) || missing "Debian has no kernel package for $kernel_pkg (apt-cache depends $kernel_pkg)"
}
kver=${image_pkg#linux-image-}
dir=$cache/$kver
mkdir -p "$dir" "$out"
exec 9>"$dir/.lock"
flock 9 # one build of a kernel's files at a time

if [[ ! -s $dir/vmlinuz || ! -d $dir/modules/lib/modules/$kver ]]; then
  log "downloading $image_pkg (Debian's kernel for the VM; once per kernel version)"
  # In the system's temporary directory: apt's sandbox user (_apt) must
  # reach the directory it downloads into, and $HOME may be closed to it.
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  chmod 0777 "$tmp"
  (cd "$tmp" && apt-get download -qq "$image_pkg" >&2) || {
    apt_update
    (cd "$tmp" && apt-get download -qq "$image_pkg" >&2) || missing "apt-get download $image_pkg failed"
  }
  deb=$(ls "$tmp"/*.deb)
  mkdir "$tmp/x"
  dpkg-deb -x "$deb" "$tmp/x"
  rm -rf "$dir/modules"
  mkdir -p "$dir/modules/lib/modules"
  mv "$tmp/x/lib/modules/$kver" "$dir/modules/lib/modules/"
  cp "$tmp/x/boot/config-$kver" "$dir/config"
  cp "$tmp/x/boot/vmlinuz-$kver" "$dir/vmlinuz.tmp"
  mv "$dir/vmlinuz.tmp" "$dir/vmlinuz"
  rm -rf "$tmp"
  trap - EXIT
fi
for opt in CONFIG_QUOTA CONFIG_XFS_QUOTA CONFIG_QFMT_V2 CONFIG_BLK_DEV_INITRD CONFIG_SERIAL_8250_CONSOLE; do
  grep -Eq "^$opt=[ym]" "$dir/config" || die "kernel $kver lacks $opt (in $dir/config); choose another HPP_QUOTAVM_KERNEL_PKG"
done

# --- the base initramfs ----------------------------------------------------
# Rebuilt when this script or a program copied into it changes.
recipe=$( { sha256sum <"$0"; dpkg-query -W busybox-static xfsprogs e2fsprogs mount util-linux 2>/dev/null; } | sha256sum | cut -c1-16)
if [[ ! -s $dir/base.cpio || $(cat "$dir/base.stamp" 2>/dev/null) != "$recipe" ]]; then
  log "assembling the initramfs for $kver in $dir"
  stage=$(mktemp -d "$dir/.stage.XXXXXX")
  trap 'rm -rf "$stage"' EXIT
  mkdir -p "$stage"/{bin,sbin,usr/bin,usr/sbin,lib,lib64,etc,proc,sys,dev,tmp,run,root,quotavm}
  cp /bin/busybox "$stage/bin/busybox"
  for applet in $(/bin/busybox --list); do
    [[ -e $stage/bin/$applet ]] || ln -s busybox "$stage/bin/$applet"
  done
  ln -sf ../bin/busybox "$stage/sbin/modprobe"
  ln -sf ../bin/busybox "$stage/sbin/insmod"
  # copy_with_libs FILE: FILE and every library ldd names for it, at the
  # same paths (the dynamic loader included).
  copy_with_libs() {
    local f=$1 lib
    mkdir -p "$stage$(dirname "$f")"
    cp -L "$f" "$stage$f"
    while read -r lib; do
      [[ -e $stage$lib ]] && continue
      mkdir -p "$stage$(dirname "$lib")"
      cp -L "$lib" "$stage$lib"
    done < <(ldd "$f" 2>/dev/null | grep -oE '/[^ ]+\.so[^ ]*' || true)
  }
  for p in "${programs[@]}"; do
    path=$(command -v "$p") || die "$p not found after installing the Debian packages"
    copy_with_libs "$(readlink -f "$path")"
    # Reach it by its own name too (mkfs.ext4 is a link to mke2fs).
    [[ -e $stage/usr/sbin/$p ]] || ln -s "$(readlink -f "$path")" "$stage/usr/sbin/$p"
  done
  [[ -f /etc/mke2fs.conf ]] && cp /etc/mke2fs.conf "$stage/etc/"
  echo "root:x:0:0:root:/root:/bin/sh" >"$stage/etc/passwd"
  echo "root:x:0:" >"$stage/etc/group"

  # Modules: each wanted one that is not built in, with its dependencies.
  mroot=$dir/modules/lib/modules/$kver
  declare -A picked=()
  pick_module() {
    local name=$1 f dep
    [[ -n ${picked[$name]:-} ]] && return 0
    picked[$name]=1
    # modules.builtin and file names spell '-' and '_' either way.
    local pat=${name//[-_]/[-_]}
    if grep -Eq "/${pat}\.ko$" "$mroot/modules.builtin"; then return 0; fi
    f=$(cd "$mroot" && find kernel -regextype egrep -regex ".*/${pat}\.ko(\.xz|\.zst)?" | head -1)
    [[ -n $f ]] || die "kernel $kver has no module $name (neither built in nor in $mroot)"
    # The depends= entry of the module's .modinfo section.
    for dep in $(tr '\0' '\n' <"$mroot/$f" | sed -n 's/^depends=//p' | head -1 | tr ',' ' '); do
      pick_module "$dep"
    done
    mkdir -p "$stage/lib/modules/$kver/$(dirname "$f")"
    case $f in
      *.xz) xz -dc "$mroot/$f" >"$stage/lib/modules/$kver/${f%.xz}" ;;
      *.zst) zstd -qdc "$mroot/$f" >"$stage/lib/modules/$kver/${f%.zst}" ;;
      *) cp "$mroot/$f" "$stage/lib/modules/$kver/$f" ;;
    esac
  }
  for m in "${modules[@]}" "${optional_modules[@]}"; do pick_module "$m"; done
  cp "$mroot/modules.builtin" "$mroot/modules.order" "$stage/lib/modules/$kver/" 2>/dev/null || true
  /bin/busybox depmod -b "$stage" "$kver"
  printf '%s\n' "${modules[@]}" >"$stage/etc/quotavm-modules"

  cat >"$stage/init" <<'INIT'
#!/bin/sh
# PID 1 of the quota VM: load the modules, run every test binary under
# /quotavm/tests in order, report, power off. The host reads the markers.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TMPDIR=/tmp
# -R: the same init again on a tmpfs root (runc's pivot_root refuses the
# initramfs, which is no mount).
if [ -f /quotavm/switchroot ] && [ ! -e /.quotavm-switched ]; then
  mkdir /newroot && mount -t tmpfs -o mode=0755 tmpfs /newroot
  for e in /*; do
    case $e in /proc|/sys|/dev|/tmp|/run|/newroot) mkdir -p "/newroot$e" ;; *) cp -a "$e" /newroot/ ;; esac
  done
  : >/newroot/.quotavm-switched
  exec switch_root /newroot /init
fi
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
# The loop images live here, in the guest's memory (sparse: only what is
# written counts).
mount -t tmpfs -o mode=1777,size=75% tmpfs /tmp
mkdir -p /dev/pts /dev/shm && mount -t devpts devpts /dev/pts
echo /sbin/modprobe >/proc/sys/kernel/modprobe
# A reset, which -no-reboot turns into qemu's exit (with or without ACPI).
finish() { echo "QUOTAVM-EXIT=$1"; sync; reboot -f; sleep 5; }
for m in $(cat /etc/quotavm-modules); do
  if grep -q "/$m.ko" /lib/modules/$(uname -r)/modules.dep 2>/dev/null; then
    modprobe "$m" || { echo "quotavm: modprobe $m failed"; finish 125; }
  fi
done
for m in $(cat /quotavm/modules 2>/dev/null); do
  modprobe "$m" || { echo "quotavm: modprobe $m failed"; finish 125; }
done
[ -e /dev/loop-control ] || { echo "quotavm: no /dev/loop-control after loading loop"; finish 125; }
dmesg -n 4
read up _ </proc/uptime
# CPUs and clocksource: with one CPU or the jiffies clocksource (every
# clock read a system call, the guest's clock falling behind) a cluster in
# the VM runs several times slower; the host's log shows them.
echo "QUOTAVM-BOOTED kernel=$(uname -r) uptime=${up}s cpus=$(grep -c ^processor /proc/cpuinfo) clocksource=$(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)"
[ -f /quotavm/env ] && . /quotavm/env
args=""
[ -f /quotavm/args ] && args=$(cat /quotavm/args)
dmesg -c >/dev/null
if [ -x /quotavm/setup ]; then
  /quotavm/setup </dev/null 2>&1 || { echo "quotavm: the setup script failed: exit $?"; finish 125; }
fi
rc=0
for t in /quotavm/tests/*; do
  [ -x "$t" ] || continue
  name=$(basename "$t")
  mkdir -p "/run/$name" && cd "/run/$name"
  echo "QUOTAVM-TEST-START $name"
  # shellcheck disable=SC2086 # the flags are one a word by construction
  "$t" -test.v -test.count=1 $args </dev/null 2>&1
  r=$?
  echo "QUOTAVM-TEST-END $name exit=$r"
  [ $r -ne 0 ] && [ $rc -eq 0 ] && rc=$r
  cd /
done
echo "QUOTAVM-KERNEL-LOG-START"
dmesg | sed 's/^/kernel: /'
echo "QUOTAVM-KERNEL-LOG-END"
finish $rc
INIT
  chmod 0755 "$stage/init"
  (cd "$stage" && find . -mindepth 1 | LC_ALL=C sort | /bin/busybox cpio -o -H newc -R 0:0 2>/dev/null) >"$dir/base.cpio.tmp"
  mv "$dir/base.cpio.tmp" "$dir/base.cpio"
  echo "$recipe" >"$dir/base.stamp"
  rm -rf "$stage"
  trap - EXIT
  log "initramfs: $(du -h "$dir/base.cpio" | cut -f1) ($(find "$dir/base.cpio" -printf '%s') bytes)"
fi
exec 9>&-

# --- this run's initramfs: base + the test binaries -----------------------
run=$(mktemp -d "$out/.run.XXXXXX")
trap 'rm -rf "$run"' EXIT
mkdir -p "$run/root/quotavm/tests"
mkdir -p "$run/root/quotavm/files"
# add_libs FILE: a dynamic binary (-race, cgo) brings its libraries.
add_libs() {
  local lib
  while read -r lib; do
    [[ -e $run/root$lib ]] && continue
    mkdir -p "$run/root$(dirname "$lib")"
    cp -L "$lib" "$run/root$lib"
  done < <(ldd "$1" 2>/dev/null | grep -oE '/[^ ]+\.so[^ ]*' || true)
}
i=0
for b in "${bins[@]}"; do
  i=$((i + 1))
  name=$(printf '%02d-%s' "$i" "$(basename "$b")")
  cp "$b" "$run/root/quotavm/tests/$name"
  add_libs "$b"
done
for f in "${files[@]}"; do
  cp "$f" "$run/root/quotavm/files/"
  add_libs "$f"
done
for f in "${installs[@]}"; do
  src=${f%%:*} dest=${f#*:}
  mkdir -p "$run/root$(dirname "$dest")"
  cp -L "$src" "$run/root$dest"
  add_libs "$src"
done
((${#extra_modules[@]})) && printf '%s\n' "${extra_modules[@]}" >"$run/root/quotavm/modules"
[[ -n $setup_script ]] && install -m 0755 "$setup_script" "$run/root/quotavm/setup"
[[ -n $switch_root ]] && : >"$run/root/quotavm/switchroot"
printf '%s\n' "${test_args[@]}" >"$run/root/quotavm/args"
# The guest sees CI as the host does: a missing prerequisite in there fails too.
{
  printf 'export CI=%s\n' "$(shell_quote "${CI:-}")"
  for e in "${envs[@]}"; do
    printf 'export %s=%s\n' "${e%%=*}" "$(shell_quote "${e#*=}")"
  done
} >"$run/root/quotavm/env"
(cd "$run/root" && find . -mindepth 1 | LC_ALL=C sort | /bin/busybox cpio -o -H newc -R 0:0 2>/dev/null) >"$run/tests.cpio"
cat "$dir/base.cpio" "$run/tests.cpio" >"$out/initrd.img"
rm -rf "$run/root"

# --- boot ------------------------------------------------------------------
console=$out/console.log
qemu_err=$out/qemu.stderr
: >"$console"
now_ms() { echo $(($(date +%s%N) / 1000000)); }
secs() { printf '%d.%d' $(($1 / 1000)) $(($1 % 1000 / 100)); }
log "booting kernel $kver under qemu (TCG, $smp CPUs, $mem; timeout ${timeout_s}s) with ${#bins[@]} test binaries; console: $console"
# No crypto self-tests, mitigations, timer checks or PCI (the serial port
# is ISA; nothing else is attached): seconds each under emulation and
# nothing the tests depend on. ACPI stays on: without it (acpi=off until
# 2026-11-29) the guest has no HPET and no ACPI PM timer, the TSC cannot be
# calibrated when the PIT calibration fails under a busy host ("No reference
# (HPET/PMTIMER) available", "Marking TSC unstable"), and the kernel falls
# back to the jiffies clocksource: every clock read a system call instead
# of the vDSO, 4 ms resolution, and the guest's clock losing ticks (5 of
# 26 minutes in one cluster-tier run). With ACPI the HPET calibrates the
# TSC and the clocksource is tsc (the guest's init prints it). Debian's
# cloud kernel also has no MP-table support, so without ACPI it brings up
# one CPU whatever -smp says. SeaBIOS, qemu's default firmware,
# stays: qboot gives no MP table, and without it the kernel hangs before its
# first message.
# Every kernel message goes to the console log (the error shows its tail when
# the VM fails to boot); only the lines after the guest's init reports are
# printed live, and init lowers the console level so the kernel's messages
# come after the tests' output (dumped from dmesg), not inside it.
append="console=ttyS0 panic=-1 loglevel=7 rdinit=/init mitigations=off cryptomgr.notests"
append+=" tsc=reliable no_timer_check edd=off pci=off i8042.noaux i8042.nokbd"
# A kernel that stops printing before it runs /init is stalled, not slow:
# with ACPI and two CPUs under TCG one boot in eight hung after "sched_clock:
# Marking stable" (2026-11-29, base initramfs alone: 7 of 8 booted in 6-15
# s). Until the kernel's "Run /init" line, a silence of stall_s seconds
# restarts qemu, at most boot_attempts times in all. The longest quiet
# stretch of a healthy boot is the unpacking of the initramfs (12 s for the
# cluster tier's 830 MB on 2026-11-29, with the machine busy).
stall_s=${HPP_QUOTAVM_STALL:-60}
# HPP_QUOTAVM_QEMU_ARGS: more qemu flags, one a word (e.g. a monitor socket
# to read TCG's `info jit` while a run goes on).
read -r -a qemu_extra <<<"${HPP_QUOTAVM_QEMU_ARGS:-}"
boot_attempts=3
mkfifo "$run/console"
start=$(now_ms)
attempt=0
while :; do
  attempt=$((attempt + 1))
  timeout -k 10 "$timeout_s" qemu-system-x86_64 \
    -nodefaults -nographic -no-reboot -monitor none -serial stdio -nic none \
    -machine pc -accel "tcg,thread=multi${HPP_QUOTAVM_TB_SIZE:+,tb-size=$HPP_QUOTAVM_TB_SIZE}" -cpu max -smp "$smp" -m "$mem" \
    -kernel "$dir/vmlinuz" -initrd "$out/initrd.img" -append "$append" "${qemu_extra[@]}" \
    </dev/null >"$run/console" 2>"$qemu_err" &
  qpid=$!
  exec 8<"$run/console"
  booted='' exit_rc='' killed='' partial='' initran='' tstart=$start heard=$(now_ms)
  while :; do
    if IFS= read -r -t 5 line <&8; then
      heard=$(now_ms)
      line=${partial}${line%$'\r'}
      partial=
      printf '%s\n' "$line" >>"$console"
      case $line in
        *"Run /init as init process"*) initran=1 ;;
        QUOTAVM-BOOTED*)
          booted=$(now_ms)
          log "${line#QUOTAVM-BOOTED }; boot took $(secs $((booted - start)))s on the host" ;;
        QUOTAVM-TEST-START\ *)
          tstart=$(now_ms)
          log "running ${line#QUOTAVM-TEST-START } in the VM" ;;
        QUOTAVM-TEST-END\ *)
          log "${line#QUOTAVM-TEST-END } after $(secs $(($(now_ms) - tstart)))s" ;;
        QUOTAVM-KERNEL-LOG-START) log "what the VM's kernel printed during the tests:" ;;
        QUOTAVM-KERNEL-LOG-END) ;;
        QUOTAVM-EXIT=*)
          exit_rc=${line#QUOTAVM-EXIT=}
          log "the tests took $(secs $(($(now_ms) - ${booted:-$start})))s in the VM" ;;
        *) [[ -n $booted ]] && printf '%s\n' "$line" ;;
      esac
    elif (($? > 128)); then
      # No full line within 5 s: keep what came.
      [[ -n $line ]] && heard=$(now_ms)
      partial+=$line
    else
      [[ -n $partial ]] && printf '%s\n' "$partial" | tee -a "$console"
      break
    fi
    if [[ -z $booted && -z $killed ]] && (($(now_ms) - start > boot_timeout_s * 1000)); then
      killed=boot
      kill "$qpid" 2>/dev/null || true
    fi
    if [[ -z $initran && -z $killed ]] && (($(now_ms) - heard > stall_s * 1000)); then
      killed=stall
      kill "$qpid" 2>/dev/null || true
    fi
  done
  exec 8<&-
  if [[ $killed != stall ]] || ((attempt >= boot_attempts)); then break; fi
  wait "$qpid" 2>/dev/null || true
  log "the kernel printed nothing for ${stall_s}s before running /init (attempt $attempt of $boot_attempts): booting again; its last lines:"
  tail -n 3 "$console" | sed 's/^/  | /' >&2
  echo "quotavm: stalled kernel killed after ${stall_s}s of silence; attempt $((attempt + 1))" >>"$console"
done
set +e
wait "$qpid"
qemu_rc=$?
set -e
fail() {
  log "error: $*"
  log "last console lines (kernel messages included), from $console:"
  tail -n 40 "$console" | sed 's/^/  | /' >&2
  if [[ -s $qemu_err ]]; then log "qemu's stderr:"; sed 's/^/  | /' "$qemu_err" >&2; fi
  exit 1
}
if [[ -z $exit_rc ]]; then
  if [[ $killed == stall ]]; then
    fail "the VM's kernel printed nothing for ${stall_s}s before running /init, $boot_attempts boots in a row (HPP_QUOTAVM_STALL raises the silence allowed)"
  fi
  if [[ $killed == boot ]]; then
    fail "the VM's init did not report within ${boot_timeout_s}s of starting qemu (HPP_QUOTAVM_BOOT_TIMEOUT raises it)"
  fi
  if ((qemu_rc == 124 || qemu_rc == 137)); then
    fail "the VM did not finish within ${timeout_s}s (HPP_QUOTAVM_TIMEOUT or -t raise it)"
  fi
  fail "the VM stopped (qemu exit status $qemu_rc) without reporting the tests' exit status"
fi
[[ $exit_rc =~ ^[0-9]+$ ]] || fail "the VM reported a malformed exit status '$exit_rc'"
log "total $(secs $(($(now_ms) - start)))s (kernel $kver); the tests' exit status: $exit_rc"
# Count the tests the binaries ran (their -test.v lines are in the console
# log): none, a -test.run name that did not run, or fewer than test/tiers.txt
# declares for $HPP_TIER_NAME (make sets it) fails the tier.
if [[ $exit_rc == 0 ]]; then
  "$root/hack/tier-count.sh" "${HPP_TIER_NAME:-}" "$console" \
    "$("$root/hack/tier-count.sh" --run-pattern "${test_args[@]}")" || exit 1
fi
exit "$exit_rc"
