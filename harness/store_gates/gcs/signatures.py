"""Who a GCS request comes from: a bearer token (``Authorization: Bearer``) of one of the
local cloud's accounts, or the signer of a signed URL V4, verified as GCS verifies it
(``signed_urls``: signature, date, expiry, scope)."""

from __future__ import annotations

from collections.abc import Mapping

from harness.gate.protocol import Exchange
from harness.gate.rules import ANONYMOUS, INVALID, Access, Verdict, header
from harness.store_gates.gcs.signed_urls import SignedRequest, SignedUrlError, is_signed, signer
from harness.store_gates.gcs.signed_urls import verify as verify_signed


class GcsSignatures:
    """Identity and signature checks of the GCS gate protocol (a base class of
    GcsGateProtocol)."""

    tokens: dict[str, str]
    """owner -> bearer token"""

    def identity(self, headers: Mapping[str, str]) -> str | None:
        """The account behind a request (``Authorization: Bearer``), ANONYMOUS or INVALID."""
        auth = header(headers, "Authorization")
        if not auth:
            return ANONYMOUS
        scheme, _, token = auth.strip().partition(" ")
        if scheme.lower() != "bearer":
            return INVALID
        return next((o for o, t in self.tokens.items() if t == token.strip()), INVALID)

    def caller(self, ex: Exchange) -> str | None:
        """The signer of a signed URL (INVALID if unknown), else the bearer token's account."""
        if is_signed(ex.query):
            return signer(ex.query) or INVALID
        return self.identity(ex.headers)

    def authenticate(self, ex: Exchange, access: Access, identity: str | None) -> Verdict | None:
        """An unknown or malformed bearer token is 401 Invalid Credentials, as in GCS; a
        signed URL is verified (signature, date, expiry, scope)."""
        if is_signed(ex.query):
            raw_path, _, raw_query = ex.path.partition("?")
            try:
                verify_signed(SignedRequest(ex.method, raw_path, raw_query, ex.headers))
            except SignedUrlError as e:
                return e.verdict()
            return None
        if identity == INVALID:
            return Verdict(False, 401, "authError", "Invalid Credentials")
        return None
