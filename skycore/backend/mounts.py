"""Mounts already on the nodes: mount them again after a start (waiting for a store that
does not answer), and drain cached uploads before a run ends, a stop or a down."""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

from skycore import logs, node
from skycore.backend.batch import NodeStep, ShellStep, run_batch
from skycore.backend.handle import ClusterHandle
from skycore.concurrency import parallel
from skycore.config import SkycoreConfig
from skycore.errors import StageError
from skycore.runner import CommandRunner
from skycore.state.mounts import get_cluster_mounts
from skycore.storage import mounting, rclone_env, recipes
from skycore.storage.common import StorageMode
from skycore.storage.storage import Storage

DRAIN_TIMEOUT_S = 600
Say = Callable[[str], None]


def remount(
    handle: ClusterHandle,
    log_path: Path,
    say: Say | None = None,
    store_wait_s: float | None = None,
) -> int:
    """Mount every recorded MOUNT / MOUNT_CACHED entry again (after start); returns count.

    With ``store_wait_s`` (start), a mount counts as back only once it is mounted and
    answers a listing of its bucket on every node: a mount call returns at once while its
    store is out (rclone asks the store only on first use), and the first read would then
    hang. start waits up to ``store_wait_s`` for a store that does not answer, saying so
    through ``say`` every STORE_PROBE_S; past that, StageError naming the mounts, nodes and
    stores. A mount call that waits for the store itself (a prefix: rclone asks whether it
    is an object) holds the mount batch: start says so meanwhile; if the node program's own
    rc timeout ends that call, rclone still finishes it once the store answers, so the
    mount is waited for, never asked for twice; a batch that failed at once for want of a
    connection is run again."""
    mounts = [m for m in get_cluster_mounts(handle.name) if m.spec is not None]
    if not mounts:
        return 0
    prepare_nodes(handle, [m.mode for m in mounts])
    entries: list[tuple[str, NodeStep]] = [
        (f"mount {m.dst}", mount_entry(Storage.from_mount_spec(m.spec), m.dst, handle.config))
        for m in mounts
        if m.spec is not None
    ]
    files = rclone_env.node_files(handle.config)
    if store_wait_s is None:
        run_batch(handle, entries, log_path, files=files)
        return len(mounts)
    where = {
        m.dst: str(Storage.from_mount_spec(m.spec).url(handle.config))
        for m in mounts
        if m.spec is not None
    }
    waited = _StoreWait(handle, where, log_path, say, store_wait_s)
    token = uuid.uuid4().hex[:12]
    mounted = False
    while True:
        if not mounted:
            failure, output = waited.mount_batch(entries, files)
            if failure is not None and _CALL_TIMED_OUT.search(output) is None:
                if not any(marker in output.lower() for marker in _UNREACHABLE):
                    raise failure
                waited.batch_failed(failure)  # nothing pending on the node: mount again
                continue
            mounted = True
        bad = _unanswered_mounts(handle, list(where), token, log_path)
        if not bad:
            if waited.said:
                waited.tell(f"the store answers: {', '.join(where)} mounted again")
            return len(mounts)
        waited.not_answering(bad)


STORE_WAIT_S = 300.0
"""How long start waits for the store of a re-mounted mount that does not answer (then it
fails, naming the mount; the cluster stays INIT)."""
STORE_PROBE_S = 5.0
"""A listing through a re-mounted mount that takes longer is no answer (yet); also how often
start says that it waits."""
_PROBE_LINE = re.compile(r"^SKYCORE_PROBE (\d+) (\d+) ?(.*)$")
# What the node program prints when its rc call to mount timed out (the call goes on in rclone).
_CALL_TIMED_OUT = re.compile(r"skycore: rclone failed to mount .*: timed out")
# A mount batch that failed with one of these found no store to talk to.
_UNREACHABLE = (
    "connection refused",
    "connection reset",
    "no such host",
    "network is unreachable",
    "no route to host",
    "i/o timeout",
    "deadline exceeded",
)
_NOT_MOUNTED = 200  # probe_mounts_command: the mount point is not mounted (yet)


