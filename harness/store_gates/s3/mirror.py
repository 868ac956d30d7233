"""The S3 access configuration as the gate keeps it: a bucket's settings (BucketAccess,
parsed once per settings version), object ACLs in the gate state's object
metadata (stored only when they differ from the default), and the answers the gate gives
itself for the Get* calls of that configuration. No networking."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from harness.gate.access_features import S3_FEATURES, AccessFeatures
from harness.gate.protocol import Answer
from harness.gate.rules import Bucket, Verdict
from harness.gate.state import GateState
from harness.store_gates.s3.access import (
    ENFORCED,
    BucketAccess,
    object_acl_for_put,
    ownership_to_xml,
)
from harness.store_gates.s3.acl import GRANT_HEADERS, Acl, acl_to_xml, private_acl
from harness.store_gates.s3.features import new_bucket, object_acl_of

XML = {"Content-Type": "application/xml"}
ACCESS = "access"
"""Bucket settings key of the BucketAccess (its to_json)."""


class SettingsCache:
    """BucketAccess per bucket, parsed again only when the gate state's
    Bucket changes (GateState makes a new one on every change: of settings, owner or
    public flag). Thread-safe. ``features``: the store's access mechanisms (the defaults
    of a bucket without stored settings)."""

    def __init__(self, features: AccessFeatures = S3_FEATURES) -> None:
        self.features = features
        self._lock = threading.Lock()
        self._access: dict[str, tuple[Bucket, BucketAccess]] = {}

    def access(self, name: str, bucket: Bucket) -> BucketAccess:
        """The bucket's access settings: its owner is ``bucket.owner`` always; without
        stored settings (a bucket the admin API made or gave to another account), AWS's
        defaults for a new bucket of that owner (the store's: :attr:`features`)."""
        hit = self._access.get(name)
        if hit is not None and hit[0] is bucket:
            return hit[1]
        parsed = access_of(bucket, self.features)
        with self._lock:
            self._access[name] = (bucket, parsed)
        return parsed

    def forget(self, name: str) -> None:
        """Drop a deleted bucket's entry."""
        with self._lock:
            self._access.pop(name, None)


def access_of(bucket: Bucket, features: AccessFeatures = S3_FEATURES) -> BucketAccess:
    """The BucketAccess of a gate-state bucket (not cached: see SettingsCache)."""
    return access_from_settings(bucket.owner, bucket.settings, features)


def access_from_settings(
    owner: str, settings: Mapping[str, Any], features: AccessFeatures = S3_FEATURES
) -> BucketAccess:
    """The BucketAccess stored in a bucket's settings, owned by ``owner`` (the gate
    state's owner wins over the one stored); the defaults of a new bucket of the store
    (``features``) without any."""
    raw = settings.get(ACCESS)
    if not raw:
        return new_bucket(features, owner)
    parsed = BucketAccess.from_json(raw)
    return parsed if parsed.owner == owner else replace(parsed, owner=owner)


def change_access(
    state: GateState,
    name: str,
    owner: str,
    change: Callable[[BucketAccess], BucketAccess],
    features: AccessFeatures = S3_FEATURES,
) -> None:
    """Apply ``change`` to bucket ``name``'s access settings atomically (read, changed and
    written under the state's lock: two configuration calls cannot lose each other's
    change). ``owner`` is the owner the caller's decision saw: if the bucket has changed
    hands since, nothing is written."""

    def apply(settings: dict[str, Any]) -> dict[str, Any]:
        settings[ACCESS] = change(access_from_settings(owner, settings, features)).to_json()
        return settings

    state.modify_settings(name, apply, owner=owner)


def has_acl_headers(headers: Mapping[str, str]) -> bool:
    """Whether a request sets an ACL by header (canned or grants)."""
    return "x-amz-acl" in headers or any(h in headers for h in GRANT_HEADERS)


def write_meta(
    bucket: BucketAccess, writer: str | None, headers: Mapping[str, str]
) -> tuple[Acl | None, dict[str, Any] | None]:
    """(ACL, object metadata) of an object that ``writer`` creates with these headers: the
    metadata is None when the object has the default ACL (private, the bucket owner's),
    so that the state file stays small. Raises AclError as S3 refuses the ACL."""
    if writer == bucket.owner and not has_acl_headers(headers):
        return None, None  # the data path: the owner writing with no ACL
    acl = object_acl_for_put(bucket, writer, headers)
    if bucket.ownership == ENFORCED or acl == private_acl(bucket.owner):
        return acl, None
    return acl, {"acl": acl.to_json()}


def acl_meta(bucket: BucketAccess, acl: Acl) -> dict[str, Any] | None:
    """The object metadata for an object ACL set by PutObjectAcl (None: the default)."""
    if acl == private_acl(bucket.owner):
        return None
    return {"acl": acl.to_json()}


def object_acl(meta: Mapping[str, Any] | None) -> Acl | None:
    """The ACL in an object's metadata (None: the default, private to the bucket owner)."""
    if not meta or "acl" not in meta:
        return None
    return Acl.from_json(meta["acl"])


def effective_object_acl(
    bucket: BucketAccess, meta: Mapping[str, Any] | None, features: AccessFeatures = S3_FEATURES
) -> Acl:
    """The ACL GetObjectAcl shows: the stored one, or the bucket owner's private ACL (with
    canned ACLs: the bucket's)."""
    stored = object_acl_of(features, bucket, object_acl(meta))
    if stored is None or bucket.ownership == ENFORCED:
        return private_acl(bucket.owner)
    return stored


CONFIG_ANSWERS = frozenset(
    (
        "GetBucketAcl",
        "GetBucketPolicy",
        "GetBucketPolicyStatus",
        "GetBucketOwnershipControls",
        "GetPublicAccessBlock",
    )
)
"""The operations :func:`config_answer` answers."""


def config_answer(op: str, bucket: BucketAccess) -> Answer | Verdict | None:
    """The gate's own answer to a Get* call of the access configuration (a Verdict for
    S3's 404 when the configuration does not exist), None for other operations."""
    if op == "GetBucketAcl":
        return Answer(200, dict(XML), acl_to_xml(bucket.acl))
    if op == "GetBucketPolicy":
        if bucket.policy is None:
            return Verdict(False, 404, "NoSuchBucketPolicy", "The bucket policy does not exist")
        return Answer(200, {"Content-Type": "application/json"}, bucket.policy.text.encode())
    if op == "GetBucketPolicyStatus":
        public = bucket.policy is not None and bucket.policy.is_public()
        body = (
            '<?xml version="1.0" encoding="UTF-8"?>\n<PolicyStatus '
            'xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
            f"<IsPublic>{str(public).upper()}</IsPublic></PolicyStatus>"
        )
        return Answer(200, dict(XML), body.encode())
    if op == "GetBucketOwnershipControls":
        if not bucket.ownership_set:
            return Verdict(
                False,
                404,
                "OwnershipControlsNotFoundError",
                "The bucket ownership controls were not found",
            )
        return Answer(200, dict(XML), ownership_to_xml(bucket.ownership))
    if op == "GetPublicAccessBlock":
        if not bucket.block.configured:
            return Verdict(
                False,
                404,
                "NoSuchPublicAccessBlockConfiguration",
                "The public access block configuration was not found",
            )
        return Answer(200, dict(XML), bucket.block.to_xml())
    return None
