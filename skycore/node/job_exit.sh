# skycore: the recorded exit code of a job part on this node, RUNNING while it runs, NEVER if
# it never started. Arguments in the environment: SKYCORE_JOBS, SKYCORE_JOB_ID,
# SKYCORE_JOB_PART (as for job_start.sh).
stem=${SKYCORE_JOBS/#\~/$HOME}/${SKYCORE_JOB_ID:-adhoc}/$SKYCORE_JOB_PART
cat "$stem.exit" 2>/dev/null || { [ -s "$stem.pid" ] && echo RUNNING; } || echo NEVER
