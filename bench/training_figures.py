"""The figures and verdicts of bench/training_run.py, from what one run left: the program's
log, the gate's write events and request log on the run's bucket, the fault schedule's
timeline and what the host saw of the nodes (bench/node_watch.py).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import unquote

import training_model as tm
from bench_consistency import at_most, counts_add_up, in_order, negatives
from common import request_kind
from node_watch import Node
from training_schedule import Schedule

_KEY_IN_REQUEST = re.compile(r"checkpoint-(\d{6})\.(?:bin|json)")
SAVED_SLACK_S = 0.05
"""A marker is closed before the program says "saved": its upload may end this much earlier."""


def attempts_json(runs: Sequence[tm.Attempt], mono: Callable[[float], float]) -> list[Any]:
    """Per attempt: where it resumed, what it tried, saved and failed (and why)."""
    return [
        {
            "resumed_from": a.resumed_from,
            "resumed_at_s": mono(a.resumed_at),
            "tried": a.tried,
            "saved": a.saved_steps,
            "failed": [
                {"step": f.step, "errno": f.errno, "file": f.file, "at_s": mono(f.t)}
                for f in a.failed
            ],
            "result": a.result is not None,
        }
        for a in runs
    ]


def order_json(
    runs: Sequence[tm.Attempt], events: Sequence[Any], bounds: Sequence[int]
) -> dict[str, Any]:
    """The store replayed against each attempt's creation order (training_model.check_order)."""
    found = tm.check_order(runs, events, bounds)
    return {
        "expected": list(found.order),
        "removed": [k for e in tm.epochs(runs, events, bounds) for k in e.removed],
        "went_with_node": list(found.went_with_node),
        "kept": not found.violations,
        "violations": len(found.violations),
        "first_violation": found.violations[0] if found.violations else None,
        "lost": list(found.lost),
        "left_in_store": list(found.left),
        "removed_seen_in_store": list(found.removed_seen),
        "events": len(events),
        "deletes": sum(1 for e in events if e.op == "delete"),
    }


def saved_to_store(runs: Sequence[tm.Attempt], events: Sequence[Any]) -> list[float]:
    """Seconds from each checkpoint's "saved" line to its marker's write in the store, within
    its attempt (a preempted attempt's files arrive before the next one resumes, or never)."""
    ordered = sorted(events, key=lambda e: e.t_ns)
    lags = []
    for n, a in enumerate(runs):
        end = runs[n + 1].resumed_at if n + 1 < len(runs) else float("inf")
        for step, t in a.saved:
            key = tm.names(step)[1]
            arrived = next(
                (e.t_ns / 1e9 for e in ordered
                 if e.key == key and e.op != "delete" and a.resumed_at <= e.t_ns / 1e9 < end),
                None,
            )  # fmt: skip
            if arrived is not None:
                lags.append(round(arrived - t, 3))
    return lags


def recoveries_json(
    recoveries: Sequence[dict[str, Any]],
    runs: Sequence[tm.Attempt],
    events: Sequence[Any],
    mono: Callable[[float], float],
) -> list[dict[str, Any]]:
    """Per preemption: what went with the node, where the next attempt resumed, and the
    newest complete checkpoint in the store when the job was marked RECOVERING (the gate's
    first ``events_at_recovering`` writes) and when the program resumed (its RESUME line)."""
    ordered = sorted(events, key=lambda e: e.t_ns)
    out = []
    for n, rec in enumerate(recoveries):
        then = tm.visible_after(ordered[: rec["events_at_recovering"]])
        nxt = runs[n + 1] if n + 1 < len(runs) else None
        at_resume = None
        if nxt is not None:
            cut = int(nxt.resumed_at * 1e9)
            at_resume = tm.newest_complete(tm.visible_after(e for e in ordered if e.t_ns <= cut))
        gone = [s for s in runs[n].saved_steps if not set(tm.names(s)) <= then] if runs else []
        out.append(
            {
                **rec,
                "went_with_node": gone,
                "resumed_from": nxt.resumed_from if nxt else None,
                "newest_complete_at_recovering": tm.newest_complete(then),
                "newest_complete_at_resume": at_resume,
                "resumed_at_s": mono(nxt.resumed_at) if nxt else None,
            }
        )
    return out


