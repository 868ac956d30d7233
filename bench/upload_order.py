"""Ordered against parallel uploads through MOUNT_CACHED, per store, for big and small files.

For each store of the local cloud (the emulators behind their gates) and each file set
(big: 8 x 32 MiB, small: 200 x 64 KiB), a fresh bucket is mounted with skycore's own mount
script (host-side, same node program and flags) twice: ordered (``transfers: 1``, the
default) and parallel (``transfers: 4``). The writer creates the files back to back; the
time counted is from the first write until the last file is in the store (the gate's
completion time of its write, falling back to the end of skycore's drain). The order of
the ordered run is checked on the server side (the gate's write events): any file reaching
the store before one created earlier is a failure.

    .venv/bin/python bench/upload_order.py [--stores s3,gcs,azure] [--sets big,small]
        [--repeat 1] [--no-check]

Prints the table and, per store and set, ordered speed as a fraction of parallel speed;
writes JSON to bench/results/upload_order-<timestamp>.json. Target: ordered >= 0.8x
parallel, i.e. ordered time / parallel time < 1.25. Exits 1 on a missed target
(unless --no-check), a lost order or a failed run.
"""

from __future__ import annotations

import os
import shlex
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import common
from bench_checks import Target, add_check_option, verdict

from harness.emulators.fleet import start_all
from skycore.config import SkycoreConfig
from skycore.storage import Storage, mounting
from skycore.storage.mounting import MountOptions

SETS = {"big": (8, 32 << 20), "small": (200, 64 << 10)}
PARALLEL = 4
TARGET_TIME_RATIO = 1.25  # ordered time / parallel time; ordered speed >= 0.8x parallel


def one_run(
    store: str, em: Any, config: SkycoreConfig, env: mounting.RcloneEnv, n: int, size: int,
    transfers: int, base: Path, flags: tuple[str, ...] = (),
) -> dict[str, Any]:  # fmt: skip
    """Mount a fresh bucket, write ``n`` files of ``size`` bytes, drain; the figures."""
    bucket = f"order-{uuid.uuid4().hex[:10]}"
    url = em.make_bucket(bucket, owner="user", public=False)
    dst = base / f"{store}-{bucket}"
    try:
        storage = Storage.from_spec(name=None, source=url, store=None, mode="MOUNT_CACHED")
        storage.mount_options = MountOptions(transfers=transfers, extra_flags=flags)
        common.mount(storage, dst, config, env)
        names = [f"f-{i:04d}.bin" for i in range(n)]
        payload = os.urandom(size)
        start_ns = time.time_ns()
        for name in names:
            with open(dst / name, "wb") as f:
                f.write(payload)
        written_s = (time.time_ns() - start_ns) / 1e9
        drained = common.drain(dst, env)
        drained_s = (time.time_ns() - start_ns) / 1e9
        if drained.returncode != 0:
            raise RuntimeError(f"drain failed: {drained.stderr[-2000:]}")
        events = []
        if em.records_events:
            events = [e for e in em.events(bucket) if e.op != "delete" and e.key in names]
        first_seen = list(dict.fromkeys(e.key for e in events))
        # Without a gate event for every file (e.g. a gate that misses some upload kinds) the
        # order cannot be checked and the time is the drain's end (skycore's durability rule).
        checked = bool(em.records_events) and sorted(first_seen) == names
        in_store_s = (max(e.t_ns for e in events) - start_ns) / 1e9 if checked else drained_s
        out_of_place = sum(1 for a, b in zip(first_seen, names, strict=False) if a != b)
        return {
            "transfers": transfers,
            "written_s": round(written_s, 3),
            "in_store_s": round(in_store_s, 3),
            "drained_s": round(drained_s, 3),
            "events_seen": len(set(first_seen)),
            "order_checked": checked,
            "in_order": first_seen == names if checked else None,
            "out_of_place": out_of_place if checked else None,
        }
    finally:
        common.unmount(dst, env)
        em.delete_bucket(bucket)


