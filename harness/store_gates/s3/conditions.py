"""IAM policy building blocks, free of any networking: the wildcard match of actions and
resources, and the condition operators and keys the local cloud models (their values come
from the request: harness.store_gates.s3.upstream.policy_context)."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.gate.errors import StoreError


class PolicyError(StoreError):
    """PutBucketPolicy's 400 MalformedPolicy, with a message naming what is wrong."""

    def __init__(self, message: str) -> None:
        super().__init__(400, "MalformedPolicy", message)


def words(text: str, prefix: str = "") -> frozenset[str]:
    """The lower-cased, space-separated names of ``text``, each after ``prefix``."""
    return frozenset(prefix + word.lower() for word in text.split())


def iam_wildcard_regex(pattern: str, ignore_case: bool = False) -> re.Pattern[str]:
    """A regular expression matching what an IAM wildcard pattern matches: ``*`` any run of
    characters, ``?`` any one character, everything else literally (whole string)."""
    parts = ("." if c == "?" else ".*" if c == "*" else re.escape(c) for c in pattern)
    return re.compile("".join(parts) + r"\Z", re.DOTALL | (re.IGNORECASE if ignore_case else 0))


def iam_wildcard_match(pattern: str, text: str, ignore_case: bool = False) -> bool:
    """Whether ``text`` matches the IAM wildcard ``pattern`` as a whole."""
    return iam_wildcard_regex(pattern, ignore_case).match(text) is not None


CONDITION_KEYS = words(
    "aws:SecureTransport aws:Referer aws:UserAgent aws:SourceIp aws:PrincipalAccount "
    "aws:PrincipalType aws:PrincipalArn aws:PrincipalOrgID aws:userid aws:username "
    "aws:SourceAccount aws:SourceArn aws:SourceOwner aws:SourceVpc aws:SourceVpce "
    "s3:prefix s3:delimiter s3:max-keys s3:x-amz-acl s3:x-amz-content-sha256 "
    "s3:x-amz-copy-source s3:x-amz-metadata-directive s3:x-amz-server-side-encryption "
    "s3:x-amz-server-side-encryption-aws-kms-key-id s3:x-amz-storage-class s3:VersionId "
    "s3:signatureversion s3:authType s3:signatureAge s3:TlsVersion s3:ResourceAccount"
)
"""Condition keys a policy may test (lower case); the caller supplies their values."""
FIXED_VALUE_KEYS = words(
    "aws:SourceArn aws:SourceVpc aws:SourceVpce aws:SourceOwner aws:SourceAccount "
    "aws:PrincipalAccount aws:PrincipalArn aws:PrincipalOrgID aws:userid "
    "s3:x-amz-server-side-encryption-aws-kms-key-id"
)
"""Keys whose fixed values make an Allow to everyone non-public (AWS's list)."""
_OPERATOR_TABLE = (
    "StringEquals=string StringNotEquals=!string StringEqualsIgnoreCase=istring "
    "StringNotEqualsIgnoreCase=!istring StringLike=like StringNotLike=!like Bool=bool "
    "Null=null NumericEquals=== NumericNotEquals=!== NumericLessThan=< "
    "NumericLessThanEquals=<= NumericGreaterThan=> NumericGreaterThanEquals=>= IpAddress=ip "
    "NotIpAddress=!ip ArnEquals=like ArnLike=like ArnNotEquals=!like ArnNotLike=!like"
)
_OPERATORS = {
    name.lower(): (kind.lstrip("!"), kind.startswith("!"))
    for name, kind in (word.split("=", 1) for word in _OPERATOR_TABLE.split())
}
"""Condition operator (lower case) -> (how it compares, whether it is negated)."""
_UNMODELLED_OPERATORS = ("date", "binary", "foranyvalue:", "forallvalues:")


