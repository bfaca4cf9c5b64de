#!/usr/bin/env bash
# Checks that each component builds as the Dockerfile builds it: from a
# directory holding only go.mod, go.sum, internal/ and the component's cmd/
# directory. A component that needs anything else of the repository (a
# package, an embedded file, a go.sum line) fails here, not in an image
# build on a machine with a container engine.
#
# `go list -deps` over that directory, not `go build`: it resolves every
# import, embed pattern and module sum the build would, from the same files,
# and `make build` compiles those same sources. A build here compiled
# internal/ and the component anew on every run (the packages of a
# temporary directory are new to Go's cache, and -trimpath, which hid the
# directory, is a build configuration of its own: on a fresh machine a
# second compile of client-go, controller-runtime and gRPC).
#
# usage: hack/build-standalone.sh COMPONENT...     e.g. hpp-csi hpp-mounter
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rc=0
for c in "$@"; do
  echo "==> go list -deps ./cmd/$c/... from go.mod, go.sum, internal/ and cmd/$c/ alone"
  src=$tmp/$c
  mkdir -p "$src/cmd"
  cp "$root/go.mod" "$root/go.sum" "$src/"
  cp -r "$root/internal" "$src/internal"
  cp -r "$root/cmd/$c" "$src/cmd/$c"
  # -e: report every broken package instead of stopping at the first.
  problems=$(cd "$src" && go list -e -mod=readonly -deps \
    -f '{{with .Error}}{{$.ImportPath}}: {{.}}{{"\n"}}{{end}}{{range .DepsErrors}}{{$.ImportPath}}: {{.}}{{"\n"}}{{end}}' \
    "./cmd/$c/..." 2>&1) || { echo "$problems" >&2; rc=1; continue; }
  if [[ -n ${problems//[$'\n ']/} ]]; then
    echo "==> cmd/$c does not build from go.mod, go.sum, internal/ and cmd/$c/ alone:" >&2
    echo "$problems" | sort -u >&2
    rc=1
  fi
done
exit "$rc"
