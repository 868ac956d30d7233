"""Target mode end to end, on every built-in store: ``harness target STORE > t.yaml`` then
``harness conform --target t.yaml -n 2 --compare-stand-in`` against the local cloud's gate
seen as an outsider (the emulator contract's probes run on it and on the session's stand-in,
and agree).

Each store gets its own emulator and gate in a throw-away harness home, so that its gate log
holds this run's requests alone. The conform run cannot read that gate's admin token (the
home is hidden under an empty tmpfs in the run's own mount namespace), its gate log shows no
admin request, no credential of the target file appears in its output, JUnit XML, HTML
report or skycore logs, and no bucket of the run is left behind."""

from __future__ import annotations

import os
import re
import shlex
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.accounts import OTHER
from harness.cloud.cloud import SEED_OBJECTS
from harness.conformance import MODULES
from harness.emulators import fleet
from harness.emulators.base import PublicAccessUnavailable, RunningEmulator
from harness.paths import harness_home
from harness.targets import load_target
from harness.testing.plugin import all_store_params
from harness.testing.terminal import with_ctrl_c

BUILT_IN = ("s3", "gcs", "azure", "r2")


RUN_GUARD_S = 900
"""A hang guard for one target run (about 40 s here)."""
STACKS_AFTER_S = 240
"""A test of the run that lasts longer prints every thread's stack (pytest's faulthandler)."""


def _text(data: str | bytes | None) -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else data or ""


def hung_run(e: subprocess.TimeoutExpired, gate_log: Path, since: int) -> str:
    """What a run that outlived its guard had done: the tests it reported (``-v``), the
    stacks of the one that hung, and the gate's last answers other than 200."""
    out, err = _text(e.stdout), _text(e.stderr)
    with gate_log.open(errors="replace") as f:
        f.seek(since)
        odd = [line for line in f.read().splitlines() if " -> 2" not in line]
    return (
        f"the target run did not end in {RUN_GUARD_S} s.\n--- its output (last part):\n"
        f"{out[-4000:]}\n--- its stderr (last part: stacks of a test past "
        f"{STACKS_AFTER_S} s):\n{err[-12000:]}\n--- the gate's last answers other than 2xx "
        f"({len(odd)} in all; whole log: {gate_log}):\n" + "\n".join(odd[-30:])
    )


def _harness() -> str:
    return str(Path(sys.executable).with_name("harness"))


def write_target(store: str, home: Path, path: Path) -> Path:
    """``harness target STORE > PATH`` for the gate recorded in ``home``."""
    env = {**os.environ, "HARNESS_HOME": str(home)}
    subprocess.run(
        f"{shlex.quote(_harness())} target {store} > {shlex.quote(str(path))}",
        shell=True, check=True, env=env, timeout=60,
    )  # fmt: skip
    return path


@pytest.fixture
def own_gate(
    store: str, local_cloud: object, tmp_path: Path
) -> Iterator[tuple[Path, RunningEmulator]]:
    """``store``'s emulator and gate in a harness home of their own, with its public dataset
    (what the session's home installed, such as Azurite's npm folder, is shared)."""
    home = tmp_path / "gate-home"
    home.mkdir()
    if (harness_home() / "npm").is_dir():
        (home / "npm").symlink_to(harness_home() / "npm")
    emulator = fleet.start_all(home=home, stores=[store])[store]
    try:
        emulator.make_bucket(
            emulator.public_dataset, owner=OTHER, public=True, objects=SEED_OBJECTS
        )
        yield home, emulator
    finally:
        fleet.stop_all(home=home)


