"""Ordered against parallel uploads through MOUNT_CACHED, per store, file set and latency.

For each store of the local cloud (the emulators behind their gates), each file set (big:
8 x 32 MiB, small: 200 x 64 KiB) and each latency (``--latency-ms``, repeatable; default 0
and 30), a fresh bucket is mounted with skycore's own mount script (host-side, same node
program and flags) twice: ordered (``transfers: 1``, the default) and parallel (``transfers:
4``). A latency L > 0 is the gate's latency fault (``harness fault STORE latency --ms L``)
scoped to the run's bucket: every request on it waits L ms, from the mount until the run
ends (the fault is cleared then, also on an error). The writer creates the files back to
back; the time counted is from the first write until the last file is in the store (the
gate's completion time of its write, falling back to the end of skycore's drain). The order
of the ordered run is checked on the server side, at every moment: the gate's write events
are replayed, deletes included (harness.testing.order_check), and any moment a file is in the
store while one created before it is not (e.g. a failed copy deleted and uploaded again after
newer files) is a failure; so is a file with no write event (the order cannot be checked).

For the small set it also gives the one-request floor, measured in the same run: around
each ordered run (``--floor-puts`` PUTs, half after the mount and before the first write,
half after the drain, on the run's bucket behind the same network, so under its load) single
PUTs of one object of the set's size, sent by the emulator module's own SDK client (kept, as
a plain client keeps its connection; one untimed PUT first); floor = files x the median PUT
(over every PUT of the row's valid ordered runs). An ordered mount has one upload in flight,
so a file costs at least one such request: ``ordered / floor`` is what the order keeper, the
writer and rclone add per file. A store whose cached small upload takes more than one
request (azure: a block, the block list and the HEAD of rclone's multi-thread copy, the
workaround of docs/performance.md) cannot reach a one-request floor: its floor is files x
the median PUT x its ordered upload requests per file (measured, rounded; listings left out),
labelled ``3-request`` (the table's ``floor`` column; ``floor_requests_per_file`` in the
JSON). And per store, set, latency and mode, the requests per uploaded file, by kind (PUT,
HEAD, LIST, PUT-part, PUT-block, ...): every request on the run's bucket in the gate's log
from the first write until the drain ended (the floor's PUTs are outside that window).

    .venv/bin/python bench/upload_order.py [--stores s3,gcs,azure,r2] [--sets big,small]
        [--latency-ms 0 --latency-ms 30] [--wan [--wan-latency-ms 30]
        [--wan-stream-mibps 8]] [--upload-concurrency N] [--chunk-size 16M] [--repeat 1]
        [--floor-puts 30] [--no-check]

``--wan`` adds (or, without --latency-ms, is the only) network: every request on the run's
bucket waits 30 ms and every connection is capped at 8 MiB/s (the gate's ``stream-bandwidth``
fault), as on a long-RTT link where one TCP stream is capped by its window. There the big
set's ordered vs parallel speed is the headline figure. ``--upload-concurrency`` and
``--chunk-size`` set those mount options on the ordered mount only: the parallel baseline is
always ``transfers: 4`` with the defaults.

Every duration is on the monotonic clock; the gate's event times (its wall clock) are mapped
onto it by the clocks' offset, sampled at the start, after the drain and at the end of each
run (bench_clock). A run whose offset moved by more than 50 ms is invalid, and so is one
whose bucket was not behind its network for the whole run (a fault ended early: the gate
restarted, or a client cleared every fault): it is reported, run again (3 runs at most) and
never in a median. Each run's figures are checked (no
negative duration, nothing in the store before it was written or after the drain, no part
longer than the whole run, counts that add up; no PUT of the floor negative, their median and
their sum within the whole run, every PUT one request or more in the gate's log); an
inconsistent run is a failure (exit 1).

Prints one row per store x set x latency (ordered s, parallel s, ordered speed as a
fraction of parallel speed, median PUT, floor and ordered / floor, requests per file) and a
table of the requests by kind; writes JSON to bench/results/upload_order-<timestamp>.json.
Targets:
- on --wan, big files on every store: ordered >= 0.9x parallel speed;
- at 0 ms, every store and set: ordered >= 0.8x parallel speed (time ratio < 1.25);
- at 30 ms, big files on s3, r2 and azure: ordered >= 0.9x parallel speed (GCS is
  reported, without a target).
Strict-order targets, per store (printed met/missed per store; ``store_targets`` in the JSON):
- small files: ordered time <= 1.2x the floor at 0 ms, <= 1.3x at 30 ms;
- at 0 ms, every set: ordered time within 2x the parallel time.
Exits 1 on a missed target (unless --no-check); always on a broken order or a failed run.
"""

