# skycore: kill the process group of a job on this node (SIGTERM, then SIGKILL).
# A marker file is written first: a job script that starts (or writes its pid file) after this
# check sees the marker and exits at once, so a cancel that arrives before the pid file exists
# is not lost. Arguments in the environment: SKYCORE_JOBS, SKYCORE_JOB_ID.
jobs=${SKYCORE_JOBS/#\~/$HOME}
mkdir -p "$jobs"
: >"$jobs/$SKYCORE_JOB_ID.cancelled"
f=$jobs/$SKYCORE_JOB_ID.pid
[ -f "$f" ] || exit 0
p=$(cat "$f")
kill -TERM -- "-$p" 2>/dev/null || true
for _ in $(seq 20); do
  kill -0 -- "-$p" 2>/dev/null || exit 0
  sleep 0.1
done
kill -KILL -- "-$p" 2>/dev/null || true