def probe_mounts_command(
    dsts: Sequence[str], token: str, timeout_s: float = STORE_PROBE_S
) -> tuple[str, dict[str, str]]:
    """(bash, environment) listing every mount point in ``dsts`` at once (node program
    probe.sh); prints ``SKYCORE_PROBE <i> <exit code> <error>`` per mount: 137 when the listing
    has not ended in ``timeout_s``, _NOT_MOUNTED when no FUSE mount appeared there in
    ``timeout_s``. A listing the store holds is never started twice for one ``token``."""
    if any("\n" in d for d in dsts):
        raise ValueError(f"a mount point holds a newline: {list(dsts)!r}")
    env = {
        "SKYCORE_PROBE_DSTS": "\n".join(dsts),
        "SKYCORE_PROBE_TOKEN": token,
        "SKYCORE_PROBE_STEPS": str(max(1, int(timeout_s * 10))),
    }
    return node.program("probe.sh"), env


def _unanswered_mounts(
    handle: ClusterHandle, dsts: Sequence[str], token: str, log_path: Path
) -> dict[str, dict[str, str]]:
    """{mount point: {node: why}} for every mount that is not mounted yet, or whose listing
    did not end well within STORE_PROBE_S: why is '' when the store has not answered yet,
    else what went wrong (a store that is out may also answer with errors once rclone's own
    retries are spent)."""
    cmd, env = probe_mounts_command(dsts, token)

    def one(runner: CommandRunner) -> dict[str, str]:
        rc, out = runner.run_output(cmd, env=env, timeout=STORE_PROBE_S + 60)
        codes: dict[int, tuple[int, str]] = {}
        for line in out.splitlines():
            m = _PROBE_LINE.match(line.strip())
            if m:
                codes[int(m.group(1))] = (int(m.group(2)), m.group(3).strip())
        bad = {}
        for i, dst in enumerate(dsts):
            code, error = codes.get(i, (rc or 255, " ".join(out.split())[-300:]))
            if code != 0:
                why = "" if code == 137 else (error or f"exit {code}")
                bad[dst] = why
                logs.append(log_path, f"[{runner.node_name}] listing {dst}: {why or 'no answer'}")
        return bad

    found: dict[str, dict[str, str]] = {}
    for runner, bad in zip(handle.runners, parallel(one, handle.runners), strict=True):
        for dst, why in bad.items():
            found.setdefault(dst, {})[runner.node_name] = why
    return found


