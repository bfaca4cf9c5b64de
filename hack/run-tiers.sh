#!/usr/bin/env bash
# Runs `make test`'s tiers and times each one: at the end (and when a tier
# fails, or on Ctrl-C) it prints every tier's wall time, which one failed
# and which did not run. The table is kept in _output/tier-times.txt;
# test/tiers.txt's `time` lines (test/README.md's table) take their figures
# from it.
#
#   hack/run-tiers.sh MAKE TIER...     (the Makefile's test target)
#
# Tiers run one after the other in the order given, except a tier whose
# block in test/tiers.txt says `lane NAME`: the tiers of one lane run one
# after the other in a job of their own, started when the order reaches the
# lane's first tier, beside the tiers that follow. The quota VM tiers are
# that lane: the VM is a machine of its own (one emulated CPU, its own
# cluster), most of its 18 minutes is the guest's time, and the host's
# cluster tiers beside it mostly wait on kubelet and pods, so running them
# together costs less than the VM's time added to theirs (test/README.md,
# "Where the time goes"). A lane's output goes to _output/tiers/lane-NAME.log
# and is printed whole when make test waits for it (after the last tier, or
# at once when a tier fails). A failure stops everything: the tiers not yet
# started do not run, a lane still running is stopped.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
make=$1
shift
out=$root/_output/tier-times.txt
logs=$root/_output/tiers

# make -n: the tiers print their recipes; there is nothing to time.
flags=${MAKEFLAGS:-}
flags=${flags%% *}
dry=
[[ $flags != -* && $flags == *n* ]] && dry=yes

names=() lanes=() nices=() secs=() states=()
total_start=$SECONDS

fmt() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

