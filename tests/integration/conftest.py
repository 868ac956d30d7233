"""The integration tests' shared fixtures (the layers are in tests/conftest.py's docstring).

Three configs, by what the test needs of the local cloud:

- ``config``: the local cloud's whole config (docker and every selected store) in the test's
  own skycore home (the harness's ``skycore_home``).
- ``docker_config``: a skycore home of the test's own with the docker section only (node
  engine and image): no emulator is needed.
- ``store_config``: the emulators' sections only, no docker and no home written: the stores
  on their own.

``cluster`` is a unique cluster name on the test's home, cleaned up after the test;
``store_emulator`` is the running emulator of the test's ``store``; ``bucket`` is a private
bucket of the user's on it, deleted after the test. ``s3`` is the S3-compatible emulator of
a test parametrised by ``store_name``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from harness.emulators.fleet import RunningEmulator
from harness.emulators.s3 import S3Emulator
from skycore import provision, state
from skycore.config import DockerConfig, SkycoreConfig, load_config, save_config
from tests.names import unique_name


@pytest.fixture
def config(skycore_home: Path) -> SkycoreConfig:
    """The local cloud's whole config (docker and every selected store), in a fresh home."""
    return load_config()


@pytest.fixture
def docker_config(
    node_engine: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> SkycoreConfig:
    """This test's own skycore home with only the docker section, logs under tmp_path."""
    host, image = node_engine
    monkeypatch.setenv("SKYCORE_HOME", str(tmp_path / "home"))
    cfg = SkycoreConfig(
        docker=DockerConfig(host=host, image=image), logs_dir=str(tmp_path / "sky_logs")
    )
    save_config(cfg)
    return cfg


@pytest.fixture
def store_config(emulators: dict[str, RunningEmulator]) -> SkycoreConfig:
    """The emulators' store sections only (no docker section, nothing written)."""
    from skycore.storage import get_store_class

    return SkycoreConfig(
        **{get_store_class(s).config_section: em.config_section() for s, em in emulators.items()}
    )


@pytest.fixture
def cluster(request: pytest.FixtureRequest) -> Iterator[str]:
    """A unique cluster name on the test's home (``config`` if the test uses it, else
    ``docker_config``); its nodes and its record are removed after the test, whatever
    happened."""
    home = "config" if "config" in request.fixturenames else "docker_config"
    cfg: SkycoreConfig = request.getfixturevalue(home)
    name = unique_name("tc")
    yield name
    provision.terminate_instances("docker", name, cfg)
    state.remove_cluster(name, "test teardown")


@pytest.fixture
def store_emulator(store: str, emulators: dict[str, RunningEmulator]) -> RunningEmulator:
    """The running emulator of the test's ``store``."""
    return emulators[store]


@pytest.fixture
def bucket(store_emulator: RunningEmulator) -> Iterator[str]:
    """The URL of a private bucket of the user's on ``store``, deleted after the test."""
    em = store_emulator
    name = unique_name("tb")
    url = em.make_bucket(name, owner="user", public=False)
    yield url
    em.delete_bucket(name)


@pytest.fixture
def s3(emulators: dict[str, RunningEmulator], store_name: str) -> S3Emulator:
    """The S3-compatible emulator of the test's ``store_name``."""
    emulator = emulators[store_name]
    assert isinstance(emulator, S3Emulator)
    return emulator


@pytest.fixture
def new_bucket_name(s3: S3Emulator) -> Iterator[Callable[[str], str]]:
    """``new_bucket_name(prefix)``: a new bucket name on ``s3``; whatever buckets the test made
    under these names are deleted after it (with the local admin view)."""
    made: list[str] = []

    def new(prefix: str) -> str:
        made.append(unique_name(prefix))
        return made[-1]

    yield new
    for name in made:
        s3.delete_bucket(name)
