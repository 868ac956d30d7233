#!/usr/bin/env bash
# Wall time of the whole smoke suite (every registered store, as `make smoke` runs it) at
# -n 2. Target: within 8 minutes. Prints the time and writes
# bench/results/smoke_time-<timestamp>.json with the load average before and after.
#
#   bench/smoke_time.sh [--no-check]
#
# pytest's exit status is recorded. A run that did not pass has no time (null in the JSON;
# its wall time is kept as elapsed_s) and the script exits with pytest's status. A missed
# target exits 1 unless --no-check (exploratory run); --no-check never hides a failing suite.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
TARGET_S=480
WORKERS=2
check=1
for arg in "$@"; do
  case "$arg" in
    --no-check) check=0 ;;
    *) echo "usage: $0 [--no-check]" >&2; exit 2 ;;
  esac
done
mkdir -p bench/results
"$BIN/harness" up >/dev/null
stamp=$(date +%Y%m%d-%H%M%S)
log="bench/results/smoke-n$WORKERS-$stamp.log"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
start=$(date +%s.%N)
status=0
"$BIN/pytest" tests/smoke -q -n "$WORKERS" --dist loadgroup -p no:cacheprovider \
   > "$log" 2>&1 || status=$?
end=$(date +%s.%N)
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
elapsed=$("$BIN/python" -c "print(round($end - $start, 1))")
if [ "$status" -eq 0 ]; then secs=$elapsed; else secs=null; fi
echo "pytest tests/smoke -n $WORKERS: $elapsed s (exit $status; $(tail -n 1 "$log"))"
target_met=$("$BIN/python" -c "
v = '$secs'
print('true' if v != 'null' and float(v) <= $TARGET_S else 'false')")
out="bench/results/smoke_time-$stamp.json"
printf '{"workers": %s, "smoke_s": %s, "elapsed_s": %s, "exit": %s, "target_s": %s, "target_met": %s, "checked": %s, "loadavg_before": "%s", "loadavg_after": "%s", "log": "%s"}\n' \
  "$WORKERS" "$secs" "$elapsed" "$status" "$TARGET_S" "$target_met" \
  "$([ $check = 1 ] && echo true || echo false)" "$load_before" "$load_after" "$log" > "$out"
echo "saved $out"

if [ "$status" -ne 0 ]; then
  echo "FAILED: the smoke suite did not pass (see $log): exit $status"
  exit "$status"
fi
if [ "$target_met" = true ]; then
  echo "target -n $WORKERS: $secs s <= $TARGET_S s met"
  exit 0
fi
echo "target -n $WORKERS: $secs s <= $TARGET_S s MISSED"
if [ "$check" = 1 ]; then exit 1; fi
echo "exit 0 because of --no-check"
