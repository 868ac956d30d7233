"""S3 bucket policies (harness.store_gates.s3.policy): validation as PutBucketPolicy does it,
evaluation (explicit Deny wins), conditions, AWS's "public" test and wildcard matching."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.accounts import OTHER, USER
from harness.store_gates.s3.acl import S3_ACCOUNTS
from harness.store_gates.s3.conditions import iam_wildcard_match
from harness.store_gates.s3.policy import BucketPolicy, PolicyError, _prefix_viable

B = "bk"
OBJ = f"arn:aws:s3:::{B}/*"
BKT = f"arn:aws:s3:::{B}"
OTHER_ID = S3_ACCOUNTS[OTHER].account_id


def policy(*statements: dict[str, Any], version: str | None = "2012-10-17") -> BucketPolicy:
    document: dict[str, Any] = {"Statement": list(statements)}
    if version is not None:
        document["Version"] = version
    return BucketPolicy.parse(json.dumps(document), B)


def stmt(
    effect: str = "Allow",
    principal: Any = "*",
    action: Any = "s3:GetObject",
    resource: Any = OBJ,
    **more: Any,
) -> dict[str, Any]:
    return {
        "Effect": effect,
        "Principal": principal,
        "Action": action,
        "Resource": resource,
        **more,
    }


def document(*statements: dict[str, Any]) -> str:
    """A policy document's text: ``statements`` and no Version."""
    return json.dumps({"Statement": list(statements)})


def reference_match(pattern: str, text: str) -> bool:
    """Wildcard matching by plain recursion (the reference for the regex version)."""
    if not pattern:
        return not text
    if pattern[0] == "*":
        return reference_match(pattern[1:], text) or (
            bool(text) and reference_match(pattern, text[1:])
        )
    return bool(text) and pattern[0] in ("?", text[0]) and reference_match(pattern[1:], text[1:])


@given(st.text("ab*?/.", max_size=8), st.text("ab/.", max_size=8))
def test_wildcard_matching_agrees_with_reference(pattern: str, text: str) -> None:
    assert iam_wildcard_match(pattern, text) == reference_match(pattern, text)


@given(st.text("ab*?/", max_size=5), st.text("ab/", max_size=4))
def test_prefix_viability_agrees_with_brute_force(pattern: str, prefix: str) -> None:
    def words(n: int) -> list[str]:
        return [""] if n == 0 else [w + c for w in words(n - 1) for c in "ab/"]

    expected = any(
        reference_match(pattern, prefix + suffix)
        for n in range(1, len(pattern) + 2)
        for suffix in words(n)
    )
    assert _prefix_viable(pattern, prefix) == expected


def test_wildcards_are_case_sensitive_unless_asked() -> None:
    assert not iam_wildcard_match("s3:get*", "s3:GetObject")
    assert iam_wildcard_match("s3:get*", "s3:GetObject", ignore_case=True)


CONDITION_ERRORS = [
    (
        {"DateGreaterThan": {"aws:CurrentTime": "2020-01-01T00:00:00Z"}},
        "DateGreaterThan is not modelled",
    ),
    ({"ForAnyValue:StringEquals": {"s3:prefix": "a"}}, "ForAnyValue:StringEquals is not modelled"),
    ({"StringSorta": {"s3:prefix": "a"}}, "Invalid Condition type : StringSorta"),
    ({"StringEquals": {"s3:colour": "a"}}, "invalid condition key: s3:colour"),
    (
        {"StringEquals": {"s3:ExistingObjectTag/team": "a"}},
        "s3:ExistingObjectTag/team is not modelled",
    ),
    ({"IpAddress": {"aws:SourceIp": "not-an-ip"}}, "invalid values for aws:SourceIp"),
    ({"Bool": {"aws:SecureTransport": "maybe"}}, "invalid values"),
]
"""Malformed conditions and the message PutBucketPolicy answers each with."""


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "invalid Json"),
        ("[]", "invalid Json"),
        (json.dumps({"Version": "2012-10-17"}), "Missing required field Statement"),
        (document(), "Statement is empty"),
        (json.dumps({"Version": "2020-01-01", "Statement": [stmt()]}), "invalid Version"),
        (json.dumps({"Statement": [stmt()], "Extra": 1}), "Unknown field Extra"),
        (document(stmt(effect="Maybe")), "Invalid effect"),
        (
            document({"Principal": "*", "Action": "s3:GetObject", "Resource": OBJ}),
            "Missing required field Effect",
        ),
        (
            document({"Effect": "Allow", "Action": "s3:GetObject", "Resource": OBJ}),
            "Missing required field Principal",
        ),
        (
            document({"Effect": "Allow", "Principal": "*", "Resource": OBJ}),
            "Missing required field Action",
        ),
        (
            document({"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject"}),
            "Missing required field Resource",
        ),
        (
            document(stmt(principal={"AWS": "arn:aws:iam::111111111111:user/bob"})),
            "Invalid principal",
        ),
        (document(stmt(principal={"Federated": "x"})), "Invalid principal"),
        (
            document(stmt(principal={"CanonicalUser": "0" * 64})),
            "Invalid principal",
        ),
        (document(stmt(principal="everyone")), "Invalid principal"),
        (document(stmt(action="s3:FetchObject")), "invalid action"),
        (document(stmt(action="ec2:RunInstances")), "invalid action"),
        (
            document(stmt(resource="arn:aws:s3:::another-bucket/*")),
            "invalid resource",
        ),
        (document(stmt(resource="*")), "invalid resource"),
        (document(stmt(resource=BKT)), "Action does not apply"),
        (document(stmt(action="s3:ListBucket")), "Action does not apply"),
        (document(stmt(Sid="a"), stmt(Sid="a")), "must be unique"),
        *[(document(stmt(Condition=c)), message) for c, message in CONDITION_ERRORS],
        (
            document(stmt(resource="arn:aws:s3:::bk/${aws:username}/*")),
            "Policy variables",
        ),
        (document(stmt(Sid="x" * 21000)), "20 KB"),
    ],
)
def test_malformed_policies(text: str, message: str) -> None:
    with pytest.raises(PolicyError) as err:
        BucketPolicy.parse(text, B)
    assert (err.value.status, err.value.code) == (400, "MalformedPolicy")
    assert message in err.value.message


