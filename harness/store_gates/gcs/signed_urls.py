"""GCS signed URLs V4 (GOOG4-RSA-SHA256 and GOOG4-HMAC-SHA256): every account's
service-account key and HMAC key, derived deterministically from its name (so the gate
process and the SDK helpers agree without sharing a file), and the verification of a signed
request as GCS documents it (canonical request, string to sign, X-Goog-Date, X-Goog-Expires,
credential scope).

The keys are test keys of the local cloud: anyone can derive them. Never use them elsewhere.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import inspect
import os
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import quote

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from harness.gate.errors import StoreError
from harness.gate.rules import query_pairs
from harness.store_gates.gcs.access import EMAILS, email_account

ALGORITHM = "GOOG4-RSA-SHA256"
HMAC_ALGORITHM = "GOOG4-HMAC-SHA256"
MAX_EXPIRES = 7 * 24 * 3600
CLOCK_SKEW = 15 * 60
"""How far in the future an X-Goog-Date may be (GCS tolerates some clock skew)."""
_SMALL_PRIMES = [p for p in range(3, 2000) if all(p % d for d in range(2, int(p**0.5) + 1))]


CHECKED_ROUNDS = 5
"""Miller-Rabin rounds computed per candidate: FIPS 186-5 (table B.1) asks 5 for the
1024-bit primes of a 2048-bit key. The later rounds of the 32 only draw their base, so the
generator's sequence, and with it every account's key, stays what it always was."""


def _probable_prime(n: int, rng: random.Random, rounds: int = 32) -> bool:
    if any(n % p == 0 for p in _SMALL_PRIMES):
        return False
    d, s = n - 1, 0
    while d % 2 == 0:
        d, s = d // 2, s + 1
    for round_ in range(rounds):
        base = rng.randrange(2, n - 2)
        if round_ >= CHECKED_ROUNDS:
            continue
        x = pow(base, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def _prime(rng: random.Random, bits: int, e: int) -> int:
    while True:
        candidate = rng.getrandbits(bits) | (3 << (bits - 2)) | 1
        if (candidate - 1) % e and _probable_prime(candidate, rng):
            return candidate


def _derive_key(account: str) -> rsa.RSAPrivateKey:
    """``account``'s 2048-bit RSA key, derived from its name (the same in every process)."""
    rng = random.Random(f"skycore-harness-gcs-service-account-{account}")
    e = 65537
    p, q = _prime(rng, 1024, e), _prime(rng, 1024, e)
    d = pow(e, -1, (p - 1) * (q - 1))
    public = rsa.RSAPublicNumbers(e, p * q)
    numbers = rsa.RSAPrivateNumbers(
        p, q, d, rsa.rsa_crt_dmp1(d, p), rsa.rsa_crt_dmq1(d, q), rsa.rsa_crt_iqmp(p, q), public
    )
    return numbers.private_key()


def _key_cache_path(account: str) -> Path | None:
    """Where ``account``'s key is kept: the user's cache, under a name that changes with the
    account and with the derivation's code (an edit of it never meets an older key); None
    where that code cannot be read."""
    try:
        code = "".join(inspect.getsource(f) for f in (_probable_prime, _prime, _derive_key))
    except (OSError, TypeError):
        return None
    digest = hashlib.sha256(f"{account}\0{CHECKED_ROUNDS}\0{code}".encode()).hexdigest()[:24]
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "skycore-harness" / "gcs-keys" / f"{digest}.pem"


@cache
def private_key(account: str) -> rsa.RSAPrivateKey:
    """``account``'s 2048-bit RSA key, the same in every process (derived from its name).
    Deriving it takes about half a second of CPU, so the key is kept in the user's cache
    (written atomically; an unreadable or damaged file is derived again)."""
    path = _key_cache_path(account)
    if path is None:
        return _derive_key(account)
    with contextlib.suppress(OSError, ValueError, TypeError, UnsupportedAlgorithm):
        kept = serialization.load_pem_private_key(
            path.read_bytes(), password=None, unsafe_skip_rsa_key_validation=True
        )
        if isinstance(kept, rsa.RSAPrivateKey):
            return kept
    key = _derive_key(account)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
        partial.touch(mode=0o600)
        partial.write_bytes(pem)
        os.replace(partial, path)
    return key


def hmac_key(account: str) -> tuple[str, str]:
    """``account``'s HMAC key (access id, secret), the same in every process."""
    seed = hashlib.sha256(f"skycore-harness-gcs-hmac-{account}".encode()).hexdigest()
    return f"GOOG1E{seed[:55].upper()}", seed[8:48]


