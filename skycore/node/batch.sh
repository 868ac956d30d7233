# skycore node batch (bash): one exec per node for many steps, and the files they need.
# stdin: a tar holding files/<i> and files.paths (their paths on the node, NUL-separated; a
# leading ~ is $HOME), written first, each mode 0600 and replaced atomically (exit 3 if that
# fails), and steps/<i>, bash scripts run side by side. Prints each step's output, then a
# "SKYCORE_ENTRY_RC <i> <exit code>" line for it.
# Output goes through files: a daemon a step leaves behind (rclone mount) must not hold
# docker's output streams (the engine then stalls ~2 s on this exec and the next).
d=$(mktemp -d /tmp/skycore-batch.XXXXXX) || exit 3
trap 'rm -rf "$d"' EXIT
if ! (umask 077 && tar -x -C "$d" -f -); then
  echo 'skycore: reading the batch from stdin failed'
  exit 3
fi
write_files() {
  local i=0 p
  umask 077
  while IFS= read -r -d '' p; do
    case $p in
      \~) p=$HOME ;;
      \~/*) p=$HOME/${p#\~/} ;;
    esac
    mkdir -p "$(dirname "$p")" && mv -f "$d/files/$i" "$p.skytmp" &&
      chmod 600 "$p.skytmp" && mv -f "$p.skytmp" "$p" || return 1
    i=$((i + 1))
  done <"$d/files.paths"
}
if [ -f "$d/files.paths" ] && ! (write_files); then
  echo 'skycore: writing the credential files failed'
  exit 3
fi
n=0
while [ -f "$d/steps/$n" ]; do n=$((n + 1)); done
for ((i = 0; i < n; i++)); do
  (
    bash "$d/steps/$i" >"$d/out.$i" 2>&1 </dev/null
    echo $? >"$d/rc.$i"
  ) &
done
wait
for ((i = 0; i < n; i++)); do
  cat "$d/out.$i"
  echo "SKYCORE_ENTRY_RC $i $(cat "$d/rc.$i" 2>/dev/null || echo 255)"
done
