"""``skycore check`` against the running emulators: each configured store's endpoint and
credentials, the docker engine and the node image, one line each."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

SECRETS = ("secret_access_key", "account_key", "access_token")
"""The fields of the stores' config sections that hold the credential's secret part."""


def check(home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "skycore.cli", "check"],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "SKYCORE_HOME": str(home)},
        stdin=subprocess.DEVNULL,
    )


LABELS = {"aws": "s3 (aws)", "gcp": "gcs (gcp)", "azure": "azure", "r2": "r2 (cloudflare)"}
"""Each built-in store's line label (its name and its cloud, as harness status shows them),
by config section."""


def labels(sections: dict[str, object]) -> dict[str, str]:
    """The line label of each configured built-in store, by config section."""
    return {section: label for section, label in LABELS.items() if section in sections}


def lines_by_label(out: str) -> dict[str, str]:
    return {line.split(": ", 1)[0]: line for line in out.splitlines() if ": " in line}


def test_check_says_ok_for_every_configured_store_and_the_engine(skycore_home: Path) -> None:
    config = yaml.safe_load((skycore_home / "config.yaml").read_text())
    r = check(skycore_home)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = lines_by_label(r.stdout)
    for label in [*labels(config).values(), "docker", "node image", "mount recipe"]:
        assert lines[label].startswith(f"{label}: ok — "), r.stdout
    assert lines["mount recipe"].endswith("skycore (skycore's own mounting, every mode)")
    for section, label in labels(config).items():
        endpoint = config[section].get("endpoint_url") or config[section].get("api_endpoint")
        if endpoint:
            assert f"endpoint {endpoint}" in lines[label], lines[label]
        for field in SECRETS:  # never a secret
            if config[section].get(field):
                assert config[section][field] not in r.stdout


def test_a_wrong_key_fails_that_store_with_a_sentence_and_exit_1(skycore_home: Path) -> None:
    path = skycore_home / "config.yaml"
    good = yaml.safe_load(path.read_text())
    wrong_keys = [(s, f) for s in labels(good) for f in SECRETS if good[s].get(f) is not None]
    assert wrong_keys, good.keys()
    for section, field in wrong_keys:  # one store's key wrong at a time
        config = yaml.safe_load(path.read_text())
        config[section][field] = "d3Jvbmcta2V5LW9mLXRoZS10ZXN0"  # base64, as Azure's keys
        path.write_text(yaml.safe_dump(config))
        r = check(skycore_home)
        path.write_text(yaml.safe_dump(good))
        assert r.returncode == 1, r.stdout + r.stderr
        lines = lines_by_label(r.stdout)
        wrong = labels(config)[section]
        line = lines[wrong]
        assert line.startswith(f"{wrong}: FAILED — "), r.stdout
        assert "credentials" in line and section in line, line  # what failed, where to fix it
        assert line.rstrip().endswith("."), line
        for other, label in labels(config).items():
            if other != section:
                assert lines[label].startswith(f"{label}: ok — "), r.stdout
        assert f"1 check(s) failed: {wrong}." in r.stderr, r.stderr
        assert "Traceback" not in r.stdout + r.stderr


def test_an_unknown_mount_recipe_fails_its_line_naming_the_field(skycore_home: Path) -> None:
    path = skycore_home / "config.yaml"
    config = yaml.safe_load(path.read_text())
    path.write_text(yaml.safe_dump({**config, "mount_recipe": "nosuch"}))
    r = check(skycore_home)
    assert r.returncode == 1, r.stdout + r.stderr
    line = lines_by_label(r.stdout)["mount recipe"]
    assert line.startswith("mount recipe: FAILED — mount_recipe: 'nosuch' is not a mount recipe")
