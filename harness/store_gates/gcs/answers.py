"""What the GCS gate answers itself, the emulator having no IAM policies and ACLs that are
not GCS's (a base class of GcsGateProtocol): a bucket's IAM policy (get, set, testPermissions)
and an object's ACL from the gate's record; and its errors, as GCS's JSON (XML for signed
URLs)."""

from __future__ import annotations

import json
import threading
from typing import Any
from urllib.error import HTTPError
from urllib.parse import quote
from urllib.request import urlopen
from xml.sax.saxutils import escape

from harness.gate.protocol import Answer, Exchange
from harness.gate.rules import Access, Verdict
from harness.gate.state import GateState
from harness.store_gates.gcs import access as ga
from harness.store_gates.gcs.bookkeeping import GcsBookkeeping
from harness.store_gates.gcs.requests import GcsDetail, detail_of, json_object

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


def _xml_error(verdict: Verdict) -> bytes:
    codes = {403: "AccessDenied", 401: "AuthenticationRequired", 404: "NoSuchKey"}
    code = verdict.code
    if not code or code in _GCS_REASONS:
        code = codes.get(verdict.status, "InvalidArgument")
    return (
        "<?xml version='1.0' encoding='UTF-8'?><Error>"
        f"<Code>{escape(code)}</Code><Message>{escape(verdict.message)}</Message></Error>"
    ).encode()


class GcsAnswers(GcsBookkeeping):
    """The GCS gate's own answers and errors (a base class of GcsGateProtocol)."""

    def __init__(self) -> None:
        super().__init__()
        self._acl_lock = threading.Lock()
        """held while an object ACL entry is changed (read, changed, written)"""

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
                ctype, body = self.error_body(ex, e.verdict(), access)
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
                    acl = self.new_acl(ex.state, access, detail, identity, known)
                    ga.check_acl(known, acl)
                except ga.AccessError as e:
                    ctype, body = self.error_body(ex, e.verdict(), access)
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

    def new_acl(
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
