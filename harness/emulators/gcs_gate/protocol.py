"""The GCS gate protocol (runs inside the gate): JSON API (and XML-style) requests
classified into GCS permissions, bearer tokens and signed URLs V4 as identities, access
decided by GCS's model (harness.emulators.gcs_gate.access: IAM, uniform bucket-level access,
public access prevention, object ACLs), bucket IAM policies answered by the gate (the
emulator has none), denials as GCS JSON (or XML) errors, bucket ownership, access settings,
resumable uploads and write events recorded from responses
(harness.emulators.gcs_gate.bookkeeping)."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from typing import Any
from urllib.error import HTTPError
from urllib.parse import quote
from urllib.request import urlopen
from xml.sax.saxutils import escape

from harness.emulators.gcs_gate import access as ga
from harness.emulators.gcs_gate.bookkeeping import GcsBookkeeping
from harness.emulators.gcs_gate.requests import (
    GcsDetail,
    classify_gcs,
    classify_gcs_batch,
    detail_of,
    gcs_bucket_from_insert,
    json_object,
)
from harness.emulators.gcs_gate.signed_urls import SignedRequest, SignedUrlError, is_signed, signer
from harness.emulators.gcs_gate.signed_urls import verify as verify_signed
from harness.gate import rules
from harness.gate.corrupt import wrong_headers, wrong_json_digests
from harness.gate.protocol import Answer, Corrupted, Exchange, GateProtocol, UpstreamResponse
from harness.gate.rules import ANONYMOUS, INVALID, Access, Kind, Verdict, header
from harness.gate.state import GateState

__all__ = ["GcsGateProtocol", "classify_gcs", "classify_gcs_batch", "gcs_bucket_from_insert"]

_GCS_REASONS = (
    "authError",
    "forbidden",
    "conflict",
    "backendError",
    "rateLimitExceeded",
    "invalid",
    "conditionNotMet",
    "notFound",
    "required",
)
_JSON = {"Content-Type": "application/json; charset=UTF-8"}
_OBJ = "storage.objects."
_BKT = "storage.buckets."
_ACL_CALLS = ("get", "set", "delete")


def answered(access: Access) -> bool:
    """True if the gate answers this request itself (the emulator has no IAM policies and
    its ACLs are not GCS's): a bucket's IAM policy (get, set, testPermissions) and an
    object's ACL (``/o/{object}/acl[/{entity}]``)."""
    detail = access.detail
    if not isinstance(detail, GcsDetail) or access.bucket is None:
        return False
    return detail.iam is not None or (detail.acl_call in _ACL_CALLS and access.key is not None)


def _object_exists(upstream: tuple[str, int], bucket: str, key: str) -> bool:
    host, port = upstream
    url = f"http://{host}:{port}/storage/v1/b/{quote(bucket, safe='')}/o/{quote(key, safe='')}"
    try:
        with urlopen(url, timeout=30) as resp:
            return bool(200 <= resp.status < 300)
    except HTTPError:
        return False


def _object_name(body: bytes | None) -> str | None:
    """The ``name`` of the object resource a JSON upload answers with."""
    try:
        data = json.loads(body or b"")
    except ValueError:
        return None
    name = data.get("name") if isinstance(data, dict) else None
    return name if isinstance(name, str) and name else None


def _xml_error(verdict: Verdict) -> bytes:
    codes = {403: "AccessDenied", 401: "AuthenticationRequired", 404: "NoSuchKey"}
    code = verdict.code
    if not code or code in _GCS_REASONS:
        code = codes.get(verdict.status, "InvalidArgument")
    return (
        "<?xml version='1.0' encoding='UTF-8'?><Error>"
        f"<Code>{escape(code)}</Code><Message>{escape(verdict.message)}</Message></Error>"
    ).encode()


def _refusal(error: ga.AccessError | SignedUrlError) -> Verdict:
    code = error.reason if isinstance(error, ga.AccessError) else error.code
    return Verdict(False, error.status, code, error.message)


class GcsGateProtocol(GcsBookkeeping, GateProtocol):
    """The GCS JSON API as fake-gcs-server serves it, with GCS's access model on top.
    A resumable upload's id is its credential, as in GCS."""

    def __init__(self, tokens: Mapping[str, str]) -> None:
        super().__init__()
        self.tokens = dict(tokens)
        """owner -> bearer token"""
        self._acl_lock = threading.Lock()
        """held while an object ACL entry is changed (read, changed, written)"""

    # --- identity ---------------------------------------------------------------------------

    def identity(self, headers: Mapping[str, str]) -> str | None:
        """The account behind a request (``Authorization: Bearer``), ANONYMOUS or INVALID."""
        auth = header(headers, "Authorization")
        if not auth:
            return ANONYMOUS
        scheme, _, token = auth.strip().partition(" ")
        if scheme.lower() != "bearer":
            return INVALID
        return next((o for o, t in self.tokens.items() if t == token.strip()), INVALID)

    def classify(self, ex: Exchange) -> tuple[Access, str | None]:
        access = classify_gcs(ex.method, ex.path, ex.headers)
        signed = is_signed(ex.query)
        identity = (signer(ex.query) or INVALID) if signed else self.identity(ex.headers)
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

    def authenticate(self, ex: Exchange, access: Access, identity: str | None) -> Verdict | None:
        """An unknown or malformed bearer token is 401 Invalid Credentials, as in GCS; a
        signed URL is verified (signature, date, expiry, scope)."""
        if is_signed(ex.query):
            raw_path, _, raw_query = ex.path.partition("?")
            try:
                verify_signed(SignedRequest(ex.method, raw_path, raw_query, ex.headers))
            except SignedUrlError as e:
                return _refusal(e)
            return None
        if identity == INVALID:
            return Verdict(False, 401, "authError", "Invalid Credentials")
        return None

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
                    return _refusal(e)
            return verdict
        try:
            return self._decide(ex, access, identity)
        except ga.AccessError as e:
            return _refusal(e)

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
            detail.new_acl = self._new_acl(state, access, detail, identity, known)
            ga.check_acl(known, detail.new_acl)
        if access.event is not None:
            return verdict  # the writer of a new object owns it and may give it any ACL
        return self._check(state, access.bucket, access.key, _OBJ + "setIamPolicy", identity, known)

    def _new_acl(
        self,
        state: GateState,
        access: Access,
        detail: GcsDetail,
        identity: str | None,
        known: ga.BucketAccess,
    ) -> list[list[str]]:
        """The ACL an object gets from a request that sets it (raises AccessError)."""
        if detail.predefined:
            return ga.predefined_acl(detail.predefined, identity)
        if detail.acl_call is None:
            return ga.acl_from_resource(detail.body.get("acl"))
        acl = self.object_acl(state, access.bucket or "", access.key or "", known)
        entity = detail.entity or detail.body.get("entity")
        acl = [e for e in acl if e[0] != entity]
        if detail.acl_call == "set":
            acl += ga.acl_from_resource([{"entity": entity, "role": detail.body.get("role")}])
        return acl

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

    # --- answers of the gate's own ----------------------------------------------------------

    def answers(self, access: Access) -> bool:
        """True for the requests :meth:`answer` answers (:func:`answered`)."""
        return answered(access)

    def answer(self, ex: Exchange, access: Access, identity: str | None) -> Answer | None:
        """The gate's own answer to what the emulator cannot serve as GCS does (only for
        :func:`answered` requests): a bucket's IAM policy (get; set, atomically against its
        etag: 412 when stale; testPermissions) and an object's ACL from the gate's record.
        None (forward) for a bucket the gate does not know."""
        detail = access.detail
        if not answered(access) or not isinstance(detail, GcsDetail) or access.bucket is None:
            return None
        known = self.bucket_access(ex.state, access.bucket)
        if known is None:
            return None
        if detail.iam is None:
            return self._acl_answer(ex, access, identity, known)
        if detail.iam == "test":
            asked = ex.query.get("permissions", [])
            granted = known.iam_permissions(identity)
            data: dict[str, Any] = {
                "kind": "storage#testIamPermissionsResponse",
                "permissions": [p for p in asked if p in granted],
            }
            return Answer(200, _JSON, json.dumps(data).encode())
        if detail.iam == "get":
            data = known.policy()
        else:
            try:
                data = self._set_policy(ex.state, access.bucket, known, ex.read_body())
            except ga.AccessError as e:
                ctype, body = self.error_body(ex, _refusal(e), access)
                return Answer(e.status, {"Content-Type": ctype}, body)
        data.setdefault("resourceId", f"projects/_/buckets/{access.bucket}")
        return Answer(200, _JSON, json.dumps(data).encode())

    def _set_policy(
        self, state: GateState, bucket: str, known: ga.BucketAccess, body: bytes
    ) -> dict[str, Any]:
        """setIamPolicy: the new policy, checked against the bucket's current one (etag,
        prevention) in the same atomic change that stores it. Raises AccessError."""
        asked = json_object(body)

        def change(settings: dict[str, Any]) -> dict[str, Any]:
            current = ga.BucketAccess.parse(known.owner, settings, known.public_flag)
            return {**settings, "iam": ga.new_policy(current, asked)}

        settings = state.modify_settings(bucket, change)
        if settings is None:
            raise ga.AccessError(404, "notFound", "The specified bucket does not exist.")
        return ga.BucketAccess.parse(known.owner, settings, known.public_flag).policy()

    def _acl_answer(
        self, ex: Exchange, access: Access, identity: str | None, known: ga.BucketAccess
    ) -> Answer:
        """``/o/{object}/acl[/{entity}]``: answered from the gate's record of the ACL. A
        change of one entry is made to the ACL as it is now (recomputed under a lock: two
        concurrent changes of one object's ACL keep each other's entry)."""
        bucket, key, detail = access.bucket or "", access.key or "", detail_of(access)
        if not _object_exists(ex.upstream, bucket, key):
            verdict = Verdict(False, 404, "notFound", f"No such object: {bucket}/{key}")
            ctype, body = self.error_body(ex, verdict, access)
            return Answer(404, {"Content-Type": ctype}, body)
        if detail.new_acl is None:
            acl = self.object_acl(ex.state, bucket, key, known)
        else:
            with self._acl_lock:
                try:
                    acl = self._new_acl(ex.state, access, detail, identity, known)
                    ga.check_acl(known, acl)
                except ga.AccessError as e:
                    ctype, body = self.error_body(ex, _refusal(e), access)
                    return Answer(e.status, {"Content-Type": ctype}, body)
                ex.state.set_object_meta(bucket, key, ga.stored_acl(known, acl))
        items = ga.acl_resource(acl, bucket, key)
        data: Any = {"kind": "storage#objectAccessControls", "items": items}
        if detail.acl_call == "delete":
            return Answer(204, {}, b"")
        if detail.acl_call == "set":
            entity = detail.entity or detail.body.get("entity")
            data = next((i for i in items if i["entity"] == entity), {})
        elif detail.entity:
            data = next((i for i in items if i["entity"] == detail.entity), None)
            if data is None:
                verdict = Verdict(False, 404, "notFound", f"No ACL entry for {detail.entity}.")
                ctype, body = self.error_body(ex, verdict, access)
                return Answer(404, {"Content-Type": ctype}, body)
        return Answer(200, _JSON, json.dumps(data).encode())

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

    # --- errors -----------------------------------------------------------------------------

    def fault_verdict(self, status: int) -> Verdict:
        reasons = {
            503: ("backendError", "We encountered an internal error. Please try again."),
            500: ("backendError", "We encountered an internal error. Please try again."),
            429: ("rateLimitExceeded", "The rate of change requests to the bucket is too high."),
            403: ("forbidden", "The caller does not have storage access to the bucket."),
        }
        reason, message = reasons.get(status, ("backendError", "Backend Error"))
        return Verdict(False, status, reason, message)

    def error_body(self, ex: Exchange, verdict: Verdict, access: Access) -> tuple[str, bytes]:
        if isinstance(access.detail, GcsDetail) and access.detail.xml:
            return "application/xml; charset=UTF-8", _xml_error(verdict)
        reasons = {401: "authError", 403: "forbidden", 409: "conflict", 404: "notFound"}
        reason = verdict.code if verdict.code in _GCS_REASONS else None
        reason = reason or reasons.get(verdict.status, "backendError")
        err: dict[str, Any] = {"domain": "global", "reason": reason, "message": verdict.message}
        if verdict.status == 401:
            err.update(locationType="header", location="Authorization")
        data = {"error": {"code": verdict.status, "message": verdict.message, "errors": [err]}}
        return "application/json", json.dumps(data).encode()

    def error_headers(self, verdict: Verdict) -> dict[str, str]:
        if verdict.status == 401:
            return {"WWW-Authenticate": 'Bearer realm="https://accounts.google.com/"'}
        return {}
