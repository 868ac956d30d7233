"""The S3 gate protocol (runs inside the gate): the hooks the gate calls, wiring the
package's roles: requests classified into IAM actions (``requests``), callers identified by
access key (``signatures``, with ``post`` for form uploads), access decided with S3's model
(``access``, pure) from the configuration the real API calls set, kept in the gate state
(``bookkeeping``, ``mirror``); the configuration's Get* calls and errors answered in
S3's terms (``answers``)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from html import unescape
from typing import ClassVar

from harness.gate.access_features import S3_FEATURES, AccessFeatures
from harness.gate.corrupt import wrong_headers, wrong_xml_etags
from harness.gate.errors import StoreError
from harness.gate.protocol import Corrupted, Exchange, GateProtocol, UpstreamResponse
from harness.gate.rules import ALLOW, ANONYMOUS, INVALID, Access, Kind, Verdict
from harness.store_gates.s3.access import (
    ACCESS_DENIED,
    BUCKET_CONTEXT,
    NO_SUCH_BUCKET,
    BucketAccess,
    PublicAccessBlock,
    authorize,
    check_change,
    ownership_from_xml,
)
from harness.store_gates.s3.acl import AclError, acl_from_headers, acl_from_xml
from harness.store_gates.s3.answers import S3Answers
from harness.store_gates.s3.bookkeeping import MIRRORED
from harness.store_gates.s3.features import new_bucket, object_acl_of, unsupported
from harness.store_gates.s3.keys import AccessKey
from harness.store_gates.s3.listing import ListingError, listing_params
from harness.store_gates.s3.mirror import (
    SettingsCache,
    effective_object_acl,
    object_acl,
    write_meta,
)
from harness.store_gates.s3.policy import BucketPolicy
from harness.store_gates.s3.post import PostUpload, read_post_upload
from harness.store_gates.s3.requests import (
    BUCKET_ROUTES,
    OBJECT_ROUTES,
    S3Detail,
    Table,
    classify_s3,
    operation,
)
from harness.store_gates.s3.signatures import S3Signatures
from harness.store_gates.s3.upstream import (
    GATE_KEY,
    UPSTREAM_REGION,
    gate_signature,
    policy_context,
)

__all__ = ["GATE_KEY", "S3GateProtocol", "classify_s3"]

_KEY = re.compile(rb"<Key>(.*?)</Key>", re.S)
PRESIGNED_KEYS = frozenset(("x-amz-credential", "awsaccesskeyid"))
"""Query keys (lower case) of a presigned URL: the caller's own signature goes upstream."""
LEGACY_REGION = "us-east-1"
"""The region where re-creating one's own bucket succeeds (elsewhere: 409)."""


