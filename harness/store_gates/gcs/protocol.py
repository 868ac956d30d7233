"""The GCS gate protocol (runs inside the gate): the hooks the gate calls, wiring the
package's roles: JSON API (and XML-style) requests classified into GCS permissions
(``requests``), bearer tokens and signed URLs V4 as identities (``signatures``), access
decided by GCS's model (``access``: IAM, uniform bucket-level access, public access
prevention, object ACLs), bucket IAM policies and object ACLs answered by the gate and
denials as GCS JSON (or XML) errors (``answers``), bucket ownership, access settings,
resumable uploads and write events recorded from responses (``bookkeeping``)."""

from __future__ import annotations

import json
from collections.abc import Mapping

from harness.gate import rules
from harness.gate.corrupt import wrong_headers, wrong_json_digests
from harness.gate.protocol import Corrupted, Exchange, GateProtocol, UpstreamResponse
from harness.gate.rules import ANONYMOUS, INVALID, Access, Kind, Verdict
from harness.gate.state import GateState
from harness.store_gates.gcs import access as ga
from harness.store_gates.gcs.answers import GcsAnswers
from harness.store_gates.gcs.requests import (
    GcsDetail,
    classify_gcs,
    classify_gcs_batch,
    detail_of,
    gcs_bucket_from_insert,
    json_object,
)
from harness.store_gates.gcs.signatures import GcsSignatures
from harness.store_gates.gcs.signed_urls import is_signed

__all__ = ["GcsGateProtocol", "classify_gcs", "classify_gcs_batch", "gcs_bucket_from_insert"]

_OBJ = "storage.objects."
_BKT = "storage.buckets."


def _object_name(body: bytes | None) -> str | None:
    """The ``name`` of the object resource a JSON upload answers with."""
    try:
        data = json.loads(body or b"")
    except ValueError:
        return None
    name = data.get("name") if isinstance(data, dict) else None
    return name if isinstance(name, str) and name else None