@dataclass
class _StoreWait:
    """remount's wait for stores that do not answer: progress and the final error."""

    handle: ClusterHandle
    where: dict[str, str]
    log_path: Path
    say: Say | None
    wait_s: float
    started: float = field(default_factory=time.monotonic)
    said: bool = False

    def tell(self, msg: str) -> None:
        logs.append(self.log_path, msg)
        if self.say is not None:
            self.say(msg)
        self.said = True

    def _left(self) -> float:
        return self.started + self.wait_s - time.monotonic()

    def _status(self) -> str:
        return (
            f"({time.monotonic() - self.started:.0f} s so far; start waits up to "
            f"{self.wait_s:.0f} s for it)"
        )

    def _mounts(self, dsts: Sequence[str]) -> str:
        return ", ".join(f"{d} ({self.where[d]})" for d in dsts)

    def mount_batch(
        self, entries: Sequence[tuple[str, NodeStep]], files: Mapping[str, str]
    ) -> tuple[StageError | None, str]:
        """run_batch, saying every STORE_PROBE_S that the store holds it: (its error, the
        output it logged). Past the wait it gives up (StageError) without waiting for the
        held batch, which ends on the node by itself (a daemon thread here: a CLI exits)."""
        try:
            offset = self.log_path.stat().st_size
        except OSError:
            offset = 0
        outcome: list[BaseException | None] = []

        def batch() -> None:
            try:
                run_batch(self.handle, entries, self.log_path, files)
            except BaseException as e:
                outcome.append(e)
            else:
                outcome.append(None)

        thread = threading.Thread(target=batch, name=f"remount-{self.handle.name}", daemon=True)
        thread.start()
        while True:
            thread.join(timeout=max(0.0, min(STORE_PROBE_S, self._left())))
            if not thread.is_alive():
                break
            if self._left() <= 0:
                self._give_up(list(self.where), [], "Its mount call still waits for the store.")
            self.tell(
                f"mounting {self._mounts(list(self.where))}: waiting for the store to answer "
                f"{self._status()}"
            )
        error = outcome[0] if outcome else None
        if error is not None and not isinstance(error, StageError):
            raise error
        with open(self.log_path, errors="replace") as f:
            f.seek(offset)
            output = f.read()
        return error, output

    def batch_failed(self, failure: StageError) -> None:
        """The mount batch failed for want of a connection: give up past the wait, else say
        so (and try again after a pause)."""
        dsts = list(self.where)
        if self._left() <= 0:
            self._give_up(dsts, [], failure.message)
        self.tell(
            f"mounting {self._mounts(dsts)} failed: the store did not answer; waiting for "
            f"it {self._status()}"
        )
        time.sleep(max(0.0, min(STORE_PROBE_S, self._left())))

    def not_answering(self, bad: dict[str, dict[str, str]]) -> None:
        """Some mounts are not mounted yet, or their listings got no answer (or an error):
        give up past the wait, else say so."""
        dsts = list(bad)
        nodes = sorted({n for by_node in bad.values() for n in by_node})
        errors = sorted({why for by_node in bad.values() for why in by_node.values() if why})
        if not errors:
            how = "does not answer"
        elif errors == ["not mounted"]:
            how = "is not mounted yet (its mount call waits for the store)"
        else:
            how = f"is not ready ({errors[0]})"
        if self._left() <= 0:
            detail = f"Last seen: {errors[0]}" if errors else ""
            self._give_up(dsts, nodes, detail)
        self.tell(
            f"waiting for the store: {self._mounts(dsts)} {how} on {', '.join(nodes)} "
            f"{self._status()}"
        )

    def _give_up(self, dsts: Sequence[str], nodes: Sequence[str], detail: str) -> NoReturn:
        on = f" on {', '.join(nodes)}" if nodes else ""
        name = self.handle.name
        raise StageError(
            f"Re-mounting {self._mounts(dsts)}{on} failed: the store did not answer "
            f"within {self.wait_s:.0f} s.{(' ' + detail.rstrip('.') + '.') if detail else ''} "
            "The nodes are up and nothing on them was removed, but the cluster stays INIT "
            f"until its mounts answer: check that the store is reachable, then run 'skycore "
            f"start {name}' again.",
            log_path=self.log_path,
            tail=logs.tail(self.log_path, 10),
        )


def drain_all_command(dsts: Sequence[str], timeout_s: float = DRAIN_TIMEOUT_S) -> str:
    """Bash draining every cached mount in ``dsts`` with one poller (the drain rule of
    skycore/node/mountd); exit 0 when all are durable."""
    return mounting.drain_command(list(dsts), timeout_s)


def cached_drain_script(
    config: SkycoreConfig, dsts: Sequence[str], timeout_s: float = DRAIN_TIMEOUT_S
) -> str:
    """Bash draining the MOUNT_CACHED mounts ``dsts`` after a job's run: the mount recipe's
    drain when a recipe mounts MOUNT_CACHED entries, else skycore's."""
    recipe = recipes.takes(config, StorageMode.MOUNT_CACHED)
    if recipe is None:
        return drain_all_command(dsts, timeout_s)
    return recipe.drain_script(list(dsts), timeout_s)


