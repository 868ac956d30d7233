"""A model of rclone's write-back queue (vfs/vfscache/writeback/writeback.go) and the order
rule driven against it by a writer, rclone and a store that fails at will: the state machine
the order keeper's tests (test_order_model.py, test_order_fast_release.py) share."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from skycore.node.mountd import order
from skycore.node.mountd.order import ORDER_HOLD_S, Decision, OrderState

MAX_UPLOAD_DELAY_S = 300.0  # rclone's maxUploadDelay


class RcloneQueue:
    """rclone's write-back queue of one mount with --transfers 1, times in seconds."""

    def __init__(self) -> None:
        self.now = 0.0
        self.items: dict[int, dict[str, Any]] = {}  # id -> expiry (absolute), tries, delay
        self.next_id = 1
        self.uploading: int | None = None

    def close_file(self) -> int:
        item_id, self.next_id = self.next_id, self.next_id + 1
        self.items[item_id] = {"expiry": self.now + ORDER_HOLD_S, "tries": 0,
                               "delay": float(ORDER_HOLD_S)}  # fmt: skip
        return item_id

    def rewrite(self, item_id: int) -> None:
        """The file is written again: an upload under way is cancelled, the item queued anew."""
        item = self.items[item_id]
        if self.uploading == item_id:
            self.uploading = None
        item["expiry"] = self.now + ORDER_HOLD_S
        item["delay"] = float(ORDER_HOLD_S)

    def schedule(self) -> None:
        """rclone's processItems: start the earliest due item if no transfer runs."""
        if self.uploading is not None:
            return
        due = [(i["expiry"], k) for k, i in self.items.items() if i["expiry"] <= self.now]
        if due:
            self.uploading = min(due)[1]
            self.items[self.uploading]["tries"] += 1

    def fail(self) -> int:
        item_id = self.uploading
        assert item_id is not None
        self.uploading = None
        item = self.items[item_id]
        item["delay"] = min(item["delay"] * 2, MAX_UPLOAD_DELAY_S)
        item["expiry"] = self.now + item["delay"]
        return item_id

    def queue(self) -> list[dict[str, Any]]:
        """What rc vfs/queue answers."""
        return [
            {
                "id": k,
                "name": f"f{k}",
                "expiry": i["expiry"] - self.now,
                "tries": i["tries"],
                "uploading": k == self.uploading,
            }
            for k, i in self.items.items()
        ]

    def set_expiry(self, item_id: int, seconds: float) -> None:
        if item_id in self.items:
            self.items[item_id]["expiry"] = self.now + seconds


class OrderModel(RuleBasedStateMachine):
    """The rule under test, driven by a writer, rclone and a store that fails at will."""

    decide: Callable[..., Decision] = staticmethod(order.decide)

    def __init__(self) -> None:
        super().__init__()
        self.rclone = RcloneQueue()
        self.state = OrderState()
        self.visible: set[int] = set()
        self.created: list[int] = []

    def check(self) -> None:
        exempt = self.state.given_up
        ids = [i for i in self.created if i not in exempt]
        shown = sorted(i for i in self.visible if i not in exempt)
        assert shown == ids[: len(shown)], f"visible {shown} of {ids}"

    @rule()
    def close_file(self) -> None:
        self.created.append(self.rclone.close_file())

    @rule(data=st.data())
    def rewrite_queued_file(self, data: st.DataObject) -> None:
        if self.rclone.items:
            self.rclone.rewrite(data.draw(st.sampled_from(sorted(self.rclone.items))))

    @rule(dt=st.floats(0, 5))
    def time_passes(self, dt: float) -> None:
        self.rclone.now += dt
        self.rclone.schedule()

    @rule()
    def upload_succeeds(self) -> None:
        if self.rclone.uploading is not None:
            item_id = self.rclone.uploading
            self.visible.add(item_id)
            del self.rclone.items[item_id]
            self.rclone.uploading = None
            self.rclone.schedule()

    @rule()
    def upload_fails(self) -> None:
        if self.rclone.uploading is not None:
            self.rclone.fail()
            self.rclone.schedule()

    @rule()
    def post_upload_check_fails(self) -> None:
        """The object was stored, rclone finds its checksum wrong, deletes it and retries."""
        if self.rclone.uploading is not None:
            self.visible.add(self.rclone.uploading)
            self.check()
            self.visible.discard(self.rclone.fail())
            self.rclone.schedule()

    @rule()
    def keeper_looks(self) -> None:
        decision = type(self).decide(self.rclone.queue(), self.state, self.rclone.now)
        for item_id, seconds in decision.expiries.items():
            self.rclone.set_expiry(item_id, seconds)
        self.rclone.schedule()

    @invariant()
    def visible_is_a_prefix(self) -> None:
        self.check()
