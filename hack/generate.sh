#!/usr/bin/env bash
# Regenerates everything generated from code: the CRD and deepcopy of
# internal/api (controller-gen, pinned in tools/codegen/go.mod), the
# kustomize manifests under deploy/ that come from the operator's render
# package, the flag tables of the component READMEs (cmd/*/README.md,
# from each command's own flags) and test/README.md's tier table (from the
# test map, test/tiers.txt). With --check, regenerates and fails if
# anything changed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
gen="$root/_output/tools/controller-gen"
paths=(internal/api deploy ':(glob)cmd/*/README.md' test/README.md)

echo "==> building controller-gen (pinned in tools/codegen/go.mod)"
mkdir -p "$(dirname "$gen")"
(cd "$root/tools/codegen" && go build -o "$gen" sigs.k8s.io/controller-tools/cmd/controller-gen)

echo "==> controller-gen: deepcopy and CRD of internal/api/v1beta1"
# maxDescLen=0: descriptions would make the CRD (PVC template and affinity
# schemas) too large for a client-side kubectl apply's annotation.
(cd "$root/internal" && "$gen" object paths=./api/... crd:maxDescLen=0 output:crd:dir=../deploy/crd)

echo "==> gendeploy: deploy/ manifests from cmd/hpp-operator/render"
(cd "$root/cmd/hpp-operator" && go run ./gendeploy "$root/deploy")

echo "==> flag tables of cmd/*/README.md from the commands (TestREADMEFlags)"
for c in "$root"/cmd/hpp-*/; do
  (cd "$c" && HPP_UPDATE_DOCS=1 go test -count=1 -run '^TestREADMEFlags$' .)
done

echo "==> tier table of test/README.md from test/tiers.txt (hack/tiermap.sh)"
"$root/hack/tiermap.sh" readme

if [[ ${1:-} == --check ]]; then
  cd "$root"
  changed=$(git status --porcelain -- "${paths[@]}")
  if [[ -n $changed ]]; then
    echo "generated files are not current (run make generate and commit):" >&2
    echo "$changed" >&2
    git --no-pager diff --stat -- "${paths[@]}" >&2
    exit 1
  fi
  echo "==> generated files are current"
fi
