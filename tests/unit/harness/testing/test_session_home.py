"""A test session's skycore home starts empty, even where an earlier session of the same
process id left one behind (its config would otherwise be merged into the new session's)."""

from __future__ import annotations

import os
from pathlib import Path

from harness.testing.cloud_fixtures import new_session_home


def test_a_session_home_is_new_and_empty_whatever_earlier_sessions_left(tmp_path: Path) -> None:
    earlier = new_session_home(tmp_path, "gw0")
    (earlier / "config.yaml").write_text("linode: {endpoint_url: http://127.0.0.1:1}\n")
    same_pid_old_scheme = tmp_path / "test-homes" / f"{os.getpid()}-gw0"
    same_pid_old_scheme.mkdir()
    (same_pid_old_scheme / "config.yaml").write_text("linode: {}\n")

    home = new_session_home(tmp_path, "gw0")

    assert home.parent == tmp_path / "test-homes"
    assert home not in (earlier, same_pid_old_scheme)
    assert list(home.iterdir()) == []
    assert home.name.startswith(f"{os.getpid()}-gw0-")
