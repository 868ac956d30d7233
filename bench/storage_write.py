"""Checkpoint write benchmark: local disk vs rclone MOUNT vs MOUNT_CACHED vs the plain SDK.

Writes one checkpoint (default 256 MiB) into local disk and into a MOUNT and a MOUNT_CACHED
mount of a fresh bucket in each store of the local cloud (the emulators behind their gates),
using the same mount scripts and node program skycore runs on nodes. Reports, per target:
the time the writer is blocked (write + close), its MiB/s, and the time until the object is
fully in the store (visible in a listing, which happens only once an upload completes).

The baseline ("SDK") is what a user would do without a mount: write the checkpoint to local
disk, then upload the same bytes with the store's SDK as its users call it, with the SDK's
defaults (boto3's ``upload_file``, google-cloud-storage's ``upload_from_filename``,
azure-storage-blob's ``upload_blob``); its time until durable is local write + upload. Per
store the benchmark prints MOUNT_CACHED's speed until durable as a fraction of the SDK's.
Target: >= 0.85x on S3 (on every store with ``--wan``), i.e. MOUNT_CACHED time / SDK time
< 1/0.85.

    .venv/bin/python bench/storage_write.py [--size-mib 256] [--stores s3,gcs,azure]
        [--wan [--wan-latency-ms 30] [--wan-stream-mibps 8]] [--upload-concurrency N]
        [--chunk-size 16M] [--repeat 1] [--no-check]
    (default: every store of the emulator registry)

A store from a package runs the same way once the package is importable, e.g. rclones3
(``rclone serve s3`` as the S3 stand-in instead of moto, whose multipart completion costs
CPU here): ``pip install --target DIR --no-deps --no-build-isolation --no-index
tests/fixtures/rclone_s3_pkg``, then ``PYTHONPATH=DIR ... --stores s3,rclones3``.

``--wan`` puts every bucket (SDK, MOUNT, MOUNT_CACHED) behind a modelled WAN: every request
waits 30 ms and every connection is capped at 8 MiB/s (the gate's ``latency`` and
``stream-bandwidth`` faults, scoped to the bucket). The mounts are made as a task YAML's
file_mounts entry makes them (the defaults users get); ``--upload-concurrency`` and
``--chunk-size`` set those options on the MOUNT_CACHED entry. Every duration is monotonic;
each row's figures are checked (no negative time, the upload not done before the write, no
part longer than the whole case), and an inconsistent row is a failure (exit 1) left out of
every median.

Prints a table and saves JSON under bench/results/ (with the load average before and after:
other work on this 2-core machine skews every figure). Exits 1 when a measurement failed (a
cached mount that could not be drained has not really written its checkpoint) or, unless
--no-check, when the S3 target is missed.
"""

from __future__ import annotations

import os
import shlex
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import common
from bench_checks import Target, add_check_option, verdict
from bench_clock import until_valid
from bench_consistency import in_order, negatives, parts_over_whole
from bench_memory import PeakRss
from bench_network import Network, add_wan_options, fresh_bucket, not_held, wan_of

from harness.emulators.fleet import start_all
from skycore.config import SkycoreConfig
from skycore.storage import Storage, make_store, mounting

CHUNK = 8 * 1024 * 1024
TARGET_SDK_STORE = "s3"
TARGET_SPEED_VS_SDK = 0.85  # MOUNT_CACHED speed until durable / SDK speed until durable


def write_file(path: Path, size: int, block: bytes, fsync: bool = False) -> float:
    """Write ``size`` bytes to ``path`` and close it (fsync first if asked); seconds the
    writer was blocked."""
    t0 = time.perf_counter()
    with open(path, "wb") as f:
        left = size
        while left > 0:
            n = min(left, len(block))
            f.write(block[:n])
            left -= n
        if fsync:
            f.flush()
            os.fsync(f.fileno())
    return time.perf_counter() - t0


