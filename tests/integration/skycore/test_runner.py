"""DockerCommandRunner on a real node: commands, secrets through stdin, incremental rsync."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from skycore import provision
from skycore.config import DockerConfig, SkycoreConfig
from skycore.runner import CommandRunner, ignore_args


@pytest.fixture(scope="module")
def runner(
    node_engine: tuple[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CommandRunner]:
    """One node for the module's tests (removed at the end)."""
    host, image = node_engine
    config = SkycoreConfig(docker=DockerConfig(host=host, image=image))
    name = f"tr-{uuid.uuid4().hex[:8]}"
    info = provision.run_instances("docker", name, 1, None, config)
    try:
        yield provision.get_command_runners("docker", info, config)[0]
    finally:
        provision.terminate_instances("docker", name, config)


def test_run_exit_code_env_log_and_stream(runner: CommandRunner, tmp_path: Path) -> None:
    lines: list[str] = []
    log = tmp_path / "run.log"
    rc = runner.run(
        "echo $GREETING; echo err >&2; shopt -q login_shell && echo login; exit 7",
        env={"GREETING": "hello world"},
        log_path=log,
        stream=True,
        prefix="(n) ",
        sink=lines.append,
    )
    assert rc == 7
    # stdout and stderr travel on separate docker streams: their order may interleave.
    assert sorted(lines) == ["(n) err\n", "(n) hello world\n", "(n) login\n"]
    assert sorted(log.read_text().splitlines()) == ["err", "hello world", "login"]


def test_run_output_and_home(runner: CommandRunner) -> None:
    assert runner.run_output("echo ok") == (0, "ok\n")
    assert runner.home() == "/root"
    assert runner.abs_path("~/x") == "/root/x"


