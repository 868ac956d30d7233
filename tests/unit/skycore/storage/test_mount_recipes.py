"""Mount recipes (skycore.storage.recipes): the active one comes from config, a recipe takes
only the modes it names, and the backend asks it for the mount, the job's drain and nothing
else."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest

from skycore import plan
from skycore.backend.batch import ShellStep
from skycore.backend.mounts import DRAIN_TIMEOUT_S, cached_drain_script, mount_entry
from skycore.config import SkycoreConfig
from skycore.errors import ConfigError
from skycore.storage import recipes
from skycore.storage.api import AccessInfo
from skycore.storage.common import StorageMode
from skycore.storage.mounting import MountStep, drain_command
from skycore.storage.storage import Storage, StoragePlan


class EchoRecipe(recipes.MountRecipe):
    """A recipe whose scripts name what they were asked for."""

    name = "echo-recipe"
    modes = frozenset({StorageMode.MOUNT_CACHED})

    def mount_script(self, mount: recipes.BucketMount) -> str:
        return f"echo mount {mount.bucket} {mount.mount_path} {mount.transfers}"

    def drain_script(self, mount_paths: Sequence[str], timeout_s: float) -> str:
        return f"echo drain {' '.join(mount_paths)} {timeout_s:.0f}"

    def unmount_script(self, mount_paths: Sequence[str]) -> str:
        return f"echo unmount {' '.join(mount_paths)}"


AWS = {
    "aws": {"access_key_id": "AKIDEXAMPLE", "secret_access_key": "secret", "region": "us-east-1"}
}


def config_with(recipe: str = "skycore") -> SkycoreConfig:
    """A config with an s3 section and ``recipe``."""
    return SkycoreConfig.model_validate({**AWS, "mount_recipe": recipe})


@pytest.fixture
def echo_recipe() -> Iterator[SkycoreConfig]:
    recipes._RECIPES.add(EchoRecipe)
    try:
        yield config_with("echo-recipe")
    finally:
        recipes._RECIPES.reset()


def cached(transfers: int | None = None) -> Storage:
    return Storage.from_spec(
        name="bucket-one", source=None, store="s3", mode="MOUNT_CACHED", transfers=transfers
    )


def test_skycore_is_the_default_and_takes_no_mode_from_its_own_mounting() -> None:
    config = config_with()
    assert config.mount_recipe == "skycore"
    assert isinstance(recipes.active(config), recipes.SkycoreRecipe)
    assert all(recipes.takes(config, mode) is None for mode in StorageMode)
    assert isinstance(mount_entry(cached(), "/ckpt", config), MountStep)
    assert cached_drain_script(config, ["/ckpt"]) == drain_command(["/ckpt"], DRAIN_TIMEOUT_S)


def test_an_unknown_recipe_names_the_field_and_the_recipes_there_are() -> None:
    with pytest.raises(ConfigError) as e:
        recipes.active(SkycoreConfig(mount_recipe="nosuch"))
    message = str(e.value)
    assert message.startswith("mount_recipe: 'nosuch' is not a mount recipe")
    assert "skycore" in message and "docs/mount-recipes.md" in message


def test_a_recipe_takes_the_modes_it_names_and_skycore_keeps_the_others(
    echo_recipe: SkycoreConfig,
) -> None:
    step = mount_entry(cached(), "/ckpt", echo_recipe)
    assert step == ShellStep("echo mount bucket-one /ckpt None")
    plain = Storage.from_spec(name="bucket-one", source=None, store="s3", mode="MOUNT")
    assert isinstance(mount_entry(plain, "/data", echo_recipe), MountStep)
    assert cached_drain_script(echo_recipe, ["/a", "/b"], 60) == "echo drain /a /b 60"


def test_the_entry_s_own_transfers_reach_the_recipe_and_the_default_does_not(
    echo_recipe: SkycoreConfig,
) -> None:
    given = recipes.bucket_mount(cached(transfers=1), "/ckpt", echo_recipe)
    assert (given.transfers, given.mount_cached.get("transfers")) == (1, 1)
    default = recipes.bucket_mount(cached(), "/ckpt", echo_recipe)
    assert default.transfers is None and "transfers" not in default.mount_cached
    assert (default.store, default.bucket, default.mode) == ("s3", "bucket-one", "MOUNT_CACHED")
    assert default.read_only is False


def test_recipe_names_lists_skycore_and_the_registered_ones(echo_recipe: SkycoreConfig) -> None:
    names = recipes.recipe_names()
    assert "skycore" in names and "echo-recipe" in names and names == sorted(names)


def test_the_dry_run_names_the_recipe_that_mounts_an_entry(echo_recipe: SkycoreConfig) -> None:
    new_bucket = StoragePlan(AccessInfo(exists=False), create=True)
    action = plan._describe("/ckpt", cached(), new_bucket, echo_recipe).action
    assert (
        action == "create bucket, mount read-write on every node with the echo-recipe mount recipe"
    )
    plain = Storage.from_spec(name="bucket-one", source=None, store="s3", mode="MOUNT")
    action = plan._describe("/data", plain, new_bucket, echo_recipe).action
    assert action == "create bucket, mount read-write on every node"