def test_valid_policy_forms() -> None:
    single = BucketPolicy.parse(json.dumps({"Statement": stmt()}), B)  # one object, no Version
    assert len(single.statements) == 1 and single.bucket == B
    for principal in (
        "*",
        {"AWS": "*"},
        {"AWS": OTHER_ID},
        {"AWS": f"arn:aws:iam::{OTHER_ID}:root"},
        {"AWS": [OTHER_ID, "333333333333"]},
        {"CanonicalUser": S3_ACCOUNTS[OTHER].canonical_id},
    ):
        p = policy(stmt(principal=principal))
        assert p.evaluate(OTHER, "s3:GetObject", f"{BKT}/k") == "Allow"
        assert p.evaluate(USER, "s3:GetObject", f"{BKT}/k") == (
            "Allow" if "*" in json.dumps(principal) else None
        )
    assert policy(stmt(resource=["arn:aws:s3:::b*", "arn:aws:s3:::bk/x/*"], action="s3:*")).text
    assert policy(stmt(action="*", resource="arn:aws:s3:::bk*")).text
    assert (
        policy(stmt(principal={"Service": "logging.s3.amazonaws.com"})).evaluate(
            OTHER, "s3:GetObject", f"{BKT}/k"
        )
        is None
    )


def test_actions_match_case_insensitively_with_wildcards() -> None:
    p = policy(
        stmt(principal={"AWS": OTHER_ID}, action=["s3:get*", "S3:LISTBUCKET"], resource=[BKT, OBJ])
    )
    assert p.evaluate(OTHER, "s3:GetObjectTagging", f"{BKT}/a/b") == "Allow"
    assert p.evaluate(OTHER, "s3:ListBucket", BKT) == "Allow"
    assert p.evaluate(OTHER, "s3:PutObject", f"{BKT}/a") is None
    assert p.evaluate(OTHER, "s3:GetObject", "arn:aws:s3:::bk2/a") is None
    assert p.evaluate(None, "s3:GetObject", f"{BKT}/a") is None


def test_explicit_deny_wins_and_negated_fields() -> None:
    p = policy(
        stmt(action="s3:*", resource=[BKT, OBJ]),
        stmt(
            effect="Deny",
            principal={"AWS": OTHER_ID},
            action="s3:PutObject",
            resource=f"{BKT}/locked/*",
        ),
    )
    assert p.evaluate(OTHER, "s3:PutObject", f"{BKT}/open/a") == "Allow"
    assert p.evaluate(OTHER, "s3:PutObject", f"{BKT}/locked/a") == "Deny"
    assert p.evaluate(None, "s3:PutObject", f"{BKT}/locked/a") == "Allow"
    everyone_but_user = policy(
        {
            "Effect": "Deny",
            "NotPrincipal": {"AWS": S3_ACCOUNTS[USER].account_id},
            "NotAction": "s3:Get*",
            "NotResource": f"{BKT}/public/*",
        }
    )
    assert everyone_but_user.evaluate(OTHER, "s3:PutObject", f"{BKT}/a") == "Deny"
    assert everyone_but_user.evaluate(None, "s3:DeleteObject", f"{BKT}/a") == "Deny"
    assert everyone_but_user.evaluate(USER, "s3:PutObject", f"{BKT}/a") is None
    assert everyone_but_user.evaluate(OTHER, "s3:GetObject", f"{BKT}/a") is None
    assert everyone_but_user.evaluate(OTHER, "s3:PutObject", f"{BKT}/public/a") is None


