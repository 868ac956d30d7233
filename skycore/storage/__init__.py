"""Storage: buckets in the registered stores, and how they reach the nodes.

Public names: ``StorageMode``, ``Storage``, ``AbstractStore`` (the store contract, api.py),
``AccessInfo``, ``make_store``, the registry functions and the errors (all ``UserError``s).
Node-side bash builders are in ``skycore.storage.mounting``; ``storage ls`` / ``storage
delete`` logic in ``skycore.storage.catalog``.
"""

from skycore.storage.api import AbstractStore, AccessInfo, UploadResult
from skycore.storage.common import (
    BucketNameError,
    BucketUrl,
    StorageAccessError,
    StorageError,
    StorageMode,
    StorageSpecError,
    bucket_name_problem,
    parse_url,
    validate_bucket_name,
)
from skycore.storage.entry_check import StoragePlan
from skycore.storage.plain_copy import plain_copy_command
from skycore.storage.storage import Storage
from skycore.stores import (
    UnknownStoreError,
    get_store_class,
    make_store,
    store_classes,
    store_names,
)

__all__ = [
    "AbstractStore",
    "AccessInfo",
    "BucketNameError",
    "BucketUrl",
    "Storage",
    "StorageAccessError",
    "StorageError",
    "StorageMode",
    "StoragePlan",
    "StorageSpecError",
    "UnknownStoreError",
    "UploadResult",
    "bucket_name_problem",
    "get_store_class",
    "make_store",
    "parse_url",
    "plain_copy_command",
    "store_classes",
    "store_names",
    "validate_bucket_name",
]
