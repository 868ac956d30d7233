"""S3 bucket policies, free of any networking: parsing and validating a policy document the
way PutBucketPolicy does, evaluating it for one request, and AWS's "is this policy public".

Conditions: the operators String(Not)Equals(IgnoreCase), String(Not)Like, Bool, Null,
Numeric*, (Not)IpAddress and Arn(Not)Equals/Arn(Not)Like, each also with ``IfExists``, on
the keys of :data:`CONDITION_KEYS`. Set operators (``ForAnyValue:``/``ForAllValues:``),
Date* and Binary* operators, tag keys and policy variables are refused with a
MalformedPolicy message that names them. Principals match the local accounts (account id,
``arn:aws:iam::ID:root``, canonical id); IAM users and roles do not exist here and are
refused as AWS refuses unknown principals.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from harness.emulators.s3_gate.acl import S3_ACCOUNTS

MAX_POLICY_BYTES = 20 * 1024
ARN_PREFIX = "arn:aws:s3:::"


def _words(text: str, prefix: str = "") -> frozenset[str]:
    """The lower-cased, space-separated names of ``text``, each after ``prefix``."""
    return frozenset(prefix + word.lower() for word in text.split())


BUCKET_ACTIONS = _words(
    "ListBucket ListBucketVersions ListBucketMultipartUploads GetBucketAcl PutBucketAcl "
    "GetBucketPolicy PutBucketPolicy DeleteBucketPolicy GetBucketPolicyStatus "
    "GetBucketCORS PutBucketCORS GetBucketOwnershipControls PutBucketOwnershipControls "
    "GetBucketPublicAccessBlock PutBucketPublicAccessBlock CreateBucket DeleteBucket "
    "GetBucketLocation GetBucketVersioning PutBucketVersioning GetBucketTagging "
    "PutBucketTagging GetBucketLogging PutBucketLogging GetBucketNotification "
    "PutBucketNotification GetBucketWebsite PutBucketWebsite DeleteBucketWebsite "
    "GetLifecycleConfiguration PutLifecycleConfiguration GetEncryptionConfiguration "
    "PutEncryptionConfiguration GetBucketRequestPayment PutBucketRequestPayment "
    "GetReplicationConfiguration PutReplicationConfiguration GetAccelerateConfiguration "
    "PutAccelerateConfiguration GetBucketObjectLockConfiguration "
    "PutBucketObjectLockConfiguration GetIntelligentTieringConfiguration "
    "PutIntelligentTieringConfiguration GetInventoryConfiguration PutInventoryConfiguration "
    "GetAnalyticsConfiguration PutAnalyticsConfiguration GetMetricsConfiguration "
    "PutMetricsConfiguration",
    "s3:",
)
"""IAM actions on a bucket (resource ``arn:aws:s3:::bucket``), lower case."""
OBJECT_ACTIONS = _words(
    "GetObject GetObjectVersion GetObjectTorrent GetObjectAcl GetObjectVersionAcl "
    "PutObject PutObjectAcl PutObjectVersionAcl DeleteObject DeleteObjectVersion "
    "GetObjectTagging GetObjectVersionTagging PutObjectTagging PutObjectVersionTagging "
    "DeleteObjectTagging DeleteObjectVersionTagging AbortMultipartUpload "
    "ListMultipartUploadParts RestoreObject GetObjectAttributes GetObjectVersionAttributes "
    "GetObjectRetention PutObjectRetention GetObjectLegalHold PutObjectLegalHold "
    "BypassGovernanceRetention ReplicateObject ReplicateDelete ReplicateTags "
    "ObjectOwnerOverrideToBucketOwner",
    "s3:",
)
"""IAM actions on an object (resource ``arn:aws:s3:::bucket/key``), lower case."""
KNOWN_ACTIONS = BUCKET_ACTIONS | OBJECT_ACTIONS
CONDITION_KEYS = _words(
    "aws:SecureTransport aws:Referer aws:UserAgent aws:SourceIp aws:PrincipalAccount "
    "aws:PrincipalType aws:PrincipalArn aws:PrincipalOrgID aws:userid aws:username "
    "aws:SourceAccount aws:SourceArn aws:SourceOwner aws:SourceVpc aws:SourceVpce "
    "s3:prefix s3:delimiter s3:max-keys s3:x-amz-acl s3:x-amz-content-sha256 "
    "s3:x-amz-copy-source s3:x-amz-metadata-directive s3:x-amz-server-side-encryption "
    "s3:x-amz-server-side-encryption-aws-kms-key-id s3:x-amz-storage-class s3:VersionId "
    "s3:signatureversion s3:authType s3:signatureAge s3:TlsVersion s3:ResourceAccount"
)
"""Condition keys a policy may test (lower case); the caller supplies their values."""
FIXED_VALUE_KEYS = _words(
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


class PolicyError(Exception):
    """PutBucketPolicy's 400 MalformedPolicy, with a message naming what is wrong."""

    status = 400
    code = "MalformedPolicy"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def wildcard_regex(pattern: str, ignore_case: bool = False) -> re.Pattern[str]:
    """A regular expression matching what an IAM wildcard pattern matches: ``*`` any run of
    characters, ``?`` any one character, everything else literally (whole string)."""
    parts = ("." if c == "?" else ".*" if c == "*" else re.escape(c) for c in pattern)
    return re.compile("".join(parts) + r"\Z", re.DOTALL | (re.IGNORECASE if ignore_case else 0))