@dataclass(frozen=True)
class Condition:
    """One condition test: operator kind, key (lower case), values."""

    kind: str
    negated: bool
    if_exists: bool
    key: str
    values: tuple[str, ...]
    operator: str

    def holds(self, context: Mapping[str, str]) -> bool:
        """Whether the test passes for a request context (keys lower case)."""
        value = context.get(self.key)
        if self.kind == "null":
            return (value is None) == (self.values[0].lower() == "true")
        if value is None:
            return self.if_exists or self.negated
        return self._matches(value) != self.negated

    def _matches(self, value: str) -> bool:
        if self.kind == "string":
            return value in self.values
        if self.kind == "istring":
            return value.lower() in {v.lower() for v in self.values}
        if self.kind == "like":
            return any(iam_wildcard_match(v, value) for v in self.values)
        if self.kind == "bool":
            return value.lower() in {v.lower() for v in self.values}
        if self.kind == "ip":
            try:
                address = ipaddress.ip_address(value)
            except ValueError:
                return False
            return any(address in ipaddress.ip_network(v, strict=False) for v in self.values)
        try:
            number = float(value)
        except ValueError:
            return False
        compare = {
            "==": number.__eq__,
            "<": number.__lt__,
            "<=": number.__le__,
            ">": number.__gt__,
            ">=": number.__ge__,
        }[self.kind]
        return any(compare(float(v)) for v in self.values)

    def narrows_to_fixed(self) -> bool:
        """Whether this test limits a statement to fixed values AWS counts as non-public."""
        if self.negated or self.if_exists:
            return False
        if self.kind == "ip" and self.key == "aws:sourceip":
            return all(ipaddress.ip_network(v, strict=False).prefixlen > 0 for v in self.values)
        wild = any("*" in v or "?" in v for v in self.values)
        return self.key in FIXED_VALUE_KEYS and self.kind in ("string", "like") and not wild


def parse_conditions(raw: Any) -> tuple[Condition, ...]:
    """The tests of a statement's Condition block (PolicyError if one is not valid or not
    modelled)."""
    if not isinstance(raw, dict):
        raise PolicyError("Condition must be an object")
    tests: list[Condition] = []
    for operator, block in raw.items():
        name = operator.lower()
        if_exists = name.endswith("ifexists") and name != "null"
        base = name[: -len("ifexists")] if if_exists else name
        if base not in _OPERATORS:
            if base.startswith(_UNMODELLED_OPERATORS):
                raise PolicyError(
                    f"Condition operator {operator} is not modelled by the local cloud"
                )
            raise PolicyError(f"Invalid Condition type : {operator}")
        kind, negated = _OPERATORS[base]
        if not isinstance(block, dict) or not block:
            raise PolicyError(f"Condition {operator} must map keys to values")
        for key, values in block.items():
            tests.append(_condition(operator, kind, negated, if_exists, key, values))
    return tuple(tests)


def _condition(
    operator: str, kind: str, negated: bool, if_exists: bool, key: str, values: Any
) -> Condition:
    lower = key.lower()
    if "/" in lower:
        raise PolicyError(f"Condition key {key} is not modelled by the local cloud")
    if lower not in CONDITION_KEYS:
        raise PolicyError(f"Policy has an invalid condition key: {key}")
    items = values if isinstance(values, list) else [values]
    if not items or not all(isinstance(v, (str, bool, int, float)) for v in items):
        raise PolicyError(f"Condition {operator} has invalid values for {key}")
    texts = tuple(str(v).lower() if isinstance(v, bool) else str(v) for v in items)
    try:
        if kind == "ip":
            for text in texts:
                ipaddress.ip_network(text, strict=False)
        elif kind in ("==", "<", "<=", ">", ">="):
            for text in texts:
                float(text)
    except ValueError:
        raise PolicyError(f"Condition {operator} has invalid values for {key}") from None
    if kind in ("bool", "null") and not all(t.lower() in ("true", "false") for t in texts):
        raise PolicyError(f"Condition {operator} has invalid values for {key}")
    return Condition(kind, negated, if_exists, lower, texts, operator)
