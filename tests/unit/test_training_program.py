"""The training program (tests/fixtures/train/train.py) when a checkpoint cannot be written
for space: it removes what it wrote of that checkpoint, says so in one line, trains on and
ends with the weights of an uninterrupted run; another write error, or ``--on-write-error
fail``, ends it. And ``--stop-file`` ends a run at the step it appeared, with its result."""

from __future__ import annotations

import errno
import importlib.util
import io
import re
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

TRAIN = Path(__file__).resolve().parents[1] / "fixtures" / "train" / "train.py"


def load_train() -> ModuleType:
    """train.py as a module of its own (it is a script, not a package)."""
    spec = importlib.util.spec_from_file_location("train_under_test", TRAIN)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class FailingFile(io.BytesIO):
    """A file whose write fails with ``code``, as a full cache fails rclone's writer."""

    def __init__(self, code: int) -> None:
        super().__init__()
        self.code = code

    def write(self, _data: Any) -> int:
        raise OSError(self.code, "simulated")


def failing_open(names: set[str], code: int) -> Callable[..., Any]:
    """``open`` whose files named in ``names`` are created (empty) and then fail to write."""

    def fake(path: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if Path(path).name in names and "w" in mode:
            Path(path).write_bytes(b"")  # the open made the file
            return FailingFile(code)
        return open(path, mode, *args, **kwargs)

    return fake


def run(train: ModuleType, ckpt: Path, capsys: Any, *args: str) -> tuple[int, str]:
    argv = ["--ckpt-dir", str(ckpt), "--step-seconds", "0", "--ckpt-mib", "0.01", *args]
    code = train.run(train.parse(argv))
    return code, capsys.readouterr().out


def result_of(out: str) -> str:
    m = re.search(r"RESULT sha256=(\w+)", out)
    assert m, out
    return m.group(1)


@pytest.mark.parametrize(
    ("failing", "code", "errno_name"),
    [
        ("checkpoint-000004.bin", errno.EIO, "EIO"),
        ("checkpoint-000004.json", errno.ENOSPC, "ENOSPC"),
    ],
)
def test_a_checkpoint_that_cannot_be_written_is_removed_and_training_goes_on(
    tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch, failing: str, code: int,
    errno_name: str,
) -> None:  # fmt: skip
    train = load_train()
    _, straight = run(train, tmp_path / "a", capsys, "--steps", "9", "--every", "2")
    monkeypatch.setattr(train, "open", failing_open({failing}, code), raising=False)
    rc, out = run(train, tmp_path / "b", capsys, "--steps", "9", "--every", "2")
    assert rc == 0
    line = next(ln for ln in out.splitlines() if ln.startswith("checkpoint 4 failed:"))
    assert line.startswith(f"checkpoint 4 failed: {errno_name} (simulated) writing {failing}; ")
    assert re.search(r"; removed checkpoint-000004\.bin(,checkpoint-000004\.json)? t=[\d.]+$", line)
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == [
        "checkpoint-000002.bin", "checkpoint-000002.json", "checkpoint-000006.bin",
        "checkpoint-000006.json", "checkpoint-000008.bin", "checkpoint-000008.json",
        "result.json",
    ]  # fmt: skip
    assert "saved checkpoint 6 " in out and result_of(out) == result_of(straight)


def test_other_write_errors_and_on_write_error_fail_end_the_program(
    tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    train = load_train()
    monkeypatch.setattr(
        train, "open", failing_open({"checkpoint-000002.bin"}, errno.ENOTCONN), raising=False
    )
    with pytest.raises(OSError, match="simulated") as raised:
        run(train, tmp_path / "a", capsys, "--steps", "5", "--every", "2")
    assert raised.value.errno == errno.ENOTCONN
    assert raised.value.filename.endswith("checkpoint-000002.bin")
    monkeypatch.setattr(
        train, "open", failing_open({"checkpoint-000002.bin"}, errno.EIO), raising=False
    )
    with pytest.raises(OSError, match="simulated"):
        run(train, tmp_path / "b", capsys, "--steps", "5", "--every", "2",
            "--on-write-error", "fail")  # fmt: skip


def test_a_stop_file_ends_the_run_with_its_result(tmp_path: Path, capsys: Any) -> None:
    train = load_train()
    stop = tmp_path / "stop"
    stop.write_text("")
    _, straight = run(train, tmp_path / "a", capsys, "--steps", "1")
    rc, out = run(train, tmp_path / "b", capsys, "--steps", "100", "--stop-file", str(stop))
    assert rc == 0 and "STOP at step 1: " in out
    assert re.search(r"RESULT sha256=\w+ steps=1$", out, re.M)
    assert result_of(out) == result_of(straight)
