#!/usr/bin/env bash
# Builds the binaries the local cluster harness (test/cluster) runs, from the
# pinned Go modules test/k8s-tools (Kubernetes, csi-provisioner, csi-resizer,
# the snapshotter and the conformance programs: one module, so their shared
# dependencies compile once) and test/etcd-tools, into
# $HPP_CACHE/<set>/<version>/ — outside the repository, so a fresh clone (CI)
# reuses them. A set already complete in the cache is skipped; a cold build
# prints what it builds and the elapsed time, because it takes minutes.
# The conformance set (e2e.test, agnhost, ginkgo, for test/conformance) is
# built only when asked for: it is big (e2e.test is ~150 MB) and only
# `make conformance` needs it.
#
# The snapshotter set is csi-snapshotter and snapshot-controller of
# external-snapshotter, with the snapshot CRDs of its client module in crd/.
#
# The csi-resizer set is external-resizer's csi-resizer (module path
# github.com/kubernetes-csi/external-resizer/v2; the path without /v2 is not
# served).
#
# Usage: hack/cluster-binaries.sh [k8s] [csi-provisioner] [csi-resizer] [etcd] [snapshotter] [conformance]
#        (default: k8s csi-provisioner csi-resizer etcd snapshotter)
# Prints nothing else on stdout than progress; `--print-env` prints the
# HPP_*_DIR variables test/cluster reads instead of building.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
HPP_CACHE=${HPP_CACHE:-$HOME/.cache/hpp}

K8S_VERSION=v1.37.1
PROVISIONER_VERSION=v6.4.0
ETCD_VERSION=v3.6.16
SNAPSHOTTER_VERSION=v8.7.0
RESIZER_VERSION=v2.3.0

K8S_DIR=$HPP_CACHE/k8s/$K8S_VERSION
PROVISIONER_DIR=$HPP_CACHE/csi-provisioner/$PROVISIONER_VERSION
RESIZER_DIR=$HPP_CACHE/csi-resizer/$RESIZER_VERSION
ETCD_DIR=$HPP_CACHE/etcd/$ETCD_VERSION
SNAPSHOTTER_DIR=$HPP_CACHE/external-snapshotter/$SNAPSHOTTER_VERSION
# Same k8s.io/kubernetes as the k8s set (one module), so its directory is
# named by the same version.
CONFORMANCE_DIR=$HPP_CACHE/conformance/$K8S_VERSION

K8S_BINS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl kube-proxy)
CONFORMANCE_BINS=(e2e.test agnhost ginkgo)

if [[ ${1:-} == --print-env ]]; then
  echo "HPP_K8S_DIR=$K8S_DIR"
  echo "HPP_CSI_PROVISIONER_DIR=$PROVISIONER_DIR"
  echo "HPP_CSI_RESIZER_DIR=$RESIZER_DIR"
  echo "HPP_ETCD_DIR=$ETCD_DIR"
  echo "HPP_CONFORMANCE_DIR=$CONFORMANCE_DIR"
  echo "HPP_SNAPSHOTTER_DIR=$SNAPSHOTTER_DIR"
  exit 0
fi

# One build at a time: make test's quota VM lane (hack/run-tiers.sh) asks
# for these binaries beside the cluster tiers, and two go builds writing one
# set would each see the other's half-written files.
mkdir -p "$HPP_CACHE"
exec 9>"$HPP_CACHE/.cluster-binaries.lock"
flock 9

complete() { # dir bin...
  local dir=$1; shift
  local b
  for b in "$@"; do [[ -x $dir/$b ]] || return 1; done
}

# with_progress NAME LOG PATTERN CMD... — runs CMD (output to LOG) in the
# background and prints a progress line every 15 s until it ends: the
# elapsed time and how many LOG lines match PATTERN (one per compiled
# package, the only progress measure Go gives). Fails with the log's tail.
with_progress() {
  local name=$1 log=$2 pattern=$3; shift 3
  local start=$SECONDS
  "$@" >"$log" 2>&1 &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 15
    kill -0 "$pid" 2>/dev/null || break
    printf '    %s: %dm%02ds elapsed, %d packages compiled\n' "$name" \
      $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60)) "$(grep -Ec -- "$pattern" "$log" || true)"
  done
  if ! wait "$pid"; then
    echo "==> building $name FAILED after $((SECONDS - start))s; last lines of the build log:" >&2
    tail -n 40 "$log" >&2
    return 1
  fi
}

