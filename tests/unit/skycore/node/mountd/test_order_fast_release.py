"""The order keeper's release straight from rclone's "upload succeeded" line
(``OrderKeeper.release_next``, from ``order.upcoming``) against the model of rclone's queue
in rclone_queue.py beside this file: the keeper reads rclone's log lines whenever it likes,
in order; a success line releases the next upload of its last look's plan without a look,
any other line (a failure, a cancelled upload) makes it look. After every step the store
holds a prefix of the creation order."""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import rule, run_state_machine_as_test

from skycore.node.mountd import order
from tests.unit.hypothesis_budget import examples
from tests.unit.skycore.node.mountd.rclone_queue import OrderModel


class FastReleaseModel(OrderModel):
    """OrderModel whose rclone logs its upload events and whose keeper releases from them."""

    looks_on_failures = True  # the keeper under test looks when an upload did not succeed

    def __init__(self) -> None:
        super().__init__()
        self.log: list[tuple[str, str]] = []
        self.in_flight: tuple[int, str] | None = None
        self.plan: list[tuple[int, str]] = []

    def look(self) -> None:
        decision = order.decide(self.rclone.queue(), self.state, self.rclone.now)
        for item_id, seconds in decision.expiries.items():
            self.rclone.set_expiry(item_id, seconds)
        self.in_flight, self.plan = order.upcoming(
            self.rclone.queue(), self.state, decision.expiries
        )
        self.rclone.schedule()

    @rule()
    def keeper_looks(self) -> None:
        self.look()

    @rule()
    def upload_succeeds(self) -> None:
        item_id = self.rclone.uploading
        super().upload_succeeds()
        if item_id is not None:
            self.log.append(("succeeded", f"f{item_id}"))

    @rule()
    def upload_fails(self) -> None:
        if self.rclone.uploading is not None:
            self.log.append(("ended", ""))
        super().upload_fails()

    @rule()
    def post_upload_check_fails(self) -> None:
        if self.rclone.uploading is not None:
            self.log.append(("ended", ""))
        super().post_upload_check_fails()

    @rule(data=st.data())
    def rewrite_queued_file(self, data: st.DataObject) -> None:
        uploading = self.rclone.uploading
        super().rewrite_queued_file(data)
        if uploading is not None and self.rclone.uploading is None:
            self.log.append(("ended", ""))  # rclone logs the cancelled upload

    @rule()
    def keeper_reads_the_log(self) -> None:
        lines, self.log = self.log, []
        if self.looks_on_failures and any(kind == "ended" for kind, _ in lines):
            self.look()
            return
        for kind, name in lines:
            if kind == "ended":  # only a broken keeper gets here
                name = self.in_flight[1] if self.in_flight else ""
            match = self.in_flight is not None and self.in_flight[1] == name
            if not match or not self.plan or self.plan[0][0] not in self.rclone.items:
                self.look()
                return
            self.rclone.set_expiry(self.plan[0][0], 0.0)
            self.in_flight = self.plan.pop(0)
            self.rclone.schedule()


class FailureBlindModel(FastReleaseModel):
    looks_on_failures = False  # takes a failed upload's line for a success


FAST_SETTINGS = settings(max_examples=examples(300), stateful_step_count=40)


def test_releasing_from_success_lines_keeps_the_creation_order() -> None:
    run_state_machine_as_test(FastReleaseModel, settings=FAST_SETTINGS)


def test_the_model_catches_a_keeper_that_releases_after_a_failure() -> None:
    """The model can fail: a keeper that releases the next upload on a failed one's line
    shows a newer file before the failed one."""
    for model in (FastReleaseModel(), FailureBlindModel()):
        for _ in range(3):
            model.close_file()
        model.keeper_looks()  # f1 in flight; the plan: f2, f3
        model.upload_fails()  # rclone puts f1 back with a back-off, starts nothing else
        model.keeper_reads_the_log()
        model.time_passes(1.0)
        if model.rclone.uploading is not None:
            model.upload_succeeds()
        if isinstance(model, FailureBlindModel):
            with pytest.raises(AssertionError, match="visible"):
                model.visible_is_a_prefix()
        else:
            model.visible_is_a_prefix()
