#!/usr/bin/env bash
# Builds each component as the Dockerfile does: from a directory holding
# only go.mod, go.sum, internal/ and the component's cmd/ directory. A
# component that needs anything else of the repository fails here, not in
# an image build on a machine with a container engine. -trimpath as in the
# Dockerfile, which also keeps the build cache warm across temporary dirs.
#
# usage: hack/build-standalone.sh COMPONENT...     e.g. hpp-csi hpp-mounter
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for c in "$@"; do
  echo "==> go build ./cmd/$c/... from go.mod, go.sum, internal/ and cmd/$c/ alone"
  src=$tmp/$c
  mkdir -p "$src/cmd"
  cp "$root/go.mod" "$root/go.sum" "$src/"
  cp -r "$root/internal" "$src/internal"
  cp -r "$root/cmd/$c" "$src/cmd/$c"
  (cd "$src" && CGO_ENABLED=0 go build -trimpath -o /dev/null "./cmd/$c/...")
done