def wildcard_match(pattern: str, text: str, ignore_case: bool = False) -> bool:
    """Whether ``text`` matches the IAM wildcard ``pattern`` as a whole."""
    return wildcard_regex(pattern, ignore_case).match(text) is not None


def _prefix_viable(pattern: str, prefix: str) -> bool:
    """Whether some string that starts with ``prefix`` and goes on with at least one more
    character matches ``pattern``."""
    states = {0}
    for char in prefix:
        nxt: set[int] = set()
        for i in states:
            if i < len(pattern):
                if pattern[i] == "*":
                    nxt.update((i, i + 1))
                elif pattern[i] in ("?", char):
                    nxt.add(i + 1)
        states = nxt
        while True:  # a "*" may also match nothing
            more = {i + 1 for i in states if i < len(pattern) and pattern[i] == "*"} - states
            if not more:
                break
            states |= more
    return any(i < len(pattern) for i in states)


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
            return any(wildcard_match(v, value) for v in self.values)
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


@dataclass(frozen=True)
class Statement:
    """One policy statement, compiled."""

    sid: str
    effect: str
    principals: frozenset[str] | None
    """Account names (or other principals' texts) the statement names; None means ``*``."""
    not_principal: bool
    actions: tuple[re.Pattern[str], ...]
    not_action: bool
    resources: tuple[re.Pattern[str], ...]
    not_resource: bool
    conditions: tuple[Condition, ...]

    def applies(
        self, caller: str | None, action: str, resource: str, context: Mapping[str, str]
    ) -> bool:
        """Whether this statement covers the request."""
        named = self.principals is None or (caller is not None and caller in self.principals)
        if named == self.not_principal:
            return False
        if any(p.match(action) for p in self.actions) == self.not_action:
            return False
        if any(p.match(resource) for p in self.resources) == self.not_resource:
            return False
        return all(c.holds(context) for c in self.conditions)

    def is_public(self) -> bool:
        """AWS's test: an Allow to everyone that no fixed-value condition narrows."""
        if self.effect != "Allow" or not (self.principals is None or self.not_principal):
            return False
        return not any(c.narrows_to_fixed() for c in self.conditions)