def cache_json(nodes: Sequence[Node], bound: int, t0: float) -> dict[str, Any]:
    """The cache against its bound and the disk: rclone's count sampled from the host, every
    cleaner line, and the passes over the bound (``CleanerPass.over``)."""
    watched = [n.as_json(t0) for n in nodes]
    passes = [(line, p) for n in nodes for _, line in n.cleaner for p in tm.cleaner_passes(line)]
    over = [line for line, p in passes if p.over(bound)]
    sampled = [x["peak_cache_bytes"] for x in watched if x["peak_cache_bytes"] is not None]
    used = [x["peak_disk_used_bytes"] for x in watched if x["peak_disk_used_bytes"] is not None]
    logged = [max(p.total[1], p.total_before[1]) for _, p in passes]
    disk = max((x["disk_total_bytes"] or 0 for x in watched), default=0) or None
    return {
        "bound_bytes": bound,
        "disk_bytes": disk,
        "peak_sampled_bytes": max(sampled) if sampled else None,
        "peak_logged_bytes": int(max(logged)) if logged else None,
        "peak_disk_used_bytes": max(used) if used else None,
        "cleaner_passes": len(passes),
        "idle_passes": sum(1 for _, p in passes if p.idle),
        "passes_that_evicted_over_bound": sum(1 for _, p in passes if p.evicted_over(bound)),
        "over_bound_passes": len(over),
        "first_over_bound": over[0] if over else None,
        "no_space_lines": sum(n.no_space_lines for n in nodes),
        "nodes": watched,
    }


def requests_by_checkpoint(
    requests: Sequence[tuple[str, str]], bucket: str
) -> tuple[dict[int, int], int, dict[str, int]]:
    """({step: requests naming its files}, requests naming no checkpoint, {kind: count}). A
    resumable chunk names no key (GCS): it counts for the upload whose start came last (an
    ordered mount has one upload at a time)."""
    per_step: Counter[int] = Counter()
    other = 0
    kinds: Counter[str] = Counter()
    current: int | None = None
    for method, path in requests:
        kinds[request_kind(method, path, bucket)] += 1
        m = _KEY_IN_REQUEST.search(unquote(path))
        step = int(m.group(1)) if m else None
        if step is not None and method in ("PUT", "POST"):
            current = step
        if step is None and "upload_id=" in path and current is not None:
            step = current
        if step is None:
            other += 1
        else:
            per_step[step] += 1
    return dict(sorted(per_step.items())), other, dict(kinds.most_common())


def durable_in_store(read: Callable[[str], bytes], order: Sequence[str]) -> dict[str, Any]:
    """Read every checkpoint of ``order`` back from the store (``read(key)``): the steps whose
    data matches its marker's size and sha256, and what is wrong with the others."""
    good, bad = [], {}
    for key in order:
        st = tm.step_of(key)
        if st is None or st[1] != 1:
            continue
        data_key, marker_key = tm.names(st[0])
        try:
            marker = json.loads(read(marker_key))
            data = read(data_key)
        except Exception as e:  # missing or unreadable: not durable, whatever the reason
            bad[st[0]] = f"{type(e).__name__}: {str(e)[:200]}"
            continue
        if len(data) != marker.get("size"):
            bad[st[0]] = f"data has {len(data)} bytes, marker says {marker.get('size')}"
        elif hashlib.sha256(data).hexdigest() != marker.get("sha256"):
            bad[st[0]] = "data does not match its marker's sha256"
        else:
            good.append(st[0])
    return {"durable": good, "not_durable": bad}


