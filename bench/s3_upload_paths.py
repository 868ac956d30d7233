"""Where the time of one big S3 upload goes in the local cloud: the SDK's path against
rclone's, and moto's multipart completion with and without a declared checksum.

bench/storage_write.py compares MOUNT_CACHED's time until durable with a plain SDK upload.
This benchmark takes the mount out of the picture and times the uploads themselves, through
the S3 gate, of the same file (default 256 MiB):

- ``boto3 upload_file``: the SDK baseline (skycore's own TransferConfig: 8 MiB parts, 4 at a
  time), with the time its CompleteMultipartUpload took;
- ``boto3 multipart, no checksum`` / ``boto3 multipart, CRC32``: the same parts sent by hand,
  once without declaring a checksum algorithm (as rclone does: it has no option to declare
  one) and once with CRC32 (as boto3's upload_file does); parts and completion timed apart;
- ``rclone copyto``: rclone 1.75's multipart upload (what the mounts' write-back runs for a
  file this big), and ``rclone copyto, one PUT`` (cutoffs raised above the file's size).

    .venv/bin/python bench/s3_upload_paths.py [--size-mib 256] [--repeat 2]

Prints the median of each and writes JSON to bench/results/s3_upload_paths-<time>.json. It
has no target of its own: it explains storage_write's S3 figure (exit 1 only if a trial
failed).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench_consistency import negatives, parts_over_whole
from common import RCLONE, arg_parser, cell, print_table, save_results

from harness.emulators.fleet import start_all
from skycore.storage.s3 import _TRANSFER, S3Store

PART = 8 << 20


def by_hand(
    client: Any, bucket: str, key: str, data: bytes, algorithm: str | None
) -> dict[str, float]:
    """Multipart upload of ``data`` in 8 MiB parts, 4 at a time; parts and completion timed."""
    extra = {"ChecksumAlgorithm": algorithm} if algorithm else {}
    t0 = time.perf_counter()
    upload = client.create_multipart_upload(Bucket=bucket, Key=key, **extra)["UploadId"]

    def part(i: int) -> dict[str, Any]:
        r = client.upload_part(
            Bucket=bucket, Key=key, UploadId=upload, PartNumber=i + 1,
            Body=data[i * PART : (i + 1) * PART], **extra,
        )  # fmt: skip
        done = {"PartNumber": i + 1, "ETag": r["ETag"]}
        if algorithm:
            done[f"Checksum{algorithm}"] = r[f"Checksum{algorithm}"]
        return done

    with ThreadPoolExecutor(4) as pool:
        parts = list(pool.map(part, range((len(data) + PART - 1) // PART)))
    t1 = time.perf_counter()
    client.complete_multipart_upload(
        Bucket=bucket, Key=key, UploadId=upload, MultipartUpload={"Parts": parts}
    )
    t2 = time.perf_counter()
    return {"total_s": t2 - t0, "parts_s": t1 - t0, "complete_s": t2 - t1}


def main(argv: list[str] | None = None) -> int:
    parser = arg_parser(__doc__)
    parser.add_argument("--size-mib", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args(argv)
    em = start_all(stores=("s3",))["s3"]
    section = em.config_section()
    bucket = f"bench-paths-{uuid.uuid4().hex[:8]}"
    em.make_bucket(bucket, owner="user", public=False)
    client = em.client("user")
    work = Path(tempfile.mkdtemp(prefix="s3p-", dir="/tmp"))
    src = work / "ckpt.bin"
    data = os.urandom(args.size_mib << 20)
    src.write_bytes(data)
    conf = work / "rclone.conf"
    conf.write_text(S3Store.rclone_config(section))
    remote = f"{S3Store.remote_name()}:{bucket}"
    env = {k: v for k, v in os.environ.items() if k != "AWS_CA_BUNDLE"}
    rows: dict[str, list[dict[str, float]]] = {}
    failures: list[str] = []
    complete: dict[str, float] = {}

    def on(name: str) -> Any:
        def hook(**_: Any) -> None:
            complete[name] = time.perf_counter()

        return hook

    client.meta.events.register("before-call.s3.CompleteMultipartUpload", on("before"))
    client.meta.events.register("after-call.s3.CompleteMultipartUpload", on("after"))

    def rclone(key: str, *flags: str) -> None:
        r = subprocess.run(
            [str(RCLONE), "--config", str(conf), "copyto", str(src), f"{remote}/{key}", *flags],
            capture_output=True, text=True, env=env, check=False,
        )  # fmt: skip
        if r.returncode != 0:
            raise RuntimeError(r.stderr[-500:])

    try:
        cases: dict[str, Any] = {
            "boto3 upload_file": lambda key: client.upload_file(
                str(src), bucket, key, Config=_TRANSFER
            ),
            "boto3 multipart, no checksum": lambda key: by_hand(client, bucket, key, data, None),
            "boto3 multipart, CRC32": lambda key: by_hand(client, bucket, key, data, "CRC32"),
            "rclone copyto": rclone,
            "rclone copyto, one PUT": lambda key: rclone(
                key, "--s3-upload-cutoff", "5G", "--multi-thread-cutoff", "5G"
            ),
        }
        for n in range(args.repeat):
            for name, fn in cases.items():
                try:
                    complete.clear()
                    t0 = time.perf_counter()
                    out = fn(f"k{n}-{uuid.uuid4().hex[:8]}")
                    row = {"total_s": time.perf_counter() - t0}
                    if isinstance(out, dict):
                        row = out
                    elif "before" in complete:
                        row["complete_s"] = complete["after"] - complete["before"]
                    steps = sum(row.get(k, 0.0) for k in ("parts_s", "complete_s"))
                    problems = [
                        *negatives(row),
                        *parts_over_whole("total_s", row["total_s"], row),
                        *parts_over_whole("total_s", row["total_s"], {"parts and complete": steps}),
                    ]  # fmt: skip
                    failures += [f"{name}: INCONSISTENT {p}" for p in problems]
                    if not problems:
                        rows.setdefault(name, []).append(row)
                except Exception as e:  # a failed trial is reported, never hidden
                    failures.append(f"{name}: {e}")
    finally:
        em.delete_bucket(bucket)
        for p in work.iterdir():
            p.unlink()
        work.rmdir()
    print(f"One {args.size_mib} MiB upload through the S3 gate to moto (median of {args.repeat})")
    keys = ("total_s", "parts_s", "complete_s")
    summary: dict[str, dict[str, float | None]] = {
        name: {
            k: round(statistics.median(r[k] for r in runs), 3)
            if all(k in r for r in runs)
            else None
            for k in keys
        }
        for name, runs in rows.items()
    }
    print_table(
        [("path", "<32"), ("total s", ">8"), ("parts s", ">8"), ("complete s", ">11")],
        [(name, *(cell(med[k]) for k in keys)) for name, med in summary.items()],
    )
    save_results(
        "s3_upload_paths",
        {
            "size_mib": args.size_mib,
            "repeat": args.repeat,
            "loadavg": os.getloadavg(),
            "runs": rows,
            "median": summary,
            "failures": failures,
        },
    )
    for f in failures:
        print(f"FAILED: {f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
