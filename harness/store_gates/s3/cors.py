"""S3 bucket CORS, as the service has it: the CORSConfiguration document (PutBucketCors,
GetBucketCors and the gate's state file), the preflight answer (OPTIONS) and the CORS
headers added to actual responses. Pure: no networking, no state.

Matching follows "How Amazon S3 evaluates the CORS configuration": the first rule whose
AllowedOrigin matches Origin (at most one ``*`` wildcard, case-sensitive), whose
AllowedMethod lists the method exactly, and (preflight only) whose AllowedHeader entries
match every requested header (case-insensitive, one ``*`` wildcard each) is used.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from xml.sax.saxutils import escape

from harness.gate.errors import StoreError
from harness.store_gates.s3.acl import S3_NS, split_tag

CORS_METHODS = ("GET", "PUT", "HEAD", "POST", "DELETE")
"""The only methods an AllowedMethod (and a preflight's request method) may name."""
MAX_RULES = 100
VARY = "Origin, Access-Control-Request-Headers, Access-Control-Request-Method"

MALFORMED_XML = (
    "The XML you provided was not well-formed or did not validate against our published schema"
)
NOT_ENABLED = "CORSResponse: CORS is not enabled for this bucket."
NOT_ALLOWED = (
    "CORSResponse: This CORS request is not allowed. This is usually because the evalution "
    "of Origin, request method / Access-Control-Request-Method or "
    "Access-Control-Request-Headers are not whitelisted by the resource's CORS spec."
)
NO_ORIGIN = "Insufficient information. Origin request header needed."


@dataclass(frozen=True)
class CorsRule:
    """One CORSRule of a bucket's CORS configuration."""

    allowed_origins: tuple[str, ...]
    allowed_methods: tuple[str, ...]
    allowed_headers: tuple[str, ...] = ()
    expose_headers: tuple[str, ...] = ()
    max_age: int | None = None
    id: str | None = None


class CorsError(StoreError):
    """A CORS configuration S3 refuses."""

    def xml(self) -> bytes:
        """The error as S3's XML error document."""
        return error_xml(self.code, self.message)


def _malformed() -> CorsError:
    return CorsError(400, "MalformedXML", MALFORMED_XML)


def _invalid(message: str) -> CorsError:
    return CorsError(400, "InvalidRequest", message)


def error_xml(code: str, message: str, extra: Mapping[str, str] | None = None) -> bytes:
    """An S3 XML error document (``extra``: more elements after Message, in order)."""
    more = "".join(f"<{k}>{escape(v)}</{k}>" for k, v in (extra or {}).items())
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<Error>'
        f"<Code>{escape(code)}</Code><Message>{escape(message)}</Message>{more}"
        "<RequestId>skycore-gate</RequestId><HostId>skycore-gate</HostId></Error>"
    ).encode()


# -- the configuration document ---------------------------------------------------------

_LISTS = {
    "AllowedOrigin": "allowed_origins",
    "AllowedMethod": "allowed_methods",
    "AllowedHeader": "allowed_headers",
    "ExposeHeader": "expose_headers",
}
_SINGLES = ("ID", "MaxAgeSeconds")


def _local(tag: str) -> str:
    """An element's name without the S3 namespace; any other namespace is malformed."""
    namespace, name = split_tag(tag)
    if namespace not in ("", S3_NS):
        raise _malformed()
    return name


def _only_space(text: str | None) -> bool:
    return not (text or "").strip()


def _one_wildcard(kind: str, values: Sequence[str]) -> None:
    for value in values:
        if value.count("*") > 1:
            raise _invalid(f'{kind} "{value}" can not have more than one wildcard.')


def _rule(elem: ET.Element) -> CorsRule:
    lists: dict[str, list[str]] = {field: [] for field in _LISTS.values()}
    singles: dict[str, str] = {}
    if not _only_space(elem.text):
        raise _malformed()
    for child in elem:
        name = _local(child.tag)
        if len(child) or not _only_space(child.tail):
            raise _malformed()
        text = child.text or ""
        if name in _LISTS:
            lists[_LISTS[name]].append(text)
        elif name in _SINGLES and name not in singles:
            singles[name] = text
        else:
            raise _malformed()
    origins, methods = lists["allowed_origins"], lists["allowed_methods"]
    if not origins or not methods or "" in origins or "" in lists["allowed_headers"]:
        raise _malformed()
    for method in methods:
        if method not in CORS_METHODS:
            raise _invalid(
                f"Found unsupported HTTP method in CORS config. Unsupported method is {method}"
            )
    _one_wildcard("AllowedOrigin", origins)
    _one_wildcard("AllowedHeader", lists["allowed_headers"])
    max_age: int | None = None
    if "MaxAgeSeconds" in singles:
        try:
            max_age = int(singles["MaxAgeSeconds"])
        except ValueError:
            raise _malformed() from None
        if max_age < 0:
            raise _malformed()
    return CorsRule(
        allowed_origins=tuple(origins),
        allowed_methods=tuple(methods),
        allowed_headers=tuple(lists["allowed_headers"]),
        expose_headers=tuple(lists["expose_headers"]),
        max_age=max_age,
        id=singles.get("ID") or None,
    )


