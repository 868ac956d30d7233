"""Shared vocabulary of the storage package: modes, URLs, errors, name-rule helpers.

Nothing here talks to a cloud; everything is pure and cheap, so the task parser can use it.
"""

from __future__ import annotations

import enum
import ipaddress
import re
from dataclasses import dataclass

from skycore.errors import BucketNameError as BucketNameError
from skycore.errors import StorageAccessError as StorageAccessError
from skycore.errors import StorageError as StorageError
from skycore.errors import StorageSpecError as StorageSpecError
from skycore.stores import get_store_class, schemes, store_for_scheme


class StorageMode(enum.StrEnum):
    """How a bucket reaches the nodes."""

    COPY = "COPY"
    MOUNT = "MOUNT"
    MOUNT_CACHED = "MOUNT_CACHED"

    @property
    def is_mount(self) -> bool:
        """True for MOUNT and MOUNT_CACHED."""
        return self is not StorageMode.COPY


_URL_RE = re.compile(r"^(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*)://(?P<rest>.*)$")


def is_cloud_url(value: str) -> bool:
    """True for anything that looks like ``scheme://...`` (store URL or any other URL)."""
    return bool(_URL_RE.match(value))


@dataclass(frozen=True)
class BucketUrl:
    """A parsed store URL: ``scheme://bucket/prefix`` (or ``scheme://account/bucket/prefix``
    for stores whose buckets live in accounts). ``store`` is the store's registered name."""

    store: str
    bucket: str
    prefix: str = ""
    account: str | None = None

    def __str__(self) -> str:

        scheme = get_store_class(self.store).schemes[0]
        head = f"{self.account}/{self.bucket}" if self.account else self.bucket
        return f"{scheme}://{head}" + (f"/{self.prefix}" if self.prefix else "")

    @property
    def bucket_url(self) -> str:
        """The URL of the whole bucket (no prefix)."""
        return str(BucketUrl(self.store, self.bucket, "", self.account))


def parse_url(url: str, field: str = "source") -> BucketUrl:
    """Parse a store URL or raise StorageSpecError naming ``field`` (the URL scheme says the
    store; an unknown scheme lists the registered ones)."""

    m = _URL_RE.match(url)
    if not m:
        known = ", ".join(f"{s}://" for s in schemes())
        raise StorageSpecError(f"{field}: '{url}' is not a bucket URL ({known}).")
    scheme, rest = m["scheme"].lower(), m["rest"]
    cls = store_for_scheme(scheme)
    if cls is None:
        known = ", ".join(f"{s}://BUCKET" for s in schemes())
        raise StorageSpecError(
            f"{field}: the URL scheme '{scheme}://' in '{url}' is not a registered store's; use "
            f"one of {known}."
        )
    account, bucket, prefix = cls.parse_location(url, rest, field)
    return BucketUrl(cls.store_name, bucket, prefix, account)


# ---------------------------------------------------------------------------------------------
# Bucket name rules live in each store module; these apply them.
# ---------------------------------------------------------------------------------------------


def basic_name_problem(name: str, chars: str, chars_text: str) -> str | None:
    """The rules S3, R2 and Azure share, checked in this order: 3 to 63 characters, only
    the characters of the regex class ``chars`` (``chars_text`` says which in words), a
    lowercase letter or digit at both ends."""
    if not 3 <= len(name) <= 63:
        return f"must be 3 to 63 characters long (it has {len(name)})"
    if not re.fullmatch(f"{chars}+", name):
        return f"may contain only {chars_text}"
    if not (name[0].isalnum() and name[-1].isalnum()):
        return "must begin and end with a lowercase letter or digit"
    return None


def is_ip_address(name: str) -> bool:
    """True when ``name`` is formatted as an IPv4 address (most stores forbid that)."""
    try:
        ipaddress.IPv4Address(name)
        return True
    except ValueError:
        return False


def bucket_name_problem(store: str, name: str) -> str | None:
    """The rule ``name`` breaks for ``store``, or None when it is valid."""

    cls = get_store_class(store)
    if not name:
        return "must not be empty"
    return cls.name_problem(name)


def validate_bucket_name(store: str, name: str, field: str = "name") -> None:
    """Raise BucketNameError (naming ``field`` and the rule) when ``name`` is invalid."""

    problem = bucket_name_problem(store, name)
    if problem:
        raise BucketNameError(
            f"{field}: '{name}' is not a valid {get_store_class(store).bucket_label} name: it "
            f"{problem}. Choose a name that follows the rule."
        )