# new_tmp DEST — sets BUILD_TMP to a new temporary directory beside DEST;
# the result is renamed into place only when complete, so an interrupted
# build never leaves a half set that a later run would take as complete.
# The EXIT trap removes BUILD_TMP if the build does not finish.
new_tmp() {
  mkdir -p "$(dirname "$1")"
  BUILD_TMP=$(mktemp -d "$1.tmp.XXXXXX")
  chmod 755 "$BUILD_TMP"
}

# commit_tmp TMP DEST — moves a complete set into place.
commit_tmp() {
  rm -rf "$2"
  mv "$1" "$2"
  BUILD_TMP=
}

# go_build NAME MODDIR TMP LDFLAGS OUT=PKG... — one `go build` for all the
# packages of a set, so shared dependencies compile once, into TMP.
# CGO_ENABLED=0 without -trimpath: make test's one build configuration (the
# Makefile), so the packages hpp's own build compiled (client-go, gRPC: the
# same versions, hack/check-shared-versions.sh) are not compiled again.
go_build() {
  local name=$1 moddir=$2 tmp=$3 ldflags=$4; shift 4
  local pkgs=() outs=() spec
  for spec in "$@"; do outs+=("${spec%%=*}"); pkgs+=("${spec#*=}"); done
  local log=$tmp/build.log
  # `go build -v` prints one line per compiled package ("go: ..." lines are
  # downloads).
  with_progress "$name" "$log" '^[^g]|^g[^o]|^go[^:]' \
    env -C "$moddir" CGO_ENABLED=0 go build -v -ldflags "$ldflags" -o "$tmp/" "${pkgs[@]}" || return 1
  local i
  for i in "${!pkgs[@]}"; do
    local built=$tmp/$(basename "${pkgs[$i]}")
    # `go build -o dir/` names a binary after its package path's last element.
    if [[ $(basename "${pkgs[$i]}") =~ ^v[0-9]+$ ]]; then
      built=$tmp/$(basename "$(dirname "${pkgs[$i]}")")
    fi
    [[ -x $built ]] || { echo "==> $name: $built missing after the build" >&2; return 1; }
    [[ $built == "$tmp/${outs[$i]}" ]] || mv "$built" "$tmp/${outs[$i]}"
  done
  rm -f "$log"
}

# build NAME MODDIR DESTDIR LDFLAGS OUT=PKG... — go_build of one set into
# its cache directory.
build() {
  local name=$1 moddir=$2 dest=$3 ldflags=$4; shift 4
  local tmp start=$SECONDS
  new_tmp "$dest"; tmp=$BUILD_TMP
  echo "==> building $name (${*%%=*}) into $dest — cold builds take minutes on 2 cores"
  go_build "$name" "$moddir" "$tmp" "$ldflags" "$@" || { rm -rf "$tmp"; return 1; }
  commit_tmp "$tmp" "$dest"
  echo "==> built $name in $((SECONDS - start))s"
}