def test_write_file_goes_through_stdin_with_mode(
    runner: CommandRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What write_file really runs: one docker exec whose argv never holds the content, which
    travels on its stdin; the file then has exactly that content and mode, nothing else."""
    import subprocess

    calls: list[tuple[list[str], object]] = []
    real_run = subprocess.run

    def spy(argv: list[str], *a: object, **kw: object) -> object:
        calls.append((list(argv), kw.get("input")))
        return real_run(argv, *a, **kw)  # type: ignore[call-overload]

    with monkeypatch.context() as m:
        m.setattr(subprocess, "run", spy)
        runner.write_file("~/.secrets/creds", "key=SECRET\n", 0o600)
    assert len(calls) == 1, calls
    argv, fed = calls[0]
    assert argv[argv.index("exec") + 1] == "-i", argv  # stdin attached
    assert fed == b"key=SECRET\n"
    assert not any("SECRET" in a for a in argv), argv
    rc, out = runner.run_output("stat -c '%a %U' ~/.secrets/creds; cat ~/.secrets/creds")
    assert (rc, out) == (0, "600 root\nkey=SECRET\n")
    # Replaced whole, with the new mode; bytes arrive unchanged; no temporary file is left.
    blob = bytes(range(256)) * 4
    runner.write_file("~/.secrets/creds", blob, 0o640)
    rc, out = runner.run_output("stat -c %a ~/.secrets/creds; sha256sum < ~/.secrets/creds")
    assert (rc, out) == (0, f"640\n{hashlib.sha256(blob).hexdigest()}  -\n")
    assert runner.run_output("ls -A ~/.secrets")[1] == "creds\n"


def test_rsync_up_is_incremental(runner: CommandRunner, tmp_path: Path) -> None:
    src = tmp_path / "wd"
    (src / "sub").mkdir(parents=True)
    for i in range(5):
        (src / f"f{i}.txt").write_text(f"file {i}\n")
    (src / "sub" / "deep.txt").write_text("deep\n")
    first = runner.rsync_up(src, "~/sync_test")
    assert first.returncode == 0
    assert first.files_transferred == 6
    second = runner.rsync_up(src, "~/sync_test")
    assert second.files_transferred == 0
    (src / "f3.txt").write_text("changed, and longer\n")
    third = runner.rsync_up(src, "~/sync_test")
    assert third.files_transferred == 1
    assert runner.run_output("cat ~/sync_test/f3.txt ~/sync_test/sub/deep.txt")[1] == (
        "changed, and longer\ndeep\n"
    )


def test_rsync_single_file_to_new_folder(runner: CommandRunner, tmp_path: Path) -> None:
    f = tmp_path / "one.txt"
    f.write_text("one\n")
    assert runner.rsync_up(f, "/data/deep/one.txt").returncode == 0
    assert runner.run_output("cat /data/deep/one.txt")[1] == "one\n"


def test_rsync_folder_to_new_deep_and_home_level_folders(
    runner: CommandRunner, tmp_path: Path
) -> None:
    """A folder right under the home is created by rsync itself (no mkdir exec); a deeper
    one gets its parents made first."""
    src = tmp_path / "d"
    src.mkdir()
    (src / "x.txt").write_text("x\n")
    assert runner.rsync_up(src, "~/top_level_new").returncode == 0
    assert runner.rsync_up(src, "~/deep_new/a/b").returncode == 0
    assert runner.run_output("cat ~/top_level_new/x.txt ~/deep_new/a/b/x.txt")[1] == "x\nx\n"


def test_skyignore_wins_over_gitignore(runner: CommandRunner, tmp_path: Path) -> None:
    src = tmp_path / "proj"
    (src / "pkg").mkdir(parents=True)
    (src / "keep.py").write_text("k")
    (src / "big.bin").write_text("b")
    (src / "notes.log").write_text("l")
    (src / "pkg" / "cache.log").write_text("l")
    (src / ".gitignore").write_text("*.log\n")
    runner.rsync_up(src, "~/ign_git")
    out = runner.run_output("cd ~/ign_git && find . -type f | sort")[1].split()
    assert out == ["./.gitignore", "./big.bin", "./keep.py"]
    (src / ".skyignore").write_text("big.bin\n")
    assert ignore_args(src) == [f"--exclude-from={src / '.skyignore'}"]
    runner.rsync_up(src, "~/ign_sky")
    out = runner.run_output("cd ~/ign_sky && find . -type f | sort")[1].split()
    assert out == [
        "./.gitignore",
        "./.skyignore",
        "./keep.py",
        "./notes.log",
        "./pkg/cache.log",
    ]


def test_rsync_down(runner: CommandRunner, tmp_path: Path) -> None:
    runner.run_output("mkdir -p ~/out && echo result > ~/out/r.txt")
    res = runner.rsync_down("~/out/", tmp_path / "got")
    assert res.returncode == 0
    assert (tmp_path / "got" / "r.txt").read_text() == "result\n"


def test_env_values_never_reach_a_command_line(
    runner: CommandRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Task envs (maybe secrets) go through stdin, never docker exec argv (ps, inspect)."""
    import subprocess

    secret = "s3cr3t-'quoted' $HOME `x`\nline2"
    argvs: list[list[str]] = []
    real_popen = subprocess.Popen

    def spy(argv: list[str], *a: object, **kw: object) -> object:
        argvs.append(list(argv))
        return real_popen(argv, *a, **kw)  # type: ignore[call-overload]

    monkeypatch.setattr(subprocess, "Popen", spy)
    lines: list[str] = []
    env = {"API_TOKEN": secret, "PLAIN": "v"}
    rc = runner.run(
        'printf "%s|%s\\n" "$API_TOKEN" "$PLAIN"; cat; ls ~/.sky/env 2>/dev/null | wc -l',
        env=env,
        stream=True,
        sink=lines.append,
    )
    assert rc == 0
    assert "".join(lines) == f"{secret}|v\n0\n"  # stdin after the env is /dev/null
    # With stdin of its own: the env goes to a 0600 file that is removed before the command.
    rc, out = runner.run_output(
        'printf "%s\\n" "$API_TOKEN"; cat; ls ~/.sky/env | wc -l', env=env, stdin=b"in\n"
    )
    assert (rc, out) == (0, f"{secret}\nin\n0\n")
    assert argvs
    for argv in argvs:
        assert not any("s3cr3t" in a for a in argv), argv
        assert "-e" not in argv
