# skycore: reserve the first free job id >= SKYCORE_JOB_FIRST in the node's job table
# (SKYCORE_JOBS; each id is one mkdir) and write SKYCORE_JOB_META, with every
# SKYCORE_JOB_ID_PLACEHOLDER in it made the id, as its job.json; prints "SKYCORE_JOB_ID <id>".
jobs=${SKYCORE_JOBS/#\~/$HOME}
mkdir -p "$jobs" || exit 1
n=$SKYCORE_JOB_FIRST
# taken ids exist; any other mkdir failure (a full disk, say) ends the loop
while ! mkdir "$jobs/$n" 2>/dev/null; do
  [ -e "$jobs/$n" ] || exit 1
  n=$((n + 1))
done
printf '%s' "${SKYCORE_JOB_META//"$SKYCORE_JOB_ID_PLACEHOLDER"/$n}" >"$jobs/$n/job.json" &&
  echo "SKYCORE_JOB_ID $n"
