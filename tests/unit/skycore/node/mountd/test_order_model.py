"""The order rule of ordered mounts (skycore/node/mountd/order.py) against a model of
rclone's write-back queue (vfs/vfscache/writeback/writeback.go): the earliest due upload goes
first, one transfer at a time; a failed upload is put back with a doubling back-off (capped
at 5 min); a failed post-upload check means the object was visible, is deleted, and the
upload is retried; rewriting a queued file cancels its upload and queues it again; the
rule's looks arrive arbitrarily late. After every step, the objects visible in the store are
a prefix of the creation order (the given-up exception aside)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from skycore.node.mountd import order
from skycore.node.mountd.order import Decision, OrderState
from tests.unit.hypothesis_budget import examples
from tests.unit.skycore.node.mountd.rclone_queue import OrderModel, RcloneQueue


def release_everything(queue: list[dict[str, Any]], state: OrderState, now: float,
                       hold_back_s: float = 0.0, paused: bool = False) -> Decision:  # fmt: skip
    """The rule with its hold disabled: every waiting upload is released at once."""
    waiting = [int(i["id"]) for i in queue if not order.released(i)]
    return Decision(dict.fromkeys(waiting, 0.0), [], bool(queue))


class HoldDisabled(OrderModel):
    decide = staticmethod(release_everything)


MODEL_SETTINGS = settings(max_examples=examples(300), stateful_step_count=40)
# The broken keeper must be caught in every run, so its test never gets fewer examples than
# under ``dev``: with a tenth of them it went uncaught in 1 run of 40. It ends at the first
# violation, so the budget costs little.
CATCH_SETTINGS = settings(MODEL_SETTINGS, max_examples=max(300, examples(300)))


def test_uploads_become_visible_in_creation_order_whatever_fails() -> None:
    run_state_machine_as_test(OrderModel, settings=MODEL_SETTINGS)


def test_the_model_catches_a_keeper_that_does_not_hold() -> None:
    """The model test can fail: with the hold disabled it finds an order violation."""
    with pytest.raises(AssertionError, match="visible"):
        run_state_machine_as_test(HoldDisabled, settings=CATCH_SETTINGS)


def test_an_upload_refused_past_the_give_up_time_lets_the_others_go() -> None:
    rclone, state = RcloneQueue(), OrderState()
    first, second = rclone.close_file(), rclone.close_file()

    def look() -> Decision:
        decision = order.decide(rclone.queue(), state, rclone.now)
        for item_id, seconds in decision.expiries.items():
            rclone.set_expiry(item_id, seconds)
        rclone.schedule()
        return decision

    look()
    assert rclone.uploading == first
    rclone.fail()
    logs = look().logs
    assert any("newer uploads wait" in line for line in logs), logs
    rclone.now += order.GIVE_UP_S + 1
    rclone.schedule()
    if rclone.uploading == first:
        rclone.fail()
    logs = look().logs
    assert first in state.given_up and any("the others go on" in line for line in logs), logs
    look()
    assert rclone.uploading == second or rclone.items[second]["expiry"] <= rclone.now


def test_a_refresh_pauses_every_release() -> None:
    rclone, state = RcloneQueue(), OrderState()
    rclone.close_file()
    assert order.decide(rclone.queue(), state, 0.0, paused=True).expiries == {}
    assert order.decide(rclone.queue(), state, 0.0).expiries == {1: 0.0}


def test_a_held_back_mount_releases_a_file_only_once_it_is_old_enough() -> None:
    rclone, state = RcloneQueue(), OrderState()
    rclone.close_file()
    assert order.decide(rclone.queue(), state, 0.0, hold_back_s=120).expiries == {}
    rclone.now += 121
    assert order.decide(rclone.queue(), state, 0.0, hold_back_s=120).expiries == {1: 0.0}