def parse_cors(xml: bytes) -> tuple[CorsRule, ...]:
    """The rules of a PutBucketCors body (with or without the S3 namespace).

    Raises CorsError as S3 does: MalformedXML for a document that is not well-formed or
    breaks the schema, InvalidRequest for an unsupported method, more than one wildcard in
    an AllowedOrigin or AllowedHeader, or more than 100 rules."""
    if b"<!DOCTYPE" in xml.upper() or b"<!ENTITY" in xml.upper():
        raise _malformed()
    try:
        root = ET.fromstring(xml)
    except ET.ParseError:
        raise _malformed() from None
    if _local(root.tag) != "CORSConfiguration" or not _only_space(root.text):
        raise _malformed()
    rules: list[CorsRule] = []
    for child in root:
        if _local(child.tag) != "CORSRule" or not _only_space(child.tail):
            raise _malformed()
        rules.append(_rule(child))
    if not rules:
        raise _malformed()
    if len(rules) > MAX_RULES:
        raise _invalid("The number of CORS rules should not exceed allowed limit of 100 rules.")
    return tuple(rules)


def cors_to_xml(rules: Sequence[CorsRule]) -> bytes:
    """The GetBucketCors response body for these rules."""
    parts = [
        '<?xml version="1.0" encoding="UTF-8"?>\n',
        f'<CORSConfiguration xmlns="{S3_NS}">',
    ]
    for rule in rules:
        parts.append("<CORSRule>")
        if rule.id is not None:
            parts.append(f"<ID>{escape(rule.id)}</ID>")
        for tag, values in (
            ("AllowedHeader", rule.allowed_headers),
            ("AllowedMethod", rule.allowed_methods),
            ("AllowedOrigin", rule.allowed_origins),
            ("ExposeHeader", rule.expose_headers),
        ):
            parts.extend(f"<{tag}>{escape(v)}</{tag}>" for v in values)
        if rule.max_age is not None:
            parts.append(f"<MaxAgeSeconds>{rule.max_age}</MaxAgeSeconds>")
        parts.append("</CORSRule>")
    parts.append("</CORSConfiguration>")
    return "".join(parts).encode()


_JSON_LISTS = {
    "AllowedOrigins": "allowed_origins",
    "AllowedMethods": "allowed_methods",
    "AllowedHeaders": "allowed_headers",
    "ExposeHeaders": "expose_headers",
}


def cors_to_json(rules: Sequence[CorsRule]) -> list[dict[str, Any]]:
    """The rules as JSON data (boto3's CORSRules shape; empty fields left out)."""
    out: list[dict[str, Any]] = []
    for rule in rules:
        item: dict[str, Any] = {}
        if rule.id is not None:
            item["ID"] = rule.id
        for key, field in _JSON_LISTS.items():
            values = getattr(rule, field)
            if values or field in ("allowed_origins", "allowed_methods"):
                item[key] = list(values)
        if rule.max_age is not None:
            item["MaxAgeSeconds"] = rule.max_age
        out.append(item)
    return out


def _strings(value: Any, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"CORS rule {key} must be a list of strings")
    return tuple(value)


def cors_from_json(data: Any) -> tuple[CorsRule, ...]:
    """Rules back from :func:`cors_to_json` data; ValueError when the data is not of it."""
    if not isinstance(data, list):
        raise ValueError("CORS rules must be a list")
    rules: list[CorsRule] = []
    for item in data:
        if not isinstance(item, dict) or not set(item) <= {*_JSON_LISTS, "ID", "MaxAgeSeconds"}:
            raise ValueError(f"not a CORS rule: {item!r}")
        fields = {field: _strings(item.get(key, []), key) for key, field in _JSON_LISTS.items()}
        max_age = item.get("MaxAgeSeconds")
        if max_age is not None and (type(max_age) is not int or max_age < 0):
            raise ValueError("CORS rule MaxAgeSeconds must be a non-negative int")
        rule_id = item.get("ID")
        if rule_id is not None and not isinstance(rule_id, str):
            raise ValueError("CORS rule ID must be a string")
        rules.append(CorsRule(**fields, max_age=max_age, id=rule_id))
    return tuple(rules)