@dataclass(frozen=True)
class BucketPolicy:
    """A validated bucket policy: its text (as stored and returned), its statements and the
    bucket it was validated for."""

    text: str
    statements: tuple[Statement, ...]
    bucket: str = ""

    @staticmethod
    def parse(text: str, bucket: str) -> BucketPolicy:
        """Validate ``text`` as PutBucketPolicy does for ``bucket`` (PolicyError if not)."""
        return _parse(text, bucket)

    def evaluate(
        self,
        caller: str | None,
        action: str,
        resource: str,
        context: Mapping[str, str] | None = None,
    ) -> Literal["Allow", "Deny"] | None:
        """ "Deny" if a Deny statement applies, else "Allow" if an Allow does, else None.
        ``caller`` is an account name or None (anonymous), ``action`` an IAM action name
        (s3:GetObject), ``resource`` an S3 ARN; ``context`` holds condition keys."""
        ctx = {k.lower(): v for k, v in (context or {}).items()}
        account = S3_ACCOUNTS.get(caller or "")
        ctx.setdefault("aws:principaltype", "Account" if account else "Anonymous")
        if account is not None:
            ctx.setdefault("aws:principalaccount", account.account_id)
            ctx.setdefault("aws:principalarn", f"arn:aws:iam::{account.account_id}:root")
        decision: Literal["Allow", "Deny"] | None = None
        for statement in self.statements:
            if statement.applies(caller, action, resource, ctx):
                if statement.effect == "Deny":
                    return "Deny"
                decision = "Allow"
        return decision

    def is_public(self) -> bool:
        """Whether AWS counts this policy as public (Block Public Access's test)."""
        return any(s.is_public() for s in self.statements)


@lru_cache(maxsize=256)
def _parse(text: str, bucket: str) -> BucketPolicy:
    if len(text.encode()) > MAX_POLICY_BYTES:
        raise PolicyError("Policies must be less than 20 KB")
    try:
        document = json.loads(text)
    except ValueError:
        raise PolicyError("This policy contains invalid Json") from None
    if not isinstance(document, dict):
        raise PolicyError("This policy contains invalid Json")
    _known_fields(document, ("Version", "Id", "Statement"))
    if document.get("Version", "2012-10-17") not in ("2012-10-17", "2008-10-17"):
        raise PolicyError("Policy has an invalid Version")
    if "Statement" not in document:
        raise PolicyError("Missing required field Statement")
    raw = document["Statement"]
    raw = [raw] if isinstance(raw, dict) else raw
    if not isinstance(raw, list) or not raw:
        raise PolicyError("Could not parse the policy: Statement is empty!")
    statements = tuple(_statement(s, bucket) for s in raw)
    sids = [s.sid for s in statements if s.sid]
    if len(sids) != len(set(sids)):
        raise PolicyError("Statement IDs (SID) in a single policy must be unique")
    return BucketPolicy(text, statements, bucket)


def _known_fields(obj: Mapping[str, Any], allowed: tuple[str, ...]) -> None:
    for key in obj:
        if key not in allowed:
            raise PolicyError(f"Unknown field {key}")


def _one_of(raw: Mapping[str, Any], name: str) -> tuple[Any, bool]:
    """The value of ``name`` or ``Not<name>`` (exactly one must be there), and which."""
    if (name in raw) == (f"Not{name}" in raw):
        if name in raw:
            raise PolicyError(f"Statement may contain only one of {name} and Not{name}")
        raise PolicyError(f"Missing required field {name}")
    return (raw[name], False) if name in raw else (raw[f"Not{name}"], True)


def _strings(value: Any, field: str) -> list[str]:
    values = value if isinstance(value, list) else [value]
    if not values or not all(isinstance(v, str) for v in values):
        raise PolicyError(f"Policy has an invalid {field}")
    return values


