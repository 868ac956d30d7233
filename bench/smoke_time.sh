#!/usr/bin/env bash
# Wall time of the whole smoke suite (all three stores) with one worker and with -n auto.
# Target: under 6 minutes with -n auto. Prints the times and writes bench/results/smoke_time.json.
#
#   bench/smoke_time.sh [--no-check]
#
# pytest's exit status of each run is recorded. A run that did not pass has no time (null in
# the JSON; its wall time is kept as *_elapsed_s) and the script exits with the first non-zero
# pytest status. A missed target exits 1 unless --no-check (exploratory run); --no-check never
# hides a failing suite.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
TARGET_NAUTO_S=360
check=1
for arg in "$@"; do
  case "$arg" in
    --no-check) check=0 ;;
    *) echo "usage: $0 [--no-check]" >&2; exit 2 ;;
  esac
done
mkdir -p bench/results
"$BIN/harness" up >/dev/null
declare -A secs elapsed statuses
for workers in 1 auto; do
  start=$(date +%s.%N)
  status=0
  "$BIN/pytest" tests/smoke -q -n "$workers" --dist loadgroup -p no:cacheprovider \
    > "bench/results/smoke-n$workers.log" 2>&1 || status=$?
  end=$(date +%s.%N)
  elapsed[$workers]=$("$BIN/python" -c "print(round($end - $start, 1))")
  statuses[$workers]=$status
  if [ "$status" -eq 0 ]; then secs[$workers]=${elapsed[$workers]}; else secs[$workers]=null; fi
  echo "pytest tests/smoke -n $workers: ${elapsed[$workers]} s (exit $status; $(tail -n 1 "bench/results/smoke-n$workers.log"))"
done

suite_status=0
for workers in 1 auto; do
  if [ "${statuses[$workers]}" -ne 0 ] && [ "$suite_status" -eq 0 ]; then
    suite_status=${statuses[$workers]}
  fi
done
target_met=$("$BIN/python" -c "
v = '${secs[auto]}'
print('true' if v != 'null' and float(v) < $TARGET_NAUTO_S else 'false')")

printf '{"n1_s": %s, "nauto_s": %s, "n1_elapsed_s": %s, "nauto_elapsed_s": %s, "n1_exit": %s, "nauto_exit": %s, "target_nauto_s": %s, "target_met": %s, "checked": %s}\n' \
  "${secs[1]}" "${secs[auto]}" "${elapsed[1]}" "${elapsed[auto]}" "${statuses[1]}" \
  "${statuses[auto]}" "$TARGET_NAUTO_S" "$target_met" "$([ $check = 1 ] && echo true || echo false)" \
  > bench/results/smoke_time.json
echo "saved bench/results/smoke_time.json"

if [ "$suite_status" -ne 0 ]; then
  echo "FAILED: the smoke suite did not pass (see bench/results/smoke-n*.log): exit $suite_status"
  exit "$suite_status"
fi
if [ "$target_met" = true ]; then
  echo "target -n auto: ${secs[auto]} s < $TARGET_NAUTO_S s met"
  exit 0
fi
echo "target -n auto: ${secs[auto]} s < $TARGET_NAUTO_S s MISSED"
if [ "$check" = 1 ]; then exit 1; fi
echo "exit 0 because of --no-check"
