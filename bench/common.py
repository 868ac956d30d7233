"""What the benchmark scripts share: the repository on ``sys.path``, argument parsing, timing,
host-side mounts of the local cloud's buckets, result tables and the JSON under
bench/results/, and the requests a gate logged on one bucket. (Targets and the exit status are in
bench_checks.py.)

Import it before ``harness`` and ``skycore``: importing it puts the repository on
``sys.path``, so ``python bench/X.py`` finds both.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
RCLONE = ROOT / ".venv" / "bin" / "rclone"

for _path in (ROOT / "bench", ROOT):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

if TYPE_CHECKING:
    from skycore.config import SkycoreConfig
    from skycore.storage import Storage, mounting


# --- arguments -----------------------------------------------------------------------------
def arg_parser(doc: str | None) -> argparse.ArgumentParser:
    """The script's argument parser, described by the first line of its docstring."""
    return argparse.ArgumentParser(description=(doc or "").splitlines()[0])


def names(text: str) -> tuple[str, ...]:
    """``"s3,gcs"`` -> ``("s3", "gcs")`` (empty items dropped)."""
    return tuple(s for s in text.split(",") if s)


def add_stores_option(p: argparse.ArgumentParser) -> None:
    """``--stores a,b``: default every store of the emulator registry."""
    from harness import emulator_registry as registry

    p.add_argument("--stores", default=",".join(registry.store_names()))


def add_rclone_flags_option(p: argparse.ArgumentParser, help_text: str) -> None:
    """``--rclone-flags``: extra flags for the rclone daemons (experiments)."""
    p.add_argument("--rclone-flags", default="", help=help_text)


def add_upload_options(p: argparse.ArgumentParser) -> None:
    """``--upload-concurrency`` and ``--chunk-size``: the mount options of the same names for
    the mounts under test (default: the mount's defaults, what users get)."""
    p.add_argument("--upload-concurrency", type=int, help="streams per uploaded file")
    p.add_argument("--chunk-size", help="the upload's chunk size, e.g. 16M")


def upload_options(p: argparse.ArgumentParser, args: argparse.Namespace) -> dict[str, Any]:
    """The upload options ``add_upload_options`` set, as keywords of ``storage_entry``; a
    usage error when this skycore's file_mounts entries lack one."""
    import inspect

    from skycore.storage import Storage

    asked = {
        k: v
        for k, v in (
            ("upload_concurrency", args.upload_concurrency),
            ("chunk_size", args.chunk_size),
        )
        if v is not None
    }
    missing = sorted(set(asked) - set(inspect.signature(Storage.from_spec).parameters))
    if missing:
        p.error(f"this skycore's mounts have no option {', '.join(missing)}: run without it")
    return asked


def storage_entry(
    url: str, mode: str, flags: tuple[str, ...] = (), transfers: int | None = None, **upload: Any
) -> Storage:
    """The bucket ``url`` as a task YAML's file_mounts entry with these options makes it (the
    mount defaults users get for what is not given), plus the rclone global ``flags``."""
    from dataclasses import replace

    from skycore.storage import Storage

    storage = Storage.from_spec(
        name=None, source=url, store=None, mode=mode, transfers=transfers, **upload
    )
    if flags:
        storage.mount_options = replace(storage.mount_options, extra_flags=flags)
    return storage


TRAIN_DIR = ROOT / "tests" / "fixtures" / "train"
"""The training program (train.py) the training benchmarks run as their task's workdir."""


def write_train_task(
    base: Path,
    name: str,
    file_mounts: Mapping[str, Any],
    run: str,
    resources: Mapping[str, Any] | None = None,
) -> Path:
    """The task ``name`` running the training program's ``run`` command with these mounts
    (and ``resources``, if any), written to ``base``/train.yaml."""
    import yaml

    spec: dict[str, Any] = {"name": name}
    if resources is not None:
        spec["resources"] = dict(resources)
    spec.update(
        workdir=str(TRAIN_DIR), file_mounts=dict(file_mounts), setup="python3 --version", run=run
    )
    path = base / "train.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