def wait_in_store(store: Any, key: str, t_start: float, timeout: float = 900) -> float:
    """Seconds from ``t_start`` until ``key`` is listed (fully uploaded) in ``store``."""
    while time.perf_counter() - t_start < timeout:
        if key in store.list_keys(key):
            return time.perf_counter() - t_start
        time.sleep(0.05)
    raise TimeoutError(f"{key} did not reach {store.url} within {timeout} s")


def sdk_upload(store: Any, path: Path, key: str) -> None:
    """Upload ``path`` as a user of the store's SDK does, with the SDK's defaults: boto3's
    ``upload_file`` (multipart from 8 MiB, 10 threads), google-cloud-storage's
    ``upload_from_filename``, azure-storage-blob's ``upload_blob``; another store through its
    skycore class."""
    from skycore.storage.azure import AzureBlobStore
    from skycore.storage.gcs import GcsStore
    from skycore.storage.s3 import S3Store

    if isinstance(store, S3Store):
        store.client.upload_file(str(path), store.name, key)
    elif isinstance(store, GcsStore):
        store.client.bucket(store.name).blob(key).upload_from_filename(str(path))
    elif isinstance(store, AzureBlobStore):
        with open(path, "rb") as f:
            store.container.upload_blob(key, f, overwrite=True)
    else:
        store.upload_file(path, key)


def bench_sdk(
    name: str, em: Any, config: SkycoreConfig, size: int, block: bytes, base: Path,
    network: Network,
) -> dict[str, Any]:  # fmt: skip
    """Write the checkpoint to local disk, then upload it with the store's SDK (its
    defaults): the way to save a checkpoint without a mount."""
    case_start = time.perf_counter()
    path = base / f"{name}-sdk.bin"
    with fresh_bucket(em, "bench-sdk", network) as (url, held):
        try:
            storage = Storage.from_spec(name=None, source=url, store=None, mode="MOUNT")
            storage.check(config)
            store = make_store(storage.store, storage.name, config, storage.account)
            t0 = time.perf_counter()
            t_write = write_file(path, size, block)
            sdk_upload(store, path, "ckpt.bin")
            t_store = time.perf_counter() - t0
            if "ckpt.bin" not in store.list_keys("ckpt.bin"):
                raise RuntimeError(f"SDK upload to {url} returned but the object is not listed")
        finally:
            path.unlink(missing_ok=True)
    wall = time.perf_counter() - case_start
    return {**row(name, "SDK", size, t_write, t_store, wall), **network_record(network, held)}


def bench_mount(
    name: str, em: Any, config: SkycoreConfig, size: int, block: bytes, base: Path,
    env: mounting.RcloneEnv, mode: str, entry: dict[str, Any], network: Network,
) -> dict[str, Any]:  # fmt: skip
    """Write the checkpoint into a fresh ``mode`` mount (``entry``: keywords of
    ``common.storage_entry``, the mount's options); the time until it is listed."""
    case_start = time.perf_counter()
    dst = base / f"{name}-{mode.lower()}"
    prefix = f"bench-{mode.lower().replace('_', '-')}"
    with fresh_bucket(em, prefix, network) as (url, held):
        try:
            storage = common.storage_entry(url, mode, **entry)
            common.mount(storage, dst, config, env)
            store = make_store(storage.store, storage.name, config, storage.account)
            with PeakRss(env.config_file) as rss:
                t0 = time.perf_counter()
                t_write = write_file(dst / "ckpt.bin", size, block)
                t_store = wait_in_store(store, "ckpt.bin", t0)
                drained = common.drain(dst, env)
            if drained.returncode != 0:
                print(f"{name} {mode}: drain failed: {drained.stderr[-1000:]}", file=sys.stderr)
        finally:
            if dst.exists():
                common.unmount(dst, env)
    wall = time.perf_counter() - case_start
    res = row(name, mode, size, t_write, t_store, wall, drained.returncode == 0)
    return {**res, **network_record(network, held), "rclone_peak_rss_mib": rss.peak_mib}


