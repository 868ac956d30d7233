"""S3 ACLs (harness.store_gates.s3.acl): accounts, canned ACLs, ACL headers, the
AccessControlPolicy XML as botocore writes and reads it, and grant evaluation."""

from __future__ import annotations

import json
import re
from typing import Any

import botocore.session
import pytest
from botocore import parsers, serialize
from hypothesis import given
from hypothesis import strategies as st

from harness.accounts import OTHER, USER
from harness.store_gates.s3.acl import (
    ALL_USERS,
    ANONYMOUS_OWNER,
    AUTHENTICATED_USERS,
    CANNED_ACLS,
    GROUPS,
    LOG_DELIVERY,
    PERMISSIONS,
    S3_ACCOUNTS,
    Acl,
    AclError,
    Grant,
    account_by,
    acl_allows,
    acl_from_headers,
    acl_from_xml,
    acl_to_xml,
    canned_acl,
    is_public_acl,
    only_owner_grants,
)

S3_MODEL = botocore.session.get_session().get_service_model("s3")
CID = {name: account.canonical_id for name, account in S3_ACCOUNTS.items()}


def boto_request_body(operation: str, params: dict[str, Any]) -> bytes:
    """The request body botocore sends for an S3 operation."""
    serializer = serialize.create_serializer("rest-xml")
    body = serializer.serialize_to_request(params, S3_MODEL.operation_model(operation))["body"]
    assert isinstance(body, bytes)
    return body


def boto_parse(operation: str, body: bytes) -> dict[str, Any]:
    """What botocore makes of a response body for an S3 operation."""
    shape = S3_MODEL.operation_model(operation).output_shape
    response = {"body": body, "headers": {}, "status_code": 200}
    parsed: dict[str, Any] = parsers.create_parser("rest-xml").parse(response, shape)
    return parsed


def test_accounts_have_s3_identifiers_and_resolve_by_each() -> None:
    assert set(S3_ACCOUNTS) == {USER, OTHER}
    for name, account in S3_ACCOUNTS.items():
        assert re.fullmatch(r"\d{12}", account.account_id)
        assert re.fullmatch(r"[0-9a-f]{64}", account.canonical_id)
        for key in (account.account_id, account.canonical_id, account.email.upper()):
            assert account_by(key) == name
        assert account_by(f"arn:aws:iam::{account.account_id}:root") == name
    assert S3_ACCOUNTS[USER].account_id != S3_ACCOUNTS[OTHER].account_id
    assert account_by("333333333333") is None
    assert account_by("nobody@example.com") is None


@pytest.mark.parametrize(
    ("name", "extra"),
    [
        ("private", []),
        ("aws-exec-read", []),
        ("public-read", [(ALL_USERS, "READ")]),
        ("public-read-write", [(ALL_USERS, "READ"), (ALL_USERS, "WRITE")]),
        ("authenticated-read", [(AUTHENTICATED_USERS, "READ")]),
        ("bucket-owner-read", [(USER, "READ")]),
        ("bucket-owner-full-control", [(USER, "FULL_CONTROL")]),
        ("log-delivery-write", [(LOG_DELIVERY, "WRITE"), (LOG_DELIVERY, "READ_ACP")]),
    ],
)
def test_canned_acls_grant_what_aws_documents(name: str, extra: list[tuple[str, str]]) -> None:
    acl = canned_acl(name, OTHER, USER)
    assert acl.owner == OTHER
    assert acl.grants == (Grant(OTHER, "FULL_CONTROL"), *(Grant(g, p) for g, p in extra))


def test_bucket_owner_canned_acls_for_the_bucket_owner_are_private() -> None:
    for name in ("bucket-owner-read", "bucket-owner-full-control"):
        assert canned_acl(name, USER, USER).grants == (Grant(USER, "FULL_CONTROL"),)
    assert len(CANNED_ACLS) == 8


def test_unknown_canned_acl_is_invalid_argument() -> None:
    with pytest.raises(AclError) as err:
        acl_from_headers({"x-amz-acl": "public"}, USER, USER)
    assert (err.value.status, err.value.code) == (400, "InvalidArgument")


