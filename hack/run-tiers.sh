#!/usr/bin/env bash
# Runs `make test`'s tiers one after the other, as make ran them when they
# were the test target's prerequisites, and times each one: at the end (and
# when a tier fails, or on Ctrl-C) it prints every tier's wall time, which
# one failed and which did not run. The table is kept in
# _output/tier-times.txt; test/tiers.txt's `time` lines (test/README.md's
# table) take their figures from it.
#
#   hack/run-tiers.sh MAKE TIER...     (the Makefile's test target)
#
# It stops at the first failing tier, as make does without -k.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
make=$1
shift
out=$root/_output/tier-times.txt

# make -n: the tiers print their recipes; there is nothing to time.
flags=${MAKEFLAGS:-}
flags=${flags%% *}
dry=
[[ $flags != -* && $flags == *n* ]] && dry=yes

names=() secs=() states=()
total_start=$SECONDS

fmt() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

summary() {
  local i n=${#names[@]}
  {
    echo "==> make test: wall time per tier ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores)"
    for ((i = 0; i < n; i++)); do
      printf '    %-20s %8s  %s\n' "${names[$i]}" "${secs[$i]:+$(fmt "${secs[$i]}")}" "${states[$i]}"
    done
    printf '    %-20s %8s\n' total "$(fmt $((SECONDS - total_start)))"
  } | tee "$out.tmp"
  [[ -n $dry ]] || mv "$out.tmp" "$out"
  rm -f "$out.tmp"
}

[[ -n $dry ]] || mkdir -p "$root/_output"
for t in "$@"; do names+=("$t") secs+=("") states+=("not run"); done
current=-1
# Ctrl-C or a kill: the table still says how far it got.
trap 'if ((current >= 0)); then states[current]="interrupted"; secs[current]=$((SECONDS - start)); fi; summary; exit 130' INT TERM

rc=0
for i in "${!names[@]}"; do
  current=$i start=$SECONDS
  states[i]="running"
  "$make" --no-print-directory "${names[$i]}"
  rc=$?
  secs[i]=$((SECONDS - start))
  if ((rc != 0)); then
    states[i]="FAILED (exit $rc)"
    break
  fi
  states[i]="passed"
done
# shellcheck disable=SC2034 # read by the trap: no tier is running now
current=-1
[[ -n $dry ]] && { echo "==> make -n: tiers listed, none run"; exit 0; }
summary
if ((rc != 0)); then
  echo "==> make test FAILED in tier ${names[i]}: the tiers after it did not run" >&2
  exit "$rc"
fi
echo "==> make test: all tiers passed"