class S3GateProtocol(S3Signatures, S3Answers, GateProtocol):
    """The S3 API as moto serves it, with the access keys of one S3-compatible service and
    the access mechanisms it has (``features``: S3's, or fewer)."""

    upstream_region = UPSTREAM_REGION
    bucket_routes: ClassVar[Table] = BUCKET_ROUTES
    """How requests on a bucket are classified (a subclass may add rows in front)."""
    object_routes: ClassVar[Table] = OBJECT_ROUTES
    """How requests on an object are classified (a subclass may add rows in front)."""

    def __init__(
        self,
        keys: Mapping[str, AccessKey],
        region: str,
        features: AccessFeatures = S3_FEATURES,
    ) -> None:
        self.keys = dict(keys)
        """owner -> access key"""
        self.region = region
        """The region clients sign for."""
        self.features = features
        """The store's access mechanisms: the gate enforces these and answers the others'
        calls with the store's error."""
        self.settings = SettingsCache(features)
        S3Answers.__init__(self)

    # --- classification --------------------------------------------------------------------

    def classify(self, ex: Exchange) -> tuple[Access, str | None]:
        access = classify_s3(
            ex.method, ex.path, ex.headers, (self.bucket_routes, self.object_routes)
        )
        identity = self.identity(ex.headers, ex.query)
        detail = access.detail
        if not isinstance(detail, S3Detail):
            return access, identity
        if detail.op == "PostObject":
            ctype = (ex.header("content-type") or "").lower()
            if ctype.startswith("multipart/form-data") and access.bucket:
                post = read_post_upload(ex, access.bucket, self.keys)
                write = Access(
                    Kind.WRITE,
                    access.bucket,
                    post.key,
                    event="put",
                    action="s3:PutObject",
                    detail=post,
                )
                return write, post.identity
            access.event, access.action, detail.op = None, "s3:*", "PostBucket"
        if identity != INVALID:
            try:
                self._prepare(ex, access, identity, detail)
            except StoreError as e:
                detail.error = e.verdict()
        return access, identity

    def _access_of(self, ex: Exchange, name: str | None) -> BucketAccess | None:
        known = ex.state.bucket(name) if name else None
        return None if known is None else self.settings.access(name or "", known)

    def _prepare(
        self, ex: Exchange, access: Access, identity: str | None, detail: S3Detail
    ) -> None:
        """Read and parse what the operation carries (small configuration bodies, ACL
        headers) before the decision; S3's refusals go to ``detail.error``."""
        op = detail.op
        if op == "CreateBucket":
            if identity is not None:
                detail.config = new_bucket(self.features, identity, ex.headers)
            return
        if op == "DeleteObjects":
            detail.keys = tuple(unescape(m.decode()) for m in _KEY.findall(ex.read_body()))
            return
        bucket = self._access_of(ex, access.bucket)
        if bucket is None:
            return
        if op in ("PutObject", "CopyObject", "CreateMultipartUpload"):
            detail.config, detail.meta = write_meta(bucket, identity, ex.headers)
        elif op == "PutBucketAcl":
            acl = acl_from_headers(ex.headers, bucket.owner, bucket.owner)
            detail.config = acl or acl_from_xml(ex.read_body(), bucket.owner)
        elif op == "PutObjectAcl":
            meta = ex.state.object_meta(access.bucket or "", access.key or "")
            owner = effective_object_acl(bucket, meta, self.features).owner
            acl = acl_from_headers(ex.headers, owner, bucket.owner)
            detail.config = acl or acl_from_xml(ex.read_body(), owner)
        elif op == "PutBucketPolicy":
            text = ex.read_body().decode("utf-8", "replace")
            detail.config = BucketPolicy.parse(text, access.bucket or "")
        elif op == "PutBucketOwnershipControls":
            detail.config = ownership_from_xml(ex.read_body())
        elif op == "PutPublicAccessBlock":
            detail.config = PublicAccessBlock.from_xml(ex.read_body())

    # --- decision ---------------------------------------------------------------------------

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
            return check_change(op, bucket, detail.config) or ALLOW
        if isinstance(detail, PostUpload) and detail.acl:
            try:
                write_meta(bucket, identity, {"x-amz-acl": detail.acl})
            except AclError as e:
                return e.verdict()
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

    # --- forwarding -----------------------------------------------------------------------

    def upstream_target(self, ex: Exchange, access: Access, identity: str | None) -> str:
        """ListBuckets goes upstream whole (the gate filters, then paginates)."""
        if access.kind is Kind.LIST_BUCKETS:
            return "/"
        return ex.path

    def upstream_headers(
        self, ex: Exchange, access: Access, identity: str | None
    ) -> dict[str, str]:
        """A signature for a region other than moto's has its scope rewritten to moto's
        region (moto checks nothing else). A request without one (anonymous, a POST form),
        or one the gate sends to another path (ListBuckets: always ``/``), is forwarded
        signed with the gate's own key: never as the bucket owner, the gate has decided
        access already, and a server that checks signatures accepts it."""
        auth = ex.header("authorization")
        target = self.upstream_target(ex, access, identity)
        if target != ex.path:  # the client signed another path: the gate signs its own
            return gate_signature(ex.method, ex.header("host") or "localhost", target, ex.headers)
        if auth:
            scope = f"/{self.region}/s3/"
            if self.region != self.upstream_region and scope in auth:
                return {"Authorization": auth.replace(scope, f"/{self.upstream_region}/s3/", 1)}
            return {}
        if any(k.lower() in PRESIGNED_KEYS for k in ex.query):
            return {}
        return gate_signature(ex.method, ex.header("host") or "localhost", ex.path, ex.headers)

    def wants_whole_response(self, ex: Exchange, access: Access) -> bool:
        op = operation(access)
        if op == "CreateMultipartUpload":
            return isinstance(access.detail, S3Detail) and access.detail.meta is not None
        return op in MIRRORED

    def corrupt_answer(
        self, ex: Exchange, access: Access, up: UpstreamResponse, body: bytes | None
    ) -> Corrupted | None:
        """rclone takes an object's MD5 from the ETag of its HEAD (of the PUT answer with
        ``no_head``), or from the ``md5chksum`` metadata it sets on multipart uploads; a
        CopyObject or CompleteMultipartUpload answer has its ETag in XML. The additional
        checksums (x-amz-checksum-*) stay right: rclone does not read them."""
        headers = wrong_headers(
            up.header, etags=("ETag",), digests=("Content-MD5", "x-amz-meta-md5chksum")
        )
        xml = wrong_xml_etags(body) if body else None
        return Corrupted(headers, xml) if headers or xml is not None else None
