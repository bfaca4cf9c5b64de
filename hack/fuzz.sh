#!/usr/bin/env bash
# Runs every Fuzz* target of every package of hpp's module, for FUZZTIME
# each (go test can fuzz only one target per invocation). Failing
# inputs land in the package's testdata/fuzz and become regression cases.
#
# usage: hack/fuzz.sh FUZZTIME     e.g. hack/fuzz.sh 10s, hack/fuzz.sh 500x
set -euo pipefail

if [[ $# -ne 1 || ! $1 =~ ^[0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h|x)$ ]]; then
  echo "usage: $0 FUZZTIME (a duration such as 10s or 2m, or a count such as 500x)" >&2
  exit 2
fi
fuzztime=$1
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# deadline_race says whether a failed fuzz run is only the coordinator's
# deadline race: "context deadline exceeded" and nothing that a real finding
# prints (a written failing input, a panic, a test error line).
deadline_race() {
  grep -q 'context deadline exceeded' "$1" &&
    ! grep -qE 'Failing input written to|^panic:|_test\.go:[0-9]+:' "$1"
}

ran=0
failed=()
raced=()
# "<package dir> <target>" for each fuzz target, from the test sources of
# the module's parts (tools/ and test/*-tools hold pinned third-party code).
targets=$(cd "$root" &&
  grep -rE --include='*_test.go' --exclude-dir=testdata --exclude-dir=vendor --exclude-dir='*-tools' \
    -o '^func Fuzz[A-Za-z0-9_]*\(' ./internal ./cmd ./test |
  sed -E 's#^(.*)/[^/]+_test\.go:func (Fuzz[A-Za-z0-9_]*)\($#\1 \2#' | sort -u) || true
while read -r pkg target; do
  [[ -n ${pkg:-} ]] || continue
  echo "==> fuzz ${pkg#./} $target for $fuzztime"
  ran=$((ran + 1))
  log=$(mktemp)
  if (cd "$root" && go test -run='^$' -fuzz="^${target}\$" -fuzztime="$fuzztime" "$pkg") 2>&1 | tee "$log"; then
    :
  elif deadline_race "$log" &&
    (cd "$root" && go test -count=1 -run="^${target}\$" "$pkg"); then
    # Go 1.26's fuzz coordinator can report its own -fuzztime deadline as
    # a failure when a worker is slow to stop (golang/go#75804, fixed in
    # Go 1.27). No input was written and the corpus replay above passed.
    echo "==> fuzz ${pkg#./} $target: the -fuzztime deadline race of golang/go#75804, no failing input; corpus replay passed"
    raced+=("${pkg#./} $target")
  else
    failed+=("${pkg#./} $target")
  fi
  rm -f "$log"
done <<<"$targets"

if [[ $ran -eq 0 ]]; then
  echo "fuzz: no Fuzz targets found" >&2
  exit 1
fi
# test/tiers.txt (the test map) declares how many targets there are at least.
min=$("$root/hack/tiermap.sh" get fuzz min)
if [[ -z $min ]] || ((ran < min)); then
  echo "fuzz: $ran targets found, fewer than the ${min:-(none declared)} test/tiers.txt declares (\"min N\" of its tier fuzz)" >&2
  exit 1
fi
if [[ ${#failed[@]} -gt 0 ]]; then
  printf 'fuzz: FAILED %s\n' "${failed[@]}" >&2
  exit 1
fi
echo "fuzz: $ran targets passed${raced[*]:+ (${#raced[@]} after the golang/go#75804 deadline race: ${raced[*]})}"
