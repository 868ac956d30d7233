"""Azure Storage request signatures, verified the way the Blob service does (pure functions,
no I/O): Shared Key (the ``Authorization: SharedKey account:signature`` header) and shared
access signatures signed with an account key (account SAS and service SAS for a container or
a blob). Every check returns None when the request is authentic, else the reason, which the
gate sends as Azure's ``AuthenticationErrorDetail`` of a 403 AuthenticationFailed.

Path-style (emulator) URLs are assumed: ``/<account>/<container>/<blob>``.
:func:`authentication_verdict` checks a request against the key of the storage account it
addresses (``bookkeeping.ACCOUNTS``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from urllib.parse import unquote

from harness.gate.protocol import Exchange
from harness.gate.rules import Verdict, query_pairs
from harness.store_gates.azure.bookkeeping import path_account

SHARED_KEY_HEADERS = (
    "content-encoding",
    "content-language",
    "content-length",
    "content-md5",
    "content-type",
    "date",
    "if-modified-since",
    "if-match",
    "if-none-match",
    "if-unmodified-since",
    "range",
)
"""The standard headers of a Shared Key string-to-sign, in order."""

CLOCK_SKEW = timedelta(minutes=15)
"""How far a Shared Key request's date may be from the service's clock."""

SERVICE_SAS_MIN_VERSION = "2018-11-09"
"""The oldest service SAS version verified (the string-to-sign of older ones differs)."""


def sign(key: str, string_to_sign: str) -> str:
    """HMAC-SHA256 of ``string_to_sign`` with a base64 account key, base64-encoded."""
    digest = hmac.new(base64.b64decode(key), string_to_sign.encode(), hashlib.sha256).digest()
    return base64.b64encode(digest).decode()


def matches(signature: str, key: str, candidates: list[str]) -> bool:
    """True if ``signature`` is the signature of one of ``candidates`` under ``key``."""
    try:
        given = base64.b64decode(signature, validate=True)
    except (binascii.Error, ValueError):
        return False
    return any(hmac.compare_digest(given, base64.b64decode(sign(key, s))) for s in candidates)


def parse_time(value: str) -> datetime | None:
    """A SAS time (ISO 8601: a UTC date, or a date and time with ``Z``), None if malformed."""
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed


# --- Shared Key ---------------------------------------------------------------------------


def _service_order(names: list[str]) -> list[str]:
    """Header names in the service's order (the SDK's emulation of it when available)."""
    try:
        from azure.storage.blob._shared.authentication import _storage_header_sort
    except ImportError:  # pragma: no cover - the SDK is a dependency of the harness
        return sorted(names)
    return [name for name, _ in _storage_header_sort([(n, "") for n in names])]


def shared_key_strings(
    method: str, raw_path: str, raw_query: str, headers: Mapping[str, str], account: str
) -> list[str]:
    """The Shared Key strings-to-sign of a request (headers lower-cased): one with the
    ``x-ms-`` headers in the service's order, one in plain ordinal order if that differs (the
    Go SDK, rclone's, sorts ordinally)."""
    standard = []
    for name in SHARED_KEY_HEADERS:
        value = headers.get(name, "")
        if name == "content-length" and value == "0":
            value = ""  # empty for a zero length since version 2015-02-21
        standard.append(value)
    ms_names = [n for n in headers if n.startswith("x-ms-")]
    grouped: dict[str, list[str]] = {}
    for name, value in query_pairs(raw_query):
        grouped.setdefault(name.lower(), []).append(value)
    resource = f"/{account}{raw_path or '/'}" + "".join(
        f"\n{name}:{','.join(sorted(values))}" for name, values in sorted(grouped.items())
    )
    strings = []
    for order in (_service_order(ms_names), sorted(ms_names)):
        canonical = "".join(f"{name}:{headers[name]}\n" for name in order)
        text = method.upper() + "\n" + "\n".join(standard) + "\n" + canonical + resource
        if text not in strings:
            strings.append(text)
    return strings


def check_shared_key(
    method: str,
    raw_path: str,
    raw_query: str,
    headers: Mapping[str, str],
    account: str,
    key: str,
    now: datetime,
) -> str | None:
    """Verify a request's ``Authorization: SharedKey`` header against ``account``'s ``key``
    (the account the request addresses); None if authentic, else the reason."""
    authorization = headers.get("authorization", "")
    scheme, _, credential = authorization.strip().partition(" ")
    if scheme != "SharedKey":
        return f"Authentication scheme {scheme or '(none)'} is not supported here."
    signer, _, signature = credential.strip().rpartition(":")
    if signer != account:
        return f"The signature is made for account '{signer}', not '{account}'."
    when = headers.get("x-ms-date") or headers.get("date")
    if not when:
        return "Request date header not specified."
    try:
        date = parsedate_to_datetime(when)
    except (TypeError, ValueError):
        return f"Request date header '{when}' is not a valid HTTP date."
    if date.tzinfo is None:
        date = date.replace(tzinfo=UTC)
    if abs(now - date) > CLOCK_SKEW:
        return f"Request date header too old or in the future: '{when}'."
    candidates = shared_key_strings(method, raw_path, raw_query, headers, account)
    if matches(signature, key, candidates):
        return None
    return (
        f"The MAC signature found in the HTTP request '{signature}' is not the same as any "
        "computed signature."
    )


# --- shared access signatures -------------------------------------------------------------


