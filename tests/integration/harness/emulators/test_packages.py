"""``install_from_pypi`` installs a server's package into the harness home once, and its
console script runs with ``package_env``. The package is a wheel made here (pip runs with
``--no-index``): no network."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import threading
import zipfile
from pathlib import Path

import pytest

from harness.emulators.packages import (
    install_from_pypi,
    installed_spec,
    package_bin_dir,
    package_dir,
    package_env,
)
from harness.emulators.records import EmulatorError

OFFLINE = ("--no-index",)


def make_wheel(folder: Path, version: str = "0.1") -> Path:
    """A pure-Python wheel of ``tinyserver`` with a ``tinyserver`` console script."""
    dist = f"tinyserver-{version}.dist-info"
    files = {
        "tinyserver/__init__.py": f"def main():\n    print('tinyserver {version} ok')\n",
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: tinyserver\nVersion: {version}\n",
        f"{dist}/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
        f"{dist}/entry_points.txt": "[console_scripts]\ntinyserver = tinyserver:main\n",
    }
    record = []
    for name, text in files.items():
        digest = hashlib.sha256(text.encode()).digest()
        b64 = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
        record.append(f"{name},sha256={b64},{len(text.encode())}")
    record.append(f"{dist}/RECORD,,")
    files[f"{dist}/RECORD"] = "\n".join(record) + "\n"
    wheel = folder / f"tinyserver-{version}-py3-none-any.whl"
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)
    return wheel


def pip_runs(home: Path, name: str) -> int:
    """How many times pip ran for ``name`` (each run starts a block of its install log)."""
    log = home / "logs" / f"{name}-install.log"
    return log.read_text().count("\n=== ") if log.exists() else 0


def run_script(folder: Path) -> str:
    done = subprocess.run(
        [str(package_bin_dir(folder) / "tinyserver")],
        env=package_env(folder),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.strip()


def test_installs_once_and_its_script_runs(tmp_path: Path) -> None:
    home = tmp_path / "harness"
    wheel = make_wheel(tmp_path / "wheels")
    folder = install_from_pypi(str(wheel), "tiny", home, pip_args=OFFLINE)
    assert folder == package_dir("tiny", home) == home / "packages" / "tiny"
    assert installed_spec(folder) == str(wheel)
    assert run_script(folder) == "tinyserver 0.1 ok"
    assert install_from_pypi(str(wheel), "tiny", home, pip_args=OFFLINE) == folder
    assert pip_runs(home, "tiny") == 1
    assert sorted(p.name for p in (home / "packages").iterdir()) == ["tiny", "tiny.lock"]


def test_callers_at_once_install_once(tmp_path: Path) -> None:
    home = tmp_path / "harness"
    wheel = make_wheel(tmp_path / "wheels")
    threads = [
        threading.Thread(target=install_from_pypi, args=(str(wheel), "tiny", home, OFFLINE))
        for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert pip_runs(home, "tiny") == 1
    assert run_script(package_dir("tiny", home)) == "tinyserver 0.1 ok"


def test_another_spec_replaces_the_install(tmp_path: Path) -> None:
    home = tmp_path / "harness"
    install_from_pypi(str(make_wheel(tmp_path / "a", "0.1")), "tiny", home, pip_args=OFFLINE)
    newer = make_wheel(tmp_path / "b", "0.2")
    folder = install_from_pypi(str(newer), "tiny", home, pip_args=OFFLINE)
    assert run_script(folder) == "tinyserver 0.2 ok"
    assert pip_runs(home, "tiny") == 2


def test_a_failed_install_names_the_log_and_leaves_nothing_half_done(tmp_path: Path) -> None:
    home = tmp_path / "harness"
    with pytest.raises(EmulatorError, match=r"tiny-install\.log") as failed:
        install_from_pypi("no-such-package-here", "tiny", home, pip_args=OFFLINE)
    assert "'pip install no-such-package-here'" in str(failed.value)
    assert sorted(p.name for p in (home / "packages").iterdir()) == ["tiny.lock"]
    wheel = make_wheel(tmp_path / "wheels")  # the next attempt installs cleanly
    assert run_script(install_from_pypi(str(wheel), "tiny", home, pip_args=OFFLINE))


@pytest.mark.parametrize("name", ["", "a/b", "..", ".hidden"])
def test_a_folder_name_must_be_one_plain_name(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError, match="one plain name"):
        package_dir(name, tmp_path)
