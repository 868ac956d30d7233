"""Shared vocabulary of the storage package: modes, store types, URLs, errors, name rules.

Nothing here talks to a cloud; everything is pure and cheap, so the task parser can use it.
"""

from __future__ import annotations

import enum
import ipaddress
import re
from dataclasses import dataclass

from skycore.errors import UserError


class StorageError(UserError):
    """A storage problem the user can fix (bad spec, access, name); one paragraph."""


class StorageSpecError(StorageError):
    """A file_mounts storage entry is inconsistent (e.g. COPY without a source)."""


class BucketNameError(StorageError):
    """A bucket name breaks its store's naming rules."""


class StorageAccessError(StorageError):
    """A bucket does not exist, is private to someone else, or its name is taken."""


class StorageMode(enum.StrEnum):
    """How a bucket reaches the nodes."""

    COPY = "COPY"
    MOUNT = "MOUNT"
    MOUNT_CACHED = "MOUNT_CACHED"

    @property
    def is_mount(self) -> bool:
        """True for MOUNT and MOUNT_CACHED."""
        return self is not StorageMode.COPY


class StoreType(enum.StrEnum):
    """A storage service. The value is what users write after ``store:``."""

    S3 = "s3"
    GCS = "gcs"
    AZURE = "azure"

    @property
    def scheme(self) -> str:
        """URL scheme of this store (``s3``, ``gs``, ``azure``)."""
        return {"s3": "s3", "gcs": "gs", "azure": "azure"}[self.value]

    @property
    def config_section(self) -> str:
        """Section of config.yaml holding this store's endpoint and credentials."""
        return {"s3": "aws", "gcs": "gcp", "azure": "azure"}[self.value]

    @classmethod
    def from_scheme(cls, scheme: str) -> StoreType:
        """The store for a URL scheme; KeyError when the scheme is not a store's."""
        return {"s3": cls.S3, "gs": cls.GCS, "azure": cls.AZURE}[scheme]

    @classmethod
    def for_cloud(cls, cloud: str | None) -> StoreType | None:
        """The default store of a cloud (None for docker or no cloud)."""
        return {"aws": cls.S3, "gcp": cls.GCS, "azure": cls.AZURE}.get(cloud or "")


CLOUD_SCHEMES = ("s3", "gs", "azure")
_URL_RE = re.compile(r"^(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*)://(?P<rest>.*)$")


def is_cloud_url(value: str) -> bool:
    """True for anything that looks like ``scheme://...`` (store URL or any other URL)."""
    return bool(_URL_RE.match(value))


@dataclass(frozen=True)
class BucketUrl:
    """A parsed store URL: ``s3://bucket/prefix``, ``gs://bucket/prefix``,
    ``azure://account/container/prefix``."""

    store: StoreType
    bucket: str
    prefix: str = ""
    account: str | None = None

    def __str__(self) -> str:
        head = f"{self.account}/{self.bucket}" if self.account else self.bucket
        return f"{self.store.scheme}://{head}" + (f"/{self.prefix}" if self.prefix else "")

    @property
    def bucket_url(self) -> str:
        """The URL of the whole bucket (no prefix)."""
        return str(BucketUrl(self.store, self.bucket, "", self.account))


def parse_url(url: str, field: str = "source") -> BucketUrl:
    """Parse a store URL or raise StorageSpecError naming ``field``."""
    m = _URL_RE.match(url)
    if not m:
        raise StorageSpecError(f"{field}: '{url}' is not a bucket URL (s3://, gs://, azure://).")
    scheme, rest = m["scheme"].lower(), m["rest"]
    if scheme not in CLOUD_SCHEMES:
        raise StorageSpecError(
            f"{field}: the URL scheme '{scheme}://' in '{url}' is not supported; use s3://BUCKET, "
            "gs://BUCKET or azure://ACCOUNT/CONTAINER."
        )
    store = StoreType.from_scheme(scheme)
    parts = rest.split("/")
    account = None
    if store is StoreType.AZURE:
        if len(parts) < 2 or not parts[0] or not parts[1]:
            raise StorageSpecError(
                f"{field}: '{url}' lacks a container; write azure://ACCOUNT/CONTAINER[/PATH]."
            )
        account, parts = parts[0], parts[1:]
    bucket = parts[0]
    if not bucket:
        raise StorageSpecError(f"{field}: '{url}' has no bucket name; write {scheme}://BUCKET.")
    prefix = "/".join(p for p in parts[1:] if p)
    return BucketUrl(store, bucket, prefix, account)


