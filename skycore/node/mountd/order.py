"""The order rule of an ordered MOUNT_CACHED mount, as a pure function of rclone's upload queue.

rclone never starts an upload of an ordered mount by itself: the mount's write-back delay is
ORDER_HOLD_S (far longer than any run), so every closed file waits in the queue until it is
released (its expiry set to now). The rule releases the oldest waiting upload (lowest
writeback id: close order, since the mount's FUSE releases are serialized; or its rank in the
close-order journal, ``journal``, for files a dead daemon left) and releases the
next one only once that one has left the queue, which rclone does only when its upload
succeeded (or the file was removed). While the released one fails, rclone puts it back with
a back-off; nothing newer is released, whatever failed (a 403, a 503, a reset, an outage, a
failed post-upload check that made rclone delete the object) and however late the rule runs.
After GIVE_UP_S on the same upload it no longer holds the others (logged).

The rule holds no timer of its own: correctness never depends on when it runs, only speed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

ORDER_HOLD_S = 1_000_000  # rclone's write-back of an ordered mount: never due by itself
RELEASED_BELOW_S = ORDER_HOLD_S / 2  # an item due sooner was released (or is rclone's retry)
HELD_BACK_FROM_S = 30.0  # a mount write-back from this on holds uploads back that long
RETRY_S = 1.0  # a released upload that failed is retried at least this often
GIVE_UP_S = 600.0  # past this, an upload the store keeps refusing no longer holds the others


@dataclass
class OrderState:
    """What the rule remembers between two looks: since when the released upload has been
    failing (id -> first seen failed, monotonic seconds) and the uploads given up."""

    failing_since: dict[int, float] = field(default_factory=dict)
    given_up: set[int] = field(default_factory=set)


@dataclass(frozen=True)
class Decision:
    """What to do after one look: new expiries (id -> seconds from now) and log lines."""

    expiries: dict[int, float]
    logs: list[str]
    busy: bool  # an upload is released or waiting


def age(item: dict[str, Any]) -> float:
    """Seconds since a waiting upload was closed (rclone set its expiry to ORDER_HOLD_S then)."""
    return ORDER_HOLD_S - float(item["expiry"])


def released(item: dict[str, Any]) -> bool:
    """True for an upload under way, or due (released, or rclone's retry of a released one)."""
    return bool(item.get("uploading")) or float(item["expiry"]) < RELEASED_BELOW_S


def decide(
    queue: list[dict[str, Any]],
    state: OrderState,
    now: float,
    hold_back_s: float = 0.0,
    paused: bool = False,
    ranks: dict[int, int] | None = None,
) -> Decision:
    """The rule for one look at rclone ``vfs/queue``'s items. ``hold_back_s``: how old a
    closed file must be before it may go; ``paused``: release nothing (a listing is made);
    ``ranks``: each item's place in the close order (write-back id -> rank, ``journal``),
    when it is not the write-back ids' order (files a dead daemon left)."""
    order = ranks or {}
    items = sorted(queue, key=lambda i: (order.get(int(i["id"]), int(i["id"])), int(i["id"])))
    expiries: dict[int, float] = {}
    logs: list[str] = []
    ids = {int(i["id"]) for i in items}
    state.failing_since = {k: v for k, v in state.failing_since.items() if k in ids}
    state.given_up &= ids
    blocking = [i for i in items if released(i) and int(i["id"]) not in state.given_up]
    for item in blocking:
        item_id = int(item["id"])
        failed = int(item.get("tries") or 0) > (1 if item.get("uploading") else 0)
        if not failed:
            continue
        since = state.failing_since.setdefault(item_id, now)
        if since == now:
            logs.append(f"{item.get('name')} failed; newer uploads wait for it")
        if now - since > GIVE_UP_S:
            state.given_up.add(item_id)
            logs.append(f"{item.get('name')} still fails after {GIVE_UP_S:g} s; the others go on")
        elif not item.get("uploading") and float(item["expiry"]) > RETRY_S:
            expiries[item_id] = RETRY_S  # sooner than rclone's back-off (up to 5 min)
    blocking = [i for i in blocking if int(i["id"]) not in state.given_up]
    if blocking or paused:
        return Decision(expiries, logs, bool(items))
    waiting = [i for i in items if not released(i)]
    if waiting and age(waiting[0]) >= hold_back_s:
        expiries[int(waiting[0]["id"])] = 0.0
    return Decision(expiries, logs, bool(items))


def hold_back(write_back_s: float) -> float:
    """How old a closed file of an ordered mount must be before it may go: its write-back
    delay if that is HELD_BACK_FROM_S or more (uploads held back on purpose), else 0 (each
    file goes as soon as the one before it is in the store)."""
    return write_back_s if write_back_s >= HELD_BACK_FROM_S else 0.0


def upcoming(
    queue: list[dict[str, Any]],
    state: OrderState,
    releases: dict[int, float],
    ranks: dict[int, int] | None = None,
    hold_back_s: float = 0.0,
    paused: bool = False,
) -> tuple[tuple[int, str] | None, list[tuple[int, str]]]:
    """After a look that applied ``releases`` (``decide``'s expiries): the one upload in
    flight (id, name) and the waiting ones in the order the rule releases them, each once the
    one before has left the queue; (None, []) when a hold-back, a pause, a failure or more
    than one upload in flight makes that less simple."""
    order = ranks or {}
    flying = [i for i in queue if (released(i) or int(i["id"]) in releases)
              and int(i["id"]) not in state.given_up]  # fmt: skip
    if hold_back_s > 0 or paused or len(flying) != 1 or state.failing_since:
        return None, []
    waiting = sorted(
        (order.get(int(i["id"]), int(i["id"])), int(i["id"]), str(i["name"]))
        for i in queue
        if not released(i) and int(i["id"]) not in releases
    )
    return (int(flying[0]["id"]), str(flying[0]["name"])), [(k, n) for _, k, n in waiting]