from __future__ import annotations

import os
import shlex
import statistics
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import common
import put_floor
from bench_checks import AtMost, Target, add_check_option, verdict
from bench_clock import ATTEMPTS, MAX_DRIFT_NS, ClockWatch, until_valid
from bench_consistency import at_most, counts_add_up, in_order, negatives, parts_over_whole
from bench_memory import PeakRss
from bench_network import Network, add_wan_options, behind, not_held, wan_of

from harness.emulators.fleet import start_all
from harness.testing.order_check import WRITE_OPS, lost_keys, visible_prefix_violations
from skycore.config import SkycoreConfig
from skycore.storage import mounting

SETS = {"big": (8, 32 << 20), "small": (200, 64 << 10)}
PARALLEL = 4
MODES = {1: "ordered", PARALLEL: "parallel"}
TARGET_TIME_RATIO = 1.25  # at 0 ms: ordered time / parallel time; ordered speed >= 0.8x
LATENCY_TARGET_MS = 30.0  # the latency the upload-order targets are stated at
TARGET_BIG_RATIO = 1 / 0.9  # at 30 ms, big: ordered time / parallel time; speed >= 0.9x
BIG_TARGET_STORES = ("s3", "r2", "azure")  # GCS big is reported, without a target
FLOOR_RATIO = {0.0: 1.2, LATENCY_TARGET_MS: 1.3}  # per store, small: ordered time / floor
FLOOR_PUTS = 30  # the floor's PUTs around each ordered small-set run
STRICT_PARALLEL_RATIO = 2.0  # per store, at 0 ms, every set: ordered time / parallel time


