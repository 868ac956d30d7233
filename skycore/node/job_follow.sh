# skycore: print a job part's node log from the start and follow it until the part ends, then
# exit with the part's exit code (143 if it was cancelled, 137 if it died without one). Safe
# to run from any terminal, any number of times. If the node's drain after the part failed, a
# "skycore: draining the cached mounts on this node failed" line and the drain log's tail
# follow the part's output. Arguments in the environment: SKYCORE_JOBS, SKYCORE_JOB_ID,
# SKYCORE_JOB_PART (as for job_start.sh).
shown=$SKYCORE_JOBS/${SKYCORE_JOB_ID:-adhoc}/$SKYCORE_JOB_PART
jobs=${SKYCORE_JOBS/#\~/$HOME}
stem=$jobs/${SKYCORE_JOB_ID:-adhoc}/$SKYCORE_JOB_PART
cancelled=/nonexistent
if [ -n "$SKYCORE_JOB_ID" ]; then cancelled=$jobs/$SKYCORE_JOB_ID.cancelled; fi
for _ in $(seq 500); do [ -s "$stem.pid" ] && break; sleep 0.02; done
[ -s "$stem.pid" ] || {
  echo 'skycore: no such job part on this node' >&2
  exit 2
}
p=$(cat "$stem.pid")
touch "$stem.log"
# tail --pid can stop (under load) before printing what the part wrote last: count what it
# printed and print the rest of the log once it is done.
cnt=$(mktemp)
{ tail -n +1 -s 0.1 -F --pid="$p" "$stem.log" 2>/dev/null | tee /dev/fd/3 | wc -c >"$cnt"; } 3>&1 || true
n=$(cat "$cnt" 2>/dev/null || echo 0)
rm -f "$cnt"
tail -c +$((${n:-0} + 1)) "$stem.log" 2>/dev/null || true
if [ -f "$stem.exit" ]; then
  if [ -f "$stem.exit.drain-failed" ]; then
    echo "skycore: draining the cached mounts on this node failed (its log on the node: $shown.drain.log):"
    tail -n 20 "$stem.drain.log" 2>/dev/null | sed 's/^/  | /'
  fi
  exit "$(cat "$stem.exit")"
fi
[ -e "$cancelled" ] && exit 143
exit 137
