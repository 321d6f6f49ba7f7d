#!/usr/bin/env bash
# Hunt flaky tests: run the suite again and again and list every test that failed even once.
#
#   make flake-hunt                     # 5 fresh clones of HEAD, each `make test` from nothing
#   make flake-hunt RUNS=10 PART=fragile # tests/browser + the fault tests, 10 times in one clone
#
# RUNS: how many runs (default 5 for the whole suite, 10 for PART=fragile).
# PART=whole (default): each run is a fresh clone of the committed HEAD (new virtualenv, new
#   test database), exactly what CI does; uncommitted changes are not tested.
# PART=fragile: the tests that drive a browser or break services on purpose, in one clone.
# Each run's full output is kept in OUT (default var/flake-hunt/<time>/run-N.log); the summary
# (status, duration, pytest's closing line, failed tests) is printed and kept in summary.txt.
set -uo pipefail

top=$(git rev-parse --show-toplevel)
part=${PART:-whole}
case "$part" in
  whole) runs=${RUNS:-5} ;;
  fragile) runs=${RUNS:-10} ;;
  *) echo "PART must be whole or fragile, not '$part'" >&2; exit 2 ;;
esac
out=${OUT:-$top/var/flake-hunt/$(date -u +%Y%m%d-%H%M%S)-$part}
mkdir -p "$out"
summary="$out/summary.txt"
commit=$(git -C "$top" rev-parse --short HEAD)
echo "flake hunt: $part suite, $runs run(s), commit $commit, logs in $out" | tee "$summary"

clone() {
  local dir
  dir=$(mktemp -d /tmp/flake-hunt-XXXXXX)
  git clone -q "$top" "$dir"
  echo "$dir"
}

if [ "$part" = fragile ]; then
  dir=$(clone)
  (cd "$dir" && make install >/dev/null) || { echo "install failed in $dir" | tee -a "$summary"; exit 1; }
fi

failed_runs=0
for i in $(seq 1 "$runs"); do
  log="$out/run-$i.log"
  began=$(date +%s)
  if [ "$part" = whole ]; then
    dir=$(clone)
    at=$(git -C "$dir" rev-parse --short HEAD)
    (cd "$dir" && bash .ci/run) >"$log" 2>&1
    status=$?
    rm -rf "$dir"
  else
    at=$(git -C "$dir" rev-parse --short HEAD)
    (cd "$dir" && make test PYTEST_ARGS="tests/browser tests/scheduler/test_failures_processes.py tests/governance/test_database_unavailable.py -p no:cacheprovider") >"$log" 2>&1
    status=$?
  fi
  seconds=$(( $(date +%s) - began ))
  closing=$(grep -E '^=+ .*(passed|failed|error).* =+$' "$log" | tail -n 1)
  echo "run $i ($at): exit $status in ${seconds}s: ${closing:-no pytest summary}" | tee -a "$summary"
  grep -E '^(FAILED|ERROR) ' "$log" | sed 's/^/    /' | tee -a "$summary"
  [ "$status" -eq 0 ] || failed_runs=$((failed_runs + 1))
done
[ "$part" = fragile ] && rm -rf "$dir"

echo "$((runs - failed_runs)) of $runs run(s) passed" | tee -a "$summary"
[ "$failed_runs" -eq 0 ]