def hmac_signing_key(secret: str, scope: str) -> bytes:
    """The V4 HMAC signing key of ``secret`` for credential ``scope``
    (DATE/LOCATION/storage/goog4_request)."""
    key = f"GOOG4{secret}".encode()
    for part in scope.split("/"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


def _credential_account(name: str) -> str | None:
    """The account of a credential's first part: a service account e-mail or an HMAC
    access id."""
    account = email_account(name)
    if account is None:
        account = next((a for a in EMAILS if hmac_key(a)[0] == name), None)
    return account


def service_account_info(account: str, token_uri: str) -> dict[str, Any]:
    """A service-account key file's content for ``account`` (google-auth's format)."""
    pem = private_key(account).private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return {
        "type": "service_account",
        "client_email": EMAILS[account],
        "private_key": pem.decode(),
        "private_key_id": hashlib.sha256(pem).hexdigest()[:40],
        "token_uri": token_uri,
        "project_id": "skycore",
    }


class SignedUrlError(StoreError):
    """A signed URL GCS refuses: HTTP status, XML error code and message."""


@dataclass(frozen=True)
class SignedRequest:
    """A request as signed: method, raw path, raw query, headers (lower-cased names)."""

    method: str
    path: str
    query: str
    headers: Mapping[str, str]


def is_signed(query: Mapping[str, list[str]]) -> bool:
    """True if a request's query carries a V4 signature."""
    return "X-Goog-Signature" in query or "X-Goog-Algorithm" in query


def signer(query: Mapping[str, list[str]]) -> str | None:
    """The account named by X-Goog-Credential, None if it names none."""
    credential = (query.get("X-Goog-Credential") or [""])[0]
    return _credential_account(credential.split("/", 1)[0])


def _pairs(raw_query: str) -> list[tuple[str, str]]:
    return query_pairs(raw_query, plus_is_space=True)


def canonical_request(req: SignedRequest, signed_headers: str) -> str:
    """The canonical request of a V4 signature (GCS: method, path, sorted query without the
    signature, the signed headers, UNSIGNED-PAYLOAD)."""
    params = sorted(
        f"{quote(k, safe='~')}={quote(v, safe='~')}"
        for k, v in _pairs(req.query)
        if k != "X-Goog-Signature"
    )
    names = [n for n in signed_headers.split(";") if n]
    lines = [f"{n}:{' '.join((req.headers.get(n) or '').split())}" for n in names]
    payload = req.headers.get("x-goog-content-sha256") or "UNSIGNED-PAYLOAD"
    return "\n".join(
        [req.method, req.path, "&".join(params), "\n".join(lines) + "\n", signed_headers, payload]
    )


def verify(req: SignedRequest, now: float | None = None) -> str:
    """The account that signed ``req``; raises SignedUrlError if GCS would refuse it."""
    params = dict(_pairs(req.query))
    algorithm = params.get("X-Goog-Algorithm", "")
    if algorithm not in (ALGORITHM, HMAC_ALGORITHM):
        raise SignedUrlError(
            400,
            "InvalidArgument" if algorithm else "AuthorizationQueryParametersError",
            f"Unsupported or missing X-Goog-Algorithm: {algorithm!r} (the local cloud "
            f"verifies {ALGORITHM} and {HMAC_ALGORITHM}).",
        )
    missing = [
        n
        for n in ("X-Goog-Credential", "X-Goog-Date", "X-Goog-Expires", "X-Goog-SignedHeaders")
        if not params.get(n)
    ]
    signature = params.get("X-Goog-Signature", "")
    if missing or not signature:
        raise SignedUrlError(
            400,
            "AuthorizationQueryParametersError",
            "Query-string authentication version 4 requires the X-Goog-Algorithm, "
            "X-Goog-Credential, X-Goog-Signature, X-Goog-Date, X-Goog-SignedHeaders and "
            "X-Goog-Expires parameters.",
        )
    stamp, expires = params["X-Goog-Date"], params["X-Goog-Expires"]
    email, _, scope = params["X-Goog-Credential"].partition("/")
    account = _credential_account(email)
    try:
        signed_at = datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
        seconds = int(expires)
    except ValueError:
        raise SignedUrlError(
            400, "AuthorizationQueryParametersError", "Invalid X-Goog-Date or X-Goog-Expires."
        ) from None
    if not 1 <= seconds <= MAX_EXPIRES:
        raise SignedUrlError(
            400,
            "AuthorizationQueryParametersError",
            "Query-string authentication version 4 requires the X-Goog-Expires parameter to be "
            f"between 1 and {MAX_EXPIRES} seconds (7 days).",
        )
    parts = scope.split("/")
    if len(parts) != 4 or parts[0] != stamp[:8] or parts[2:] != ["storage", "goog4_request"]:
        raise SignedUrlError(
            400,
            "AuthorizationQueryParametersError",
            f"Invalid credential scope {scope!r}: expected DATE/LOCATION/storage/goog4_request "
            "with the date of X-Goog-Date.",
        )
    clock = time.time() if now is None else now
    start = signed_at.timestamp()
    if start > clock + CLOCK_SKEW:
        raise SignedUrlError(400, "InvalidArgument", f"Request is not yet valid: {stamp}")
    if clock > start + seconds:
        raise SignedUrlError(400, "ExpiredToken", f"Request has expired: {int(start + seconds)}")
    canonical = canonical_request(req, params["X-Goog-SignedHeaders"])
    if "host" not in params["X-Goog-SignedHeaders"].split(";"):
        raise SignedUrlError(
            400, "AuthorizationQueryParametersError", "The host header must be signed."
        )
    digest = hashlib.sha256(canonical.encode()).hexdigest()
    to_sign = "\n".join([algorithm, stamp, scope, digest])
    if account is None or not _good(account, algorithm, email, scope, signature, to_sign):
        raise SignedUrlError(
            403,
            "SignatureDoesNotMatch",
            f"The request signature we calculated does not match the signature you provided. "
            f"Check your Google secret key and signing method.\nStringToSign: {to_sign}\n"
            f"CanonicalRequest: {canonical}",
        )
    return account


def _good(
    account: str, algorithm: str, key_id: str, scope: str, signature: str, to_sign: str
) -> bool:
    if algorithm == HMAC_ALGORITHM:
        access_id, secret = hmac_key(account)
        if key_id != access_id:
            return False  # an HMAC signature needs an HMAC key, not an e-mail
        mac = hmac.new(hmac_signing_key(secret, scope), to_sign.encode(), hashlib.sha256)
        return hmac.compare_digest(mac.hexdigest(), signature.lower())
    if key_id.lower() != EMAILS[account].lower():
        return False
    try:
        raw = bytes.fromhex(signature)
    except ValueError:
        return False
    try:
        private_key(account).public_key().verify(
            raw, to_sign.encode(), padding.PKCS1v15(), hashes.SHA256()
        )
    except InvalidSignature:
        return False
    return True