def network_record(network: Network, held: dict[str, Any]) -> dict[str, Any]:
    """What a row records of its network: the faults' hits and why the bucket was not behind
    the network all along (the row is then invalid: measured again)."""
    return {"network_faults": held, "network_problems": not_held(network, held)}


def bench_store(
    name: str, em: Any, config: SkycoreConfig, size: int, block: bytes, base: Path,
    env: mounting.RcloneEnv, flags: tuple[str, ...], upload: dict[str, Any], network: Network,
) -> list[dict[str, Any]]:  # fmt: skip
    """The SDK, MOUNT and MOUNT_CACHED rows of one store (``flags`` and ``upload``: options
    of the MOUNT_CACHED mount), each measured again (3 times at most) while its bucket was not
    behind the network all along; the rows left out are ``invalid`` (in the JSON)."""

    def mount(mode: str, entry: dict[str, Any]) -> Callable[[], dict[str, Any]]:
        return lambda: bench_mount(name, em, config, size, block, base, env, mode, entry, network)

    cases: list[Callable[[], dict[str, Any]]] = [
        lambda: bench_sdk(name, em, config, size, block, base, network),
        mount("MOUNT", {}),
        mount("MOUNT_CACHED", {"flags": flags, **upload}),
    ]
    rows = []
    for case in cases:
        res, invalid = until_valid(case, lambda r: not r["network_problems"])
        for r in invalid:
            print(f"INVALID {name} {r['target']} ({'; '.join(r['network_problems'])}): run again")
        rows += [{**r, "invalid": True} for r in invalid] + ([res] if res else [])
    return rows


def row(
    store: str,
    target: str,
    size: int,
    t_write: float,
    t_store: float | None,
    case_wall: float | None = None,
    drained: bool = True,
) -> dict[str, Any]:
    """One line of the results: how long the writer was blocked and, for a store, how long
    until the checkpoint was in it (``t_store``) and how long the whole case took (bucket,
    mount, write, upload, unmount: ``case_wall``). ``inconsistent``: what in them cannot be."""
    figures = {"write_s": t_write, "in_store_s": t_store, "case_wall_s": case_wall}
    problems = [
        *negatives(figures),
        *in_order([("write_s", t_write), ("in_store_s", t_store)]),
        *parts_over_whole("case_wall_s", case_wall, {"write_s": t_write, "in_store_s": t_store}),
    ]
    return {
        "store": store,
        "target": target,
        **{k: None if v is None else round(v, 3) for k, v in figures.items()},
        "write_mib_s": round(size / 2**20 / t_write, 1) if t_write > 0 else None,
        "end_to_end_mib_s": round(size / 2**20 / t_store, 1) if t_store else None,
        "drained": drained,
        "inconsistent": problems,
    }


def _median(rows: list[dict[str, Any]], store: str, target: str, key: str) -> float | None:
    """The median of ``key`` over the consistent rows of ``store`` and ``target``."""
    vals = [
        r[key]
        for r in rows
        if r["store"] == store and r["target"] == target
        and not r["inconsistent"] and not r.get("invalid")
    ]  # fmt: skip
    return round(statistics.median(vals), 3) if vals else None


