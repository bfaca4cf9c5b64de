#!/usr/bin/env bash
# gofmt, go vet and golangci-lint (pinned in tools/) over hpp's module, and
# go.mod/go.sum as `go mod tidy` writes them.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

"$root/hack/check-files.sh"
"$root/hack/check-skips.sh"
"$root/hack/tiermap.sh" check
"$root/hack/check-shared-versions.sh"

echo "==> gofmt"
unformatted=$(cd "$root" && gofmt -l internal cmd test tools 2>/dev/null || true)
if [[ -n $unformatted ]]; then
  echo "gofmt would change:" >&2
  echo "$unformatted" >&2
  exit 1
fi

echo "==> go mod tidy -diff"
(cd "$root" && go mod tidy -diff) || {
  echo "go.mod or go.sum is not what go mod tidy writes: run go mod tidy" >&2
  exit 1
}

echo "==> building golangci-lint (pinned in tools/go.mod)"
lint="$root/_output/tools/golangci-lint"
mkdir -p "$(dirname "$lint")"
(cd "$root/tools" && go build -o "$lint" github.com/golangci/golangci-lint/v2/cmd/golangci-lint)

# ./... stops at tools/ and test/*-tools: modules of their own, pins of
# third-party code that is not hpp's to lint.
echo "==> go vet + golangci-lint"
(cd "$root" && go vet ./... && "$lint" run --allow-serial-runners --config "$root/.golangci.yml" ./...)
