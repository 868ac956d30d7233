"""The S3 gate's access decision, as S3 makes it: credentials, the bucket's existence
for anonymous callers, authorization by the bucket's ACL, policy and Object Ownership
(harness.emulators.s3_gate.access), the copy source, then the validity of what a request sets
(an ACL when ACLs are disabled, a public ACL or policy under Block Public Access)."""

from __future__ import annotations

from typing import Any

from harness.emulators.s3_gate.access import (
    BUCKET_CONTEXT,
    BucketAccess,
    authorize,
    check_acl_change,
    check_ownership_change,
    check_policy_change,
)
from harness.emulators.s3_gate.acl import AclError
from harness.emulators.s3_gate.actions import S3Detail, operation, refusal
from harness.emulators.s3_gate.features import object_acl_of, unsupported
from harness.emulators.s3_gate.listing import ListingError, listing_params
from harness.emulators.s3_gate.mirror import SettingsCache, object_acl, write_meta
from harness.emulators.s3_gate.post import PostUpload
from harness.emulators.s3_gate.upstream import policy_context
from harness.gate.access_features import AccessFeatures
from harness.gate.protocol import Exchange
from harness.gate.rules import ALLOW, ANONYMOUS, INVALID, Access, Kind, Verdict

NO_SUCH_BUCKET = Verdict(False, 404, "NoSuchBucket", "The specified bucket does not exist")
ACCESS_DENIED = Verdict(False, 403, "AccessDenied", "Access Denied")
LEGACY_REGION = "us-east-1"
"""The region where re-creating one's own bucket succeeds (elsewhere: 409)."""


class S3Decisions:
    """The access decision of the S3 gate protocol (a base class of S3GateProtocol)."""

    settings: SettingsCache
    region: str
    features: AccessFeatures

    def decide(self, ex: Exchange, access: Access, identity: str | None) -> Verdict:
        """S3's decision: credentials, then the bucket's existence for anonymous callers,
        then authorization by the bucket's ACL, policy and ownership (the admin API's
        public flag counts as a public-read policy statement), then the validity of what
        the request sets."""
        if access.kind is Kind.PASS:
            return ALLOW
        if access.kind is Kind.DENY:
            return Verdict(
                False, 403, "AccessDenied", "This endpoint is not available through the gate."
            )
        if identity == INVALID:
            return Verdict(
                False,
                403,
                "InvalidAccessKeyId",
                "The AWS Access Key Id you provided does not exist in our records.",
            )
        op = operation(access)
        if op == "Preflight":
            return ALLOW  # answered from the bucket's CORS rules
        lacking = unsupported(self.features, op, ex.headers)
        if lacking is not None:  # a mechanism the store does not have
            return lacking
        if access.kind is Kind.LIST_BUCKETS:
            if identity is ANONYMOUS:
                return ACCESS_DENIED
            try:
                listing_params(ex.query)
            except ListingError as e:
                return e.verdict
            return ALLOW
        if access.kind is Kind.CREATE_BUCKET:
            return self._decide_create(ex, access, identity)
        known = ex.state.bucket(access.bucket) if access.bucket else None
        if known is None:
            return NO_SUCH_BUCKET if identity is ANONYMOUS else ALLOW  # moto answers 404
        bucket = self.settings.access(access.bucket or "", known)
        verdict = self._authorize(ex, access, identity, bucket, known.public)
        if not verdict.allowed:
            return verdict
        detail = access.detail
        if isinstance(detail, S3Detail):
            if detail.source is not None:
                verdict = self._decide_source(ex, identity, detail.source)
                if not verdict.allowed:
                    return verdict
            if detail.error is not None:
                return detail.error
            return self._check_change(op, bucket, detail.config) or ALLOW
        if isinstance(detail, PostUpload) and detail.acl:
            try:
                write_meta(bucket, identity, {"x-amz-acl": detail.acl})
            except AclError as e:
                return refusal(e)
        return ALLOW

    def _decide_create(self, ex: Exchange, access: Access, identity: str | None) -> Verdict:
        if identity is ANONYMOUS:
            return ACCESS_DENIED
        known = ex.state.bucket(access.bucket)
        if known is not None and known.owner != identity:
            return Verdict(
                False,
                409,
                "BucketAlreadyExists",
                "The requested bucket name is not available. The bucket namespace is shared "
                "by all users of the system. Please select a different name and try again.",
            )
        if known is not None and self.region != LEGACY_REGION:
            return Verdict(
                False,
                409,
                "BucketAlreadyOwnedByYou",
                "Your previous request to create the named bucket succeeded and you already "
                "own it.",
            )
        detail = access.detail
        if isinstance(detail, S3Detail) and detail.error is not None:
            return detail.error
        return ALLOW

    def _authorize(
        self,
        ex: Exchange,
        access: Access,
        identity: str | None,
        bucket: BucketAccess,
        public_flag: bool,
    ) -> Verdict:
        key = access.key
        action = access.action or "s3:*"
        acl = None
        if key is not None and action.lower() not in BUCKET_CONTEXT:
            # an object-level action: decided by the object's owner and ACL
            stored = object_acl(ex.state.object_meta(access.bucket or "", key))
            acl = object_acl_of(self.features, bucket, stored)
        context = policy_context(ex, identity) if bucket.policy is not None else None
        detail = access.detail
        if isinstance(detail, S3Detail) and detail.op == "DeleteObjects" and detail.keys:
            if identity == bucket.owner:
                return ALLOW
            for each in detail.keys:  # S3 authorizes DeleteObject key by key
                verdict = authorize(bucket, identity, "s3:DeleteObject", each, None, context)
                if not verdict.allowed:
                    return verdict
            return ALLOW
        return authorize(bucket, identity, action, key, acl, context, public_flag)

    def _decide_source(
        self, ex: Exchange, identity: str | None, source: tuple[str, str]
    ) -> Verdict:
        name, key = source
        known = ex.state.bucket(name)
        if known is None:
            return NO_SUCH_BUCKET if identity is ANONYMOUS else ALLOW
        bucket = self.settings.access(name, known)
        acl = object_acl_of(self.features, bucket, object_acl(ex.state.object_meta(name, key)))
        context = policy_context(ex, identity) if bucket.policy is not None else None
        return authorize(bucket, identity, "s3:GetObject", key, acl, context, known.public)

    def _check_change(self, op: str, bucket: BucketAccess, config: Any) -> Verdict | None:
        if config is None:
            return None
        if op in ("PutBucketAcl", "PutObjectAcl"):
            return check_acl_change(bucket, config)
        if op == "PutBucketPolicy":
            return check_policy_change(bucket, config)
        if op == "PutBucketOwnershipControls":
            return check_ownership_change(bucket, config)
        return None

    # --- answering and forwarding --------------------------------------------------------