def one_run(
    store: str, em: Any, config: SkycoreConfig, env: mounting.RcloneEnv, n: int, size: int,
    entry: dict[str, Any], base: Path, network: Network, puts: int = 0,
) -> dict[str, Any]:  # fmt: skip
    """Mount a fresh bucket (behind ``network``; ``entry``: keywords of
    ``common.storage_entry``, the mount's options), write ``n`` files of ``size`` bytes, drain;
    the figures, every duration on the monotonic clock (the gate's event times mapped onto it,
    the clock's offset sampled at the start, after the drain and at the end). ``puts``: the
    floor's single PUTs of ``size`` bytes (``put_floor``), half before the first write and
    half after the drain."""
    case_start = time.monotonic_ns()
    watch = ClockWatch.start()
    bucket = f"order-{uuid.uuid4().hex[:10]}"
    url = em.make_bucket(bucket, owner="user", public=False)
    dst = base / f"{store}-{bucket}"
    names = [f"f-{i:04d}.bin" for i in range(n)]
    payload = os.urandom(size)
    probe = put_floor.PutProbe(em, bucket, payload)
    with common.removed_after(em, bucket, dst, env), behind(em, bucket, network) as held:
        storage = common.storage_entry(url, "MOUNT_CACHED", **entry)
        common.mount(storage, dst, config, env)
        probe.batch(puts // 2, "before")
        log_offset = common.gate_log_offset(em)
        with PeakRss(env.config_file) as rss:
            start = time.monotonic_ns()
            for name in names:
                with open(dst / name, "wb") as f:
                    f.write(payload)
            written = time.monotonic_ns()
            drained = common.drain(dst, env)
            drained_at = time.monotonic_ns()
        watch.mark()
        common.check_drained(drained)
        requests = common.gate_requests(em, bucket, log_offset)
        events = [  # the floor's PUTs are no part of the mount's order
            e
            for e in (em.events(bucket) if em.records_events else [])
            if not e.key.startswith(put_floor.KEY_PREFIX)
        ]
        probe.batch(puts - puts // 2, "after")
    watch.stop()
    case_wall_s = (time.monotonic_ns() - case_start) / 1e9
    writes = [e for e in events if e.op in WRITE_OPS and e.key in names]
    first_seen = list(dict.fromkeys(e.key for e in writes))
    # Without a gate event for every file (e.g. a gate that misses some upload kinds) the
    # order cannot be checked and the time is the drain's end (skycore's durability rule).
    lost = lost_keys(events, names) if em.records_events else names
    checked = not lost
    violations = visible_prefix_violations(events, names) if em.records_events else []
    drained_s = (drained_at - start) / 1e9

    def since_start(t_ns: int) -> float:
        return (watch.to_monotonic_ns(t_ns) - start) / 1e9

    in_store_s = since_start(max(e.t_ns for e in writes)) if checked else drained_s
    res: dict[str, Any] = {
        "transfers": storage.mount_options.transfers,
        "network_faults": held,
        "network_problems": not_held(network, held),
        "rclone_peak_rss_mib": rss.peak_mib,
        "latency_ms": network.latency_ms,
        "written_s": (written - start) / 1e9,
        "first_in_store_s": since_start(min(e.t_ns for e in writes)) if writes else None,
        "in_store_s": in_store_s,
        "drained_s": drained_s,
        "case_wall_s": case_wall_s,
        **watch.as_json(),
        "events_seen": len(set(first_seen)),
        "order_checked": checked,
        "not_in_store_by_events": len(lost),
        "in_order": False if violations else (True if checked else None),
        "out_of_place": (
            sum(1 for a, b in zip(first_seen, names, strict=False) if a != b) if checked else None
        ),
        "deletes": sum(1 for e in events if e.op not in WRITE_OPS and e.key in names),
        "order_violations": len(violations) if em.records_events else None,
        "first_violation": violations[0].describe() if violations else None,
        "requests": len(requests),
        "requests_by_kind": dict(
            Counter(common.request_kind(m, p, bucket) for m, p in requests).most_common()
        ),
        "puts": probe.as_json() if puts else None,
    }
    res["valid"] = watch.valid and not res["network_problems"]
    res["inconsistent"] = inconsistencies(res, n, watch.drift_ns / 1e9)
    for key in ("written_s", "first_in_store_s", "in_store_s", "drained_s", "case_wall_s"):
        res[key] = None if res[key] is None else round(res[key], 3)
    return res


def inconsistencies(run: dict[str, Any], n: int, slack_s: float) -> list[str]:
    """What in one run's figures cannot be: a negative duration, a step before the one it
    follows, a part longer than the case, a count over the files written or a total that is
    not its parts' sum. ``slack_s``: how far the clocks' offset moved (a figure taken from the
    gate's event times may be off by that much)."""
    keys = ("written_s", "first_in_store_s", "in_store_s", "drained_s", "case_wall_s")
    durations = {k: run[k] for k in keys}
    return [
        *negatives(durations),
        *in_order([("written_s", run["written_s"]), ("in_store_s", run["in_store_s"])], slack_s),
        *in_order([("in_store_s", run["in_store_s"]), ("drained_s", run["drained_s"])], slack_s),
        *in_order(
            [("first_in_store_s", run["first_in_store_s"]), ("in_store_s", run["in_store_s"])]
        ),
        *parts_over_whole("case_wall_s", run["case_wall_s"], durations),
        *at_most(
            "the files written",
            n,
            {k: run[k] for k in ("events_seen", "not_in_store_by_events", "out_of_place")},
        ),
        *counts_add_up("requests", run["requests"], run["requests_by_kind"]),
        *put_floor.inconsistencies(run.get("puts") or {}, run["case_wall_s"]),
    ]


def per_file(runs: list[dict[str, Any]], n: int) -> dict[str, Any] | None:
    """Requests per uploaded file over ``runs`` (each of ``n`` files), in all and by kind."""
    if not runs:
        return None
    kinds: Counter[str] = Counter()
    for r in runs:
        kinds.update(r["requests_by_kind"])
    files = n * len(runs)
    return {
        "total": round(sum(r["requests"] for r in runs) / files, 3),
        "by_kind": {k: round(c / files, 3) for k, c in kinds.most_common()},
    }


def measure_case(
    store: str, em: Any, config: SkycoreConfig, env: mounting.RcloneEnv, set_name: str,
    network: Network, base: Path, flags: tuple[str, ...], upload: dict[str, Any], repeat: int,
    failures: list[str], puts: int = 0,
) -> dict[str, Any]:  # fmt: skip
    """Ordered and parallel runs (``repeat`` valid ones each, median) of one store, set and
    network. A run whose clocks drifted apart is run again (``bench_clock.ATTEMPTS`` in all)
    and kept apart; one with inconsistent figures is a failure. ``upload``: mount options for
    the ordered mount (the parallel baseline keeps the defaults); ``puts``: the floor's PUTs
    around each ordered run (0: none)."""
    n, size = SETS[set_name]
    case = f"{store} {set_name} {network.label}"
    runs: dict[int, list[dict[str, Any]]] = {t: [] for t in MODES}
    invalid: dict[int, list[dict[str, Any]]] = {t: [] for t in MODES}
    for _ in range(repeat):
        for transfers in MODES:
            entry = {"flags": flags, "transfers": transfers, **(upload if transfers == 1 else {})}

            def attempt(entry: dict[str, Any] = entry) -> dict[str, Any] | None:
                try:
                    return one_run(
                        store, em, config, env, n, size, entry, base, network,
                        puts if entry["transfers"] == 1 else 0,
                    )  # fmt: skip
                except Exception as e:  # a failed run is reported, never hidden
                    failures.append(f"{case} transfers={entry['transfers']}: {e}")
                    return None

            res, drifted = until_valid(attempt, lambda r: r is None or r["valid"])
            drifted_runs = [r for r in drifted if r is not None]
            invalid[transfers] += drifted_runs
            for r in drifted_runs:
                why = r["network_problems"] + (
                    [] if r["clock_valid"] else [f"clock offset moved {r['clock_drift_ms']} ms"]
                )
                print(f"INVALID RUN ({'; '.join(why)}): {case} transfers={transfers}, run again",
                      flush=True)  # fmt: skip
            if res is None:
                if drifted_runs:
                    failures.append(f"{case} transfers={transfers}: no valid run in {ATTEMPTS}")
                continue
            if res["inconsistent"]:
                failures.extend(
                    f"{case} transfers={transfers}: INCONSISTENT {p}" for p in res["inconsistent"]
                )
                print("\n".join(failures[-len(res["inconsistent"]) :]), flush=True)
                invalid[transfers].append(res)
                continue
            runs[transfers].append(res)
            if transfers == 1 and not res["order_checked"]:
                failures.append(
                    f"{case}: order not checked on the server (the gate's events leave "
                    f"{res['not_in_store_by_events']} of {n} files not in the store: never "
                    "written, deleted, or an upload kind the gate does not record)"
                )
            if transfers == 1 and res["in_order"] is False:
                failures.append(
                    f"{case}: ordered upload broke the order after {res['order_violations']} "
                    f"of the gate's events; the first: {res['first_violation']}"
                )
                print(f"ORDER BROKEN: {failures[-1]}", flush=True)
    med = {
        t: (statistics.median(r["in_store_s"] for r in rs) if rs else None)
        for t, rs in runs.items()
    }
    ratio = round(med[1] / med[PARALLEL], 3) if med[1] and med[PARALLEL] else None
    return {
        "store": store,
        "set": set_name,
        **network.as_json(),
        "network": network.label,
        "files": n,
        "file_bytes": size,
        "ordered_options": {k: v for k, v in upload.items()},
        "ordered_s": med[1],
        "parallel_s": med[PARALLEL],
        "ordered_over_parallel_time": ratio,
        "ordered_speed_vs_parallel": round(1 / ratio, 3) if ratio else None,
        "put_median_ms": None,
        "put_mean_ms": None,
        "puts": 0,
        "requests_per_put": None,
        "floor_requests_per_file": None,
        "floor": None,
        "floor_s": None,
        "ordered_over_floor": None,
        "order_checked_on_server": all(r["order_checked"] for r in runs[1]),
        "rclone_peak_rss_mib": {
            MODES[t]: max((r["rclone_peak_rss_mib"] for r in rs), default=None)
            for t, rs in runs.items()
        },
        "requests_per_file": {MODES[t]: per_file(rs, n) for t, rs in runs.items()},
        "runs": {MODES[t]: rs for t, rs in runs.items()},
        "invalid_runs": {MODES[t]: rs for t, rs in invalid.items()},
    }


def add_floor(row: dict[str, Any]) -> None:
    """Set the row's floor from its ordered runs' PUTs (``put_floor``): the median PUT, the
    requests per file the floor counts (1, or the store's ordered upload requests per file)
    and ordered / floor (left None without PUTs)."""
    times = [t for r in row["runs"]["ordered"] if r["puts"] for t in r["puts"]["times_ms"]]
    if not times:
        return
    sent = sum(r["puts"]["count"] for r in row["runs"]["ordered"] if r["puts"])
    logged = sum(r["puts"]["requests"] for r in row["runs"]["ordered"] if r["puts"])
    median_s = statistics.median(times) / 1000
    per_file = put_floor.requests_per_file(row["requests_per_file"]["ordered"])
    floor = put_floor.floor_s(row["files"], median_s, per_file)
    row["put_median_ms"] = round(median_s * 1000, 3)
    row["put_mean_ms"] = round(statistics.mean(times), 3)  # context: the floor is the median's
    row["puts"] = sent
    row["requests_per_put"] = round(logged / sent, 3) if sent else None
    row["floor_requests_per_file"] = per_file
    row["floor"] = put_floor.floor_name(per_file)
    row["floor_s"] = None if floor is None else round(floor, 3)
    if row["ordered_s"] and floor:
        row["ordered_over_floor"] = round(row["ordered_s"] / floor, 3)


def ordered_over(name: str, row: dict[str, Any], base: str, limit: float) -> list[Target]:
    """The row's target of ordered time over ``base`` ('parallel' or 'floor') time (the
    floor's may reach its limit)."""
    if base == "parallel":
        return [Target(f"{name}: ordered/parallel time", row["ordered_over_parallel_time"],
                       limit, "x")]  # fmt: skip
    label = f"ordered/{row['floor'] or 'one-request'} floor time"
    return [AtMost(f"{name}: {label}", row["ordered_over_floor"], limit, "x")]


def targets_of(row: dict[str, Any]) -> list[Target]:
    """The upload-order targets a row has (none for other latencies, or GCS big at 30 ms; on
    the WAN profile, big files on every store)."""
    name = f"{row['store']} {row['set']} {row['network']}"
    if row["stream_mibps"] is not None:
        if row["set"] != "big":
            return []
        return ordered_over(name, row, "parallel", round(TARGET_BIG_RATIO, 3))
    if row["latency_ms"] == 0:
        return ordered_over(name, row, "parallel", TARGET_TIME_RATIO)
    if row["latency_ms"] != LATENCY_TARGET_MS:
        return []
    if row["set"] == "big" and row["store"] in BIG_TARGET_STORES:
        return ordered_over(name, row, "parallel", round(TARGET_BIG_RATIO, 3))
    return []


def strict_targets_of(row: dict[str, Any]) -> list[Target]:
    """The strict-order targets a row has: the small set's ordered / floor time at 0 and
    30 ms (``FLOOR_RATIO``), and at 0 ms every set's ordered / parallel time."""
    name = f"strict-order {row['store']} {row['set']} {row['network']}"
    if row["stream_mibps"] is not None:
        return []
    out = []
    if row["set"] == "small" and row["latency_ms"] in FLOOR_RATIO:
        out += ordered_over(name, row, "floor", FLOOR_RATIO[row["latency_ms"]])
    if row["latency_ms"] == 0:
        out += ordered_over(name, row, "parallel", STRICT_PARALLEL_RATIO)
    return out


def print_store_targets(by_store: dict[str, list[Target]]) -> None:
    """The strict-order targets, met or missed, store by store."""
    print("\nStrict-order targets per store")
    for store, targets in by_store.items():
        met = sum(t.met for t in targets)
        print(f"{store}: {met} of {len(targets)} met")
        for t in targets:
            print(f"  {t.describe()}")


def print_tables(rows: list[dict[str, Any]], version: str) -> None:
    """The figures per store x set x latency, then the requests per file by kind."""
    print(f"\nOrdered (transfers 1) vs parallel (transfers {PARALLEL}), {version}")

    def req(row: dict[str, Any], mode: str) -> str:
        pf = row["requests_per_file"][mode]
        return common.cell(pf["total"] if pf else None, missing="-")

    common.print_table(
        [("store", "<6"), ("set", "<6"), ("network", "<24"), ("ordered s", ">10"),
         ("parallel s", ">11"), ("ordered/parallel", ">17"), ("PUT ms", ">7"),
         ("floor", ">12"), ("floor s", ">8"), ("ordered/floor", ">14"),
         ("req/file ord", ">13"), ("req/file par", ">13"),
         ("invalid runs", ">13"), ("rclone MiB ord/par", ">19")],
        [
            (r["store"], r["set"], r["network"],
             common.cell(r["ordered_s"] or None, missing="nan"),
             common.cell(r["parallel_s"] or None, missing="nan"),
             common.cell(r["ordered_speed_vs_parallel"], ".2f", "-", "x"),
             common.cell(r["put_median_ms"], missing="-"), r["floor"] or "-",
             common.cell(r["floor_s"], missing="-"),
             common.cell(r["ordered_over_floor"], ".2f", "-", "x"),
             req(r, "ordered"), req(r, "parallel"),
             "/".join(str(len(v)) for v in r["invalid_runs"].values()),
             "/".join(common.cell(v, ".0f", "-") for v in r["rclone_peak_rss_mib"].values()))
            for r in rows
        ],
    )  # fmt: skip
    print(
        "PUT ms: the median of single PUTs of one object of the set's size by the store's "
        "SDK client, beside the ordered runs; floor: files x that x the requests the ordered "
        "mount sends per file (one-request, or N-request where a small file takes N); "
        "invalid runs: ordered/parallel runs left out, run again (the clocks' offset moved "
        f"more than {MAX_DRIFT_NS / 1e6:g} ms, or the network's faults did not last the run) "
        "or with inconsistent figures (a failure); "
        "rclone MiB: the peak RSS of the benchmark's rclone daemons together (as on one node) "
        "while the files were written and drained, the largest over the runs"
    )
    print("\nRequests per uploaded file on the run's bucket, by kind (gate log)")
    common.print_table(
        [("store", "<6"), ("set", "<6"), ("network", "<24"), ("mode", "<9"), ("total", ">6"),
         ("by kind", "<")],
        [
            (r["store"], r["set"], r["network"], mode,
             common.cell(pf["total"] if pf else None, missing="-"),
             ", ".join(f"{k} {v:.2f}" for k, v in pf["by_kind"].items()) if pf else "-")
            for r in rows
            for mode, pf in r["requests_per_file"].items()
        ],
    )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = common.arg_parser(__doc__)
    common.add_stores_option(parser)
    parser.add_argument("--sets", default="big,small")
    parser.add_argument(
        "--latency-ms",
        type=float,
        action="append",
        help="the gate's latency fault per request, repeatable (default: 0 and 30, or none "
        "with --wan; 0: none)",
    )
    add_wan_options(parser)
    common.add_upload_options(parser)
    parser.add_argument("--repeat", type=int, default=1, help="runs per case (median)")
    parser.add_argument(
        "--floor-puts",
        type=int,
        default=FLOOR_PUTS,
        help="single PUTs around each ordered small-set run, for the floor (0: no floor)",
    )
    common.add_rclone_flags_option(
        parser, "extra rclone flags for both daemons (experiments), e.g. '--s3-disable-checksum'"
    )
    add_check_option(parser)
    args = parser.parse_args(argv)
    flags = tuple(shlex.split(args.rclone_flags))
    stores = common.names(args.stores)
    sets = common.names(args.sets)
    wan = wan_of(parser, args)
    latencies = sorted(set(args.latency_ms or ([] if wan else [0.0, LATENCY_TARGET_MS])))
    if any(ms < 0 for ms in latencies):
        parser.error("--latency-ms must be >= 0")
    if args.repeat < 1:
        parser.error("--repeat must be >= 1")
    if args.floor_puts < 0:
        parser.error("--floor-puts must be >= 0 (0: no floor)")
    upload = common.upload_options(parser, args)
    networks = [Network(ms) for ms in latencies] + ([wan] if wan else [])
    ems = start_all(stores=stores)
    load_before = os.getloadavg()
    rows: list[dict[str, Any]] = []
    failures: list[str] = []
    with common.host_mounts(ems, "sko-") as (config, base, env):
        for store in stores:
            for set_name in sets:
                for network in networks:
                    row = measure_case(
                        store, ems[store], config, env, set_name, network, base, flags, upload,
                        args.repeat, failures, args.floor_puts if set_name == "small" else 0,
                    )  # fmt: skip
                    add_floor(row)
                    rows.append(row)
                    walls = [r["case_wall_s"] for rs in row["runs"].values() for r in rs]
                    print(
                        f"{store:6} {set_name:5} {network.label} ordered {row['ordered_s']}s "
                        f"parallel {row['parallel_s']}s -> ordered at "
                        f"{row['ordered_speed_vs_parallel']}x parallel speed"
                        + (
                            f", PUT {row['put_median_ms']} ms, {row['ordered_over_floor']}x "
                            f"{row['floor']} floor"
                            if row["floor_s"]
                            else ""
                        )
                        + f" (runs took {sum(walls):.0f} s)",
                        flush=True,
                    )
    targets = [t for r in rows for t in targets_of(r)]
    by_store: dict[str, list[Target]] = {s: [] for s in stores}
    for r in rows:
        by_store[r["store"]] += strict_targets_of(r)
    version = common.rclone_version()
    print_tables(rows, version)
    print_store_targets(by_store)
    load_after = os.getloadavg()
    print(f"\nload average before {load_before}, after {load_after}")
    common.save_results(
        "upload_order",
        {
            "rclone": version,
            "parallel_transfers": PARALLEL,
            "latencies_ms": latencies,
            "wan": wan.as_json() if wan else None,
            "ordered_options": upload,
            "floor_puts_per_run": args.floor_puts,
            "floor_ratio_limits": {f"{ms:g}ms": v for ms, v in FLOOR_RATIO.items()},
            "clock_max_drift_ms": MAX_DRIFT_NS / 1e6,
            "rclone_flags": list(flags),
            "loadavg_before": load_before,
            "loadavg_after": load_after,
            "results": rows,
            "targets": {t.name: t.as_json() for t in targets},
            "store_targets": {s: {t.name: t.as_json() for t in ts} for s, ts in by_store.items()},
            "failures": failures,
            "checked": not args.no_check,
        },
    )
    strict = [t for ts in by_store.values() for t in ts]
    return verdict(targets + strict, args.no_check, failures)


if __name__ == "__main__":
    sys.exit(main())
