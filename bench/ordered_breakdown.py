"""Where an ordered small file's time goes, per store and latency.

One ordered MOUNT_CACHED run (``transfers: 1``) per store and latency: ``--files`` files of
``--size`` bytes written back to back into a fresh bucket behind the gate's latency fault,
then drained, through a daemon that logs with microseconds (``--log-format``, the only flag
added). Per file, from rclone's log ("queuing for upload", "upload succeeded") and its own
transfer times (rc ``core/transferred``, polled every 0.2 s):

- ``keeper``: the previous file's "upload succeeded" (or this file's close, if later) to the
  start of this file's transfer: the node's order keeper wakes on the log line, looks at the
  queue and releases the file, then rclone starts it;
- ``transfer``: rclone's transfer, start to end (the request and rclone's own work);
- ``after``: the transfer's end to "upload succeeded" in the log (the event the keeper waits
  for).

Beside it, as upload_order's floor: ``--puts`` single PUTs of one file's size by the store's
SDK client on the same bucket (half before the writes, half after the drain). Also the CPU
time of rclone and of the node's refresher (the keeper's process) per file, and,
timed in this process against the same daemon while a listing hold keeps its queue of N files
(N = 1 and ``--files`` - 50), one keeper look (``OrderKeeper.look``, which then releases
nothing) and one ``vfs/queue-set-expiry`` (a release's own rc call).

    .venv/bin/python bench/ordered_breakdown.py [--stores s3,gcs,azure,r2]
        [--latency-ms 0 --latency-ms 30] [--files 200] [--size 65536] [--puts 30]

Times between processes are wall-clock times of this machine (rclone's log and transfer
times); a run whose wall clock moved against the monotonic clock by more than 50 ms
(bench_clock) is reported invalid. No targets: it explains upload_order's figures.
"""

from __future__ import annotations

import datetime
import glob
import itertools
import os
import re
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import common
import put_floor
from bench_clock import ClockWatch
from bench_network import Network, behind

from harness.emulators.fleet import start_all
from skycore.config import SkycoreConfig
from skycore.node.mountd.keeper import OrderKeeper, UploadHold
from skycore.node.mountd.rc import live_mounts, rc
from skycore.storage import mounting

LOG_FLAGS = ("--log-format", "date,time,microseconds")
PUTS = 30  # single PUTs per run, as upload_order's floor
_LINE = re.compile(r"^(\d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d+) \w+\s*: (.+?): vfs cache: (.*)$")


def rfc3339(value: str) -> float:
    """Seconds since the epoch of rclone's RFC 3339 time (nanoseconds cut to microseconds)."""
    text = re.sub(r"(\.\d{6})\d*", r"\1", value).replace("Z", "+00:00")
    return datetime.datetime.fromisoformat(text).timestamp()


def log_times(text: str) -> dict[str, dict[str, float]]:
    """name -> {"queued", "succeeded"}: wall-clock seconds of those rclone log lines."""
    out: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        m = _LINE.match(line)
        if m is None:
            continue
        what = m.group(3)
        kind = "queued" if what.startswith("queuing") else ""
        kind = "succeeded" if "succeeded" in what else kind
        if kind:
            t = datetime.datetime.strptime(m.group(1), "%Y/%m/%d %H:%M:%S.%f").timestamp()
            out.setdefault(m.group(2), {})[kind] = t
    return out


def segments(
    names: list[str], logged: dict[str, dict[str, float]], transfers: dict[str, dict[str, Any]]
) -> dict[str, list[float]]:
    """Per file after the first, in seconds: keeper, transfer and after (module docstring)."""
    out: dict[str, list[float]] = {"keeper": [], "transfer": [], "after": []}
    for prev, name in itertools.pairwise(names):
        t, p, c = transfers.get(name), logged.get(prev, {}), logged.get(name, {})
        if not t or "succeeded" not in p or "queued" not in c or "succeeded" not in c:
            continue
        start, end = rfc3339(t["started_at"]), rfc3339(t["completed_at"])
        out["keeper"].append(start - max(p["succeeded"], c["queued"]))
        out["transfer"].append(end - start)
        out["after"].append(c["succeeded"] - end)
    return out


