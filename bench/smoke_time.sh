#!/usr/bin/env bash
# Wall time of the whole smoke suite (all three stores) with one worker and with -n auto.
# Target: under 6 minutes with -n auto. Prints the times and writes bench/results/smoke_time.json.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
mkdir -p bench/results
"$BIN/harness" up >/dev/null
declare -A secs
for workers in 1 auto; do
  start=$(date +%s.%N)
  status=0
  "$BIN/pytest" tests/smoke -q -n "$workers" --dist loadgroup -p no:cacheprovider \
    > "bench/results/smoke-n$workers.log" 2>&1 || status=$?
  end=$(date +%s.%N)
  secs[$workers]=$("$BIN/python" -c "print(round($end - $start, 1))")
  echo "pytest tests/smoke -n $workers: ${secs[$workers]} s (exit $status; $(tail -n 1 "bench/results/smoke-n$workers.log"))"
done
printf '{"n1_s": %s, "nauto_s": %s, "target_nauto_s": 360}\n' "${secs[1]}" "${secs[auto]}" \
  > bench/results/smoke_time.json
echo "saved bench/results/smoke_time.json"
