"""Checkpoint write benchmark: local disk vs rclone MOUNT vs MOUNT_CACHED, per store.

Writes one checkpoint (default 256 MiB) into local disk and into a MOUNT and a MOUNT_CACHED
mount of a fresh bucket in each store of the local cloud (the emulators behind their gates),
using the same mount scripts skycore runs on nodes. Reports, per target: the time the writer
is blocked (write + close), its MiB/s, and the time until the object is fully in the store
(visible in a listing, which happens only once an upload completes).

    .venv/bin/python bench/storage_write.py [--size-mib 256] [--stores s3,gcs,azure]
    (default: every store of the emulator registry)

Prints a table and saves JSON under bench/results/. It states no speed target (the figures
are compared by hand with DESIGN.md's); it exits 1 when a measurement failed: a cached mount
that could not be drained has not really written its checkpoint.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness import registry  # noqa: E402
from harness.emulators import start_all  # noqa: E402
from skycore.config import SkycoreConfig  # noqa: E402
from skycore.storage import Storage, get_store_class, make_store, mounting  # noqa: E402

CHUNK = 8 * 1024 * 1024
RCLONE = ROOT / ".venv" / "bin" / "rclone"


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


def bash(cmd: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "AWS_CA_BUNDLE"}
    return subprocess.run(
        ["bash", "-c", cmd], capture_output=True, text=True, timeout=timeout, env=env, check=False
    )


def wait_in_store(store: Any, key: str, t_start: float, timeout: float = 900) -> float:
    """Seconds from ``t_start`` until ``key`` is listed (fully uploaded) in ``store``."""
    while time.perf_counter() - t_start < timeout:
        if key in store.list_keys(key):
            return time.perf_counter() - t_start
        time.sleep(0.05)
    raise TimeoutError(f"{key} did not reach {store.url} within {timeout} s")


def bench_store(
    name: str, em: Any, config: SkycoreConfig, size: int, block: bytes, base: Path
) -> list[dict[str, Any]]:
    results = []
    env = mounting.RcloneEnv(
        rclone=str(RCLONE), config_file=str(base / "rclone.conf"), mounts_base=str(base / "m")
    )
    for mode in ("MOUNT", "MOUNT_CACHED"):
        bucket = f"bench-{mode.lower().replace('_', '-')}-{uuid.uuid4().hex[:8]}"
        url = em.make_bucket(bucket, owner="user", public=False)
        dst = base / f"{name}-{mode.lower()}"
        try:
            storage = Storage.from_spec(name=None, source=url, store=None, mode=mode)
            storage.check(config)
            r = bash(storage.mount_command(str(dst), config, env=env))
            if r.returncode != 0:
                raise RuntimeError(f"mount failed: {r.stderr}")
            store = make_store(storage.store, storage.name, config, storage.account)
            t0 = time.perf_counter()
            t_write = write_file(dst / "ckpt.bin", size, block)
            t_store = wait_in_store(store, "ckpt.bin", t0)
            drain = bash(mounting.drain_command(str(dst), 900, env), timeout=960)
            results.append(
                {
                    "store": name,
                    "target": mode,
                    "write_s": round(t_write, 3),
                    "write_mib_s": round(size / 2**20 / t_write, 1),
                    "in_store_s": round(t_store, 3),
                    "end_to_end_mib_s": round(size / 2**20 / t_store, 1),
                    "drained": drain.returncode == 0,
                }
            )
            bash(mounting.unmount_command(str(dst), 900, env), timeout=960)
        finally:
            if dst.exists() and any(
                line.split()[1] == str(dst)
                for line in Path("/proc/self/mounts").read_text().splitlines()
            ):
                subprocess.run(["fusermount3", "-uz", str(dst)], check=False)
            em.delete_bucket(bucket)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=256)
    parser.add_argument("--stores", default=",".join(registry.store_names()))
    args = parser.parse_args()
    size = args.size_mib * 2**20
    stores = tuple(s for s in args.stores.split(",") if s)
    ems = start_all(stores=stores)
    config = SkycoreConfig(
        **{get_store_class(s).config_section: em.config_section() for s, em in ems.items()}
    )
    block = os.urandom(CHUNK)
    base = Path(tempfile.mkdtemp(prefix="skb-", dir="/tmp"))
    conf = base / "rclone.conf"
    conf.write_text(mounting.rclone_config_text(config))
    conf.chmod(0o600)
    rows: list[dict[str, Any]] = []
    try:
        local = base / "local"
        local.mkdir()
        write_file(local / "warmup.bin", size, block, fsync=True)  # page cache warm-up
        (local / "warmup.bin").unlink()
        for label, fsync in (("local disk", False), ("local+fsync", True)):
            t = write_file(local / "ckpt.bin", size, block, fsync=fsync)
            rows.append(
                {
                    "store": "-",
                    "target": label,
                    "write_s": round(t, 3),
                    "write_mib_s": round(size / 2**20 / t, 1),
                    "in_store_s": None,
                    "end_to_end_mib_s": None,
                    "drained": True,
                }
            )
            (local / "ckpt.bin").unlink()
        for name in stores:
            rows.extend(bench_store(name, ems[name], config, size, block, base))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    version = bash(f"{RCLONE} version").stdout.split("\n", 1)[0]
    print(f"Checkpoint write, {args.size_mib} MiB ({version}, host-side mounts)")
    print(
        f"{'store':6} {'target':13} {'write s':>8} {'MiB/s':>8} {'in store s':>11} "
        f"{'e2e MiB/s':>10}"
    )
    for r in rows:
        print(
            f"{r['store']:6} {r['target']:13} {r['write_s']:8.2f} {r['write_mib_s']:8.1f} "
            f"{'' if r['in_store_s'] is None else format(r['in_store_s'], '.2f'):>11} "
            f"{'' if r['end_to_end_mib_s'] is None else r['end_to_end_mib_s']:>10}"
        )
    out_dir = ROOT / "bench" / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / f"storage_write-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(
        json.dumps(
            {
                "benchmark": "storage_write",
                "size_mib": args.size_mib,
                "host": platform.node(),
                "cpus": os.cpu_count(),
                "rclone": version,
                "time": time.time(),
                "results": rows,
            },
            indent=2,
        )
    )
    print(f"saved {out}")
    undrained = [f"{r['store']} {r['target']}" for r in rows if not r["drained"]]
    if undrained:
        print(f"FAILED: not drained: {', '.join(undrained)}: exit 1")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