def figures(
    row: dict[str, Any],
    *,
    log: str,
    events: Sequence[Any],
    requests: Sequence[tuple[str, str]],
    schedule: Schedule,
    nodes: Sequence[Node],
    bound: int,
    mono: Callable[[float], float],
    t0: float,
) -> None:
    """Fill ``row`` with the run's figures, and ``row["inconsistent"]`` with what breaks the
    consistency rules (bench/bench_consistency.py)."""
    runs = tm.attempts(log)
    bad = row["inconsistent"]
    row["attempts"] = attempts_json(runs, mono)
    for n, a in enumerate(runs):
        bad += counts_add_up(
            f"attempt {n + 1}'s checkpoints tried", len(a.tried),
            {"saved": len(a.saved), "failed": len(a.failed)},
        )  # fmt: skip
    bounds = [r["events_at_recovering"] for r in schedule.recoveries][: max(0, len(runs) - 1)]
    if len(bounds) == len(runs) - 1:
        row["order"] = order_json(runs, events, bounds)
    else:
        row["order"] = order_json(runs[: len(bounds) + 1], events, bounds)
        bad.append(f"{len(runs)} attempts in the log, {len(bounds)} recoveries seen")
    lags = saved_to_store(runs, events)
    row["saved_to_store_s"] = {
        "median": sorted(lags)[len(lags) // 2] if lags else None,
        "max": max(lags) if lags else None,
        "count": len(lags),
    }
    if lags:
        bad += negatives({"shortest saved-to-store + slack": min(lags) + SAVED_SLACK_S})
    row["recoveries"] = recoveries_json(schedule.recoveries, runs, events, mono)
    row["cache"] = cache_json(nodes, bound, t0)
    cache = row["cache"]
    if cache["disk_bytes"]:
        bad += at_most(
            "the disk's size", cache["disk_bytes"],
            {"peak sampled cache": cache["peak_sampled_bytes"],
             "peak disk used": cache["peak_disk_used_bytes"]},
        )  # fmt: skip
    per_step, other, kinds = requests_by_checkpoint(requests, row["bucket"])
    row["requests"] = {"total": len(requests), "per_step": per_step,
                       "not_a_checkpoint": other, "by_kind": kinds}  # fmt: skip
    bad += counts_add_up(
        "requests", len(requests), {"per checkpoint": sum(per_step.values()), "other": other}
    )
    timeline = dict(schedule.timeline)
    if row["recoveries"]:
        timeline["resumed_s"] = row["recoveries"][0]["resumed_at_s"]
    row["timeline"] = {k: timeline[k] for k in Schedule.ORDER if timeline.get(k) is not None}
    steps = list(row["timeline"].items())
    bad += negatives(dict(steps)) + in_order(steps)


def judge(row: dict[str, Any], status: str, reason: str) -> list[str]:
    """The run's failures, one line each (the job ended ``status`` for ``reason``)."""
    fail = []
    if status != "SUCCEEDED":
        fail.append(f"the job ended {status}: {reason}")
    if not row.get("result_matches_uninterrupted"):
        fail.append("result.json does not hold an uninterrupted run's weights")
    order = row["order"]
    if not order["kept"]:
        fail.append(f"order broken ({order['violations']} violations): {order['first_violation']}")
    if order["lost"]:
        fail.append(f"lost: {', '.join(order['lost'][:4])} ({len(order['lost'])} files)")
    if order["left_in_store"]:
        fail.append(f"files in the store that no checkpoint kept: {order['left_in_store']}")
    bad = row["store"]["not_durable"]
    if bad:
        step, why = next(iter(bad.items()))
        fail.append(f"{len(bad)} checkpoint(s) not whole in the store, e.g. {step}: {why}")
    cache = row["cache"]
    if cache["over_bound_passes"]:
        fail.append(f"cache over its bound: {cache['first_over_bound']}")
    if not cache["cleaner_passes"]:
        fail.append("no cache cleaner line was read: the bound was not checked")
    if not row["recoveries"]:
        fail.append("no recovery happened")
    for rec in row["recoveries"]:
        want = rec["newest_complete_at_recovering"]
        if rec["resumed_from"] != want or rec["newest_complete_at_resume"] != want:
            fail.append(
                f"resumed from {rec['resumed_from']}; the newest complete checkpoint was "
                f"{want} when the job was recovered, {rec['newest_complete_at_resume']} when "
                "it resumed"
            )
    return fail + [f"INCONSISTENT {p}" for p in row["inconsistent"]]