# -- matching ---------------------------------------------------------------------------


def cors_wildcard_match(pattern: str, value: str) -> bool:
    """Whether value matches pattern, whose one ``*`` (if any) stands for any text."""
    head, star, tail = pattern.partition("*")
    if not star:
        return pattern == value
    return len(value) >= len(head) + len(tail) and value.startswith(head) and value.endswith(tail)


def request_header_names(request_headers: str | None) -> tuple[str, ...]:
    """The names of an Access-Control-Request-Headers value, lower-cased, blanks dropped."""
    names = (name.strip().lower() for name in (request_headers or "").split(","))
    return tuple(name for name in names if name)


def _headers_allowed(rule: CorsRule, names: Sequence[str]) -> bool:
    allowed = [h.lower() for h in rule.allowed_headers]
    return all(any(cors_wildcard_match(a, name) for a in allowed) for name in names)


def find_rule(
    rules: Sequence[CorsRule] | None,
    origin: str,
    method: str,
    header_names: Sequence[str] | None = None,
) -> CorsRule | None:
    """The first rule allowing origin and method (and, when given, every header name)."""
    for rule in rules or ():
        if method not in rule.allowed_methods:
            continue
        if not any(cors_wildcard_match(o, origin) for o in rule.allowed_origins):
            continue
        if header_names and not _headers_allowed(rule, header_names):
            continue
        return rule
    return None


def _rule_headers(rule: CorsRule, origin: str) -> dict[str, str]:
    headers: dict[str, str] = {}
    if "*" in rule.allowed_origins:
        headers["Access-Control-Allow-Origin"] = "*"
    else:
        headers["Access-Control-Allow-Origin"] = origin
        headers["Access-Control-Allow-Credentials"] = "true"
    headers["Access-Control-Allow-Methods"] = ", ".join(rule.allowed_methods)
    if rule.expose_headers:
        headers["Access-Control-Expose-Headers"] = ", ".join(rule.expose_headers)
    if rule.max_age is not None:
        headers["Access-Control-Max-Age"] = str(rule.max_age)
    headers["Vary"] = VARY
    return headers


_XML = {"Content-Type": "application/xml"}


def preflight_error(
    origin: str | None, method: str | None
) -> tuple[int, dict[str, str], bytes] | None:
    """S3's 400 for a preflight lacking Origin or a valid Access-Control-Request-Method
    (checked before the bucket is looked up), or None when both are there."""
    if not origin:
        return 400, dict(_XML), error_xml("BadRequest", NO_ORIGIN)
    if method not in CORS_METHODS:
        message = f"Invalid Access-Control-Request-Method: {method or 'null'}"
        return 400, dict(_XML), error_xml("BadRequest", message)
    return None


def preflight(
    rules: tuple[CorsRule, ...] | None,
    origin: str | None,
    method: str | None,
    request_headers: str | None,
    *,
    resource_type: str = "OBJECT",
) -> tuple[int, dict[str, str], bytes]:
    """S3's whole answer to a preflight (OPTIONS) against a bucket whose CORS rules are
    ``rules`` (None: no configuration): status, headers, body.

    ``resource_type`` ("OBJECT" or "BUCKET") names the target in the 403 error document."""
    bad = preflight_error(origin, method)
    if bad is not None:
        return bad
    assert origin is not None and method is not None
    names = request_header_names(request_headers)
    rule = find_rule(rules, origin, method, names)
    if rule is None:
        message = NOT_ENABLED if not rules else NOT_ALLOWED
        extra = {"Method": method, "ResourceType": resource_type}
        return 403, dict(_XML), error_xml("AccessForbidden", message, extra)
    headers = _rule_headers(rule, origin)
    if names:
        headers["Access-Control-Allow-Headers"] = ", ".join(names)
    return 200, headers, b""


def response_headers(
    rules: tuple[CorsRule, ...] | None, origin: str | None, method: str | None
) -> dict[str, str]:
    """The CORS headers S3 adds to an actual (non-preflight) response to a request with
    this Origin and method: the first rule allowing both ({} when none, or no Origin).
    Requested headers are not checked and Access-Control-Allow-Headers is never sent."""
    if not origin or not method:
        return {}
    rule = find_rule(rules, origin, method.upper())
    return {} if rule is None else _rule_headers(rule, origin)
