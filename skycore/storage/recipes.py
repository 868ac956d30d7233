"""Mount recipes: what mounts a bucket on a node, and how a job waits for its uploads.

skycore's own mounting (skycore/storage/mounting.py and the node program mountd) is the
default recipe, ``skycore``: it mounts every mode itself. Another recipe is a plug-in (a
``MountRecipe`` subclass registered under the entry-point group ``skycore.mount_recipes``,
chosen with ``mount_recipe: NAME`` in config.yaml) that takes over the modes it names in
``modes``; every other entry keeps skycore's mounting. For its mounts a recipe gives:

- ``mount_script``: the bash a node runs to mount one bucket (run again after a start; it
  must leave a live mount alone);
- ``drain_script``: the bash that returns once the cached uploads of its mount points are
  in the store (run on each node after a job's run, and before a stop or a down when
  ``drains_before_stop``);
- ``unmount_script``: the bash run before a down (and a stop);
- ``prepare_node``: whatever a node needs before the first mount (called once per node and
  launch, before the mount batch).

docs/mount-recipes.md has the contract and the SkyPilot recipe that harness ships.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from skycore.errors import ConfigError
from skycore.plugins import PluginGroup
from skycore.storage.common import StorageMode

if TYPE_CHECKING:
    from skycore.config import SkycoreConfig
    from skycore.runner import CommandRunner
    from skycore.storage.storage import Storage

GROUP = "skycore.mount_recipes"
DEFAULT = "skycore"


@dataclass(frozen=True)
class BucketMount:
    """One bucket a recipe mounts on a node.

    ``store``: the registered store name (a built-in or a plug-in store); ``sub_path``:
    the prefix inside the bucket ('' for all of it); ``transfers``: the entry's own
    ``transfers`` (None: the recipe's default); ``mount_cached``: the entry's tuning as
    ``config.mount_cached`` field names (only those the entry or its type set);
    ``store_config``: the store's section of config.yaml (endpoint, credentials)."""

    store: str
    bucket: str
    sub_path: str
    mount_path: str
    mode: StorageMode
    read_only: bool
    transfers: int | None
    mount_cached: Mapping[str, Any] = field(default_factory=dict)
    store_config: Any = None


class MountRecipe:
    """A way to mount buckets on nodes (subclass it; ``name`` is the entry point's name)."""

    name: ClassVar[str] = ""
    modes: ClassVar[frozenset[StorageMode]] = frozenset()
    drains_before_stop: ClassVar[bool] = True

    def describe(self) -> str:
        """One line for ``skycore check``: the recipe, where it comes from, what it mounts."""
        modes = ", ".join(sorted(m.value for m in self.modes)) or "no mode"
        return f"{self.name} ({type(self).__module__}; mounts {modes}, skycore the rest)"

    def prepare_node(self, runner: CommandRunner) -> None:
        """Put what the recipe's scripts need on the node ``runner`` reaches."""

    def mount_script(self, mount: BucketMount) -> str:
        """Idempotent bash mounting ``mount`` on a node."""
        raise NotImplementedError

    def drain_script(self, mount_paths: Sequence[str], timeout_s: float) -> str:
        """Bash that exits 0 once every upload of ``mount_paths`` is in the store."""
        raise NotImplementedError

    def unmount_script(self, mount_paths: Sequence[str]) -> str:
        """Bash unmounting ``mount_paths``."""
        raise NotImplementedError


class SkycoreRecipe(MountRecipe):
    """skycore's own mounting: every mode through the node's rclone daemon and mountd."""

    name = DEFAULT

    def describe(self) -> str:
        return "skycore (skycore's own mounting, every mode)"


_RECIPES: PluginGroup[MountRecipe] = PluginGroup(
    GROUP, "MountRecipe", lambda cls: cls.name, ConfigError, "mount recipe"
)
_RECIPES.register_contract(MountRecipe)


def recipe_names() -> list[str]:
    """Every mount recipe's name: skycore's and the registered ones, sorted."""
    return sorted({DEFAULT, *_RECIPES.classes()})


def active(config: SkycoreConfig) -> MountRecipe:
    """The recipe ``config.mount_recipe`` names (an instance); ConfigError naming the field
    and the recipes there are for an unknown name."""
    name = config.mount_recipe
    if name == DEFAULT:
        return SkycoreRecipe()
    _RECIPES.check(name)
    cls = _RECIPES.classes().get(name)
    if cls is None:
        raise ConfigError(
            f"mount_recipe: '{name}' is not a mount recipe; use one of "
            f"{', '.join(recipe_names())} (docs/mount-recipes.md), or install the package "
            "that registers it."
        )
    return cls()


def takes(config: SkycoreConfig, mode: StorageMode | str) -> MountRecipe | None:
    """The active recipe if it mounts ``mode`` itself, else None (skycore's mounting)."""
    recipe = active(config)
    return recipe if StorageMode(mode) in recipe.modes else None


def bucket_mount(st: Storage, dst: str, config: SkycoreConfig) -> BucketMount:
    """What a recipe needs to mount storage entry ``st`` at ``dst``."""
    opts = st.mount_options
    tuning = {
        "transfers": opts.transfers if st.transfers_from else None,
        "vfs_cache_max_size": opts.cache_max_size,
        "vfs_cache_max_age": opts.cache_max_age_s,
        "buffer_size": opts.buffer_size,
        "vfs_read_ahead": opts.read_ahead,
        "vfs_read_chunk_size": opts.read_chunk_size,
        "vfs_read_chunk_streams": opts.read_chunk_streams,
    }
    return BucketMount(
        store=st.store,
        bucket=st.name,
        sub_path=st.prefix,
        mount_path=dst,
        mode=st.mode,
        read_only=st.mounts_read_only(),
        transfers=opts.transfers if st.transfers_from else None,
        mount_cached={k: v for k, v in tuning.items() if v is not None},
        store_config=config.section(st.store_obj(config).config_section),
    )


def mount_script(st: Storage, dst: str, config: SkycoreConfig) -> str | None:
    """The active recipe's bash mounting ``st`` at ``dst``; None when skycore mounts it."""
    recipe = takes(config, st.mode)
    return None if recipe is None else recipe.mount_script(bucket_mount(st, dst, config))
