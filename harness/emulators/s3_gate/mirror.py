"""The S3 access configuration as the gate keeps it: a bucket's settings (BucketAccess and
CORS rules, parsed once per settings version), object ACLs in the gate state's object
metadata (stored only when they differ from the default), and the answers the gate gives
itself for the Get* calls of that configuration. No networking."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from harness.emulators.s3_gate.access import (
    ENFORCED,
    BucketAccess,
    object_acl_for_put,
    ownership_to_xml,
)
from harness.emulators.s3_gate.acl import GRANT_HEADERS, Acl, acl_to_xml, private_acl
from harness.emulators.s3_gate.cors import CorsRule, cors_from_json, cors_to_xml
from harness.gate.protocol import Answer
from harness.gate.rules import Bucket, Verdict

XML = {"Content-Type": "application/xml"}
ACCESS = "access"
"""Bucket settings key of the BucketAccess (its to_json)."""
CORS = "cors"
"""Bucket settings key of the CORS rules (cors_to_json)."""


class SettingsCache:
    """BucketAccess and CORS rules per bucket, parsed again only when the bucket's settings
    object changes (GateState replaces it on every update). Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._access: dict[str, tuple[Mapping[str, Any], BucketAccess]] = {}
        self._cors: dict[str, tuple[Mapping[str, Any], tuple[CorsRule, ...] | None]] = {}

    def access(self, name: str, bucket: Bucket) -> BucketAccess:
        """The bucket's access settings (AWS's defaults for a bucket without any: one the
        admin API made)."""
        hit = self._access.get(name)
        if hit is not None and hit[0] is bucket.settings:
            return hit[1]
        raw = bucket.settings.get(ACCESS)
        parsed = BucketAccess.from_json(raw) if raw else BucketAccess.new(bucket.owner, {})
        with self._lock:
            self._access[name] = (bucket.settings, parsed)
        return parsed

    def cors(self, name: str, bucket: Bucket) -> tuple[CorsRule, ...] | None:
        """The bucket's CORS rules, None without a configuration."""
        hit = self._cors.get(name)
        if hit is not None and hit[0] is bucket.settings:
            return hit[1]
        raw = bucket.settings.get(CORS)
        rules = cors_from_json(raw) if raw else None
        with self._lock:
            self._cors[name] = (bucket.settings, rules)
        return rules

    def forget(self, name: str) -> None:
        """Drop a deleted bucket's entries."""
        with self._lock:
            self._access.pop(name, None)
            self._cors.pop(name, None)


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


def effective_object_acl(bucket: BucketAccess, meta: Mapping[str, Any] | None) -> Acl:
    """The ACL GetObjectAcl shows: the stored one, or the bucket owner's private ACL."""
    stored = object_acl(meta)
    if stored is None or bucket.ownership == ENFORCED:
        return private_acl(bucket.owner)
    return stored


def config_answer(
    op: str, bucket: BucketAccess, rules: tuple[CorsRule, ...] | None
) -> Answer | Verdict | None:
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
    if op == "GetBucketCors":
        if not rules:
            return Verdict(
                False, 404, "NoSuchCORSConfiguration", "The CORS configuration does not exist"
            )
        return Answer(200, dict(XML), cors_to_xml(rules))
    return None
