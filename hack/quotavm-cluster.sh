#!/usr/bin/env bash
# Runs test/e2e scenarios on a one-node Kubernetes cluster inside the quota
# VM (hack/quotavm.sh), whose kernel has project quotas, so that the
# enforcing pools exist (e2e.PoolQuota: XFS mounted prjquota;
# e2e.PoolQuotaExt4: ext4 with project,quota mounted prjquota): issue 22's
# cluster-tier Proof on machines whose own kernel has no project quotas.
#
#   hack/quotavm-cluster.sh E2E_TEST HPP_CSI PAUSE [-- TEST FLAGS...]
#
# E2E_TEST is `go test -c ./test/e2e/`, HPP_CSI and PAUSE
# (test/images/pause) static builds; all three CGO_ENABLED=0 (the VM has no
# Go toolchain). The cluster binaries come from the cache (`make
# cluster-binaries`, at /cache in the VM, laid out as in $HPP_CACHE),
# containerd, runc, nsenter and the CNI plugins from Debian's packages
# (`make deps`), copied to the same paths with their libraries. In the VM
# test/cluster runs exactly as on a machine: hack/quotavm-node.sh gives the
# guest a node IP, cgroups and names; -R a tmpfs root runc can pivot from.
#
# Environment: HPP_QUOTAVM_MEM (default here 6G: the cluster's binaries,
# about 850 MB, live in guest memory next to what runs), HPP_QUOTAVM_TIMEOUT
# (default here 2400 s; a run took 7-8 min on 2026-11-27's machine, 17 to 27
# on this one when shared, 24 with ACPI; test/README.md "Where the time
# goes"), and
# hack/quotavm.sh's others.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cache=${HPP_CACHE:-$HOME/.cache/hpp}
log() { echo "quotavm-cluster: $*" >&2; }
die() { log "error: $*"; exit 1; }

(($# >= 3)) || { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
e2e=$1 hppcsi=$2 pause=$3
shift 3
[[ ${1:-} == -- ]] && shift

args=()
# in_cache FILE: FILE (under $cache) at the same place under /cache.
in_cache() {
  [[ $1 == "$cache"/* ]] || die "$1 is not under HPP_CACHE $cache"
  [[ -x $1 ]] || die "$1 missing: run make cluster-binaries"
  args+=(-i "$1:/cache${1#"$cache"}")
}
declare -A dirs=()
while IFS='=' read -r k v; do dirs[$k]=$v; done < <(HPP_CACHE=$cache "$root/hack/cluster-binaries.sh" --print-env)
for b in kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl; do in_cache "${dirs[HPP_K8S_DIR]}/$b"; done
in_cache "${dirs[HPP_ETCD_DIR]}/etcd"
in_cache "${dirs[HPP_CSI_PROVISIONER_DIR]}/csi-provisioner"
in_cache "${dirs[HPP_CSI_RESIZER_DIR]}/csi-resizer"
export PATH=$PATH:/usr/sbin:/sbin
for p in containerd ctr containerd-shim-runc-v2 runc nsenter; do
  path=$(command -v "$p") || die "$p not found: run make deps (containerd, runc, util-linux)"
  args+=(-i "$path:$path")
done
for p in bridge host-local loopback; do
  [[ -x /usr/lib/cni/$p ]] || die "/usr/lib/cni/$p missing: run make deps (containernetworking-plugins)"
  args+=(-i "/usr/lib/cni/$p:/usr/lib/cni/$p")
done

export HPP_QUOTAVM_MEM=${HPP_QUOTAVM_MEM:-6G}
exec "$root/hack/quotavm.sh" -t "${HPP_QUOTAVM_TIMEOUT:-2400}" "${args[@]}" \
  -f "$hppcsi" -f "$pause" \
  -e HPP_BIN_DIR=/quotavm/files -e HPP_CACHE=/cache -e HPP_TEST_TIER=e2e -e HPP_QUOTA_TIER=vm \
  -m overlay -m bridge -m veth -s "$root/hack/quotavm-node.sh" -R \
  "$e2e" -- "$@"
