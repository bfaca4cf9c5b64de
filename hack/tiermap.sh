#!/usr/bin/env bash
# Reads the test map, test/tiers.txt: every tier of `make test` declared
# once (its packages, root, environment, measured time, "run it when you
# change ..." and minimum test count). The file's head says its format.
#
#   hack/tiermap.sh get TIER FIELD   one field of a tier ("" when absent;
#                                    min: the number alone)
#   hack/tiermap.sh tiers            `make test`'s tiers, in order
#   hack/tiermap.sh table            test/README.md's tier table (Markdown)
#   hack/tiermap.sh readme           writes that table into test/README.md
#   hack/tiermap.sh check            fails when the Makefile, mk/*.mk, the
#                                    tests' tier gates or test/README.md
#                                    disagree with the map (in `make lint`)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
map=${HPP_TIERS_FILE:-$root/test/tiers.txt}
readme=$root/test/README.md
begin='<!-- tier table: generated from test/tiers.txt by hack/tiermap.sh (make generate); edit the map, not this table -->'
end='<!-- end of tier table -->'

# fields: "tier<TAB>key<TAB>value" for every field of every tier, in file
# order, comments (" #" to the end of the line) removed.
fields() {
  awk '
    /^[[:space:]]*#/ || /^[[:space:]]*$/ { next }
    /^tier[[:space:]]/ { tier = $2; print tier "\ttier\t"; next }
    /^[^[:space:]]/ { tier = ""; next }
    tier != "" {
      line = $0
      sub(/[[:space:]]+#.*$/, "", line)
      sub(/^[[:space:]]+/, "", line)
      key = line; sub(/[[:space:]].*$/, "", key)
      val = substr(line, length(key) + 1); sub(/^[[:space:]]+/, "", val)
      print tier "\t" key "\t" val
    }
  ' "$map"
}

# The map, read once: field[TIER|KEY] (the first KEY of a tier counts) and
# the tiers in file order.
declare -A field=()
order=()
while IFS=$'\t' read -r t k v; do
  [[ $k == tier ]] && order+=("$t")
  [[ -v field["$t|$k"] ]] || field["$t|$k"]=$v
done < <(fields)

get() { printf '%s\n' "${field["$1|$2"]:-}"; } # TIER FIELD

all_tiers() { printf '%s\n' "${order[@]}"; }

# in_test TIER: a target of `make test` (not a part of another tier's
# target like `unit:<module>`, not marked in-test no).
in_test() {
  [[ -z $(get "$1" part-of) && $(get "$1" in-test) != no ]]
}

tiers() {
  local t
  for t in $(all_tiers); do
    if in_test "$t"; then echo "$t"; fi
  done
}

# outside: the map's tiers that are not part of `make test` (in-test no).
outside() {
  local t
  for t in $(all_tiers); do
    if [[ $(get "$t" in-test) == no ]]; then echo "$t"; fi
  done
}

# cell TEXT: TEXT made safe inside a Markdown table cell.
cell() { printf '%s' "${1//|/\\|}"; }

# packages TIER: "`dir`: `pkg` `pkg` (env)" of the tier, or of its parts.
packages() {
  local t=$1 parts=() p out=()
  for p in $(all_tiers); do
    if [[ $(get "$p" part-of) == "$t" ]]; then parts+=("$p"); fi
  done
  for p in "$t" "${parts[@]}"; do
    local dir pkgs env s
    dir=$(get "$p" dir) pkgs=$(get "$p" pkgs) env=$(get "$p" env)
    [[ -n $pkgs ]] || continue
    s="\`$dir\`: \`${pkgs// /\` \`}\`"
    [[ -n $env ]] && s+=" with \`$env\`"
    out+=("$s")
  done
  local IFS=';'
  s="${out[*]}"
  printf '%s' "${s//;/; }"
}

table() {
  echo '| target | what it runs | packages (environment) | root | time on 2 cores | run it when you change |'
  echo '|---|---|---|---|---|---|'
  local t
  for t in $(tiers) $(outside); do
    local what
    what=$(get "$t" what)
    in_test "$t" || what="not in \`make test\`: $what"
    [[ -z $(get "$t" lane) ]] || what="beside the tiers after it (lane $(get "$t" lane), hack/run-tiers.sh): $what"
    printf '| `%s` | %s | %s | %s | %s | %s |\n' "$t" "$(cell "$what")" "$(cell "$(packages "$t")")" \
      "$(cell "$(get "$t" root)")" "$(cell "$(get "$t" time)")" "$(cell "$(get "$t" when)")"
  done
}

# readme_table: the table test/README.md holds now.
readme_table() {
  awk -v b="$begin" -v e="$end" '$0 == e { on = 0 } on { print } $0 == b { on = 1 }' "$readme"
}

readme() {
  grep -qxF "$begin" "$readme" || { echo "tiermap: test/README.md has no line $begin" >&2; exit 1; }
  local new
  new=$(mktemp)
  table >"$new"
  awk -v b="$begin" -v e="$end" -v f="$new" '
    $0 == b { print; while ((getline l < f) > 0) print l; skip = 1; next }
    $0 == e { skip = 0 }
    !skip { print }
  ' "$readme" >"$readme.tmp"
  mv "$readme.tmp" "$readme"
  rm -f "$new"
}

# make_file TIER: the Makefile or mk/*.mk file with the tier's rule.
make_file() {
  grep -lE "^$1:" "$root/Makefile" "$root"/mk/*.mk 2>/dev/null | sed -n 1p || true
}

# make_text FILE: FILE and the hack/ scripts it names, where a tier's
# packages and environment may be written out (the quota VM tiers pass
# theirs to the VM).
make_text() {
  cat "$1"
  local s
  for s in $(grep -oE 'hack/[A-Za-z0-9_.-]+\.sh' "$1" | sort -u); do
    if [[ -f $root/$s ]]; then cat "$root/$s"; fi
  done
}

# rule_text TIER FILE: the rule of TIER in FILE, to its first blank line,
# with $@ written as TIER.
rule_text() {
  local r
  r=$(awk -v t="$1:" 'index($0, t) == 1 { on = 1 } on && /^$/ { exit } on { print }' "$2")
  printf '%s\n' "${r//\$@/$1}"
}

check() {
  local errs=() t
  # The README's table is the map's.
  if ! diff <(readme_table) <(table) >/dev/null; then
    errs+=("test/README.md's tier table is not the map's: run hack/tiermap.sh readme (make generate); the difference:
$(diff <(readme_table) <(table) | head -n 20 || true)")
  fi
  # `make test` runs the map's tiers in the map's order (hack/run-tiers.sh).
  grep -qE '^TEST_TIERS.*\$\(TIERMAP\) tiers' "$root/Makefile" ||
    errs+=("the Makefile's TEST_TIERS does not come from hack/tiermap.sh tiers")
  for t in $(all_tiers); do
    local owner=$t file pkgs env p dir text
    [[ -n $(get "$t" part-of) ]] && owner=$(get "$t" part-of)
    file=$(make_file "$owner")
    if [[ -z $file ]]; then
      errs+=("tier $t: no rule \"$owner:\" in the Makefile or mk/*.mk")
      continue
    fi
    dir=$(get "$t" dir) pkgs=$(get "$t" pkgs) env=$(get "$t" env)
    text=$(make_text "$file"; rule_text "$owner" "$file")
    [[ -z $pkgs || -n $dir ]] || errs+=("tier $t: pkgs without dir")
    # Packages: they exist, and the tier's make rule runs them (from the
    # map through tier_pkgs, or written out in its mk file).
    for p in $pkgs; do
      [[ -d $root/$dir/${p%...} ]] || errs+=("tier $t: package $dir/$p does not exist")
      grep -qF -e "tier_pkgs,$t)" -e "$p" <<<"$text" ||
        errs+=("tier $t: ${file#"$root"/} neither takes its packages from the map (\$(call tier_pkgs,$t)) nor names $p")
    done
    for p in $env; do
      grep -qF -e "tier_env,$t)" -e "$p" <<<"$text" ||
        errs+=("tier $t: ${file#"$root"/} neither takes its environment from the map (\$(call tier_env,$t)) nor sets $p")
    done
  done
  # A tier gate is written nowhere but in the map: no make file sets
  # HPP_TEST_TIER itself.
  local literal
  literal=$(grep -nE 'HPP_TEST_TIER=' "$root/Makefile" "$root"/mk/*.mk || true)
  [[ -z $literal ]] || errs+=("HPP_TEST_TIER set in a make file instead of taken from the map (\$(call tier_env,TIER)):
$literal")
  # Every gate in the tests (Getenv("HPP_TEST_TIER") compared with a
  # literal) names a tier of the map whose packages hold the test, and
  # every HPP_TEST_TIER of the map is a gate somewhere in its packages.
  local gates g gdir gval found
  gates=$(cd "$root" && git ls-files -- '*_test.go' | xargs grep -HE 'Getenv\("HPP_TEST_TIER"\)' |
    sed -nE 's#^([^:]+)/[^/:]+:.*Getenv\("HPP_TEST_TIER"\)[^"]*(==|!=) *"([^"]+)".*#\1 \3#p' | sort -u || true)
  while read -r gdir gval; do
    [[ -n ${gdir:-} ]] || continue
    found=
    for t in $(all_tiers); do
      [[ " $(get "$t" env) " == *" HPP_TEST_TIER=$gval "* ]] || continue
      for p in $(get "$t" pkgs); do
        p=${p#./} p=${p%/...} p=${p%/}
        [[ $(get "$t" dir)/$p == "$gdir" ]] && found=$t
      done
    done
    [[ -n $found ]] || errs+=("$gdir gates on HPP_TEST_TIER=$gval, and no tier of the map with env HPP_TEST_TIER=$gval holds that package")
  done <<<"$gates"
  for t in $(all_tiers); do
    for g in $(get "$t" env); do
      [[ $g == HPP_TEST_TIER=* ]] || continue
      grep -qE " ${g#HPP_TEST_TIER=}\$" <<<"$gates" ||
        errs+=("tier $t: env $g, but no test compares HPP_TEST_TIER with \"${g#HPP_TEST_TIER=}\"")
    done
  done
  # Every package of the test module with tests belongs to a tier, or its
  # tests run nowhere.
  local owned pkg
  owned=$(for t in $(all_tiers); do
    [[ $(get "$t" dir) == test ]] || continue
    for p in $(get "$t" pkgs); do echo "${p%/}"; done
  done | sort -u)
  for pkg in $(cd "$root/test" && go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.Dir}}{{end}}' ./...); do
    pkg=./${pkg#"$root"/test/}
    grep -qxF "$pkg" <<<"$owned" || errs+=("test/${pkg#./}: has tests, and no tier of the map runs it")
  done
  if ((${#errs[@]})); then
    printf 'tiermap: %s\n' "${errs[@]}" >&2
    echo "tiermap: test/tiers.txt is the test map; change it and what disagrees with it together" >&2
    exit 1
  fi
  echo "==> test map: $(tiers | wc -l) tiers of make test in test/tiers.txt agree with the Makefile, mk/, the tests' gates and test/README.md"
}

case ${1:-} in
  get) (($# == 3)) || { echo "usage: $0 get TIER FIELD" >&2; exit 2; }; v=$(get "$2" "$3"); [[ $3 == min ]] && v=${v%% *}; printf '%s\n' "$v" ;;
  tiers) tiers ;;
  table) table ;;
  readme) readme ;;
  check) check ;;
  *) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
