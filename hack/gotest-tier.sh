#!/usr/bin/env bash
# Runs `go test -v` for a cluster tier (arguments go to go test; run it
# where its package patterns resolve) and, when it fails, closes with each failed test's
# own log lines. A failed cluster test dumps every component's log tail
# after its failure message; CI keeps only the end of the output, so
# without this summary the reason is cut off above the dump.
# The whole output is also kept in $HPP_TIER_LOG when it is set.
# Then hack/tier-count.sh counts the tests that ran: none, or fewer than
# test/tiers.txt declares for the tier $HPP_TIER_NAME (make sets it to the
# target's name), or a -run name that did not run, fails the tier.
set -uo pipefail
log=${HPP_TIER_LOG:-$(mktemp)}
mkdir -p "$(dirname "$log")"
go test "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
if ((rc != 0)); then
  echo "==> why it failed (the test's own lines before each --- FAIL; whole output: $log)"
  # A test's lines are indented and start with file_test.go:N:; the lines
  # of a component log dump are the continuation of one of them and are
  # left out. At most 20 lines per failed test, each cut at 600 bytes.
  awk '
    /^[[:space:]]+[A-Za-z0-9_]+_test\.go:[0-9]+: / { ring[n++ % 20] = substr($0, 1, 600); next }
    /^[[:space:]]*--- (PASS|SKIP)/ { n = 0; next }
    /^[[:space:]]*--- FAIL/ {
      for (i = (n > 20 ? n - 20 : 0); i < n; i++) print ring[i % 20]
      print; n = 0
    }
  ' "$log"
fi
count_rc=0
"$(dirname "$0")/tier-count.sh" "${HPP_TIER_NAME:-}" "$log" "$("$(dirname "$0")/tier-count.sh" --run-pattern "$@")" || count_rc=$?
((rc != 0)) && exit "$rc"
exit "$count_rc"
