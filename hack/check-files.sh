#!/usr/bin/env bash
# Fails on a committed executable or any committed file over 1 MiB outside a
# testdata/ directory. Built binaries belong in bin/ or _output/ (ignored);
# data a script can make again is made by that script, not committed: a
# session's submission has a size limit, and every rewrite of a tracked
# binary counts in full.
set -euo pipefail
cd "$(dirname "$0")/.."
limit=$((1024 * 1024))
bad=()
while IFS= read -r -d '' f; do
  [[ -f $f ]] || continue
  case "/$f" in */testdata/*) continue ;; esac
  size=$(stat -c %s "$f")
  if (( size > limit )); then
    bad+=("$f: $size bytes (over 1 MiB)")
  elif head -c 4 "$f" | grep -q $'^\x7fELF'; then
    bad+=("$f: an ELF executable")
  fi
done < <(git ls-files -z)
if (( ${#bad[@]} )); then
  printf 'committed file that does not belong in git: %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "==> committed files: no binary, none over 1 MiB"
