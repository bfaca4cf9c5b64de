#!/usr/bin/env bash
# go test through gotestsum (pinned in tools/go.mod): a line per package,
# failures in full, and a closing summary that lists every skipped test with
# its reason, so a skip is never silent. Arguments go to go test; run it
# where its package patterns resolve (the repository root, or a directory
# of it for relative ones). Under CI=true, tests whose tier cannot run here fail
# instead of skipping (internal/testutil.MissingPrerequisite).
# Then hack/tier-count.sh counts the tests that ran: none, or fewer than
# test/tiers.txt declares for the tier $HPP_TIER_NAME (make sets it to the
# target's name), fails the run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
gotestsum="$root/_output/tools/gotestsum"
if [[ ! -x $gotestsum || $root/tools/go.mod -nt $gotestsum ]]; then
  mkdir -p "$(dirname "$gotestsum")"
  (cd "$root/tools" && go build -o "$gotestsum" gotest.tools/gotestsum)
fi
# -race needs cgo; make test's other go commands run with CGO_ENABLED=0
# (the Makefile says why).
for a in "$@"; do
  [[ $a == -race ]] && export CGO_ENABLED=1
done
json=$(mktemp)
trap 'rm -f "$json"' EXIT
rc=0
"$gotestsum" --format pkgname-and-test-fails --format-hide-empty-pkg --jsonfile "$json" -- "$@" || rc=$?
count_rc=0
"$root/hack/tier-count.sh" "${HPP_TIER_NAME:-}" "$json" "$("$root/hack/tier-count.sh" --run-pattern "$@")" || count_rc=$?
((rc != 0)) && exit "$rc"
exit "$count_rc"
