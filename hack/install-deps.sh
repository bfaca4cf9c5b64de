#!/usr/bin/env bash
# Installs the Debian packages hpp's tests and demo use, only when missing,
# so `make test` and `make demo` are the whole set-up on a fresh machine.
set -euo pipefail

declare -A need=(
  [mkfs.xfs]=xfsprogs
  [losetup]=mount
  [blkid]=util-linux
  [mkfs.ext4]=e2fsprogs
  [containerd]=containerd
  [runc]=runc
  [/usr/lib/cni/bridge]=containernetworking-plugins
  [/bin/busybox]=busybox-static
  [iptables]=iptables
  [conntrack]=conntrack
  [ip]=iproute2
)
missing=()
for probe in "${!need[@]}"; do
  if [[ $probe == /* ]]; then [[ -e $probe ]] && continue
  else command -v "$probe" >/dev/null 2>&1 && continue; fi
  missing+=("${need[$probe]}")
done
if ((${#missing[@]} == 0)); then
  echo "==> Debian packages present"
  exit 0
fi
if [[ $(id -u) != 0 ]]; then
  echo "==> missing packages ${missing[*]} and not root: tests that need them will skip and say so" >&2
  exit 0
fi
echo "==> installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