summary() {
  local i n=${#names[@]} where
  {
    echo "==> make test: wall time per tier ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores)"
    for ((i = 0; i < n; i++)); do
      where=
      [[ -n ${lanes[$i]} ]] && where="  (lane ${lanes[$i]}, beside the tiers after it)"
      printf '    %-20s %8s  %s%s\n' "${names[$i]}" "${secs[$i]:+$(fmt "${secs[$i]}")}" "${states[$i]}" "$where"
    done
    printf '    %-20s %8s\n' total "$(fmt $((SECONDS - total_start)))"
  } | tee "$out.tmp"
  [[ -n $dry ]] || mv "$out.tmp" "$out"
  rm -f "$out.tmp"
}

for t in "$@"; do
  lane= nice=
  [[ -n $dry ]] || lane=$("$root/hack/tiermap.sh" get "$t" lane)
  [[ -n $dry ]] || nice=$("$root/hack/tiermap.sh" get "$t" nice)
  names+=("$t") lanes+=("$lane") nices+=("${nice:-0}") secs+=("") states+=("not run")
done
[[ -n $dry ]] || mkdir -p "$logs"

# A lane's job records each of its tiers' result in its state file, a line
# "INDEX SECONDS STATE" as each tier ends, so the summary can say how far it
# got even when it was stopped.
declare -A lane_pid=() lane_state=()

# run_tier INDEX: the tier's make target, at its niceness from the map
# (`nice N`: a lane's compiles then take only the CPU the tiers beside it
# leave; idle I/O class too, as the cluster tiers' etcd syncs to disk).
run_tier() {
  local i=$1 niced=()
  ((nices[i] == 0)) || niced=(nice -n "${nices[$i]}" ionice -c 3)
  "${niced[@]}" "$make" --no-print-directory "${names[$i]}"
}

run_lane() { # NAME INDEX...: the lane's tiers in order, stopping at a failure
  local name=$1 i start rc
  shift
  for i in "$@"; do
    start=$SECONDS
    echo "$i 0 running" >>"${lane_state[$name]}"
    echo "==> lane $name: tier ${names[$i]}"
    run_tier "$i"
    rc=$?
    if ((rc != 0)); then
      echo "$i $((SECONDS - start)) FAILED (exit $rc)" >>"${lane_state[$name]}"
      return "$rc"
    fi
    echo "$i $((SECONDS - start)) passed" >>"${lane_state[$name]}"
  done
}

start_lane() { # NAME: starts the lane's job
  local name=$1 i idx=()
  for i in "${!names[@]}"; do
    [[ ${lanes[$i]} == "$name" ]] && idx+=("$i")
  done
  lane_state[$name]=$logs/lane-$name.state
  : >"${lane_state[$name]}"
  echo "==> lane $name: ${#idx[@]} tier(s) start beside the next tiers; output in ${logs#"$root"/}/lane-$name.log, printed when make test waits for it"
  # set -m: the lane gets a process group of its own, so stopping it stops
  # its make, go test and qemu too.
  set -m
  run_lane "$name" "${idx[@]}" >"$logs/lane-$name.log" 2>&1 &
  lane_pid[$name]=$!
  set +m
}

# read_lane NAME: the lane's results into the summary's arrays.
read_lane() {
  local i s st
  while read -r i s st; do
    secs[i]=$s states[i]=$st
  done <"${lane_state[$1]}"
}

# join_lane NAME [stop]: waits for the lane (or stops it), prints its
# output, and returns its exit code.
join_lane() {
  local name=$1 rc
  if [[ ${2:-} == stop ]] && kill -0 "${lane_pid[$name]}" 2>/dev/null; then
    kill -TERM -- "-${lane_pid[$name]}" 2>/dev/null
  fi
  wait "${lane_pid[$name]}"
  rc=$?
  read_lane "$name"
  local i
  for i in "${!names[@]}"; do
    if [[ ${lanes[$i]} == "$name" && ${states[$i]} == running ]]; then
      states[i]="interrupted" secs[i]=""
    fi
  done
  echo "==> lane $name: its output ($(wc -l <"$logs/lane-$name.log") lines, ${logs#"$root"/}/lane-$name.log)"
  cat "$logs/lane-$name.log"
  echo "==> lane $name: end of its output (exit $rc)"
  unset "lane_pid[$name]"
  return "$rc"
}

# lane_failed: a lane's tier has failed (its state file says so).
lane_failed() {
  local name
  for name in "${!lane_pid[@]}"; do
    grep -q ' FAILED' "${lane_state[$name]}" && return 0
  done
  return 1
}

stop_lanes() {
  local name
  for name in "${!lane_pid[@]}"; do join_lane "$name" stop; done
}

current=-1
# Ctrl-C or a kill: the table still says how far it got.
trap 'if ((current >= 0)); then states[current]="interrupted"; secs[current]=$((SECONDS - start)); fi; stop_lanes; summary; exit 130' INT TERM

rc=0 failed=
for i in "${!names[@]}"; do
  lane=${lanes[$i]}
  if [[ -n $lane ]]; then
    [[ -v lane_state[$lane] ]] || start_lane "$lane"
    continue
  fi
  current=$i start=$SECONDS
  states[i]="running"
  run_tier "$i"
  rc=$?
  secs[i]=$((SECONDS - start))
  if ((rc != 0)); then
    states[i]="FAILED (exit $rc)"
    failed=${names[$i]}
    break
  fi
  states[i]="passed"
  # A lane that failed fails make test now, not after the tiers beside it.
  if lane_failed; then
    failed=lane
    break
  fi
done
# shellcheck disable=SC2034 # read by the trap: no tier is running now
current=-1
[[ -n $dry ]] && { echo "==> make -n: tiers listed, none run"; exit 0; }
if [[ -n $failed ]]; then
  stop_lanes
else
  for lane in "${!lane_pid[@]}"; do
    echo "==> waiting for lane $lane"
    join_lane "$lane" || rc=$?
  done
fi
summary
# The first failed tier in the summary's order (a lane's, or the one that
# stopped the sequence).
for i in "${!names[@]}"; do
  if [[ ${states[$i]} == FAILED* ]]; then
    failed=${names[$i]}
    ((rc != 0)) || rc=1
    break
  fi
done
if ((rc != 0)); then
  echo "==> make test FAILED in tier ${failed:-of a lane}: the tiers not yet started did not run" >&2
  exit "$rc"
fi
echo "==> make test: all tiers passed"
