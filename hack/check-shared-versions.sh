#!/usr/bin/env bash
# Fails when hpp's go.mod and test/k8s-tools/go.mod (the Kubernetes
# binaries, the sidecars, the conformance programs) build the packages both
# use at different module versions. Built with one configuration
# (CGO_ENABLED=0, no -trimpath: the Makefile and hack/cluster-binaries.sh),
# a package of one module version compiles once for both: on a fresh
# machine client-go, apimachinery, gRPC and Prometheus's client, compiled
# for hpp's binaries, then serve the Kubernetes set instead of compiling
# again (minutes of make test's critical path). Run by hack/lint.sh; when it
# fails, `go get` the newer version in the other module and `go mod tidy`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
shared=(k8s.io/client-go/kubernetes k8s.io/client-go/tools/cache k8s.io/client-go/rest
  google.golang.org/grpc github.com/prometheus/client_golang/prometheus/promhttp)
modules() { # DIR: "path version" of every module the shared packages come from
  (cd "$1" && go list -deps -f '{{with .Module}}{{.Path}} {{.Version}}{{end}}' "${shared[@]}" | sort -u)
}
if ! d=$(diff <(modules "$root") <(modules "$root/test/k8s-tools")); then
  echo "go.mod and test/k8s-tools/go.mod build the shared packages (${shared[*]}) from different module versions (< hpp, > k8s-tools):" >&2
  echo "$d" | grep '^[<>]' >&2
  exit 1
fi
echo "==> go.mod and test/k8s-tools/go.mod agree on the modules of client-go, gRPC and Prometheus's client"