def is_user_delegation_sas(params: Mapping[str, str]) -> bool:
    """True if a SAS is signed with a user delegation key (it names one: ``skoid``, ...)."""
    return any(name in params for name in ("skoid", "sktid", "skt", "ske", "sks", "skv"))


def account_sas_string(params: Mapping[str, str], account: str) -> str:
    """The string-to-sign of an account SAS (``ss`` and ``srt`` present)."""
    names = ["sp", "ss", "srt", "st", "se", "sip", "spr", "sv"]
    if params.get("sv", "") >= "2020-12-06":
        names.append("ses")
    return account + "\n" + "".join(params.get(n, "") + "\n" for n in names)


def service_sas_string(
    params: Mapping[str, str], account: str, container: str, blob: str | None
) -> str:
    """The string-to-sign of a service SAS for ``container`` (``sr=c``) or one of its blobs
    (``sr=b``, ``bs``, ``bv``): the resource is the one the request addresses."""
    resource = f"/blob/{account}/{container}"
    if params.get("sr", "") != "c":
        resource += f"/{blob or ''}"
    fields = [
        params.get("sp", ""),
        params.get("st", ""),
        params.get("se", ""),
        resource,
        params.get("si", ""),
        params.get("sip", ""),
        params.get("spr", ""),
        params.get("sv", ""),
        params.get("sr", ""),
        params.get("snapshot", ""),
    ]
    if params.get("sv", "") >= "2020-12-06":
        fields.append(params.get("ses", ""))
    fields += [params.get(n, "") for n in ("rscc", "rscd", "rsce", "rscl", "rsct")]
    return "\n".join(fields)


def check_sas(
    params: Mapping[str, str],
    account: str,
    key: str,
    container: str | None,
    blob: str | None,
    now: datetime,
) -> str | None:
    """Verify a SAS signed with ``account``'s ``key`` (the account the request addresses) for
    the request's ``container`` and ``blob``: its version, its signature and its time window;
    None if authentic, else the reason. Permissions are left to the emulator, which checks
    them against the operation."""
    version = params.get("sv", "")
    if not version:
        return "The signed version (sv) is missing."
    string_to_sign: str
    if "ss" in params or "srt" in params:
        string_to_sign = account_sas_string(params, account)
    else:
        resource = params.get("sr", "")
        if resource not in ("c", "b", "bs", "bv"):
            return f"The signed resource '{resource}' is not supported here."
        if container is None or (resource != "c" and not blob):
            return f"The signed resource '{resource}' does not match the request's resource."
        if version < SERVICE_SAS_MIN_VERSION:
            return f"The signed version {version} is older than {SERVICE_SAS_MIN_VERSION}."
        string_to_sign = service_sas_string(params, account, container, blob)
    if not matches(params.get("sig", ""), key, [string_to_sign]):
        shown = string_to_sign.replace("\n", " ")
        return f"Signature did not match. String to sign used was {shown}"
    return _time_window(params, now)


def _time_window(params: Mapping[str, str], now: datetime) -> str | None:
    start_text, expiry_text = params.get("st", ""), params.get("se", "")
    if not expiry_text and "si" in params:
        return None  # the expiry is in a stored access policy (the emulator checks it)
    expiry = parse_time(expiry_text)
    start = parse_time(start_text) if start_text else None
    if expiry is None or (start_text and start is None):
        return "The signed start or expiry time is not a valid ISO 8601 time."
    if expiry <= now:
        return (
            f"Signed expiry time [{_http_date(expiry)}] must be after signed start time "
            f"[{_http_date(start or now)}]"
        )
    if start is not None and start > now:
        return (
            f"Signature not valid in the specified time frame: Start [{_http_date(start)}] - "
            f"Expiry [{_http_date(expiry)}] - Current [{_http_date(now)}]"
        )
    return None


def _http_date(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%a, %d %b %Y %H:%M:%S GMT")


AUTHENTICATION_FAILED = (
    "Server failed to authenticate the request. Make sure the value of Authorization header "
    "is formed correctly including the signature."
)


def authentication_verdict(ex: Exchange, now: datetime) -> Verdict | None:
    """None if the request is anonymous or its credentials are authentic for the storage
    account it addresses (or that account is not one of the local cloud's: the emulator
    answers), else Azure's 403 AuthenticationFailed with the reason."""
    raw_path, _, raw_query = ex.path.partition("?")
    segs = raw_path.lstrip("/").split("/", 2)
    account = path_account(raw_path)[1]
    if account is None or is_anonymous(ex):
        return None
    if ex.header("authorization"):
        reason = check_shared_key(
            ex.method, raw_path, raw_query, ex.headers, account.name, account.key, now
        )
    else:
        params = {name: value for name, value in query_pairs(raw_query)}
        container = unquote(segs[1]) if len(segs) > 1 and segs[1] else None
        blob = unquote(segs[2]) if len(segs) > 2 and segs[2] else None
        if is_user_delegation_sas(params):
            reason = (
                "User delegation SAS: the local cloud has no Microsoft Entra ID, so it issues "
                "no user delegation keys and no such SAS can be valid."
            )
        else:
            reason = check_sas(params, account.name, account.key, container, blob, now)
    if reason is None:
        return None
    return Verdict(False, 403, "AuthenticationFailed", f"{AUTHENTICATION_FAILED}\n{reason}")


def is_anonymous(ex: Exchange) -> bool:
    """True if a request carries no credentials (no Authorization header, no SAS)."""
    return not ex.header("authorization") and "sig" not in ex.query
