#!/usr/bin/env bash
# Builds one container image per component from the one Dockerfile at the
# repository root (the component is its COMPONENT build argument). Needs docker/podman/buildah with a working
# engine; where there is none (as on hpp's CI machines), says so and exits 0:
# the cluster tests build their own images from the binaries instead.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
builder=""
for b in buildah podman docker; do
  if command -v "$b" >/dev/null 2>&1 && "$b" info >/dev/null 2>&1; then builder=$b; break; fi
done
if [[ -z $builder ]]; then
  echo "images: no working image builder (buildah, podman or a docker engine) on this machine; nothing built."
  echo "images: build with e.g. 'docker build --build-arg COMPONENT=hpp-csi .' where one exists."
  exit 0
fi
tag=${IMAGE_TAG:-latest}
# The same version stamp as the Makefile's LDFLAGS (VERSION, COMMIT).
version=${VERSION:-$(git -C "$root" describe --tags --always --dirty 2>/dev/null || echo dev)}
commit=${COMMIT:-$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)}
registry=${IMAGE_REGISTRY:-localhost/hpp}
for c in "$@"; do
  echo "==> $builder build $registry/$c:$tag"
  "$builder" build --build-arg "COMPONENT=$c" --build-arg "VERSION=$version" --build-arg "COMMIT=$commit" \
    -f "$root/Dockerfile" -t "$registry/$c:$tag" "$root"
done