# --- timing --------------------------------------------------------------------------------
def wait_for(what: str, check: Callable[[], Any], timeout: float, poll: float = 0.05) -> Any:
    """Poll ``check`` until truthy and return its value; TimeoutError naming ``what``."""
    from tests.polling import wait_for as poll_until

    return poll_until(what, check, timeout, poll, error=TimeoutError)


# --- host-side mounts ------------------------------------------------------------------------
def bash(cmd: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` with bash (without AWS_CA_BUNDLE: the local cloud's gates are plain HTTP)."""
    env = {k: v for k, v in os.environ.items() if k != "AWS_CA_BUNDLE"}
    return subprocess.run(
        ["bash", "-c", cmd], capture_output=True, text=True, timeout=timeout, env=env, check=False
    )


def rclone_version() -> str:
    """First line of ``rclone version`` (the venv's rclone)."""
    return bash(f"{RCLONE} version").stdout.split("\n", 1)[0]


@contextlib.contextmanager
def host_mounts(
    emulators: Mapping[str, Any], prefix: str
) -> Iterator[tuple[SkycoreConfig, Path, mounting.RcloneEnv]]:
    """A config for the running ``emulators`` and a fresh folder under /tmp holding what a
    node gets before mounting (rclone.conf and the mount helper): (config, folder, env).
    The folder is removed on exit."""
    from skycore.config import SkycoreConfig
    from skycore.storage import get_store_class, mounting

    config = SkycoreConfig(
        **{get_store_class(s).config_section: em.config_section() for s, em in emulators.items()}
    )
    base = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    env = mounting.RcloneEnv(
        rclone=str(RCLONE),
        config_file=str(base / "rclone.conf"),
        mounts_base=str(base / "m"),
        helper=str(base / "skycore-mounts.py"),
    )
    for path, content in mounting.node_files(config, env).items():
        Path(path).write_text(content)
        Path(path).chmod(0o600)
    try:
        yield config, base, env
    finally:
        shutil.rmtree(base, ignore_errors=True)


def mount(storage: Storage, dst: Path, config: SkycoreConfig, env: mounting.RcloneEnv) -> None:
    """Check ``storage`` and mount it at ``dst`` with skycore's own mount script."""
    storage.check(config)
    r = bash(storage.mount_command(str(dst), config, env=env), timeout=900)
    if r.returncode != 0:
        raise RuntimeError(f"mount failed: {r.stderr[-2000:]}")


def drain(dst: Path, env: mounting.RcloneEnv) -> subprocess.CompletedProcess[str]:
    """Wait (up to 900 s) until the mount at ``dst`` has uploaded everything written to it."""
    from skycore.storage import mounting

    return bash(mounting.drain_command(str(dst), 900, env), timeout=960)


def unmount(dst: Path, env: mounting.RcloneEnv) -> None:
    """Unmount ``dst`` with skycore's script; lazily with fusermount3 if it is still mounted."""
    from skycore.storage import mounting

    bash(mounting.unmount_command(str(dst), 900, env), timeout=960)
    mounts = Path("/proc/self/mounts").read_text().splitlines()
    if any(line.split()[1] == str(dst) for line in mounts):
        subprocess.run(["fusermount3", "-uz", str(dst)], check=False)


@contextlib.contextmanager
def removed_after(em: Any, bucket: str, dst: Path, env: mounting.RcloneEnv) -> Iterator[None]:
    """The block's mount and bucket: on leaving it (even by an error) ``dst`` unmounted,
    then ``bucket`` deleted."""
    try:
        yield
    finally:
        try:
            unmount(dst, env)
        finally:
            em.delete_bucket(bucket)


def check_drained(drained: subprocess.CompletedProcess[str]) -> None:
    """Raise if the drain failed (with the end of its stderr)."""
    if drained.returncode != 0:
        raise RuntimeError(f"drain failed: {drained.stderr[-2000:]}")


# --- the gates' request logs -------------------------------------------------------------------
# One line per request, written when it ends (harness.gate.server._logged):
# ``HH:MM:SS METHOD PATH?QUERY -> STATUS (N ms)``.
_REQUEST_LINE = re.compile(r"^\d\d:\d\d:\d\d ([A-Z]+) (\S+) -> .* \(\d+ ms\)$")
_ADMIN_PREFIX = "/__gate__/"


def gate_log_offset(emulator: Any) -> int:
    """The size of the gate's log now: pass it to ``gate_requests`` to read what follows."""
    return Path(emulator.record.gate_log).stat().st_size


def gate_requests(emulator: Any, bucket: str, since: int) -> list[tuple[str, str]]:
    """(method, path and query) of each request on ``bucket`` that the gate of ``emulator``
    logged after byte ``since`` of its log (its admin API left out), oldest first."""
    with open(emulator.record.gate_log, "rb") as f:
        f.seek(since)
        text = f.read().decode(errors="replace")
    found = []
    for line in text.splitlines():
        m = _REQUEST_LINE.match(line)
        if m is None or m.group(2).startswith(_ADMIN_PREFIX):
            continue
        if bucket in urlsplit(m.group(2)).path.split("/"):
            found.append((m.group(1), m.group(2)))
    return found


_QUALIFIERS = (  # query key -> the kind's suffix (the first present wins)
    ("comp", ""),  # Azure: the value (block, blocklist, list, metadata, ...)
    ("upload_id", "chunk"),  # GCS: a chunk of a resumable upload
    ("uploadType", ""),  # GCS: the value (media, multipart, resumable: the upload's start)
    ("uploads", "mpu-start"),  # S3 CreateMultipartUpload
    ("partNumber", "part"),  # S3 UploadPart
    ("uploadId", "mpu-end"),  # S3 Complete/AbortMultipartUpload
)


def request_kind(method: str, path_qs: str, bucket: str) -> str:
    """A short name for a request's kind, e.g. ``PUT``, ``HEAD``, ``LIST``, ``PUT-part``,
    ``POST-mpu-start``, ``PUT-block``, ``POST-multipart``, ``POST-chunk``, ``GET-bucket``: the
    method, made more precise by what the path and query say (S3, GCS JSON and Azure Blob
    conventions)."""
    parts = urlsplit(path_qs)
    query = parse_qs(parts.query, keep_blank_values=True)
    segments = parts.path.split("/")
    rest = [s for s in segments[segments.index(bucket) + 1 :] if s] if bucket in segments else []
    bucket_level = rest in ([], ["o"])  # GCS JSON: /b/BUCKET/o lists, /b/BUCKET/o/NAME is one
    listing = "comp" in query and query["comp"] == ["list"]
    listing |= bucket_level and method == "GET" and (
        rest == ["o"] or not query or any(k in query for k in ("list-type", "prefix", "delimiter"))
    )  # fmt: skip
    if listing:
        return "LIST"
    for key, suffix in _QUALIFIERS:
        if key in query:
            return f"{method}-{suffix or query[key][0]}"
    return f"{method}-bucket" if bucket_level else method


# --- output --------------------------------------------------------------------------------
def cell(value: float | None, spec: str = ".2f", missing: str = "", unit: str = "") -> str:
    """``value`` formatted with ``spec`` and followed by ``unit``; ``missing`` when it was not
    measured (None)."""
    return missing if value is None else format(value, spec) + unit


def print_table(
    columns: Sequence[tuple[str, str]], rows: Iterable[Sequence[object]], sep: str = " "
) -> None:
    """A header and one line per row. ``columns``: (title, width and alignment as a format
    spec, e.g. ``"<6"`` or ``">8"``); cells are printed with ``str``."""
    print(sep.join(format(title, spec) for title, spec in columns))
    for row in rows:
        print(sep.join(format(str(v), spec) for v, (_, spec) in zip(row, columns, strict=True)))


def machine() -> dict[str, Any]:
    """Where and when the benchmark ran: host, CPUs, Python, wall-clock time."""
    return {
        "host": platform.node(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "time": time.time(),
    }


def save_results(benchmark: str, data: Mapping[str, Any]) -> Path:
    """Write ``data`` (with the benchmark's name and ``machine()``) to
    bench/results/<benchmark>-<timestamp>.json and say where."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"{benchmark}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps({"benchmark": benchmark, **machine(), **data}, indent=2))
    print(f"saved {out}")
    return out