def test_acl_headers() -> None:
    assert acl_from_headers({"content-type": "text/plain"}, USER, USER) is None
    assert acl_from_headers({"x-amz-acl": "public-read"}, USER, USER) == canned_acl(
        "public-read", USER, USER
    )
    headers = {
        "x-amz-grant-read": f'id="{CID[OTHER]}", uri="{ALL_USERS}"',
        "x-amz-grant-full-control": 'emailAddress="user@skycore.local"',
        "x-amz-grant-write-acp": f"id={CID[OTHER]}",
    }
    acl = acl_from_headers(headers, USER, USER)
    assert acl == Acl(
        USER,
        (
            Grant(OTHER, "READ"),
            Grant(ALL_USERS, "READ"),
            Grant(OTHER, "WRITE_ACP"),
            Grant(USER, "FULL_CONTROL"),
        ),
    )


@pytest.mark.parametrize(
    ("headers", "status", "code"),
    [
        (
            {"x-amz-acl": "private", "x-amz-grant-read": f'uri="{ALL_USERS}"'},
            400,
            "InvalidRequest",
        ),
        ({"x-amz-grant-read": 'id="0123"'}, 400, "InvalidArgument"),
        ({"x-amz-grant-read": 'uri="http://example.com/group"'}, 400, "InvalidArgument"),
        (
            {"x-amz-grant-read": 'emailAddress="x@example.com"'},
            400,
            "UnresolvableGrantByEmailAddress",
        ),
        ({"x-amz-grant-read": "everyone"}, 400, "InvalidArgument"),
        ({"x-amz-grant-read": 'name="x"'}, 400, "InvalidArgument"),
    ],
)
def test_acl_header_errors(headers: dict[str, str], status: int, code: str) -> None:
    with pytest.raises(AclError) as err:
        acl_from_headers(headers, USER, USER)
    assert (err.value.status, err.value.code) == (status, code)


def test_acl_from_the_xml_boto3_sends() -> None:
    body = boto_request_body(
        "PutBucketAcl",
        {
            "Bucket": "b",
            "AccessControlPolicy": {
                "Owner": {"ID": CID[USER]},
                "Grants": [
                    {
                        "Grantee": {"Type": "CanonicalUser", "ID": CID[USER]},
                        "Permission": "FULL_CONTROL",
                    },
                    {"Grantee": {"Type": "CanonicalUser", "ID": CID[OTHER]}, "Permission": "READ"},
                    {
                        "Grantee": {"Type": "Group", "URI": AUTHENTICATED_USERS},
                        "Permission": "READ_ACP",
                    },
                    {
                        "Grantee": {
                            "Type": "AmazonCustomerByEmail",
                            "EmailAddress": "other@skycore.local",
                        },
                        "Permission": "WRITE",
                    },
                ],
            },
        },
    )
    assert acl_from_xml(body, USER) == Acl(
        USER,
        (
            Grant(USER, "FULL_CONTROL"),
            Grant(OTHER, "READ"),
            Grant(AUTHENTICATED_USERS, "READ_ACP"),
            Grant(OTHER, "WRITE"),
        ),
    )


def test_acl_xml_is_what_boto3_parses() -> None:
    acl = Acl(USER, (Grant(USER, "FULL_CONTROL"), Grant(ALL_USERS, "READ"), Grant(OTHER, "WRITE")))
    parsed = boto_parse("GetBucketAcl", acl_to_xml(acl))
    assert parsed["Owner"] == {"ID": CID[USER], "DisplayName": "user"}
    assert parsed["Grants"] == [
        {
            "Grantee": {"Type": "CanonicalUser", "ID": CID[USER], "DisplayName": "user"},
            "Permission": "FULL_CONTROL",
        },
        {"Grantee": {"Type": "Group", "URI": ALL_USERS}, "Permission": "READ"},
        {
            "Grantee": {"Type": "CanonicalUser", "ID": CID[OTHER], "DisplayName": "other"},
            "Permission": "WRITE",
        },
    ]


def test_anonymous_owner_renders_as_s3s_anonymous_user() -> None:
    parsed = boto_parse("GetObjectAcl", acl_to_xml(Acl(ANONYMOUS_OWNER, ())))
    assert parsed["Owner"]["ID"] == "65a011a29cdf8ec533ec3d1ccaae921c"


def _policy_xml(owner_id: str | None, grants: str) -> bytes:
    owner = "" if owner_id is None else f"<Owner><ID>{owner_id}</ID></Owner>"
    return (
        '<AccessControlPolicy xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
        f"{owner}<AccessControlList>{grants}</AccessControlList></AccessControlPolicy>"
    ).encode()


