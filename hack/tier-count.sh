#!/usr/bin/env bash
# Fails a test tier that ran nothing, or fewer tests than it declares.
#
#   hack/tier-count.sh TIER OUTPUT [RUN_PATTERN]
#
# OUTPUT is what the tier's go test printed: `go test -json` events (what
# gotestsum's --jsonfile keeps; hack/gotest.sh) or `go test -v` text
# (hack/gotest-tier.sh, the quota VM's console). It counts the top-level
# results, `--- PASS`, `--- FAIL` and `--- SKIP` of a Test, Fuzz or Example
# function (subtests are not counted: their number follows tables and
# fixtures), prints one line for the tier and exits 1 when
#   - no test ran at all;
#   - RUN_PATTERN (the tier's -run) names tests, as ^TestA$ or
#     ^(TestA|TestB)$ do, and one of them did not run (renamed or removed);
#   - fewer tests ran than the `min` of the tier in test/tiers.txt (the
#     test map, read through hack/tiermap.sh);
#   - TIER is not empty and its block in test/tiers.txt has no `min`.
#
#   hack/tier-count.sh --run-pattern GO_TEST_ARGS...
#
# prints the -run (or -test.run) pattern among the arguments, for callers
# that pass their go test arguments through.
# With TIER empty (go test run by hand through hack/gotest.sh) only the
# first two apply. A skipped test counts as run here: under CI=true a skip
# that would hide a missing prerequisite fails the test itself
# (internal/testutil.MissingPrerequisite), and the skips that stay skips are
# listed in test/tiers.txt and checked by hack/check-skips.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tiers=${HPP_TIERS_FILE:-$root/test/tiers.txt}
export HPP_TIERS_FILE=$tiers
if [[ ${1:-} == --run-pattern ]]; then
  shift
  pattern='' prev=''
  for a in "$@"; do
    case $prev in -run | -test.run | --run | --test.run) pattern=$a ;; esac
    case $a in -run=* | -test.run=* | --run=* | --test.run=*) pattern=${a#*=} ;; esac
    prev=$a
  done
  printf '%s\n' "$pattern"
  exit 0
fi
if (($# < 2 || $# > 3)); then
  sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
tier=$1 output=$2 pattern=${3:-}
[[ -r $output ]] || { echo "tier-count: $output: no such output to count" >&2; exit 2; }
label=${tier:-"go test"}

# name<TAB>result per top-level result.
results=$(awk '
  NR == 1 || !mode { if ($0 ~ /^[[:space:]]*$/) next; mode = ($0 ~ /^\{/) ? "json" : "text" }
  mode == "json" {
    if (!match($0, /"Action":"(pass|fail|skip)"/)) next
    act = toupper(substr($0, RSTART + 10, RLENGTH - 11))
    if (!match($0, /"Test":"[^"]*"/)) next
    name = substr($0, RSTART + 8, RLENGTH - 9)
    if (name ~ /\//) next
    print name "\t" act
    next
  }
  {
    sub(/\r$/, "")
    if (match($0, /^--- (PASS|FAIL|SKIP): [^ ]+/)) {
      split(substr($0, 5, RLENGTH - 4), f, ": ")
      if (f[2] !~ /\//) print f[2] "\t" f[1]
    }
  }
' "$output")

count() { [[ -z $results ]] && { echo 0; return; }; grep -c "	$1\$" <<<"$results" || true; }
pass=$(count PASS) fail=$(count FAIL) skip=$(count SKIP)
total=$((pass + fail + skip))

min=
if [[ -n $tier ]]; then
  min=$("$root/hack/tiermap.sh" get "$tier" min)
fi
declared=${min:+", at least $min declared"}
echo "==> tier $label: $total tests ran ($pass passed, $fail failed, $skip skipped$declared)"

errs=()
run_hint=${pattern:+" (-run '$pattern' matches no test: renamed or removed?)"}
((total > 0)) || errs+=("no test ran$run_hint")
# A pattern that is only anchored names: each of them must have run.
if [[ $pattern =~ ^\^\(?([A-Za-z0-9_|]+)\)?\$$ ]]; then
  IFS='|' read -ra names <<<"${BASH_REMATCH[1]}"
  for n in "${names[@]}"; do
    grep -q "^$n	" <<<"$results" ||
      errs+=("-run '$pattern' names $n, which did not run (renamed or removed? change the pattern and test/tiers.txt with it)")
  done
fi
if [[ -n $tier ]]; then
  if [[ -z $min ]]; then
    errs+=("${tiers#"$root"/} declares no minimum for it: add \"min N\" to its block \"tier $tier\" (N a little below the count it runs today)")
  elif ! [[ $min =~ ^[0-9]+$ ]]; then
    errs+=("${tiers#"$root"/}: the minimum \"$min\" is not a number")
  elif ((total < min)); then
    errs+=("$total tests ran, fewer than the $min ${tiers#"$root"/} declares (a test renamed out of the tier's -run, a package or file left out?)")
  fi
fi
if ((${#errs[@]})); then
  for e in "${errs[@]}"; do printf '==> tier %s FAILED: %s\n' "$label" "$e" >&2; done
  exit 1
fi