@pytest.mark.parametrize(
    "store", [p for p in all_store_params(group="target") if p.values[0] in BUILT_IN]
)
def test_conform_against_a_target_file(
    request: pytest.FixtureRequest,
    store: str,
    own_gate: tuple[Path, RunningEmulator],
    local_cloud: object,
    tmp_path: Path,
) -> None:
    home, emulator = own_gate
    target_file = write_target(store, home, tmp_path / "t.yaml")
    assert stat.S_IMODE(target_file.stat().st_mode) == 0o600
    target = load_target(target_file)
    secrets = target.secrets()
    assert secrets, "the target file names no credential"

    gate_log = Path(emulator.record.gate_log)
    log_start = gate_log.stat().st_size
    junit, html = tmp_path / "junit.xml", tmp_path / "report.html"
    outer_report = request.config.getoption("--matrix-report")
    if outer_report:  # this store's matrix beside the smoke run's own report
        html = Path(outer_report).resolve().with_name(f"matrix-report-{store}.html")
    basetemp = tmp_path / "run"
    conform = [
        _harness(), "conform", "--target", str(target_file), "-n", "2", "-y",
        "--compare-stand-in", "--",
        "-rA", f"--junitxml={junit}", f"--matrix-report={html}", f"--basetemp={basetemp}",
        "-v", "-o", f"faulthandler_timeout={STACKS_AFTER_S}",
    ]  # fmt: skip
    # The gate's home (its admin token) is hidden from the run: an empty tmpfs over it.
    script = f"mount -t tmpfs none {shlex.quote(str(home))} && exec {shlex.join(conform)}"
    run_env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_XDIST_WORKER",)}
    run_env["SKYCORE_HOME"] = str(tmp_path / "skycore-home")
    try:
        r = subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
            cwd=tmp_path, env=run_env, capture_output=True, text=True, timeout=RUN_GUARD_S,
        )  # fmt: skip
    except subprocess.TimeoutExpired as e:
        pytest.fail(hung_run(e, gate_log, log_start), pytrace=False)
    output = r.stdout + r.stderr
    assert r.returncode == 0, output[-6000:]

    summary = output.strip().splitlines()
    passed = [line for line in summary if line.startswith("PASSED ")]
    skipped = [line for line in summary if line.startswith("SKIPPED ")]
    expected_skips: dict[str, str] = {}
    try:
        type(emulator).attach(target).check_public_possible()
    except PublicAccessUnavailable:  # the comp test needs a public bucket of the user's
        expected_skips["test_comp_test"] = "no API call that makes a bucket public"
    for module in MODULES:
        if module in expected_skips:
            assert any(
                f"{module}.py:" in line and expected_skips[module] in line for line in skipped
            ), f"{module} was not skipped with its reason:\n{output[-4000:]}"
            continue
        assert any(f"{module}.py::" in line for line in passed), (
            f"{module} did not pass:\n{output[-4000:]}"
        )
    final = r.stdout.strip().splitlines()[-1]  # "=== 17 passed, 1 xfailed in 80.1s ==="
    assert re.search(r"\b1 xfailed\b", final), output[-3000:]  # parallel transfers caught
    assert not re.search(r"\d+ (failed|errors?|xpassed)\b", final), output[-3000:]
    assert "upload order, observed by polling the bucket" in output
    # The contract's probes ran on the target too: the same server behind the same gate as
    # the session's stand-in, so every check agrees.
    assert "the local stand-in against the service" in output, output[-4000:]
    agree = re.search(rf"{store}: the stand-in and the service agree on (\d+) of (\d+)", output)
    assert agree and agree.group(1) == agree.group(2) and int(agree.group(2)) >= 9, output[-4000:]
    assert output.count("The conformance suite will run on") == 1, "the plan is shown once"
    assert "a listing every" in output

    # No admin request reached the gate during the run.
    with gate_log.open() as f:
        f.seek(log_start)
        requests = f.read()
    admin = [line for line in requests.splitlines() if "/__gate__/" in line]
    assert not admin, admin[:5]
    assert requests.count("\n") > 100, "the run sent the gate almost nothing"

    # No credential in what the run printed or wrote.
    written = [junit, html, html.with_suffix(".md")]
    logs = [p for p in basetemp.rglob("*") if p.is_file() and "sky_logs" in p.parts]
    for secret in secrets:
        assert secret not in output
        for path in [*written, *logs]:
            if path.exists():
                assert secret not in path.read_text(errors="replace"), path

    # Nothing of the run is left in the store.
    tag = f"{target.bucket_prefix}-"
    left = [n for owner in ("user", "other") for n in emulator.list_buckets(owner) if tag in n]
    assert not left, left


@pytest.mark.parametrize(
    "store", [p for p in all_store_params(group="target") if p.values[0] == "s3"]
)
def test_ctrl_c_leaves_no_bucket_behind(
    store: str, own_gate: tuple[Path, RunningEmulator], local_cloud: object, tmp_path: Path
) -> None:
    """Ctrl-C while the run is creating its buckets: the run still deletes every one."""
    home, emulator = own_gate
    target_file = write_target(store, home, tmp_path / "t.yaml")
    run_env = {k: v for k, v in os.environ.items() if k != "PYTEST_XDIST_WORKER"}
    run_env["SKYCORE_HOME"] = str(tmp_path / "skycore-home")
    conform = [_harness(), "conform", "--target", str(target_file), "-n", "0", "-y", "--",
               "-k", "test_mount", f"--basetemp={tmp_path / 'run'}"]  # fmt: skip
    proc = subprocess.Popen(
        with_ctrl_c(conform), cwd=tmp_path, env=run_env, start_new_session=True, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    tag = f"{load_target(target_file).bucket_prefix}-"

    def run_buckets() -> list[str]:
        return [n for o in ("user", "other") for n in emulator.list_buckets(o) if tag in n]

    try:
        deadline = time.monotonic() + 300
        while not run_buckets():
            assert proc.poll() is None, proc.communicate()[0][-3000:]
            assert time.monotonic() < deadline, "the run made no bucket in 300 s"
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C at the terminal sends
        output = proc.communicate(timeout=600)[0]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode != 0, output[-3000:]
    assert "clean-up of run" in output or "KeyboardInterrupt" in output, output[-3000:]
    assert not run_buckets(), output[-3000:]