@pytest.mark.parametrize(
    ("condition", "context", "expected"),
    [
        ({"Bool": {"aws:SecureTransport": "true"}}, {"aws:SecureTransport": "true"}, True),
        ({"Bool": {"aws:SecureTransport": True}}, {"aws:SecureTransport": "false"}, False),
        ({"Bool": {"aws:SecureTransport": "true"}}, {}, False),
        ({"StringLike": {"s3:prefix": ["home/*", "shared/"]}}, {"s3:prefix": "home/me/"}, True),
        ({"StringLike": {"s3:prefix": "home/*"}}, {"s3:prefix": "other/"}, False),
        ({"StringNotLike": {"s3:prefix": "home/*"}}, {}, True),
        ({"StringEquals": {"s3:prefix": "a"}}, {}, False),
        ({"StringEqualsIfExists": {"s3:prefix": "a"}}, {}, True),
        ({"StringEqualsIfExists": {"s3:prefix": "a"}}, {"s3:prefix": "b"}, False),
        ({"StringNotEquals": {"s3:x-amz-acl": "public-read"}}, {"s3:x-amz-acl": "private"}, True),
        (
            {"StringEqualsIgnoreCase": {"aws:Referer": "HTTPS://Example.com/"}},
            {"aws:referer": "https://example.com/"},
            True,
        ),
        (
            {"StringLike": {"aws:Referer": "https://example.com/*"}},
            {"aws:Referer": "https://evil.com/"},
            False,
        ),
        ({"Null": {"s3:prefix": "true"}}, {}, True),
        ({"Null": {"s3:prefix": "false"}}, {}, False),
        ({"IpAddress": {"aws:SourceIp": "10.0.0.0/8"}}, {"aws:SourceIp": "10.1.2.3"}, True),
        (
            {"NotIpAddress": {"aws:SourceIp": ["10.0.0.0/8", "::1/128"]}},
            {"aws:SourceIp": "::1"},
            False,
        ),
        ({"NumericLessThanEquals": {"s3:max-keys": "10"}}, {"s3:max-keys": "10"}, True),
        ({"NumericGreaterThan": {"s3:max-keys": 10}}, {"s3:max-keys": "x"}, False),
        ({"StringEquals": {"aws:PrincipalAccount": OTHER_ID}}, {}, True),
        ({"StringEquals": {"aws:PrincipalType": "Anonymous"}}, {}, False),
        (
            {"ArnLike": {"aws:SourceArn": "arn:aws:s3:::src-*"}},
            {"aws:SourceArn": "arn:aws:s3:::src-1"},
            True,
        ),
        (
            {"Bool": {"aws:SecureTransport": "true"}, "StringLike": {"s3:prefix": "a*"}},
            {"aws:SecureTransport": "true", "s3:prefix": "b"},
            False,
        ),
    ],
)
def test_conditions(condition: dict[str, Any], context: dict[str, str], expected: bool) -> None:
    p = policy(stmt(action="s3:ListBucket", resource=BKT, Condition=condition))
    assert (p.evaluate(OTHER, "s3:ListBucket", BKT, context) == "Allow") is expected


@pytest.mark.parametrize(
    ("statement", "public"),
    [
        (stmt(), True),
        (stmt(principal={"AWS": "*"}), True),
        (stmt(principal={"AWS": OTHER_ID}), False),
        (stmt(effect="Deny"), False),
        (
            {
                "Effect": "Allow",
                "NotPrincipal": {"AWS": OTHER_ID},
                "Action": "s3:GetObject",
                "Resource": OBJ,
            },
            True,
        ),
        (stmt(Condition={"IpAddress": {"aws:SourceIp": "192.0.2.0/24"}}), False),
        (stmt(Condition={"IpAddress": {"aws:SourceIp": "0.0.0.0/0"}}), True),
        (stmt(Condition={"StringEquals": {"aws:SourceAccount": OTHER_ID}}), False),
        (stmt(Condition={"StringLike": {"aws:SourceArn": "arn:aws:s3:::*"}}), True),
        (stmt(Condition={"StringEqualsIfExists": {"aws:SourceAccount": OTHER_ID}}), True),
        (stmt(Condition={"StringNotEquals": {"aws:SourceAccount": OTHER_ID}}), True),
        (stmt(Condition={"StringLike": {"aws:Referer": "https://example.com/*"}}), True),
        (stmt(Condition={"Bool": {"aws:SecureTransport": "true"}}), True),
    ],
)
def test_public_policy_as_aws_defines_it(statement: dict[str, Any], public: bool) -> None:
    assert policy(statement).is_public() is public


def test_parse_keeps_text_and_is_cached() -> None:
    text = json.dumps({"Version": "2012-10-17", "Statement": [stmt()]})
    assert BucketPolicy.parse(text, B).text == text
    assert BucketPolicy.parse(text, B) is BucketPolicy.parse(text, B)
    with pytest.raises(PolicyError):
        BucketPolicy.parse(text, "another-bucket")
