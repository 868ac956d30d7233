"""What the S3 gate answers itself, never asking the server behind it (a base class of
S3GateProtocol): the access configuration it keeps (ACLs, policy, ownership, Block Public
Access) read or set, and its errors in S3's terms."""

from __future__ import annotations

from functools import partial
from urllib.parse import urlsplit
from xml.sax.saxutils import escape

from harness.gate.protocol import Answer, Exchange
from harness.gate.rules import Access, Verdict
from harness.store_gates.s3.access import BucketAccess
from harness.store_gates.s3.acl import acl_to_xml
from harness.store_gates.s3.bookkeeping import MIRRORED, S3Bookkeeping
from harness.store_gates.s3.mirror import (
    CONFIG_ANSWERS,
    change_access,
    config_answer,
    effective_object_acl,
)
from harness.store_gates.s3.requests import S3Detail, operation
from harness.store_gates.s3.upstream import quoted_key, upstream_size

GATE_CONFIG_WRITES = MIRRORED
"""The access configuration's calls the gate answers from its state alone, never sending
them to the server behind it: a server that does not know a sub-resource such as
``?publicAccessBlock`` takes ``DELETE /bucket?publicAccessBlock`` for DeleteBucket (rclone
serve s3 does), and ``PUT /bucket/key?acl`` for a PutObject. The object ACL calls ask the
server only whether the object exists (a HEAD signed with the gate's key). They are the calls
whose outcome the gate keeps (``bookkeeping.MIRRORED``): one list."""
GATE_ANSWERS = (
    frozenset(("PutBucketPolicy", "DeleteBucketPolicy")) | CONFIG_ANSWERS | GATE_CONFIG_WRITES
)
"""Operations the gate answers itself (the configuration it keeps):
:meth:`S3Answers.answer` answers these and only these."""
NO_SUCH_KEY = Verdict(False, 404, "NoSuchKey", "The specified key does not exist.")


class S3Answers(S3Bookkeeping):
    """The S3 gate's own answers and its errors, in S3's terms (a base class of
    S3GateProtocol; the configuration calls it answers are recorded by the bookkeeping)."""

    def answers(self, access: Access) -> bool:
        """Whether :meth:`answer` may answer (its operation is one of GATE_ANSWERS)."""
        return operation(access) in GATE_ANSWERS

    def answer(self, ex: Exchange, access: Access, identity: str | None) -> Answer | None:
        """The access configuration the gate keeps (ACLs, policy, ownership, Block Public
        Access) read or set without moto."""
        op = operation(access)
        if op not in GATE_ANSWERS:  # keeps answers() and answer() in step
            return None
        known = ex.state.bucket(access.bucket) if access.bucket else None
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
        got = config_answer(op, bucket)
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
