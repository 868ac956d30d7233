"""``harness up --store NAME`` merges its store's section into the skycore config: bringing
stores up one after the other keeps every section, and a task mounts buckets of both."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.testing import access
from harness.testing.buckets import SKY_MANAGED
from harness.testing.plugin import selected_stores
from skycore.config import load_config
from skycore.stores import get_store_class

pytestmark = pytest.mark.usefixtures("local_cloud")


def test_stores_brought_up_one_after_another_are_all_configured(
    request: pytest.FixtureRequest,
    skycore_home: Path,
    bucket_factory: Any,
    cluster_factory: Any,
) -> None:
    if access.target() is not None:
        pytest.skip("'harness up' is the local cloud's: a target run has its own config")
    stores = selected_stores(request.config)[:2]
    if len(stores) < 2:
        pytest.skip("needs two stores selected (run with no --store, or two of them)")
    path = skycore_home / "config.yaml"
    logs_dir = load_config(path).logs_dir
    path.write_text(yaml.safe_dump({"logs_dir": logs_dir}))  # no store section yet

    for store in stores:
        up = subprocess.run(
            [sys.executable, "-m", "harness.cli", "up", "--store", store],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert up.returncode == 0, up.stdout + up.stderr

    config = load_config(path)
    sections = {get_store_class(store).config_section for store in stores}
    assert sections <= set(config.sections()), config.sections()
    assert config.logs_dir == logs_dir, "a section set by hand was dropped"

    mounts = {}
    for i, store in enumerate(stores):
        bucket = bucket_factory(store, SKY_MANAGED)
        mounts[f"/data{i}"] = bucket.mount_entry("MOUNT")
    cluster = cluster_factory("twoup")
    outcome = cluster.launch(
        {
            "name": "two-stores",
            "file_mounts": mounts,
            "run": " && ".join(f"ls {m} > /dev/null" for m in mounts) + " && echo both-mounted",
        }
    )
    assert outcome.exit_code == 0, outcome.output + outcome.run_log()
    assert "both-mounted" in outcome.run_log()