# ---------------------------------------------------------------------------------------------
# Bucket name rules, one function per store. Each returns None when valid, else the problem.
# ---------------------------------------------------------------------------------------------


def _is_ip(name: str) -> bool:
    try:
        ipaddress.IPv4Address(name)
        return True
    except ValueError:
        return False


def s3_name_problem(name: str) -> str | None:
    """Amazon S3 general-purpose bucket naming rules."""
    if not 3 <= len(name) <= 63:
        return f"must be 3 to 63 characters long (it has {len(name)})"
    if not re.fullmatch(r"[a-z0-9.-]+", name):
        return "may contain only lowercase letters, digits, dots and hyphens"
    if not (name[0].isalnum() and name[-1].isalnum()):
        return "must begin and end with a lowercase letter or digit"
    if ".." in name:
        return "must not contain two adjacent dots"
    if _is_ip(name):
        return "must not be formatted as an IP address"
    if name.startswith(("xn--", "sthree-", "amzn-s3-demo-")):
        return "must not start with 'xn--', 'sthree-' or 'amzn-s3-demo-'"
    if name.endswith(("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")):
        return "must not end with '-s3alias', '--ol-s3', '.mrap', '--x-s3' or '--table-s3'"
    return None


def gcs_name_problem(name: str) -> str | None:
    """Google Cloud Storage bucket naming rules."""
    if not re.fullmatch(r"[a-z0-9._-]+", name):
        return "may contain only lowercase letters, digits, dashes, underscores and dots"
    if not (name[0].isalnum() and name[-1].isalnum()):
        return "must begin and end with a lowercase letter or digit"
    limit = 222 if "." in name else 63
    if not 3 <= len(name) <= limit:
        return f"must be 3 to {limit} characters long (it has {len(name)})"
    if any(not 1 <= len(part) <= 63 for part in name.split(".")):
        return "each dot-separated part must be 1 to 63 characters long"
    if _is_ip(name):
        return "must not be formatted as an IP address"
    if name.startswith("goog"):
        return "must not begin with 'goog'"
    if "google" in name or "g00gle" in name:
        return "must not contain 'google' or close misspellings of it"
    return None


def azure_name_problem(name: str) -> str | None:
    """Azure Blob container naming rules."""
    if not 3 <= len(name) <= 63:
        return f"must be 3 to 63 characters long (it has {len(name)})"
    if not re.fullmatch(r"[a-z0-9-]+", name):
        return "may contain only lowercase letters, digits and hyphens"
    if not (name[0].isalnum() and name[-1].isalnum()):
        return "must begin and end with a lowercase letter or digit"
    if "--" in name:
        return "must not contain two consecutive hyphens"
    return None


_NAME_RULES = {StoreType.S3: s3_name_problem, StoreType.GCS: gcs_name_problem}
_NAME_RULES[StoreType.AZURE] = azure_name_problem
_KIND = {StoreType.S3: "S3 bucket", StoreType.GCS: "GCS bucket", StoreType.AZURE: "Azure container"}


def bucket_name_problem(store: StoreType, name: str) -> str | None:
    """The rule ``name`` breaks for ``store``, or None when it is valid."""
    if not name:
        return "must not be empty"
    return _NAME_RULES[store](name)


def validate_bucket_name(store: StoreType, name: str, field: str = "name") -> None:
    """Raise BucketNameError (naming ``field`` and the rule) when ``name`` is invalid."""
    problem = bucket_name_problem(store, name)
    if problem:
        raise BucketNameError(
            f"{field}: '{name}' is not a valid {_KIND[store]} name: it {problem}. "
            "Choose a name that follows the rule."
        )