# k8s_ldflags — the version stamp of every Kubernetes binary (else they
# report v0.0.0-master).
k8s_ldflags() {
  local major minor v=${K8S_VERSION#v}
  major=${v%%.*}; minor=${v#*.}; minor=${minor%%.*}
  local cb=k8s.io/component-base/version cg=k8s.io/client-go/pkg/version ld="-s -w" p
  for p in $cb $cg; do
    ld+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=$major -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
  echo "$ld"
}

# k8s — the Kubernetes binaries. Only the missing ones are built: a cache
# made before a binary joined K8S_BINS (kube-proxy did) gains just that one,
# in minutes, instead of a rebuild of the whole set. Each binary is renamed
# into the cache complete, so an interrupted build leaves none half-written.
k8s() {
  local missing=() b
  for b in "${K8S_BINS[@]}"; do [[ -x $K8S_DIR/$b ]] || missing+=("$b"); done
  if ((${#missing[@]} == 0)); then
    echo "==> k8s $K8S_VERSION binaries cached in $K8S_DIR"; return
  fi
  if ((${#missing[@]} == ${#K8S_BINS[@]})); then
    local specs=()
    for b in "${K8S_BINS[@]}"; do specs+=("$b=k8s.io/kubernetes/cmd/$b"); done
    build "k8s $K8S_VERSION" "$ROOT/test/k8s-tools" "$K8S_DIR" "$(k8s_ldflags)" "${specs[@]}"
    return
  fi
  local specs=() tmp start=$SECONDS
  for b in "${missing[@]}"; do specs+=("$b=k8s.io/kubernetes/cmd/$b"); done
  new_tmp "$K8S_DIR"; tmp=$BUILD_TMP
  echo "==> building k8s $K8S_VERSION ${missing[*]} into $K8S_DIR (the rest is cached)"
  go_build "k8s $K8S_VERSION ${missing[*]}" "$ROOT/test/k8s-tools" "$tmp" "$(k8s_ldflags)" "${specs[@]}" || { rm -rf "$tmp"; return 1; }
  for b in "${missing[@]}"; do mv "$tmp/$b" "$K8S_DIR/$b"; done
  rm -rf "$tmp"; BUILD_TMP=
  echo "==> built k8s $K8S_VERSION ${missing[*]} in $((SECONDS - start))s"
}

provisioner() {
  if complete "$PROVISIONER_DIR" csi-provisioner; then
    echo "==> csi-provisioner $PROVISIONER_VERSION cached in $PROVISIONER_DIR"; return
  fi
  build "csi-provisioner $PROVISIONER_VERSION" "$ROOT/test/k8s-tools" "$PROVISIONER_DIR" \
    "-s -w -X main.version=$PROVISIONER_VERSION" \
    "csi-provisioner=github.com/kubernetes-csi/external-provisioner/v6/cmd/csi-provisioner"
}

resizer() {
  if complete "$RESIZER_DIR" csi-resizer; then
    echo "==> csi-resizer $RESIZER_VERSION cached in $RESIZER_DIR"; return
  fi
  build "csi-resizer $RESIZER_VERSION" "$ROOT/test/k8s-tools" "$RESIZER_DIR" \
    "-s -w -X main.version=$RESIZER_VERSION" \
    "csi-resizer=github.com/kubernetes-csi/external-resizer/v2/cmd/csi-resizer"
}

etcd() {
  if complete "$ETCD_DIR" etcd; then
    echo "==> etcd $ETCD_VERSION cached in $ETCD_DIR"; return
  fi
  # etcd's version string is a constant in its source; nothing to stamp.
  build "etcd $ETCD_VERSION" "$ROOT/test/etcd-tools" "$ETCD_DIR" "-s -w" \
    "etcd=go.etcd.io/etcd/server/v3"
}

# The group snapshot CRDs too: without them snapshot-controller spends its
# first ~30 s looking for them before it starts.
SNAPSHOT_CRDS=(snapshot.storage.k8s.io_volumesnapshotclasses.yaml snapshot.storage.k8s.io_volumesnapshotcontents.yaml
  snapshot.storage.k8s.io_volumesnapshots.yaml groupsnapshot.storage.k8s.io_volumegroupsnapshotclasses.yaml
  groupsnapshot.storage.k8s.io_volumegroupsnapshotcontents.yaml groupsnapshot.storage.k8s.io_volumegroupsnapshots.yaml)

# snapshotter — csi-snapshotter (run per node, --node-deployment) and
# snapshot-controller, plus the snapshot CRDs of the same release.
snapshotter() {
  if complete "$SNAPSHOTTER_DIR" csi-snapshotter snapshot-controller &&
    [[ -f $SNAPSHOTTER_DIR/crd/${SNAPSHOT_CRDS[-1]} ]]; then
    echo "==> external-snapshotter $SNAPSHOTTER_VERSION cached in $SNAPSHOTTER_DIR"; return
  fi
  local name="external-snapshotter $SNAPSHOTTER_VERSION" moddir=$ROOT/test/k8s-tools tmp start=$SECONDS client c
  new_tmp "$SNAPSHOTTER_DIR"; tmp=$BUILD_TMP
  echo "==> building $name (csi-snapshotter snapshot-controller) into $SNAPSHOTTER_DIR — cold builds take minutes on 2 cores"
  go_build "$name" "$moddir" "$tmp" "-s -w -X main.version=$SNAPSHOTTER_VERSION" \
    "csi-snapshotter=github.com/kubernetes-csi/external-snapshotter/v8/cmd/csi-snapshotter" \
    "snapshot-controller=github.com/kubernetes-csi/external-snapshotter/v8/cmd/snapshot-controller" || { rm -rf "$tmp"; return 1; }
  client=$(env -C "$moddir" go list -m -f '{{.Dir}}' github.com/kubernetes-csi/external-snapshotter/client/v8) || { rm -rf "$tmp"; return 1; }
  mkdir -p "$tmp/crd"
  for c in "${SNAPSHOT_CRDS[@]}"; do
    cp "$client/config/crd/$c" "$tmp/crd/$c" || { rm -rf "$tmp"; return 1; }
  done
  chmod 644 "$tmp"/crd/*
  commit_tmp "$tmp" "$SNAPSHOTTER_DIR"
  echo "==> built $name in $((SECONDS - start))s"
}

# conformance — the Kubernetes e2e suite (e2e.test), agnhost (the image
# most of its pods run) and the ginkgo CLI (runs e2e.test in parallel), all
# from test/k8s-tools, i.e. the same sources and flags as the k8s set: with
# the k8s set built, most of e2e.test's ~2,600 packages come from Go's
# build cache.
conformance() {
  if complete "$CONFORMANCE_DIR" "${CONFORMANCE_BINS[@]}"; then
    echo "==> conformance $K8S_VERSION binaries cached in $CONFORMANCE_DIR"; return
  fi
  local name="conformance $K8S_VERSION" moddir=$ROOT/test/k8s-tools tmp start=$SECONDS ld
  ld=$(k8s_ldflags)
  new_tmp "$CONFORMANCE_DIR"; tmp=$BUILD_TMP
  echo "==> building $name (${CONFORMANCE_BINS[*]}) into $CONFORMANCE_DIR — cold builds take minutes on 2 cores"
  go_build "$name: agnhost, ginkgo" "$moddir" "$tmp" "$ld" \
    "agnhost=k8s.io/kubernetes/test/images/agnhost" "ginkgo=github.com/onsi/ginkgo/v2/ginkgo" || { rm -rf "$tmp"; return 1; }
  # `go test -c` has no -v for packages; -x prints one compile command per
  # package it compiles. -vet=off: by default it vets the test package,
  # which computes vet facts for all ~2,800 dependencies (many minutes).
  with_progress "$name: e2e.test" "$tmp/build.log" '/compile -o' \
    env -C "$moddir" CGO_ENABLED=0 go test -c -x -vet=off -ldflags "$ld" -o "$tmp/e2e.test" k8s.io/kubernetes/test/e2e \
    || { rm -rf "$tmp"; return 1; }
  rm -f "$tmp/build.log"
  complete "$tmp" "${CONFORMANCE_BINS[@]}" || { echo "==> $name: a binary is missing after the build" >&2; rm -rf "$tmp"; return 1; }
  commit_tmp "$tmp" "$CONFORMANCE_DIR"
  echo "==> built $name in $((SECONDS - start))s"
}

BUILD_TMP=
trap '[[ -z $BUILD_TMP ]] || rm -rf "$BUILD_TMP"' EXIT

sets=("$@")
((${#sets[@]})) || sets=(k8s csi-provisioner csi-resizer etcd snapshotter)
for s in "${sets[@]}"; do
  case $s in
    k8s) k8s ;;
    csi-provisioner) provisioner ;;
    csi-resizer) resizer ;;
    etcd) etcd ;;
    conformance) conformance ;;
    snapshotter) snapshotter ;;
    *) echo "unknown binary set $s (want k8s, csi-provisioner, csi-resizer, etcd, conformance or snapshotter)" >&2; exit 2 ;;
  esac
done