def main(argv: list[str] | None = None) -> int:
    parser = common.arg_parser(__doc__)
    common.add_stores_option(parser)
    parser.add_argument("--sets", default="big,small")
    parser.add_argument("--repeat", type=int, default=1, help="runs per case (median)")
    common.add_rclone_flags_option(
        parser, "extra rclone flags for both daemons (experiments), e.g. '--s3-disable-checksum'"
    )
    add_check_option(parser)
    args = parser.parse_args(argv)
    flags = tuple(shlex.split(args.rclone_flags))
    stores = common.names(args.stores)
    sets = common.names(args.sets)
    ems = start_all(stores=stores)
    load_before = os.getloadavg()
    rows: list[dict[str, Any]] = []
    failures: list[str] = []
    targets: list[Target] = []
    with common.host_mounts(ems, "sko-") as (config, base, env):
        for store in stores:
            for set_name in sets:
                n, size = SETS[set_name]
                runs: dict[int, list[dict[str, Any]]] = {1: [], PARALLEL: []}
                for _ in range(args.repeat):
                    for transfers in (1, PARALLEL):
                        try:
                            res = one_run(
                                store, ems[store], config, env, n, size, transfers, base, flags
                            )
                        except Exception as e:  # a failed run is reported, never hidden
                            failures.append(f"{store} {set_name} transfers={transfers}: {e}")
                            continue
                        runs[transfers].append(res)
                        if transfers == 1 and not res["order_checked"]:
                            failures.append(
                                f"{store} {set_name}: order not checked on the server (the gate "
                                f"recorded {res['events_seen']} of {n} uploads)"
                            )
                        if transfers == 1 and res["in_order"] is False:
                            failures.append(
                                f"{store} {set_name}: ordered upload out of order "
                                f"({res['out_of_place']} files out of place)"
                            )
                med = {
                    t: (statistics.median(r["in_store_s"] for r in rs) if rs else None)
                    for t, rs in runs.items()
                }
                ratio = (
                    round(med[1] / med[PARALLEL], 3) if med[1] and med[PARALLEL] else None
                )  # ordered time / parallel time
                row = {
                    "store": store,
                    "set": set_name,
                    "files": n,
                    "file_bytes": size,
                    "ordered_s": med[1],
                    "parallel_s": med[PARALLEL],
                    "ordered_speed_vs_parallel": round(1 / ratio, 3) if ratio else None,
                    "order_checked_on_server": all(r["order_checked"] for r in runs[1]),
                    "runs": runs,
                }
                rows.append(row)
                targets.append(
                    Target(f"{store} {set_name}: ordered/parallel time", ratio,
                           TARGET_TIME_RATIO, "x")
                )  # fmt: skip
                print(
                    f"{store:6} {set_name:5} ordered {med[1]}s parallel {med[PARALLEL]}s "
                    f"-> ordered at {row['ordered_speed_vs_parallel']}x parallel speed",
                    flush=True,
                )
    version = common.rclone_version()
    print(f"\nOrdered (transfers 1) vs parallel (transfers {PARALLEL}), {version}")
    common.print_table(
        [("store", "<6"), ("set", "<6"), ("ordered s", ">10"), ("parallel s", ">11"),
         ("ordered/parallel", ">17")],
        [
            (r["store"], r["set"], common.cell(r["ordered_s"] or None, missing="nan"),
             common.cell(r["parallel_s"] or None, missing="nan"),
             common.cell(r["ordered_speed_vs_parallel"], ".2f", "-", "x"))
            for r in rows
        ],
    )  # fmt: skip
    common.save_results(
        "upload_order",
        {
            "rclone": version,
            "parallel_transfers": PARALLEL,
            "rclone_flags": list(flags),
            "loadavg_before": load_before,
            "loadavg_after": os.getloadavg(),
            "results": rows,
            "targets": {t.name: t.as_json() for t in targets},
            "failures": failures,
            "checked": not args.no_check,
        },
    )
    return verdict(targets, args.no_check, failures)


if __name__ == "__main__":
    sys.exit(main())