def summary(values: list[float]) -> dict[str, float | None]:
    """Median, mean and 90th percentile in ms (None when empty)."""
    if not values:
        return {"median_ms": None, "mean_ms": None, "p90_ms": None}
    ordered = sorted(values)
    return {
        "median_ms": round(statistics.median(ordered) * 1e3, 3),
        "mean_ms": round(statistics.mean(ordered) * 1e3, 3),
        "p90_ms": round(ordered[len(ordered) * 9 // 10] * 1e3, 3),
    }


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pid_in(d: str, name: str, program: str) -> int:
    """The pid a live ``program`` wrote into ``d``/``name`` (waits for it, up to 10 s)."""
    path = Path(d) / name

    def live() -> int | None:
        try:
            pid = int(path.read_text().strip())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (OSError, ValueError):
            return None
        return pid if program.encode() in cmdline else None

    return int(common.wait_for(f"{name} of a live {program}", live, 10))


def median_call_ms(call: Any, times: int = 100) -> float:
    """The median time of ``call()`` in ms over ``times`` calls."""
    taken = []
    for _ in range(times):
        t0 = time.perf_counter_ns()
        call()
        taken.append(time.perf_counter_ns() - t0)
    return round(statistics.median(taken) / 1e6, 3)


def look_costs(dst: Path, sock: str, fs: str, sizes: tuple[int, ...], size: int) -> dict[str, Any]:
    """One keeper look and one set-expiry, timed here while a listing hold keeps the queue at
    each of ``sizes`` files (nothing is released meanwhile); the files are drained after."""
    out: dict[str, Any] = {}
    payload = os.urandom(size)
    written = 0
    with UploadHold(sock, fs, light=True):
        for n in sorted(sizes):
            for i in range(written, n):
                (dst / f"look-{i:04d}.bin").write_bytes(payload)
            written = n
            keeper = OrderKeeper(sock, fs, 0.0)

            def queued(n: int = n) -> list[dict[str, Any]] | None:
                queue = rc(sock, "vfs/queue", {"fs": fs}).get("queue") or []
                return queue if len(queue) >= n else None

            queue = common.wait_for("the queue", queued, 10)
            item = {"fs": fs, "id": int(queue[-1]["id"]), "expiry": 0, "relative": True}

            def set_expiry(item: dict[str, Any] = item) -> None:
                rc(sock, "vfs/queue-set-expiry", item)  # relative 0: changes nothing

            out[str(n)] = {
                "look_ms": median_call_ms(keeper.look),
                "vfs_queue_ms": median_call_ms(lambda: rc(sock, "vfs/queue", {"fs": fs})),
                "set_expiry_ms": median_call_ms(set_expiry),
            }
    return out


def one_case(
    store: str, em: Any, config: SkycoreConfig, env: mounting.RcloneEnv, base: Path,
    network: Network, n: int, size: int, puts: int,
) -> dict[str, Any]:  # fmt: skip
    """One ordered run of ``n`` files behind ``network``; its breakdown (module docstring)."""
    bucket = f"brk-{uuid.uuid4().hex[:10]}"
    url = em.make_bucket(bucket, owner="user", public=False)
    dst = base / f"{store}-{bucket}"
    names = [f"f-{i:04d}.bin" for i in range(n)]
    watch = ClockWatch.start()
    with common.removed_after(em, bucket, dst, env), behind(em, bucket, network):
        storage = common.storage_entry(url, "MOUNT_CACHED", flags=LOG_FLAGS, transfers=1)
        common.mount(storage, dst, config, env)
        probe = put_floor.PutProbe(em, bucket, os.urandom(size))
        probe.batch(puts // 2, "before")
        sock = next(s for s in glob.glob(f"{env.mounts_base}/rcd-t1*/rc.sock"))
        d = os.path.dirname(sock)
        fs = live_mounts(sock)[str(dst)]
        rclone_pid, keeper_pid = (
            pid_in(d, "rclone.pid", "rcd"),
            pid_in(d, "refresher.pid", "refresher"),
        )
        log_start = os.path.getsize(os.path.join(d, "rclone.log"))
        seen: dict[str, dict[str, Any]] = {}
        stop = threading.Event()

        def poll() -> None:
            while not stop.is_set():
                for t in rc(sock, "core/transferred").get("transferred") or []:
                    seen[str(t["name"])] = t
                stop.wait(0.2)

        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        cpu0 = (cpu_s(rclone_pid), cpu_s(keeper_pid))
        payload = os.urandom(size)
        start = time.monotonic_ns()
        for name in names:
            (dst / name).write_bytes(payload)
        written = time.monotonic_ns()
        drained = common.drain(dst, env)
        end = time.monotonic_ns()
        cpu1 = (cpu_s(rclone_pid), cpu_s(keeper_pid))
        probe.batch(puts - puts // 2, "after")
        time.sleep(0.3)
        stop.set()
        poller.join()
        watch.mark()
        common.check_drained(drained)
        with open(os.path.join(d, "rclone.log"), errors="replace") as f:
            f.seek(log_start)
            logged = log_times(f.read())
        looks = look_costs(dst, sock, fs, (1, max(1, n - 50)), size)
        common.drain(dst, env)
    watch.stop()
    parts = segments(names, logged, seen)
    ends = [v["succeeded"] for k, v in logged.items() if k in names and "succeeded" in v]
    firsts = [v["queued"] for k, v in logged.items() if k in names and "queued" in v]
    span = (max(ends) - min(firsts)) if ends and firsts else None
    return {
        "store": store,
        "latency_ms": network.latency_ms,
        "files": n,
        "file_bytes": size,
        "written_s": round((written - start) / 1e9, 3),
        "drained_s": round((end - start) / 1e9, 3),
        "per_file_ms": None if span is None else round(span / n * 1e3, 3),
        "files_timed": len(parts["keeper"]),
        "put": summary([t / 1e9 for t in probe.times_ns]),
        "put_requests": probe.as_json()["requests"],
        **{k: summary(v) for k, v in parts.items()},
        "rclone_cpu_ms_per_file": round((cpu1[0] - cpu0[0]) / n * 1e3, 3),
        "keeper_cpu_ms_per_file": round((cpu1[1] - cpu0[1]) / n * 1e3, 3),
        "look_costs": looks,
        **watch.as_json(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = common.arg_parser(__doc__)
    common.add_stores_option(parser)
    parser.add_argument("--latency-ms", type=float, action="append")
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--size", type=int, default=64 << 10)
    parser.add_argument("--puts", type=int, default=PUTS)
    args = parser.parse_args(argv)
    if args.files < 2 or args.size < 1:
        parser.error("--files must be >= 2 and --size >= 1")
    stores = common.names(args.stores)
    latencies = sorted(set(args.latency_ms or [0.0, 30.0]))
    ems = start_all(stores=stores)
    load_before = os.getloadavg()
    rows = []
    with common.host_mounts(ems, "skb-") as (config, base, env):
        for store in stores:
            for ms in latencies:
                row = one_case(store, ems[store], config, env, base, Network(ms), args.files,
                               args.size, args.puts)  # fmt: skip
                rows.append(row)
                print(f"{store:6} {ms:g}ms {row['per_file_ms']} ms/file", flush=True)
    print("\nOrdered small files: where a file's time goes (ms; median / mean)")

    def mm(part: dict[str, Any]) -> str:
        return f"{common.cell(part['median_ms'])} / {common.cell(part['mean_ms'])}"

    common.print_table(
        [("store", "<6"), ("latency", "<8"), ("ms/file", ">8"), ("SDK PUT", ">14"),
         ("keeper", ">14"),
         ("transfer", ">14"), ("after", ">12"), ("rclone CPU", ">11"), ("keeper CPU", ">11"),
         ("look q=1", ">9"), (f"look q={max(1, args.files - 50)}", ">10"),
         ("set-expiry", ">11"), ("valid", ">6")],
        [
            (r["store"], f"{r['latency_ms']:g}ms", common.cell(r["per_file_ms"]),
             mm(r["put"]), mm(r["keeper"]), mm(r["transfer"]), mm(r["after"]),
             common.cell(r["rclone_cpu_ms_per_file"]), common.cell(r["keeper_cpu_ms_per_file"]),
             *(common.cell(v["look_ms"]) for v in r["look_costs"].values()),
             common.cell(r["look_costs"]["1"]["set_expiry_ms"]), str(r["clock_valid"]))
            for r in rows
        ],
    )  # fmt: skip
    print(
        "SDK PUT: one request by the store's SDK client (upload_order's floor); "
        "keeper: the previous upload's success (or the file's close) to this transfer's start; "
        "transfer: rclone's, start to end; after: its end to 'upload succeeded' logged; CPU: "
        "ms per file over the run; look q=N: one OrderKeeper.look with N files queued (held), "
        "in this process; set-expiry: one release's rc call"
    )
    load_after = os.getloadavg()
    print(f"\nload average before {load_before}, after {load_after}")
    common.save_results(
        "ordered_breakdown",
        {"loadavg_before": load_before, "loadavg_after": load_after, "results": rows},
    )
    return 0 if all(r["clock_valid"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
