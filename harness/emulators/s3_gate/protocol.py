"""The S3 gate protocol (runs inside the gate): requests classified into IAM actions
(``actions``), callers identified by access key (``signatures``, ``post``), access decided
with S3's model (``decide``) from the configuration the real API calls set, mirrored into
the gate state (``bookkeeping``, ``mirror``); CORS preflights and the configuration's Get*
calls answered by the gate; denials as S3's XML errors. (Module names: this package,
harness.emulators.s3_gate.)"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import partial
from html import unescape
from urllib.parse import urlsplit
from xml.sax.saxutils import escape

from harness.emulators.s3_gate import cors as s3_cors
from harness.emulators.s3_gate.access import BucketAccess, PublicAccessBlock, ownership_from_xml
from harness.emulators.s3_gate.acl import AclError, acl_from_headers, acl_from_xml, acl_to_xml
from harness.emulators.s3_gate.actions import MIRRORED, S3Detail, classify_s3, operation, refusal
from harness.emulators.s3_gate.bookkeeping import S3Bookkeeping
from harness.emulators.s3_gate.decide import NO_SUCH_BUCKET, S3Decisions
from harness.emulators.s3_gate.features import new_bucket
from harness.emulators.s3_gate.mirror import (
    CONFIG_ANSWERS,
    SettingsCache,
    change_access,
    config_answer,
    effective_object_acl,
    write_meta,
)
from harness.emulators.s3_gate.policy import BucketPolicy, PolicyError
from harness.emulators.s3_gate.post import read_post_upload
from harness.emulators.s3_gate.signatures import SIGV2_KEY, SIGV4_KEY, AccessKey, S3Signatures
from harness.emulators.s3_gate.upstream import (
    GATE_KEY,
    UPSTREAM_REGION,
    gate_signature,
    quoted_key,
    upstream_size,
)
from harness.gate.access_features import S3_FEATURES, AccessFeatures
from harness.gate.corrupt import wrong_headers, wrong_xml_etags
from harness.gate.protocol import Answer, Corrupted, Exchange, GateProtocol, UpstreamResponse
from harness.gate.rules import ANONYMOUS, INVALID, Access, Kind, Verdict, header

__all__ = ["GATE_KEY", "S3GateProtocol", "classify_s3"]

_KEY = re.compile(rb"<Key>(.*?)</Key>", re.S)


GATE_CONFIG_WRITES = MIRRORED
"""The access configuration's calls the gate answers from its state alone, never sending
them to the server behind it: a server that does not know a sub-resource such as
``?publicAccessBlock`` takes ``DELETE /bucket?publicAccessBlock`` for DeleteBucket (rclone
serve s3 does), and ``PUT /bucket/key?acl`` for a PutObject. The object ACL calls ask the
server only whether the object exists (a HEAD signed with the gate's key). They are the calls
whose outcome the gate keeps (``actions.MIRRORED``): one list."""
GATE_ANSWERS = (
    frozenset(("Preflight", "PutBucketPolicy", "DeleteBucketPolicy"))
    | CONFIG_ANSWERS
    | GATE_CONFIG_WRITES
)
"""Operations the gate answers itself (CORS preflights, the configuration it keeps):
:meth:`S3GateProtocol.answer` answers these and only these."""
NO_SUCH_KEY = Verdict(False, 404, "NoSuchKey", "The specified key does not exist.")
PRESIGNED_KEYS = frozenset(("x-amz-credential", "awsaccesskeyid"))
"""Query keys (lower case) of a presigned URL: the caller's own signature goes upstream."""


class S3GateProtocol(S3Signatures, S3Decisions, S3Bookkeeping, GateProtocol):
    """The S3 API as moto serves it, with the access keys of one S3-compatible service and
    the access mechanisms it has (``features``: S3's, or fewer)."""

    upstream_region = UPSTREAM_REGION

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
        S3Bookkeeping.__init__(self)

    # --- who and what --------------------------------------------------------------------

    def identity(self, headers: Mapping[str, str], query: Mapping[str, list[str]]) -> str | None:
        """The account behind a request (header or presigned URL), ANONYMOUS or INVALID."""
        auth = header(headers, "Authorization")
        key: str | None = None
        if auth:
            match = SIGV4_KEY.search(auth) or SIGV2_KEY.match(auth)
            if not match:
                return INVALID
            key = match.group(1)
        else:
            lowered = {k.lower(): v for k, v in query.items()}
            if "x-amz-credential" in lowered:
                key = lowered["x-amz-credential"][0].split("/", 1)[0]
            elif "awsaccesskeyid" in lowered:
                key = lowered["awsaccesskeyid"][0]
        if key is None:
            return ANONYMOUS
        return next((o for o, k in self.keys.items() if k.access_key_id == key), INVALID)

    def classify(self, ex: Exchange) -> tuple[Access, str | None]:
        access = classify_s3(ex.method, ex.path, ex.headers)
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
            except (AclError, PolicyError, s3_cors.CorsError) as e:
                detail.error = refusal(e)
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
        elif op == "PutBucketCors":
            detail.config = s3_cors.parse_cors(ex.read_body())

    # --- answering and forwarding --------------------------------------------------------

    def answers(self, access: Access) -> bool:
        """Whether :meth:`answer` may answer (its operation is one of GATE_ANSWERS)."""
        return operation(access) in GATE_ANSWERS

    def answer(self, ex: Exchange, access: Access, identity: str | None) -> Answer | None:
        """CORS preflights, and the access configuration the gate keeps (ACLs, policy,
        ownership, Block Public Access, CORS) read or set without moto."""
        op = operation(access)
        if op not in GATE_ANSWERS:  # keeps answers() and answer() in step
            return None
        known = ex.state.bucket(access.bucket) if access.bucket else None
        if op == "Preflight":
            if known is None:
                return self._error_answer(ex, access, NO_SUCH_BUCKET)
            status, headers, body = s3_cors.preflight(
                self.settings.cors(access.bucket or "", known),
                ex.header("origin"),
                ex.header("access-control-request-method"),
                ex.header("access-control-request-headers"),
                resource_type="OBJECT" if access.key else "BUCKET",
            )
            return Answer(status, headers, body)
        if known is None or not isinstance(access.detail, S3Detail):
            return None
        name = access.bucket or ""
        bucket = self.settings.access(name, known)
        if op in GATE_CONFIG_WRITES:
            return self._config_write(ex, access, op, bucket)
        if op in ("PutBucketPolicy", "DeleteBucketPolicy"):
            policy = access.detail.config if op == "PutBucketPolicy" else None
            change_access(
                ex.state,
                name,
                bucket.owner,
                partial(BucketAccess.with_policy, policy=policy),
                self.features,
            )
            return Answer(204, {}, b"")
        # no CORS headers here: response_headers() reaches forwarded responses only
        got = config_answer(op, bucket, self.settings.cors(name, known))
        if isinstance(got, Verdict):
            return self._error_answer(ex, access, got)
        return got

    def _config_write(self, ex: Exchange, access: Access, op: str, bucket: BucketAccess) -> Answer:
        """A configuration call of GATE_CONFIG_WRITES answered from the gate state (as S3
        answers it: 200 for Put and Get, 204 for Delete)."""
        name, key = access.bucket or "", access.key or ""
        if key and upstream_size(ex, f"/{name}/{quoted_key(ex.path)}") < 0:
            return self._error_answer(ex, access, NO_SUCH_KEY)
        if op == "GetObjectAcl":
            acl = effective_object_acl(bucket, ex.state.object_meta(name, key), self.features)
            return Answer(200, {"Content-Type": "application/xml"}, acl_to_xml(acl))
        config = access.detail.config if isinstance(access.detail, S3Detail) else None
        self.apply_config(ex, op, name, key, bucket, config)
        return Answer(204 if op.startswith("Delete") else 200, {}, b"")

    def _error_answer(self, ex: Exchange, access: Access, verdict: Verdict) -> Answer:
        ctype, body = self.error_body(ex, verdict, access)
        return Answer(verdict.status, {"Content-Type": ctype}, body)

    def upstream_target(self, ex: Exchange, access: Access, identity: str | None) -> str:
        """ListBuckets goes upstream whole (the gate filters, then paginates)."""
        if access.kind is Kind.LIST_BUCKETS:
            return "/"
        return ex.path

    def response_headers(
        self, ex: Exchange, access: Access, identity: str | None
    ) -> dict[str, str]:
        """S3's CORS headers on an actual request with an Origin.

        The gate calls this for forwarded responses only: the answers the gate gives itself
        (:meth:`answer`: the configuration's Get* calls; preflights carry their own) and its
        denials go out without them, where S3 would add them when a rule matches. A browser
        reading those answers cross-origin is not modelled."""
        origin = ex.headers.get("origin")
        if not origin or not access.bucket:
            return {}
        known = ex.state.bucket(access.bucket)
        if known is None:
            return {}
        rules = self.settings.cors(access.bucket, known)
        return s3_cors.response_headers(rules, origin, ex.method) if rules else {}

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

    # --- errors --------------------------------------------------------------------------

    def fault_verdict(self, status: int) -> Verdict:
        codes = {
            503: ("SlowDown", "Please reduce your request rate."),
            500: ("InternalError", "We encountered an internal error. Please try again."),
            403: ("AccessDenied", "Access Denied"),
        }
        code, message = codes.get(
            status, ("ServiceUnavailable", "Service is unable to handle request.")
        )
        return Verdict(False, status, code, message)

    def malformed_verdict(self, message: str) -> Verdict:
        return Verdict(False, 400, "BadRequest", "An error occurred when parsing the HTTP request.")

    def error_body(self, ex: Exchange, verdict: Verdict, access: Access) -> tuple[str, bytes]:
        resource = urlsplit(ex.path).path
        named = f"<BucketName>{escape(access.bucket)}</BucketName>" if access.bucket else ""
        xml = (
            '<?xml version="1.0" encoding="UTF-8"?>\n<Error>'
            f"<Code>{verdict.code}</Code><Message>{escape(verdict.message)}</Message>"
            + named
            + f"<Resource>{escape(resource)}</Resource>"
            "<RequestId>skycore-gate</RequestId></Error>"
        )
        return "application/xml", xml.encode()
