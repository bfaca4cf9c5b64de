#!/usr/bin/env bash
# Fails when hpp's go.mod and a tools module build the packages both use at
# different module versions: test/k8s-tools (the Kubernetes binaries, the
# sidecars, the conformance programs) for client-go, gRPC and Prometheus's
# client; tools/codegen (controller-gen, built first by generate-check) for
# apimachinery, the core API and apiextensions. Built with one configuration
# (CGO_ENABLED=0, no -trimpath: the Makefile and hack/cluster-binaries.sh),
# a package of one module version compiles once for all: on a fresh
# machine what controller-gen's build compiled serves hpp's build, and what
# hpp's build compiled serves the Kubernetes set, instead of compiling again
# (minutes of make test's critical path). Run by hack/lint.sh; when it
# fails, `go get` the newer version in the other module and `go mod tidy`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
modules() { # DIR PKG...: "path version" of every module the packages come from
  local dir=$1; shift
  (cd "$dir" && go list -deps -f '{{with .Module}}{{.Path}} {{.Version}}{{end}}' "$@" | sort -u)
}
agree() { # DIR PKG...: the packages' modules are the same in hpp and DIR
  local dir=$1 d; shift
  if ! d=$(diff <(modules "$root" "$@") <(modules "$root/$dir" "$@")); then
    echo "go.mod and $dir/go.mod build the shared packages ($*) from different module versions (< hpp, > $dir):" >&2
    echo "$d" | grep '^[<>]' >&2
    return 1
  fi
  echo "==> go.mod and $dir/go.mod agree on the modules of $*"
}
rc=0
agree test/k8s-tools k8s.io/client-go/kubernetes k8s.io/client-go/tools/cache k8s.io/client-go/rest \
  google.golang.org/grpc github.com/prometheus/client_golang/prometheus/promhttp || rc=1
agree tools/codegen k8s.io/apimachinery/pkg/apis/meta/v1 k8s.io/api/core/v1 \
  k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1 || rc=1
exit $rc
