# skycore node health check (bash, streamed to the node by skycore.backend).
# The node answers through its runtime, /dev/fuse opens read-write, fusermount is there and
# the shell holds CAP_SYS_ADMIN (bit 21), which mounting needs.
echo skycore-health-start
set -e
exec 3<>/dev/fuse
command -v fusermount3 >/dev/null || command -v fusermount >/dev/null
cap=$(awk '/^CapEff/ {print $2}' /proc/self/status)
(( (16#$cap >> 21) & 1 ))
echo "skycore-home $HOME"
echo skycore-node-ok
