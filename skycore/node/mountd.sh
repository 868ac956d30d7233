# skycore: run one command of the node's mount program (skycore/node/mountd) with python3
# (bash; arguments are shell variables, set by quoted assignments before this text):
#   SKYCORE_MOUNTD_COMMAND  up-many, copy-many, drain, unmount or live
#   SKYCORE_REQUEST         the command's JSON request (the program reads it from the environment)
#   SKYCORE_MOUNTD_FILE     the program's file (written with the credentials), or
#   SKYCORE_MOUNTD_PROGRAM  the program's text, run from stdin (this skycore's own version,
#                           whatever file the node has)
# Exits with the program's exit code.
set -euo pipefail
unset AWS_CA_BUNDLE
if ! command -v python3 >/dev/null 2>&1; then
  echo 'skycore: python3 is missing on this node (skycore runs its mount helper with it); install python3 in the node image.' >&2
  exit 127
fi
if [ -n "${SKYCORE_MOUNTD_PROGRAM:-}" ]; then
  SKYCORE_REQUEST=$SKYCORE_REQUEST python3 - "$SKYCORE_MOUNTD_COMMAND" <<<"$SKYCORE_MOUNTD_PROGRAM"
  exit
fi
if [ ! -f "$SKYCORE_MOUNTD_FILE" ]; then
  echo "skycore: the mount helper $SKYCORE_MOUNTD_FILE is missing on this node; it is written with the credentials (skycore launch or start does that)." >&2
  exit 1
fi
SKYCORE_REQUEST=$SKYCORE_REQUEST python3 "$SKYCORE_MOUNTD_FILE" "$SKYCORE_MOUNTD_COMMAND"
