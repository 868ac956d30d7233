# skycore: start one job part on a node, detached from the caller (bash; arguments in the
# environment). Its own session (the job's process group, which cancel kills), output to the
# node's job log, and, once it ends, the node's cached mounts drained BEFORE its exit code is
# written: a finished part is durable whether or not any terminal still watches it.
#   SKYCORE_JOBS       the node's job table (a leading ~ is $HOME)
#   SKYCORE_JOB_ID     the job id ('' for a part of no job: the table's "adhoc" folder)
#   SKYCORE_JOB_PART   <kind>-<rank>
#   SKYCORE_JOB_WORKDIR  where the part runs ('' for $HOME; a leading ~ is $HOME)
#   SKYCORE_JOB_BODY   the part's bash
#   SKYCORE_JOB_DRAIN  bash that drains the node's cached mounts after the part ('' for none)
set -e
jobs=${SKYCORE_JOBS/#\~/$HOME}
id=$SKYCORE_JOB_ID
d=$jobs/${id:-adhoc}
stem=$d/$SKYCORE_JOB_PART
workdir=${SKYCORE_JOB_WORKDIR/#\~/$HOME}
body=$SKYCORE_JOB_BODY
drain=$SKYCORE_JOB_DRAIN
# the part's environment is the caller's without these
unset SKYCORE_JOBS SKYCORE_JOB_ID SKYCORE_JOB_PART SKYCORE_JOB_WORKDIR SKYCORE_JOB_BODY
unset SKYCORE_JOB_DRAIN
mkdir -p "$d"
rm -f "$stem.exit" "$stem.exit.drain-failed" "$stem.log"
{
  # A cancel that came before the part started left a marker (job_cancel.sh).
  if [ -n "$id" ]; then printf '[ -e %q ] && exit 143\n' "$jobs/$id.cancelled"; fi
  if [ -n "$workdir" ]; then
    printf 'cd %q\n' "$workdir"
  else
    # shellcheck disable=SC2016  # expanded where the part runs
    echo 'cd "$HOME"'
  fi
  printf '%s\n' "$body"
} >"$stem.sh"
if [ -n "$drain" ]; then printf '%s\n' "$drain" >"$stem.drain.sh"; else rm -f "$stem.drain.sh"; fi

# The detached wrapper: $1 the part's path stem, $2 the job's pid file ('' for none).
# shellcheck disable=SC2317,SC2329  # run from the file written below
wrap() {
  echo $$ | tee "$1.pid" ${2:+"$2"} >/dev/null
  bash "$1.sh" >>"$1.log" 2>&1
  rc=$?
  if [ -f "$1.drain.sh" ]; then
    bash "$1.drain.sh" >"$1.drain.log.new" 2>&1 || {
      rc=$((rc ? rc : 1))
      : >"$1.exit.drain-failed"
    }
    # what the job must hear of its mounts (a cache disk that ran full) goes to its log too
    grep -F 'skycore: cache full:' "$1.drain.log.new" >>"$1.log" || true
    cat "$1.drain.log.new" >>"$1.drain.log" && rm -f "$1.drain.log.new"
  fi
  echo "$rc" >"$1.exit.tmp" && mv -f "$1.exit.tmp" "$1.exit"
}
{
  declare -f wrap
  echo 'wrap "$@"'
} >"$stem.sh.wrap"
setsid -f bash "$stem.sh.wrap" "$stem" "${id:+$jobs/$id.pid}" </dev/null >/dev/null 2>&1
for _ in $(seq 200); do [ -s "$stem.pid" ] && exit 0; sleep 0.02; done
echo 'skycore: the job part did not start on this node' >&2
exit 1
