#!/usr/bin/env bash
# Every t.Skip, t.Skipf and t.SkipNow in the Go sources is either
# internal/testutil.MissingPrerequisite (a skip that fails under CI=true) or
# a skip that stays a skip under CI=true, listed in test/tiers.txt as
#   skip FILE FUNCTION REASON
# (FUNCTION the one that calls it). Fails on an unlisted skip, and on a
# listed one that is no longer there, so the list stays the whole truth.
#   hack/check-skips.sh           check
#   hack/check-skips.sh --list    print FILE FUNCTION of every skip found
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
tiers=${HPP_TIERS_FILE:-test/tiers.txt}
# The helper itself skips; so do its own tests.
helper='^internal/testutil/(root|prereq_test)\.go$'

found=$(git ls-files -- '*.go' | grep -Ev "$helper" | while read -r f; do
  awk -v f="$f" '
    /^func / {
      fn = $0
      sub(/^func (\([^)]*\) )?/, "", fn)
      sub(/[^A-Za-z0-9_].*$/, "", fn)
    }
    /^[[:space:]]*\/\// { next }
    /\.Skip(f|Now)?\(/ { print f, fn }
  ' "$f"
done | sort -u)
if [[ ${1:-} == --list ]]; then
  printf '%s\n' "$found"
  exit 0
fi
listed=$(awk '$1 == "skip" { print $2, $3 }' "$tiers" | sort -u)
unlisted=$(comm -23 <(printf '%s\n' "$found") <(printf '%s\n' "$listed") | sed '/^$/d')
stale=$(comm -13 <(printf '%s\n' "$found") <(printf '%s\n' "$listed") | sed '/^$/d')
rc=0
if [[ -n $unlisted ]]; then
  echo "a skip that would stay a skip under CI=true and is not listed in $tiers:" >&2
  while read -r l; do echo "  $l"; done <<<"$unlisted" >&2
  echo "use testutil.MissingPrerequisite (fails under CI=true), or add \"skip FILE FUNCTION REASON\" to $tiers" >&2
  rc=1
fi
if [[ -n $stale ]]; then
  echo "listed in $tiers as a skip, but no skip is there any more (remove the line):" >&2
  while read -r l; do echo "  $l"; done <<<"$stale" >&2
  rc=1
fi
((rc == 0)) && echo "==> skips: $(wc -l <<<"$found") places that stay a skip under CI=true, each listed with its reason in $tiers"
exit "$rc"
