#!/usr/bin/env bash
# Builds the binaries the local cluster harness (test/cluster) runs, from the
# pinned Go modules under test/{k8s-tools,provisioner-tools,etcd-tools}, into
# $HPP_CACHE/<set>/<version>/ — outside the repository, so a fresh clone (CI)
# reuses them. A set already complete in the cache is skipped; a cold build
# prints what it builds and the elapsed time, because it takes minutes.
#
# Usage: hack/cluster-binaries.sh [k8s] [csi-provisioner] [etcd]   (default: all)
# Prints nothing else on stdout than progress; `--print-env` prints the
# HPP_*_DIR variables test/cluster reads instead of building.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
HPP_CACHE=${HPP_CACHE:-$HOME/.cache/hpp}

K8S_VERSION=v1.37.1
PROVISIONER_VERSION=v6.3.0
ETCD_VERSION=v3.6.16

K8S_DIR=$HPP_CACHE/k8s/$K8S_VERSION
PROVISIONER_DIR=$HPP_CACHE/csi-provisioner/$PROVISIONER_VERSION
ETCD_DIR=$HPP_CACHE/etcd/$ETCD_VERSION

K8S_BINS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)

if [[ ${1:-} == --print-env ]]; then
  echo "HPP_K8S_DIR=$K8S_DIR"
  echo "HPP_CSI_PROVISIONER_DIR=$PROVISIONER_DIR"
  echo "HPP_ETCD_DIR=$ETCD_DIR"
  exit 0
fi

complete() { # dir bin...
  local dir=$1; shift
  local b
  for b in "$@"; do [[ -x $dir/$b ]] || return 1; done
}

# build NAME MODDIR DESTDIR LDFLAGS OUT=PKG... — one `go build` for all the
# packages of a set, so shared dependencies compile once; the result lands in
# a temporary directory and is renamed into place, so an interrupted build
# never leaves a half set that a later run would take as complete.
build() {
  local name=$1 moddir=$2 dest=$3 ldflags=$4; shift 4
  local tmp
  mkdir -p "$(dirname "$dest")"
  tmp=$(mktemp -d "$dest.tmp.XXXXXX")
  chmod 755 "$tmp"
  BUILD_TMP=$tmp # removed by the EXIT trap if the build does not finish
  local pkgs=() outs=() spec
  for spec in "$@"; do outs+=("${spec%%=*}"); pkgs+=("${spec#*=}"); done
  echo "==> building $name (${outs[*]}) into $dest — cold builds take minutes on 2 cores"
  local start=$SECONDS log=$tmp/build.log
  (
    cd "$moddir"
    GOWORK=off CGO_ENABLED=0 go build -v -trimpath -ldflags "$ldflags" -o "$tmp/" "${pkgs[@]}"
  ) >"$log" 2>&1 &
  local pid=$!
  # A loop that reports progress until the build ends; `go build -v` prints
  # one line per compiled package, which is the only progress measure Go gives.
  while kill -0 "$pid" 2>/dev/null; do
    sleep 15
    kill -0 "$pid" 2>/dev/null || break
    printf '    %s: %dm%02ds elapsed, %d packages compiled\n' "$name" \
      $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60)) "$(grep -vc '^go: ' "$log" || true)"
  done
  if ! wait "$pid"; then
    echo "==> building $name FAILED after $((SECONDS - start))s; last lines of the build log:" >&2
    tail -n 40 "$log" >&2
    rm -rf "$tmp"
    return 1
  fi
  local i
  for i in "${!pkgs[@]}"; do
    local built=$tmp/$(basename "${pkgs[$i]}")
    # `go build -o dir/` names a binary after its package path's last element.
    if [[ $(basename "${pkgs[$i]}") =~ ^v[0-9]+$ ]]; then
      built=$tmp/$(basename "$(dirname "${pkgs[$i]}")")
    fi
    [[ -x $built ]] || { echo "==> $name: $built missing after the build" >&2; rm -rf "$tmp"; return 1; }
    [[ $built == "$tmp/${outs[$i]}" ]] || mv "$built" "$tmp/${outs[$i]}"
  done
  rm -f "$log"
  rm -rf "$dest"
  mv "$tmp" "$dest"
  BUILD_TMP=
  echo "==> built $name in $((SECONDS - start))s"
}

k8s() {
  if complete "$K8S_DIR" "${K8S_BINS[@]}"; then
    echo "==> k8s $K8S_VERSION binaries cached in $K8S_DIR"; return
  fi
  local major minor v=${K8S_VERSION#v}
  major=${v%%.*}; minor=${v#*.}; minor=${minor%%.*}
  local cb=k8s.io/component-base/version cg=k8s.io/client-go/pkg/version ld="-s -w" p
  for p in $cb $cg; do
    ld+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=$major -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
  local specs=() b
  for b in "${K8S_BINS[@]}"; do specs+=("$b=k8s.io/kubernetes/cmd/$b"); done
  build "k8s $K8S_VERSION" "$ROOT/test/k8s-tools" "$K8S_DIR" "$ld" "${specs[@]}"
}

provisioner() {
  if complete "$PROVISIONER_DIR" csi-provisioner; then
    echo "==> csi-provisioner $PROVISIONER_VERSION cached in $PROVISIONER_DIR"; return
  fi
  build "csi-provisioner $PROVISIONER_VERSION" "$ROOT/test/provisioner-tools" "$PROVISIONER_DIR" \
    "-s -w -X main.version=$PROVISIONER_VERSION" \
    "csi-provisioner=github.com/kubernetes-csi/external-provisioner/v6/cmd/csi-provisioner"
}

etcd() {
  if complete "$ETCD_DIR" etcd; then
    echo "==> etcd $ETCD_VERSION cached in $ETCD_DIR"; return
  fi
  # etcd's version string is a constant in its source; nothing to stamp.
  build "etcd $ETCD_VERSION" "$ROOT/test/etcd-tools" "$ETCD_DIR" "-s -w" \
    "etcd=go.etcd.io/etcd/server/v3"
}

BUILD_TMP=
trap '[[ -z $BUILD_TMP ]] || rm -rf "$BUILD_TMP"' EXIT

sets=("$@")
((${#sets[@]})) || sets=(k8s csi-provisioner etcd)
for s in "${sets[@]}"; do
  case $s in
    k8s) k8s ;;
    csi-provisioner) provisioner ;;
    etcd) etcd ;;
    *) echo "unknown binary set $s (want k8s, csi-provisioner or etcd)" >&2; exit 2 ;;
  esac
done