def prepare_nodes(handle: ClusterHandle, modes: Sequence[str]) -> None:
    """Let the mount recipe prepare every node once if it mounts any of ``modes``."""
    recipe = next((r for m in modes if (r := recipes.takes(handle.config, m)) is not None), None)
    if recipe is not None:
        parallel(recipe.prepare_node, handle.runners)


def mount_entry(st: Storage, dst: str, config: SkycoreConfig) -> NodeStep:
    """The node step mounting ``st`` at ``dst``: the mount recipe's bash for the modes it
    takes, else skycore's mount step."""
    script = recipes.mount_script(st, dst, config)
    return ShellStep(script) if script is not None else st.mount_step(dst, config)


class _Throttled:
    """Forwards progress lines to ``say``, at most one per ``interval`` seconds (thread-safe)."""

    def __init__(self, say: Callable[[str], None], interval: float = 1.0) -> None:
        self.say = say
        self.interval = interval
        self._last = float("-inf")
        self._lock = threading.Lock()

    def __call__(self, line: str) -> None:
        text = line.strip()
        if not text:
            return
        with self._lock:
            now = time.monotonic()
            if now - self._last < self.interval:
                return
            self._last = now
        self.say(text)


def drain_mounts(
    handle: ClusterHandle,
    log_path: Path,
    unmount: bool,
    say: Callable[[str], None] | None = None,
) -> int:
    """Drain every MOUNT_CACHED mount on every node (uploads finish), then maybe unmount.

    The drain's progress lines go to the log and, with ``say``, to the reporter (one line per
    second at most). Raises StageError if a drain fails: unmounting with uploads pending
    would lose them.
    """
    mounts = [m for m in get_cluster_mounts(handle.name) if m.is_mount]
    if not mounts:
        return 0
    recipe = recipes.takes(handle.config, StorageMode.MOUNT_CACHED)
    cached = [m.dst for m in mounts if m.mode == "MOUNT_CACHED"]
    if recipe is not None and not recipe.drains_before_stop:
        cached = []  # the recipe runs nothing before a stop or a down
    progress = _Throttled(say) if say is not None else None

    def drain(runner: CommandRunner) -> None:
        logs.append(log_path, f"[{runner.node_name}] drain {', '.join(cached)}")
        rc = runner.run(
            cached_drain_script(handle.config, cached),
            log_path=log_path,
            stream=progress is not None,
            sink=progress,
            prefix=f"[{runner.node_name}] ",
        )
        logs.append(log_path, f"[{runner.node_name}] drain: exit {rc}")
        if rc != 0:
            raise StageError(
                f"Draining the cached mounts on {runner.node_name} failed (exit {rc}); "
                "nothing was unmounted, so no write is lost. Retry the command; if the store "
                "is unreachable, fix that first.",
                log_path=log_path,
                tail=logs.tail(log_path, 10),
            )

    if cached:
        parallel(drain, handle.runners)
    if unmount:
        # unmount_command drains again by itself and refuses to unmount with uploads pending;
        # one command per node unmounts them all, then the idle daemon quits.
        own = [m.dst for m in mounts if recipes.takes(handle.config, m.mode) is None]
        theirs = [m.dst for m in mounts if m.dst not in own]
        entries: list[tuple[str, NodeStep]] = []
        if theirs and recipe is not None:
            step = ShellStep(recipe.unmount_script(theirs))
            entries.append((f"unmount {', '.join(theirs)} ({recipe.name})", step))
        if own:
            step = ShellStep(mounting.unmount_command(own, DRAIN_TIMEOUT_S))
            entries.append((f"unmount {', '.join(own)}", step))
        try:
            run_batch(handle, entries, log_path)
        except StageError as e:
            e.message += (
                " A cached mount with uploads pending is never unmounted, so no write is lost."
                " Retry the command; if the store is unreachable, fix that first."
            )
            raise
    return len(mounts)
