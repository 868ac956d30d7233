"""The close-order journal (skycore/node/mountd/journal.py) keeps an ordered mount's creation
order across the death of its rclone daemon: the next daemon queues the files the dead one
left in NAME order, with new ids, and the order keeper still releases them in the order they
were closed. Driven against a model of rclone's write-back queue whose daemon dies at will
(SIGKILL: the queue is lost, the closed files stay in the cache folder), with order keepers
that look arbitrarily late or not at all before a death; the store must always hold a prefix
of the creation order."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from skycore.node.mountd import order
from skycore.node.mountd.journal import CloseOrder
from skycore.node.mountd.order import ORDER_HOLD_S, OrderState
from tests.unit.hypothesis_budget import examples


class Daemon:
    """rclone's write-back queue of one ordered mount (--transfers 1), one daemon's life: ids
    from 1 in the order files are queued, at most one upload at a time."""

    def __init__(self, pid: int, leftovers: list[str]) -> None:
        self.pid = pid
        self.items: dict[int, dict[str, Any]] = {}
        self.next_id = 1
        self.uploading: int | None = None
        for name in sorted(leftovers):  # rclone walks its cache folder
            self.queue_file(name)

    def queue_file(self, name: str) -> None:
        self.items[self.next_id] = {"name": name, "expiry": ORDER_HOLD_S, "tries": 0}
        self.next_id += 1

    def queue(self) -> list[dict[str, Any]]:
        return [
            {"id": k, "name": i["name"], "expiry": i["expiry"], "tries": i["tries"],
             "uploading": k == self.uploading}
            for k, i in self.items.items()
        ]  # fmt: skip

    def schedule(self) -> None:
        if self.uploading is None:
            due = sorted((i["expiry"], k) for k, i in self.items.items() if i["expiry"] <= 0)
            if due:
                self.uploading = due[0][1]
                self.items[self.uploading]["tries"] += 1


class CrashModel(RuleBasedStateMachine):
    """A writer, rclone, a store and the order keeper, and a daemon that dies at will."""

    def __init__(self) -> None:
        super().__init__()
        self.tmp = tempfile.TemporaryDirectory()
        self.cache = Path(self.tmp.name) / "cache"
        self.cache.mkdir()
        self.daemon = Daemon(pid=100, leftovers=[])
        self.state = OrderState()
        self.created: list[str] = []
        self.visible: list[str] = []

    def teardown(self) -> None:
        self.tmp.cleanup()

    @rule(name=st.text("ab", min_size=1, max_size=2))
    def close_file(self, name: str) -> None:
        name = f"{name}-{len(self.created)}"  # unique; name order is not creation order
        path = self.cache / name
        path.write_bytes(b"x")
        stamp = 1_000_000 + len(self.created)  # its cache file's mtime: when it was written
        os.utime(path, (stamp, stamp))
        self.created.append(name)
        self.daemon.queue_file(name)

    journaled = True  # the keeper under test writes down and uses the close order

    @rule()
    def keeper_looks(self) -> None:
        journal = CloseOrder(self.tmp.name, "remote:bucket")  # a keeper of any process
        queue = self.daemon.queue()
        ranks = journal.ranks(queue, self.daemon.pid, lambda: str(self.cache))
        if not self.journaled:
            ranks = {}
        decision = order.decide(queue, self.state, 0.0, ranks=ranks)
        for item_id, seconds in decision.expiries.items():
            self.daemon.items[item_id]["expiry"] = seconds
        self.daemon.schedule()

    @rule()
    def upload_succeeds(self) -> None:
        item_id = self.daemon.uploading
        if item_id is not None:
            name = self.daemon.items.pop(item_id)["name"]
            self.visible.append(name)
            (self.cache / name).unlink()  # a clean file: nothing left for a next daemon
            self.daemon.uploading = None
            self.daemon.schedule()

    @rule()
    def upload_fails(self) -> None:
        item_id = self.daemon.uploading
        if item_id is not None:
            self.daemon.items[item_id]["expiry"] = 2.0  # put back with a back-off
            self.daemon.uploading = None

    @rule()
    def back_off_ends(self) -> None:
        for item in self.daemon.items.values():
            if 0 < item["expiry"] < order.RELEASED_BELOW_S:
                item["expiry"] = 0.0
        self.daemon.schedule()

    @rule()
    def daemon_killed(self) -> None:
        """SIGKILL: the queue is gone, the closed files stay; the next daemon queues them."""
        left = [i["name"] for i in self.daemon.items.values()]
        self.daemon = Daemon(self.daemon.pid + 1, left)
        self.state = OrderState()

    @invariant()
    def the_store_holds_a_prefix_of_the_creation_order(self) -> None:
        shown = self.visible
        assert shown == self.created[: len(shown)], f"visible {shown}, created {self.created}"


class NoJournal(CrashModel):
    journaled = False  # releases by write-back id, as the keeper did before the journal


CRASH_SETTINGS = settings(max_examples=examples(200), stateful_step_count=25)


def test_uploads_keep_the_creation_order_across_daemon_deaths() -> None:
    run_state_machine_as_test(CrashModel, settings=CRASH_SETTINGS)


def play_a_crash(model: CrashModel) -> None:
    """b, then a closed; the daemon killed before the keeper saw either; then uploads."""
    model.close_file("b")
    model.close_file("a")
    model.daemon_killed()
    for _ in range(2):
        model.keeper_looks()
        model.upload_succeeds()
        model.the_store_holds_a_prefix_of_the_creation_order()


def test_the_model_catches_a_keeper_without_the_journal() -> None:
    """The crash model can fail: releasing by write-back id alone (the next daemon's ids are
    in name order) breaks the order, and the same steps keep it with the journal."""
    with pytest.raises(AssertionError, match="created"):
        play_a_crash(NoJournal())
    kept = CrashModel()
    play_a_crash(kept)
    assert kept.visible == ["b-0", "a-1"]
    kept.teardown()


def test_a_new_daemons_files_go_up_in_the_order_they_were_closed(tmp_path: Path) -> None:
    """The integration test's case by hand: b-first, a-second, c-third closed and seen by a
    keeper, the daemon killed, the next one queues them a, b, c."""
    journal = CloseOrder(str(tmp_path), "fs")
    names = ["b-first", "a-second", "c-third"]
    before = [{"id": k + 1, "name": n, "expiry": ORDER_HOLD_S} for k, n in enumerate(names)]
    assert journal.ranks(before, pid=7) == {1: 1, 2: 2, 3: 3}
    after = [{"id": k + 1, "name": n, "expiry": ORDER_HOLD_S} for k, n in enumerate(sorted(names))]
    ranks = CloseOrder(str(tmp_path), "fs").ranks(after, pid=8)
    by_name = {i["name"]: ranks[i["id"]] for i in after}
    assert sorted(by_name, key=by_name.__getitem__) == names


def test_the_journal_is_emptied_when_the_queue_is(tmp_path: Path) -> None:
    journal = CloseOrder(str(tmp_path), "fs")
    journal.ranks([{"id": 1, "name": "x", "expiry": ORDER_HOLD_S}], pid=7)
    journal.ranks([], pid=7)
    assert len(Path(journal.path).read_text().splitlines()) == 1  # the daemon's start line
