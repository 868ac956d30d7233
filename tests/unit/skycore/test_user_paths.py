"""Every path a user gives (the task file, workdir, --workdir, file_mounts sources and
destinations) goes through skycore.user_paths: a bad one is one paragraph naming the field and
the path (exit 2), never a traceback.

Real files, folders and symbolic links in tmp_path; the real CLI in-process (click's
CliRunner). The skycore config names no store, so ``launch --dryrun`` cannot reach an emulator;
an audit hook checks that the dry runs open no socket and start no process (no docker).
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from skycore.cli import cli
from skycore.config import DockerConfig, SkycoreConfig, save_config
from skycore.storage import Storage, StorageSpecError
from skycore.user_paths import (
    UserPathError,
    check_node_path,
    path_exists,
    resolve_local_path,
    show,
)
from tests.unit.hypothesis_budget import examples
from tests.unit.skycore.task_messages import problems_of

NO_USER = "skycore-no-such-user-5e1f"
LONG = "n" * 300  # one name longer than the 255 bytes a file system allows


def short_id(value: object) -> str:
    """A readable test id for a (possibly long or unprintable) string."""
    return show(value)[:24] if isinstance(value, str) else repr(value)


# --- no cloud, no docker: an audit hook records sockets and processes during a dry run -------

_REACHING_OUT = (
    "socket.connect",
    "socket.getaddrinfo",
    "subprocess.Popen",
    "os.system",
    "os.exec",
    "os.posix_spawn",
)
_recorded: list[str] | None = None


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _recorded is not None and event in _REACHING_OUT:
        _recorded.append(f"{event}{args!r}"[:200])


sys.addaudithook(_audit)  # inert unless a dry run below is recording


def run(*args: str) -> tuple[int, str]:
    """``skycore ARGS`` in-process; fails the test if it opened a socket or a process."""
    global _recorded
    _recorded = []
    try:
        result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
        reached = _recorded
    finally:
        _recorded = None
    assert not reached, f"the dry run reached out: {reached}"
    assert "Traceback" not in result.output, result.output
    return result.exit_code, result.output


def test_the_audit_hook_sees_sockets_and_processes() -> None:
    global _recorded
    _recorded = []
    try:
        with contextlib.suppress(OSError), socket.socket() as sock:
            sock.settimeout(1)
            sock.connect(("127.0.0.1", 9))
        subprocess.run(["true"], check=True)
        seen = [event.split("(")[0] for event in _recorded]
    finally:
        _recorded = None
    assert "socket.connect" in seen and "subprocess.Popen" in seen, seen


def error_of(out: str) -> str:
    """The error of the CLI's output (after 'Error: '): one paragraph, or one line per
    problem when there are several (tests/unit/skycore/task_messages.py)."""
    assert "Error: " in out, out
    message = out.split("Error: ", 1)[1]
    problems_of(message)
    return message.strip()


def launch(entry: str = "task.yaml", *extra: str) -> tuple[int, str]:
    return run("launch", "--dryrun", "-y", "-c", "ok", *extra, "--", entry)


def write_task(doc: Any, name: str = "task.yaml") -> None:
    Path(name).write_text(yaml.safe_dump(doc, allow_unicode=True), encoding="utf-8")


@pytest.fixture
def play(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """cwd and HOME: a folder with a folder, a file, link loops, a dangling link and a task;
    a skycore home whose config names no store."""
    with pytest.raises(KeyError):
        pwd.getpwnam(NO_USER)
    d = tmp_path / "play"
    (d / "dir").mkdir(parents=True)
    (d / "dir" / "a.txt").write_text("a")
    (d / "file.txt").write_text("f")
    os.symlink("loop", d / "loop")
    os.symlink("loop-b", d / "loop-a")
    os.symlink("loop-a", d / "loop-b")
    os.symlink("missing", d / "dangling")
    os.symlink("loop.yaml", d / "loop.yaml")
    os.symlink("dir", d / "link-to-dir")
    monkeypatch.chdir(d)
    monkeypatch.setenv("HOME", str(d))
    monkeypatch.setenv("SKYCORE_HOME", str(tmp_path / "skyhome"))
    save_config(SkycoreConfig(docker=DockerConfig(), logs_dir=str(tmp_path / "logs")))
    write_task({"run": "echo hi"})
    return d


# --- the resolver ----------------------------------------------------------------------------


def test_resolver_expands_home_and_resolves_links(play: Path) -> None:
    assert resolve_local_path("~/link-to-dir", "workdir") == play / "dir"
    assert resolve_local_path("link-to-dir/../file.txt", "workdir") == play / "file.txt"
    assert resolve_local_path(play / "dir", "workdir") == play / "dir"
    assert path_exists("~/dir") and not path_exists("a\0b") and not path_exists(LONG)


def test_long_paths_are_shortened_in_messages() -> None:
    text = "a" * 100 + "END-OF-THE-PATH-1234"
    assert show(text) == "a" * 60 + "…" + text[-20:] and len(show(text)) == 81
    assert show("/data") == "/data"
    assert show("a\0b\nc") == "a\\x00b\\nc"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("missing", "does not exist. Create it or fix the path"),
        (LONG, "has a name that is too long"),
        (f"dir/{LONG}", "is 300 bytes, more than the 255"),
        ("é" * 200, "is 400 bytes"),  # 200 characters, 400 bytes
        ("loop", "is a symbolic link loop"),
        ("loop-a/x", "is a symbolic link loop"),
        (f"~{NO_USER}/x", f"no user '{NO_USER}' on this machine"),
        ("file.txt/x", "'file.txt'"),
        ("file.txt/x", "is a file, not a folder"),
        ("a\0b", "contains a NUL byte"),
        ("", "is an empty string"),
        ("\udcff", "is not valid UTF-8"),
        ("dangling", "does not exist"),
    ],
    ids=short_id,
)
def test_each_failure_kind_names_field_path_and_fix(play: Path, value: str, expected: str) -> None:
    with pytest.raises(UserPathError) as info:
        resolve_local_path(value, "file_mounts./x.source")
    msg = info.value.message
    assert msg.startswith("file_mounts./x.source: the local path '"), msg
    assert expected in msg and "\n" not in msg and info.value.exit_code == 2, msg
    assert show(value) in msg and len(msg) < 450, msg


@pytest.mark.parametrize(
    ("dst", "expected"),
    [
        ("", "is an empty string"),
        ("/a\0b", "contains a NUL byte"),
        ("/" + LONG, "has a name that is too long"),
        ("/" + "/".join(["d" * 200] * 21), "is too long: 4221 bytes, more than the 4095"),
        ("/a\ud800", "is not valid UTF-8"),
    ],
    ids=short_id,
)
def test_destinations_are_checked_not_resolved(dst: str, expected: str) -> None:
    with pytest.raises(UserPathError, match=r"file_mounts\./d: the destination") as info:
        check_node_path(dst, "file_mounts./d")
    assert expected in info.value.message
    deep = "/" + "/".join(["d" * 255] * 15)  # 3855 bytes: a valid node path, never looked up
    assert check_node_path(deep, "f") == deep


def test_storage_source_goes_through_the_resolver(play: Path) -> None:
    for source, expected in [("loop", "symbolic link loop"), (f"~{NO_USER}", "no user")]:
        with pytest.raises(StorageSpecError, match=rf"^file_mounts./m.source: .*{expected}"):
            Storage.from_spec(name="bucket-one", source=source, store="s3", field="file_mounts./m")
    st_ = Storage.from_spec(name="bucket-one", source="~/link-to-dir", store="s3")
    assert st_.source == str(play / "dir")


# --- through the CLI, field by field ---------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (LONG, "has a name that is too long"),
        ("loop", "is a symbolic link loop"),
        (f"~{NO_USER}/x", "no user"),
        ("file.txt/x", "'file.txt', a part of it, is a file, not a folder"),
        ("a\0b", "contains a NUL byte"),
        ("missing", "does not exist"),
    ],
    ids=short_id,
)
def test_cli_names_each_path_field(play: Path, value: str, expected: str) -> None:
    shown = show(value)
    cases: list[tuple[Any, tuple[str, ...], str]] = [
        ({"workdir": value, "run": "x"}, (), f"workdir: the local path '{shown}'"),
        ({"file_mounts": {"/x": value}}, (), f"file_mounts./x: the local path '{shown}'"),
        (
            {"file_mounts": {"/x": {"name": "bucket-one", "store": "s3", "source": value}}},
            (),
            f"file_mounts./x.source: the local path '{shown}'",
        ),
        ({"run": "x"}, ("--workdir", value), f"--workdir: the local path '{shown}'"),
    ]
    for doc, extra, field in cases:
        write_task(doc)
        code, out = launch("task.yaml", *extra)
        msg = error_of(out)
        assert code == 2 and field in msg and expected in msg, msg
    code, out = launch(value + ".yaml")
    msg = error_of(out)
    assert code == 2 and msg.startswith(f"Cannot read the task file '{show(value + '.yaml')}'")
    assert expected in msg, msg


def test_cli_task_file_problems(play: Path) -> None:
    code, out = launch("loop.yaml")
    assert code == 2 and "task file 'loop.yaml': it is a symbolic link loop" in error_of(out)
    code, out = launch("dir")  # an existing folder is a task file, not a command
    assert code == 2 and "task file 'dir': it is a folder, not a file" in error_of(out)
    Path("latin1.yaml").write_bytes(b"run: caf\xe9\n")
    code, out = launch("latin1.yaml")
    assert code == 2 and "cannot be read as text" in error_of(out) and "UTF-8" in out
    code, out = launch("")
    assert code == 2 and "ENTRYPOINT is empty" in error_of(out)
    code, out = launch("echo ~nosuchuser/x")  # not a path: a command, as before
    assert code == 0, out


def test_cli_destinations(play: Path) -> None:
    for dst, expected in [
        ("/" + LONG, "file_mounts./nnnnn"),
        ("/a\0b", "file_mounts./a\\x00b: the destination '/a\\x00b' contains a NUL byte"),
        ("", "file_mounts.: the destination '' is an empty string"),
    ]:
        write_task({"file_mounts": {dst: "dir"}})
        code, out = launch()
        msg = error_of(out)
        assert code == 2 and expected in msg and len(msg) < 500, msg


def test_cli_valid_paths_still_work(play: Path) -> None:
    write_task({"workdir": "~/link-to-dir", "file_mounts": {"/f": "file.txt", "~/d": "dir"}})
    code, out = launch("task.yaml", "--workdir", "dir")
    assert code == 0 and str(play / "dir") in out and "copy" in out, out
    code, out = launch("task.yaml", "--workdir", "file.txt")
    assert code == 2 and "--workdir: 'file.txt' is a file" in error_of(out)


# --- permission denied -----------------------------------------------------------------------


def _in_child(fn: Callable[[], Any]) -> Any:
    """fn() in a forked child that runs as nobody (uid/gid 65534) when we are root; its
    JSON result ({"result": ...}, {"error": ...}, or {"skip": ...} if it cannot drop root).
    The parent never changes its own uid."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (child)
        os.close(read_end)
        payload: dict[str, Any]
        try:
            if os.geteuid() == 0:
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
        except OSError as e:
            payload = {"skip": f"cannot drop root to nobody here: {e!r}"}
        else:
            try:
                payload = {"result": fn()}
            except BaseException as e:
                payload = {"error": repr(e)}
        os.write(write_end, json.dumps(payload).encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as f:
        data = f.read()
    os.waitpid(pid, 0)
    return json.loads(data)


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A folder every user can cross. pytest's tmp_path lies under 0700 folders of root that
    nobody (the user the EACCES test drops to) cannot cross, so this one is made by tempfile
    and removed at the end."""
    d = Path(tempfile.mkdtemp(prefix="skycore-eacces-"))
    d.chmod(0o755)
    try:
        yield d
    finally:
        for p in [d, *d.rglob("*")]:
            if p.is_dir() and not p.is_symlink():
                p.chmod(0o755)
        shutil.rmtree(d)


def test_permission_denied_names_the_field(
    play: Path, shared_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Root passes every permission check, so when the tests run as root the CLI runs in a
    forked child that drops to nobody (any other user just meets the 0000 folder): the
    kernel's own EACCES, nothing faked."""
    locked = shared_dir / "locked"
    (locked / "sub").mkdir(parents=True)
    (locked / "task.yaml").write_text("run: x\n")
    monkeypatch.chdir(shared_dir)
    sub = str(locked / "sub")
    cases: list[tuple[str, Any, tuple[str, ...]]] = [
        ("workdir", {"workdir": sub, "run": "x"}, ()),
        ("file_mounts./x", {"file_mounts": {"/x": sub}}, ()),
        ("file_mounts./y.source", {"file_mounts": {"/y": {"name": "bkt", "source": sub}}}, ()),
        ("--workdir", {"run": "x"}, ("--workdir", sub)),
        ("task file", None, ()),
    ]
    invocations = []
    for i, (_, doc, extra) in enumerate(cases):
        entry = str(locked / "task.yaml")
        if doc is not None:
            entry = f"task-{i}.yaml"
            write_task(doc, entry)
            Path(entry).chmod(0o644)
        invocations.append(["launch", "--dryrun", "-y", "-c", "ok", *extra, "--", entry])
    code, out = launch("missing.yaml")  # imports the error path before the child drops root
    assert code == 2, out
    locked.chmod(0o000)

    def attempts() -> list[tuple[int, str]]:
        results = [CliRunner().invoke(cli, args) for args in invocations]
        return [(r.exit_code, r.output + repr(r.exception)) for r in results]

    got = _in_child(attempts)
    if "skip" in got:
        pytest.skip(got["skip"])
    assert "error" not in got, got
    for (field, _, _), (code, out) in zip(cases, got["result"], strict=True):
        msg = error_of(out.rsplit("SystemExit", 1)[0])
        assert code == 2, out
        assert field in msg and "permission denied" in msg and "chmod" in msg, msg
    assert stat.S_IMODE(locked.stat().st_mode) == 0


# --- hypothesis: random path strings and YAML shapes in every path field ---------------------


def mostly(common: st.SearchStrategy[Any], rare: st.SearchStrategy[Any]) -> Any:
    """``common`` three times out of four, else ``rare``."""
    return st.one_of(common, common, common, rare)


_fixture_names = st.sampled_from(
    ["dir", "file.txt", "loop", "loop-a", "dangling", "link-to-dir", "task.yaml", ".", ".."]
)
_components = st.one_of(
    _fixture_names,
    _fixture_names,
    st.sampled_from(["missing", "a\0b", "\0", "${NOPE}", "x\ny", " ", "~", "é" * 130]),
    st.text(st.characters(blacklist_categories=["Cs"]), max_size=10),
    st.integers(240, 320).map(lambda n: "n" * n),
)
_prefixes = st.sampled_from(["", "", "./", "/", "~", "~/", "~root/", f"~{NO_USER}/", "../"])
local_paths = st.builds(
    lambda prefix, parts: prefix + "/".join(parts), _prefixes, st.lists(_components, max_size=4)
)
arg_paths = st.one_of(local_paths, st.sampled_from(["\udcff", "dir/\ud800", "x" * 5000]))
dests = st.one_of(
    st.builds(
        lambda prefix, parts: prefix + "/".join(parts),
        st.sampled_from(["/", "~/", "", "s3://", "rel/"]),
        st.lists(_components, min_size=1, max_size=3),
    ),
    st.just("/" + "/".join(["d" * 250] * 17)),
)
junk = st.one_of(
    st.none(),
    st.integers(),
    st.booleans(),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
mount_values = st.one_of(
    local_paths,
    local_paths,
    st.fixed_dictionaries(
        {"name": st.just("bucket-one"), "store": st.just("s3"), "source": local_paths},
        optional={"mode": st.sampled_from(["COPY", "MOUNT", "MOUNT_CACHED"])},
    ),
    st.fixed_dictionaries({"source": local_paths}),
    junk,
)
docs = st.fixed_dictionaries(
    {"run": st.just("echo hi")},
    optional={
        "workdir": mostly(local_paths, junk),
        "file_mounts": mostly(st.dictionaries(dests, mount_values, max_size=3), junk),
    },
)


_KINDS = (
    "does not exist",
    "too long",
    "symbolic link loop",
    "no user",
    "is a file",
    "NUL byte",
    "UTF-8",
    "empty string",
    "is a folder",
    "is not defined",
    "not configured",
)


@settings(
    max_examples=examples(300),
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    doc=docs,
    entry=st.one_of(st.just("task.yaml"), st.just("task.yaml"), arg_paths),
    workdir=st.one_of(st.none(), arg_paths),
)
def test_random_paths_in_every_field_never_traceback(
    play: Path, doc: dict[str, Any], entry: str, workdir: str | None
) -> None:
    write_task(doc)
    extra = () if workdir is None else (f"--workdir={workdir}",)
    code, out = launch(entry, *extra)
    assert code in (0, 2), out
    event(f"exit {code}")
    if code == 0:
        assert "Error: " not in out, out
        return
    msg = error_of(out)
    fields: list[str] = [f for f in ("workdir", "file_mounts") if f in doc]
    if workdir is not None:
        fields.append("--workdir")
    if entry != "task.yaml":
        fields += ["task file", "ENTRYPOINT"]
    assert any(f in msg for f in fields), (fields, msg)
    event(next((k for k in _KINDS if k in msg), "other: " + msg[:60]))
    for problem in problems_of(msg):  # each problem is one short paragraph
        assert len(problem) < 1000, msg
