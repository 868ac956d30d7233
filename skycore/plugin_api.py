"""What an outside store package may import from skycore: these names keep their meaning
across releases, and a name that leaves this list first goes through ``DEPRECATED`` (it
still resolves, with a PluginAPIDeprecationWarning naming its new home).

The store contract (docs/backends.md):

- ``AbstractStore``: the base class of every store (one bucket; class variables, class
  methods and instance methods of the contract).
- ``AccessInfo``: what ``AbstractStore.access()`` returns (exists, readable, writable, anonymous).
- ``UploadResult``: what ``AbstractStore.upload()`` returns (files and bytes uploaded).
- ``S3Store``: the S3 store, to subclass for an S3-compatible service.
- ``AwsConfig``: the config.yaml model of the S3 store, to subclass for its section.

The mount recipe contract (docs/mount-recipes.md):

- ``MountRecipe``: the base class of a way to mount buckets on nodes (registered under the
  entry-point group ``skycore.mount_recipes``, chosen with ``mount_recipe:`` in config.yaml).
- ``BucketMount``: what a recipe is asked to mount (store, bucket, mount path, mode, tuning).
- ``StorageMode``: COPY, MOUNT or MOUNT_CACHED (a recipe's ``modes``).

What a store raises (each a one-paragraph ``UserError`` naming the field or bucket and the fix):

- ``StorageError``: a store operation failed (the base of the errors below).
- ``StorageAccessError``: the bucket belongs to another account, or the credentials may not do it.
- ``StorageSpecError``: a bucket URL or storage entry is malformed (raised by ``parse_location``).
- ``BucketNameError``: a bucket name breaks the store's naming rule.
- ``UnknownStoreError``: no registered store has that name.
- ``StoreLoadError``: a registered store package failed to load.

Deprecation:

- ``PluginAPIDeprecationWarning``: the warning an old import path gives (a DeprecationWarning).
"""

from skycore.deprecation import PluginAPIDeprecationWarning, forwarder
from skycore.errors import (
    BucketNameError,
    StorageAccessError,
    StorageError,
    StorageSpecError,
    StoreLoadError,
    UnknownStoreError,
)
from skycore.storage.api import AbstractStore, AccessInfo, UploadResult
from skycore.storage.common import StorageMode
from skycore.storage.recipes import BucketMount, MountRecipe
from skycore.storage.s3 import AwsConfig, S3Store

__all__ = [
    "AbstractStore", "AccessInfo", "AwsConfig", "BucketMount", "BucketNameError", "MountRecipe",
    "PluginAPIDeprecationWarning", "S3Store", "StorageAccessError", "StorageError",
    "StorageMode", "StorageSpecError", "StoreLoadError", "UnknownStoreError", "UploadResult",
]  # fmt: skip

DEPRECATED: dict[str, str] = {}
"""Names that left this module: name -> the module to import it from now."""

__getattr__ = forwarder(__name__, DEPRECATED)