def _statement(raw: Any, bucket: str) -> Statement:
    if not isinstance(raw, dict):
        raise PolicyError("Statement must be an object")
    _known_fields(
        raw,
        (
            *("Sid", "Effect", "Principal", "NotPrincipal", "Action", "NotAction"),
            *("Resource", "NotResource", "Condition"),
        ),
    )
    effect = raw.get("Effect")
    if effect is None:
        raise PolicyError("Missing required field Effect")
    if effect not in ("Allow", "Deny"):
        raise PolicyError(f"Invalid effect: {effect}")
    principal, not_principal = _one_of(raw, "Principal")
    actions, not_action = _one_of(raw, "Action")
    resources, not_resource = _one_of(raw, "Resource")
    action_list = [_action(a) for a in _strings(actions, "action")]
    resource_list = _strings(resources, "resource")
    for resource in resource_list:
        _check_resource(resource, bucket)
    if not not_action and not not_resource:
        _check_actions_apply(action_list, resource_list, bucket)
    return Statement(
        sid=str(raw.get("Sid", "")),
        effect=effect,
        principals=_principals(principal),
        not_principal=not_principal,
        actions=tuple(wildcard_regex(a, ignore_case=True) for a in action_list),
        not_action=not_action,
        resources=tuple(wildcard_regex(r) for r in resource_list),
        not_resource=not_resource,
        conditions=_conditions(raw.get("Condition", {})),
    )


def _principals(value: Any) -> frozenset[str] | None:
    if value == "*":
        return None
    if not isinstance(value, dict) or not value:
        raise PolicyError("Invalid principal in policy")
    names: set[str] = set()
    for kind, entries in value.items():
        for entry in _strings(entries, "principal"):
            if kind == "AWS" and entry == "*":
                return None
            if kind == "AWS":
                names.add(_aws_principal(entry))
            elif kind == "CanonicalUser":
                found = [a.name for a in S3_ACCOUNTS.values() if a.canonical_id == entry]
                if not found:
                    raise PolicyError("Invalid principal in policy")
                names.add(found[0])
            elif kind == "Service":
                names.add(f"service:{entry}")  # matches no caller of the local cloud
            else:
                raise PolicyError("Invalid principal in policy")
    return frozenset(names)


def _aws_principal(entry: str) -> str:
    """The account name an AWS principal names (other valid accounts: their id)."""
    match = re.fullmatch(r"(?:arn:aws:iam::)?(\d{12})(:root)?", entry)
    if match is None or (entry.startswith("arn:") != bool(match.group(2))):
        raise PolicyError("Invalid principal in policy")
    for account in S3_ACCOUNTS.values():
        if account.account_id == match.group(1):
            return account.name
    return f"account:{match.group(1)}"


def _action(action: str) -> str:
    if action == "*":
        return action
    if not action.lower().startswith("s3:") or "${" in action:
        raise PolicyError("Policy has invalid action")
    if "*" not in action and "?" not in action and action.lower() not in KNOWN_ACTIONS:
        raise PolicyError("Policy has invalid action")
    return action


def _check_resource(resource: str, bucket: str) -> None:
    if "${" in resource:
        raise PolicyError(f"Policy variables are not modelled by the local cloud: {resource}")
    if not resource.startswith(ARN_PREFIX):
        raise PolicyError("Policy has invalid resource")
    bucket_arn = ARN_PREFIX + bucket
    if not (wildcard_match(resource, bucket_arn) or _prefix_viable(resource, bucket_arn + "/")):
        raise PolicyError("Policy has invalid resource")


def _check_actions_apply(actions: list[str], resources: list[str], bucket: str) -> None:
    bucket_arn = ARN_PREFIX + bucket
    on_bucket = any(wildcard_match(r, bucket_arn) for r in resources)
    on_objects = any(_prefix_viable(r, bucket_arn + "/") for r in resources)
    for action in actions:
        pattern = wildcard_regex(action, ignore_case=True)
        matched = {a for a in KNOWN_ACTIONS if pattern.match(a)}
        if (on_bucket and matched & BUCKET_ACTIONS) or (on_objects and matched & OBJECT_ACTIONS):
            continue
        raise PolicyError("Action does not apply to any resource(s) in statement")


def _conditions(raw: Any) -> tuple[Condition, ...]:
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
