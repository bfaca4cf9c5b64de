#!/usr/bin/env bash
# gofmt, go vet and golangci-lint (pinned in tools/) over every module.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
modules=(internal cmd/hpp-csi cmd/hpp-legacy cmd/hpp-operator cmd/hpp-mounter cmd/hpp-migrate test)

"$root/hack/check-files.sh"
"$root/hack/check-skips.sh"
"$root/hack/tiermap.sh" check

echo "==> gofmt"
unformatted=$(cd "$root" && gofmt -l internal cmd test tools 2>/dev/null || true)
if [[ -n $unformatted ]]; then
  echo "gofmt would change:" >&2
  echo "$unformatted" >&2
  exit 1
fi

echo "==> building golangci-lint (pinned in tools/go.mod)"
lint="$root/_output/tools/golangci-lint"
mkdir -p "$(dirname "$lint")"
(cd "$root/tools" && GOWORK=off go build -o "$lint" github.com/golangci/golangci-lint/v2/cmd/golangci-lint)

for m in "${modules[@]}"; do
  echo "==> go vet + golangci-lint: $m"
  (cd "$root/$m" && go vet ./... && "$lint" run --allow-serial-runners --config "$root/.golangci.yml" ./...)
done