XSI = 'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"'


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (b"not xml", 400, "MalformedACLError"),
        (b"<Other/>", 400, "MalformedACLError"),
        (b'<!DOCTYPE x [<!ENTITY a "b">]><AccessControlPolicy/>', 400, "MalformedACLError"),
        (_policy_xml(None, ""), 400, "MalformedACLError"),
        (_policy_xml(CID[OTHER], ""), 403, "AccessDenied"),
        (
            _policy_xml(
                CID[USER],
                f'<Grant><Grantee {XSI} xsi:type="Group"><URI>{ALL_USERS}</URI></Grantee>'
                "<Permission>EVERYTHING</Permission></Grant>",
            ),
            400,
            "MalformedACLError",
        ),
        (
            _policy_xml(
                CID[USER],
                f"<Grant><Grantee><URI>{ALL_USERS}</URI></Grantee><Permission>READ</Permission></Grant>",
            ),
            400,
            "MalformedACLError",
        ),
        (
            _policy_xml(
                CID[USER],
                f'<Grant><Grantee {XSI} xsi:type="CanonicalUser"><ID>{"0" * 64}</ID></Grantee>'
                "<Permission>READ</Permission></Grant>",
            ),
            400,
            "InvalidArgument",
        ),
    ],
)
def test_acl_xml_errors(body: bytes, status: int, code: str) -> None:
    with pytest.raises(AclError) as err:
        acl_from_xml(body, USER)
    assert (err.value.status, err.value.code) == (status, code)


accounts = st.sampled_from(sorted(S3_ACCOUNTS))
grants = st.builds(
    Grant, st.sampled_from(sorted(S3_ACCOUNTS) + list(GROUPS)), st.sampled_from(PERMISSIONS)
)
acls = st.builds(Acl, accounts, st.lists(grants, unique=True, max_size=8).map(tuple))


@given(acls)
def test_acl_xml_round_trip(acl: Acl) -> None:
    assert acl_from_xml(acl_to_xml(acl), acl.owner) == acl


@given(acls)
def test_acl_json_round_trip(acl: Acl) -> None:
    assert Acl.from_json(json.loads(json.dumps(acl.to_json()))) == acl


def test_acl_from_json_refuses_unknown_permissions() -> None:
    with pytest.raises(ValueError):
        Acl.from_json({"owner": USER, "grants": [{"grantee": OTHER, "permission": "ALL"}]})


def test_grant_evaluation() -> None:
    acl = Acl(
        USER,
        (Grant(OTHER, "READ"), Grant(AUTHENTICATED_USERS, "READ_ACP"), Grant(ALL_USERS, "WRITE")),
    )
    assert acl_allows(acl, USER, "WRITE_ACP")  # the owner, implicitly
    assert acl_allows(acl, OTHER, "READ")
    assert not acl_allows(acl, OTHER, "FULL_CONTROL")
    assert acl_allows(acl, OTHER, "READ_ACP")  # AuthenticatedUsers: any signed caller
    assert not acl_allows(acl, None, "READ_ACP")
    assert acl_allows(acl, None, "WRITE")  # AllUsers: everyone
    assert not acl_allows(acl, None, "WRITE", ignore_public=True)
    assert not acl_allows(acl, OTHER, "READ_ACP", ignore_public=True)
    assert acl_allows(acl, OTHER, "READ", ignore_public=True)  # not a public grant
    full = Acl(USER, (Grant(OTHER, "FULL_CONTROL"), Grant(LOG_DELIVERY, "WRITE")))
    assert all(acl_allows(full, OTHER, p) for p in PERMISSIONS)
    assert not acl_allows(full, None, "WRITE")  # LogDelivery is a service, not a caller
    assert acl_allows(Acl(ANONYMOUS_OWNER, ()), None, "READ")
    assert not acl_allows(Acl(ANONYMOUS_OWNER, ()), OTHER, "READ")


def test_public_and_owner_only_acls() -> None:
    assert is_public_acl(canned_acl("public-read", USER, USER))
    assert is_public_acl(canned_acl("authenticated-read", USER, USER))
    assert not is_public_acl(canned_acl("log-delivery-write", USER, USER))
    assert not is_public_acl(Acl(USER, (Grant(OTHER, "FULL_CONTROL"),)))
    assert only_owner_grants(canned_acl("private", USER, USER), USER)
    assert only_owner_grants(canned_acl("bucket-owner-full-control", OTHER, USER), USER)
    assert not only_owner_grants(canned_acl("log-delivery-write", USER, USER), USER)
    assert not only_owner_grants(Acl(USER, (Grant(OTHER, "READ"),)), USER)
    assert not only_owner_grants(canned_acl("private", OTHER, USER), USER)
    assert not only_owner_grants(canned_acl("bucket-owner-read", OTHER, USER), USER)
