# skycore: list every mount point at once (bash; arguments in the environment):
#   SKYCORE_PROBE_DSTS   the mount points, one a line (a leading ~ is $HOME)
#   SKYCORE_PROBE_TOKEN  names this probe's result files
#   SKYCORE_PROBE_STEPS  how many tenths of a second a listing (or the mount) is waited for
# prints "SKYCORE_PROBE <i> <exit code> <error>" per mount point: 137 when the listing has not
# ended in time, 200 when no FUSE mount appeared there in time.
# A listing the store holds cannot be killed (the kernel waits for rclone's answer once the
# request reached it), so each runs in the background, detached, its result in
# /tmp/skycore-probe-<token>-<i>.rc; the next probe with the same token waits for that listing
# instead of starting another.
is_fuse() { awk -v d="$1" '$2 == d && ($3 == "fuse" || $3 ~ /^fuse\./) {f=1} END {exit !f}' /proc/self/mounts; }
steps=$SKYCORE_PROBE_STEPS
probe() {
  local i=$1 d f n=0
  d=$(realpath -m -- "$2")
  f=/tmp/skycore-probe-$SKYCORE_PROBE_TOKEN-$i
  until is_fuse "$d"; do
    n=$((n + 1))
    if [ "$n" -ge "$steps" ]; then
      echo "SKYCORE_PROBE $i 200 not mounted"
      return
    fi
    sleep 0.1
  done
  if [ ! -e "$f.rc" ] && ! { [ -s "$f.pid" ] && kill -0 "$(cat "$f.pid")" 2>/dev/null; }; then
    # shellcheck disable=SC2016  # the listing's own arguments
    setsid bash -c 'ls -A -- "$1" >/dev/null 2>"$2.err"; echo $? >"$2.tmp"; mv -f "$2.tmp" "$2.rc"' \
      _ "$d" "$f" </dev/null >/dev/null 2>&1 &
    echo $! >"$f.pid"
  fi
  for _ in $(seq "$steps"); do [ -e "$f.rc" ] && break; sleep 0.1; done
  if [ -e "$f.rc" ]; then
    echo "SKYCORE_PROBE $i $(cat "$f.rc") $(head -c 300 "$f.err" | tr '\n' ' ')"
    rm -f "$f.rc" "$f.err" "$f.pid"
  else
    echo "SKYCORE_PROBE $i 137"
  fi
}
i=0
while IFS= read -r dst; do
  case $dst in
    \~) dst=$HOME ;;
    \~/*) dst=$HOME/${dst#\~/} ;;
  esac
  probe "$i" "$dst" &
  i=$((i + 1))
done <<<"$SKYCORE_PROBE_DSTS"
wait
