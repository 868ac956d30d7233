"""Storage: buckets in S3, GCS and Azure Blob, and how they reach the nodes.

Public names: ``StorageMode``, ``StoreType``, ``Storage``, ``AbstractStore``, ``AccessInfo``,
``make_store`` and the errors (all ``UserError``s). Node-side bash builders are in
``skycore.storage.mounting``; ``storage ls`` / ``storage delete`` logic in
``skycore.storage.catalog``.
"""

from skycore.storage.common import (
    BucketNameError,
    BucketUrl,
    StorageAccessError,
    StorageError,
    StorageMode,
    StorageSpecError,
    StoreType,
    bucket_name_problem,
    parse_url,
    validate_bucket_name,
)
from skycore.storage.storage import Storage, StoragePlan, plain_copy_command
from skycore.storage.store import AbstractStore, AccessInfo, UploadResult, make_store

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
    "StoreType",
    "UploadResult",
    "bucket_name_problem",
    "make_store",
    "parse_url",
    "plain_copy_command",
    "validate_bucket_name",
]