class GcsGateProtocol(GcsSignatures, GcsAnswers, GateProtocol):
    """The GCS JSON API as fake-gcs-server serves it, with GCS's access model on top.
    A resumable upload's id is its credential, as in GCS."""

    def __init__(self, tokens: Mapping[str, str]) -> None:
        super().__init__()
        self.tokens = dict(tokens)
        """owner -> bearer token"""

    def classify(self, ex: Exchange) -> tuple[Access, str | None]:
        access = classify_gcs(ex.method, ex.path, ex.headers)
        signed = is_signed(ex.query)
        identity = self.caller(ex)
        if access.needs_body:
            body = ex.read_body()
            if access.kind is Kind.CREATE_BUCKET:
                access.bucket = gcs_bucket_from_insert(body)
                access.detail = GcsDetail(body=json_object(body))
                access.detail.predefined = ex.query.get("predefinedAcl", [None])[0]
            elif access.sub or access.bucket is None:
                access = classify_gcs_batch(body)
            else:
                detail_of(access).body = json_object(body)
        detail = detail_of(access)
        detail.xml = detail.xml or signed
        if detail.predefined or (access.key and "acl" in detail.body):
            detail.sets_acl = True
        upload_id = ex.query.get("upload_id", [None])[0]
        started = ex.state.upload(upload_id) if upload_id else None
        if started is not None and started[0] == access.bucket:
            identity = started[1]
        return access, identity

    # --- decision ---------------------------------------------------------------------------

    def decide(self, ex: Exchange, access: Access, identity: str | None) -> Verdict:
        """GCS's access model instead of the generic owner rules: the bucket's IAM policy,
        uniform bucket-level access, public access prevention and object ACLs give the
        caller the permission the request needs (``Access.action``), every source object
        of a copy included; a batch needs every part allowed. Refusals are GCS's (403
        forbidden, 400 for ACL calls under uniform access, 412 for public grants under
        prevention, 404 for the IAM policy of an unknown bucket)."""
        if access.sub and identity != INVALID:
            for part in access.sub:
                verdict = self.decide(ex, part, identity)
                if not verdict.allowed:
                    return verdict
            return rules.ALLOW
        if access.kind in (Kind.PASS, Kind.DENY, Kind.LIST_BUCKETS) or identity == INVALID:
            return rules.decide(access, identity, ex.state.buckets())
        if access.kind is Kind.CREATE_BUCKET:
            verdict = rules.decide(access, identity, ex.state.buckets())
            if verdict.allowed:
                detail = detail_of(access)
                try:
                    ga.new_bucket_settings(
                        detail.body,
                        detail.predefined,
                        ex.query.get("predefinedDefaultObjectAcl", [None])[0],
                    )
                except ga.AccessError as e:
                    return e.verdict()
            return verdict
        try:
            return self._decide(ex, access, identity)
        except ga.AccessError as e:
            return e.verdict()

    def _decide(self, ex: Exchange, access: Access, identity: str | None) -> Verdict:
        detail = detail_of(access)
        state = ex.state
        for bucket, key in detail.sources:
            verdict = self._check(state, bucket, key, _OBJ + "get", identity)
            if not verdict.allowed:
                return verdict
        known = self.bucket_access(state, access.bucket)
        if known is None:
            if detail.iam:
                return Verdict(False, 404, "notFound", "The specified bucket does not exist.")
            return rules.decide(Access(access.kind, access.bucket), identity, {})
        if detail.iam == "test":
            return rules.ALLOW  # anyone may ask what they may do
        if known.uniform and (detail.acl_call or detail.sets_acl):
            what = "access legacy ACLs" if access.kind is Kind.READ else "update legacy ACLs"
            raise ga.uniform_acl_error(what)
        verdict = self._check(state, access.bucket, access.key, access.action, identity, known)
        config = detail.body.get("iamConfiguration")
        if verdict.allowed and config is not None and access.action == _BKT + "update":
            ga.iam_configuration(config, known.uniform, known.prevention)  # 400 if invalid
        if not verdict.allowed or not (detail.sets_acl or detail.acl_call):
            return verdict
        if detail.acl_call in (None, "set", "delete") and (access.key or detail.predefined):
            detail.new_acl = self.new_acl(state, access, detail, identity, known)
            ga.check_acl(known, detail.new_acl)
        if access.event is not None:
            return verdict  # the writer of a new object owns it and may give it any ACL
        return self._check(state, access.bucket, access.key, _OBJ + "setIamPolicy", identity, known)

    def _check(
        self,
        state: GateState,
        bucket: str | None,
        key: str | None,
        permission: str | None,
        identity: str | None,
        known: ga.BucketAccess | None = None,
    ) -> Verdict:
        known = known or self.bucket_access(state, bucket)
        if known is None or permission is None:
            return rules.decide(Access(Kind.READ, bucket), identity, {})
        meta = state.object_meta(bucket or "", key) if key and identity != known.owner else None
        acl = meta.get("acl") if meta else None
        if known.allows(permission, identity, acl):
            return rules.ALLOW
        who = "Anonymous caller" if identity is ANONYMOUS else ga.EMAILS.get(identity or "", "")
        what = "object" if permission.startswith(_OBJ) and key else "bucket"
        return Verdict(
            False,
            403,
            "forbidden",
            f"{who} does not have {permission} access to the Google Cloud Storage {what}. "
            f"Permission '{permission}' denied on resource (or it may not exist).",
        )

    # --- the corrupt fault ------------------------------------------------------------------

    def corrupt_answer(
        self, ex: Exchange, access: Access, up: UpstreamResponse, body: bytes | None
    ) -> Corrupted | None:
        """rclone takes an uploaded object's MD5 from ``md5Hash`` in the JSON answer of the
        upload (no HEAD after it); JSON metadata reads carry ``md5Hash`` and ``crc32c``,
        media reads and the XML API the ``x-goog-hash`` header (and an MD5 ETag)."""
        headers = wrong_headers(up.header, etags=("ETag",), lists=("x-goog-hash",))
        data = wrong_json_digests(body, ("md5Hash", "crc32c")) if body else None
        if not headers and data is None:
            return None
        return Corrupted(headers, data, None if access.key else _object_name(body))

    def corrupt_reads_body(self, ex: Exchange, access: Access) -> bool:
        return ex.path.startswith("/storage/v1/") and "media" not in ex.query.get("alt", [])
