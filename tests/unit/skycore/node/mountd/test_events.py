"""What wakes a node's refresher (skycore/node/mountd/events.py), on a real folder with real
inotify and a real process: rclone's log lines, a rotation of that log, an upload hold that
ends, the registry replaced, a poke, the daemon's end; and the one line a drain says when the
cache disk was full (cachefull.py)."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path

from skycore.node.mountd import cachefull
from skycore.node.mountd.events import DaemonWatch, Woken
from skycore.node.mountd.journal import digest, state_dir
from skycore.node.mountd.keepers import JOURNAL_LOOK_S, DaemonKeepers

GUARD_S = 10.0  # hang guard: every event here arrives within milliseconds
QUEUED = "2026/12/05 11:04:32 INFO  : ckpt.bin: vfs cache: queuing for upload in 1000000s\n"
CLEANED = "2026/12/05 11:04:42 INFO  : S3 bucket b: vfs cache: cleaned: objects 1 (was 1)\n"
NO_SPACE = (
    "2026/12/05 11:04:32 ERROR : IO error: write /n/rcd-t1/cache/vfs/s3/b/ckpt-7.bin: "
    "no space left on device\n"
)


def watch_in(tmp_path: Path) -> tuple[DaemonWatch, Path]:
    log = tmp_path / "rclone.log"
    log.write_text("2026/12/05 11:00:00 INFO  : started\n")
    watch = DaemonWatch(str(tmp_path))
    assert watch.evented, "inotify is missing: the refresher would poll"
    return watch, log


def append(path: Path, text: str) -> None:
    with open(path, "a") as f:
        f.write(text)


def test_an_upload_line_wakes_and_the_cleaners_line_does_not(tmp_path: Path) -> None:
    watch, log = watch_in(tmp_path)
    append(log, CLEANED)
    assert not watch.wait(GUARD_S).uploads  # woken by the write, nothing to do
    append(log, QUEUED)
    assert watch.wait(GUARD_S).uploads
    quiet = watch.wait(0.05)  # nothing pending: the timeout ends it
    assert not (quiet.uploads or quiet.registry or quiet.holds_ended or quiet.gone)
    watch.close()


def test_a_rotated_log_is_followed_into_the_new_file(tmp_path: Path) -> None:
    watch, log = watch_in(tmp_path)
    append(log, CLEANED)
    log.rename(tmp_path / "rclone-2026-12-05T11-04-32.log")  # what rclone's rotation does
    log.write_text(QUEUED)
    woken = watch.wait(GUARD_S)
    while not woken.uploads:  # the rename and the create may come as two wake-ups
        woken = watch.wait(GUARD_S)
    assert woken.uploads
    watch.close()


def test_holds_registry_pokes_and_the_daemons_end_wake_it(tmp_path: Path) -> None:
    watch, _ = watch_in(tmp_path)
    hold = tmp_path / "holds" / f"{digest('remote:b')}.123.456"
    hold.write_text("")
    hold.unlink()
    assert digest("remote:b") in watch.wait(GUARD_S).holds_ended
    (tmp_path / "refresh.json.tmp").write_text("{}")
    os.replace(tmp_path / "refresh.json.tmp", tmp_path / "refresh.json")
    assert watch.wait(GUARD_S).registry
    threading.Timer(0.05, watch.poke).start()
    assert watch.wait(GUARD_S).registry
    daemon = subprocess.Popen(["sleep", "30"])
    assert watch.follow_pid(daemon.pid)
    assert not watch.wait(0.05).gone
    daemon.kill()
    daemon.wait()
    assert watch.wait(GUARD_S).gone
    watch.close()


def test_a_full_disk_is_noted_with_its_cache_path(tmp_path: Path) -> None:
    watch, log = watch_in(tmp_path)
    append(log, NO_SPACE)
    woken = watch.wait(GUARD_S)
    assert woken.no_space == ["/n/rcd-t1/cache/vfs/s3/b/ckpt-7.bin"] and woken.uploads
    watch.close()


def test_a_drain_says_once_that_the_cache_was_full_and_of_what(tmp_path: Path) -> None:
    d = str(tmp_path)
    os.makedirs(state_dir(d))
    records = [
        {"t": 1796469000.0 + k, "fs": "remote:b", "names": [f"ckpt-{k}.bin"], "waiting": 6 + k,
         "waiting_bytes": (6 + k) << 20, "disk_total": 1 << 30, "disk_free": 0}
        for k in range(4)
    ] + [{"t": 1796469000.0, "fs": "remote:other", "names": ["x"], "waiting": 1,
          "waiting_bytes": 1, "disk_total": 1 << 30, "disk_free": 0}]  # fmt: skip
    Path(state_dir(d), cachefull.RECORDS).write_text("".join(json.dumps(r) + "\n" for r in records))
    line = cachefull.report(d, "remote:b", "/ckpt")
    assert line is not None and "\n" not in line
    assert line.startswith(f"{cachefull.MARK} /ckpt: the node's cache disk (1.0 GiB) was full")
    assert "9 file(s) (9.0 MiB) waiting for the store" in line
    assert "ckpt-0.bin, ckpt-1.bin, ckpt-2.bin and 1 more failed with EIO" in line
    assert cachefull.report(d, "remote:b", "/ckpt") is None  # said once
    assert cachefull.report(d, "remote:other", "/other") is not None


def test_a_daemon_releases_from_its_log_only_for_its_one_uploading_mount(tmp_path: Path) -> None:
    """A success line names a file, not its mount: the next upload is released from it only
    when one ordered mount is the daemon's only mount that uploads."""
    keepers = DaemonKeepers(str(tmp_path), lambda _: None)
    keepers.match({"remote:a": 0.0}, uploaders={"remote:a"})
    assert keepers.exclusive is keepers.slots["remote:a"]
    keepers.match({"remote:a": 0.0}, uploaders={"remote:a", "remote:unordered"})
    assert keepers.exclusive is None
    keepers.match({"remote:a": 0.0, "remote:b": 0.0}, uploaders={"remote:a", "remote:b"})
    assert keepers.exclusive is None and set(keepers.slots) == {"remote:a", "remote:b"}


def test_a_close_during_an_upload_is_written_down_soon_not_at_once(tmp_path: Path) -> None:
    slot = DaemonKeepers(str(tmp_path), lambda _: None)
    slot.match({"remote:a": 0.0}, uploaders={"remote:a"})
    keeper = slot.slots["remote:a"]
    keeper.busy, keeper.last_look, keeper.next_look = True, 100.0, 105.0
    assert not keeper.wants_look(Woken(uploads=True, queued=True), now=100.01)
    assert keeper.next_look == 100.0 + JOURNAL_LOOK_S  # written down within JOURNAL_LOOK_S
    assert keeper.wants_look(Woken(uploads=True, queued=True), now=100.0 + JOURNAL_LOOK_S)
    assert keeper.wants_look(Woken(uploads=True, succeeded=["x"]), now=100.01)
    assert not keeper.wants_look(Woken(uploads=True, succeeded=["x"]), 100.01, released=True)
    assert keeper.wants_look(Woken(uploads=True, ended=True), now=100.01)
    keeper.busy = False
    assert keeper.wants_look(Woken(uploads=True, queued=True), now=100.01)  # may go at once