def main(argv: list[str] | None = None) -> int:
    parser = common.arg_parser(__doc__)
    parser.add_argument("--size-mib", type=int, default=256)
    common.add_stores_option(parser)
    parser.add_argument("--repeat", type=int, default=1, help="runs per store (median)")
    common.add_rclone_flags_option(
        parser,
        "extra rclone flags for the MOUNT_CACHED daemon (experiments), e.g. '--s3-chunk-size 16M'",
    )
    add_wan_options(parser)
    common.add_upload_options(parser)
    add_check_option(parser)
    args = parser.parse_args(argv)
    network = wan_of(parser, args) or Network()
    upload = common.upload_options(parser, args)
    size = args.size_mib * 2**20
    stores = common.names(args.stores)
    flags = tuple(shlex.split(args.rclone_flags))
    ems = start_all(stores=stores)
    block = os.urandom(CHUNK)
    load_before = os.getloadavg()
    rows: list[dict[str, Any]] = []
    failures: list[str] = []
    with common.host_mounts(ems, "skb-") as (config, base, env):
        local = base / "local"
        local.mkdir()
        write_file(local / "warmup.bin", size, block, fsync=True)  # page cache warm-up
        (local / "warmup.bin").unlink()
        for label, fsync in (("local disk", False), ("local+fsync", True)):
            t = write_file(local / "ckpt.bin", size, block, fsync=fsync)
            rows.append(row("-", label, size, t, None))
            (local / "ckpt.bin").unlink()
        for _ in range(args.repeat):
            for name in stores:
                try:
                    rows.extend(
                        bench_store(
                            name, ems[name], config, size, block, base, env, flags, upload, network
                        )
                    )
                except Exception as e:  # a failed measurement is reported, never hidden
                    failures.append(f"{name}: {e}")
    for r in rows:
        for problem in r["inconsistent"]:
            failures.append(f"{r['store']} {r['target']}: INCONSISTENT {problem}")
            print(failures[-1])
    version = common.rclone_version()
    print(
        f"Checkpoint write, {args.size_mib} MiB ({version}, host-side mounts, network "
        f"{network.label}, MOUNT_CACHED options {upload or 'defaults'})"
    )
    common.print_table(
        [("store", "<9"), ("target", "<13"), ("write s", ">8"), ("MiB/s", ">8"),
         ("in store s", ">11"), ("e2e MiB/s", ">10"), ("case s", ">8"), ("rclone MiB", ">11"),
         ("figures", "<")],
        [
            (r["store"], r["target"], common.cell(r["write_s"]),
             common.cell(r["write_mib_s"], ".1f"), common.cell(r["in_store_s"]),
             common.cell(r["end_to_end_mib_s"], ""), common.cell(r["case_wall_s"], ".1f"),
             common.cell(r.get("rclone_peak_rss_mib"), ".0f"),
             "INVALID" if r.get("invalid") else "INCONSISTENT" if r["inconsistent"] else "ok")
            for r in rows
        ],
    )  # fmt: skip
    vs_sdk: dict[str, Any] = {}
    targets: list[Target] = []
    for name in stores:
        sdk = _median(rows, name, "SDK", "in_store_s")
        cached = _median(rows, name, "MOUNT_CACHED", "in_store_s")
        ratio = round(cached / sdk, 3) if sdk and cached else None  # time ratio
        vs_sdk[name] = {
            "sdk_in_store_s": sdk,
            "mount_cached_in_store_s": cached,
            "mount_cached_speed_vs_sdk": round(1 / ratio, 3) if ratio else None,
        }
        print(
            f"{name}: MOUNT_CACHED until durable {cached}s, SDK (local write + upload) {sdk}s"
            f" -> MOUNT_CACHED at {vs_sdk[name]['mount_cached_speed_vs_sdk']}x the SDK's speed"
        )
        if name == TARGET_SDK_STORE or args.wan:
            targets.append(
                Target(
                    f"{name}: MOUNT_CACHED/SDK time until durable",
                    ratio,
                    round(1 / TARGET_SPEED_VS_SDK, 3),
                    "x",
                )
            )
    load_after = os.getloadavg()
    print(f"load average before {load_before[0]:.1f}, after {load_after[0]:.1f}")
    common.save_results(
        "storage_write",
        {
            "size_mib": args.size_mib,
            "rclone": version,
            "loadavg_before": load_before,
            "loadavg_after": load_after,
            "repeat": args.repeat,
            "rclone_flags": list(flags),
            "network": network.as_json(),
            "mount_cached_options": upload,
            "results": rows,
            "vs_sdk": vs_sdk,
            "targets": {t.name: t.as_json() for t in targets},
            "failures": failures,
            "checked": not args.no_check,
        },
    )
    failures += [f"{r['store']} {r['target']}: not drained" for r in rows if not r["drained"]]
    return verdict(targets, args.no_check, failures)


if __name__ == "__main__":
    sys.exit(main())
