"""S3 bucket policies, free of any networking: parsing and validating a policy document the
way PutBucketPolicy does, evaluating it for one request, and AWS's "is this policy public".

Conditions: the operators String(Not)Equals(IgnoreCase), String(Not)Like, Bool, Null,
Numeric*, (Not)IpAddress and Arn(Not)Equals/Arn(Not)Like, each also with ``IfExists``, on
the keys of ``CONDITION_KEYS`` (all in harness.store_gates.s3.conditions). Set
operators (``ForAnyValue:``/``ForAllValues:``), Date* and Binary* operators, tag keys and
policy variables are refused with a MalformedPolicy message that names them. Principals
match the local accounts (account id, ``arn:aws:iam::ID:root``, canonical id); IAM users
and roles do not exist here and are refused as AWS refuses unknown principals.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from harness.store_gates.s3.acl import S3_ACCOUNTS
from harness.store_gates.s3.conditions import (
    Condition,
    PolicyError,
    iam_wildcard_match,
    iam_wildcard_regex,
    parse_conditions,
    words,
)

MAX_POLICY_BYTES = 20 * 1024
ARN_PREFIX = "arn:aws:s3:::"


BUCKET_ACTIONS = words(
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
OBJECT_ACTIONS = words(
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
        actions=tuple(iam_wildcard_regex(a, ignore_case=True) for a in action_list),
        not_action=not_action,
        resources=tuple(iam_wildcard_regex(r) for r in resource_list),
        not_resource=not_resource,
        conditions=parse_conditions(raw.get("Condition", {})),
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
    if not (iam_wildcard_match(resource, bucket_arn) or _prefix_viable(resource, bucket_arn + "/")):
        raise PolicyError("Policy has invalid resource")


def _check_actions_apply(actions: list[str], resources: list[str], bucket: str) -> None:
    bucket_arn = ARN_PREFIX + bucket
    on_bucket = any(iam_wildcard_match(r, bucket_arn) for r in resources)
    on_objects = any(_prefix_viable(r, bucket_arn + "/") for r in resources)
    for action in actions:
        pattern = iam_wildcard_regex(action, ignore_case=True)
        matched = {a for a in KNOWN_ACTIONS if pattern.match(a)}
        if (on_bucket and matched & BUCKET_ACTIONS) or (on_objects and matched & OBJECT_ACTIONS):
            continue
        raise PolicyError("Action does not apply to any resource(s) in statement")
