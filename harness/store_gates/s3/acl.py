"""S3 access control lists, free of any networking: the two local accounts in S3's terms,
grants, canned ACLs, the ACL request headers, the AccessControlPolicy XML and the question
"does this ACL give this caller this permission".

A grantee is an account name of the local cloud (harness.accounts.USER / OTHER) or one of
the predefined group URIs. Errors carry S3's status, code and message (:class:`AclError`).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from xml.sax.saxutils import escape

from harness.accounts import OTHER, USER
from harness.gate.errors import StoreError

ALL_USERS = "http://acs.amazonaws.com/groups/global/AllUsers"
AUTHENTICATED_USERS = "http://acs.amazonaws.com/groups/global/AuthenticatedUsers"
LOG_DELIVERY = "http://acs.amazonaws.com/groups/s3/LogDelivery"
GROUPS = (ALL_USERS, AUTHENTICATED_USERS, LOG_DELIVERY)
PERMISSIONS = ("READ", "WRITE", "READ_ACP", "WRITE_ACP", "FULL_CONTROL")
CANNED_ACLS = (
    "private",
    "public-read",
    "public-read-write",
    "authenticated-read",
    "aws-exec-read",
    "bucket-owner-read",
    "bucket-owner-full-control",
    "log-delivery-write",
)
S3_NS = "http://s3.amazonaws.com/doc/2006-03-01/"
XSI_NS = "http://www.w3.org/2001/XMLSchema-instance"
GRANT_HEADERS = {
    "x-amz-grant-read": "READ",
    "x-amz-grant-write": "WRITE",
    "x-amz-grant-read-acp": "READ_ACP",
    "x-amz-grant-write-acp": "WRITE_ACP",
    "x-amz-grant-full-control": "FULL_CONTROL",
}
MALFORMED_ACL = (
    "The XML you provided was not well-formed or did not validate against our published schema"
)


@dataclass(frozen=True)
class S3Account:
    """One local account as S3 names it."""

    name: str
    account_id: str
    canonical_id: str
    email: str
    display_name: str


S3_ACCOUNTS: dict[str, S3Account] = {
    USER: S3Account(
        USER,
        "111111111111",
        "75aa57f09aa0c8caeab4f8c24e99d10f8e7faeebf76c078efc7c6caea54ba06a",
        "user@skycore.local",
        "user",
    ),
    OTHER: S3Account(
        OTHER,
        "222222222222",
        "79a59df900b949e55d96a1e698fbacedfd6e09d98eacf8f8d5218e7cd47ef2be",
        "other@skycore.local",
        "other",
    ),
}


ANONYMOUS_OWNER = "anonymous"
"""The owner of an object an anonymous caller wrote (ACLs enabled), as S3 has it."""
ANONYMOUS_CANONICAL_ID = "65a011a29cdf8ec533ec3d1ccaae921c"


def canonical_id(name: str) -> str:
    """The canonical user id of an account name (or of :data:`ANONYMOUS_OWNER`)."""
    return ANONYMOUS_CANONICAL_ID if name == ANONYMOUS_OWNER else S3_ACCOUNTS[name].canonical_id


def _display_name(name: str) -> str:
    return name if name == ANONYMOUS_OWNER else S3_ACCOUNTS[name].display_name


def account_by(value: str) -> str | None:
    """The account name for an account id, canonical id, email address or account ARN
    (``arn:aws:iam::ID:root``); None when no local account has it."""
    value = value.strip()
    if value.startswith("arn:aws:iam::") and value.endswith(":root"):
        value = value[len("arn:aws:iam::") : -len(":root")]
    for account in S3_ACCOUNTS.values():
        if value in (account.account_id, account.canonical_id) or (
            value.lower() == account.email.lower()
        ):
            return account.name
    return None


class AclError(StoreError):
    """An ACL S3 refuses (malformed, unknown grantee, not allowed here)."""


@dataclass(frozen=True)
class Grant:
    """One grant: an account name or group URI, and one of :data:`PERMISSIONS`."""

    grantee: str
    permission: str


@dataclass(frozen=True)
class Acl:
    """An access control list: the resource owner's account name and its grants."""

    owner: str
    grants: tuple[Grant, ...]

    def to_json(self) -> dict[str, Any]:
        """A JSON-serialisable form (see :meth:`from_json`)."""
        return {
            "owner": self.owner,
            "grants": [{"grantee": g.grantee, "permission": g.permission} for g in self.grants],
        }

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> Acl:
        """The ACL :meth:`to_json` made."""
        grants = tuple(Grant(str(g["grantee"]), str(g["permission"])) for g in data["grants"])
        for grant in grants:
            if grant.permission not in PERMISSIONS:
                raise ValueError(f"unknown ACL permission {grant.permission!r}")
        return Acl(str(data["owner"]), grants)


def _unique(grants: Iterable[Grant]) -> tuple[Grant, ...]:
    return tuple(dict.fromkeys(grants))


def private_acl(owner: str) -> Acl:
    """The default ACL: the owner has FULL_CONTROL, nobody else anything."""
    return Acl(owner, (Grant(owner, "FULL_CONTROL"),))


def canned_acl(name: str, owner: str, bucket_owner: str) -> Acl:
    """The ACL a canned ACL name stands for, for a resource of ``owner`` in a bucket of
    ``bucket_owner`` (for a bucket, pass its owner twice). aws-exec-read's grant to EC2 is
    not modelled (it is the owner's FULL_CONTROL only)."""
    full = Grant(owner, "FULL_CONTROL")
    extra: tuple[Grant, ...]
    if name in ("private", "aws-exec-read"):
        extra = ()
    elif name == "public-read":
        extra = (Grant(ALL_USERS, "READ"),)
    elif name == "public-read-write":
        extra = (Grant(ALL_USERS, "READ"), Grant(ALL_USERS, "WRITE"))
    elif name == "authenticated-read":
        extra = (Grant(AUTHENTICATED_USERS, "READ"),)
    elif name == "bucket-owner-read":
        extra = (Grant(bucket_owner, "READ"),)
    elif name == "bucket-owner-full-control":
        extra = (Grant(bucket_owner, "FULL_CONTROL"),)
    elif name == "log-delivery-write":
        extra = (Grant(LOG_DELIVERY, "WRITE"), Grant(LOG_DELIVERY, "READ_ACP"))
    else:
        raise AclError(400, "InvalidArgument", f"The canned ACL '{name}' is not valid.")
    grants = (full, *(g for g in extra if g.grantee != owner or g.permission == "FULL_CONTROL"))
    return Acl(owner, _unique(grants))


_GRANTEE_ITEM = re.compile(r'\s*(id|uri|emailaddress)\s*=\s*(?:"([^"]*)"|([^",\s]+))\s*', re.I)


def _grantees_from_header(value: str) -> list[str]:
    grantees: list[str] = []
    for item in value.split(","):
        match = _GRANTEE_ITEM.fullmatch(item)
        if match is None:
            raise AclError(400, "InvalidArgument", "Invalid Argument")
        kind, grantee = match.group(1).lower(), match.group(2) or match.group(3) or ""
        grantees.append(_resolve(kind, grantee))
    return grantees


def _resolve(kind: str, value: str) -> str:
    """An account name or group URI for a grantee given by id, uri or email address."""
    value = value.strip()
    if kind == "uri":
        if value not in GROUPS:
            raise AclError(400, "InvalidArgument", "Invalid group uri")
        return value
    if kind == "id":
        for account in S3_ACCOUNTS.values():
            if value == account.canonical_id:
                return account.name
        raise AclError(400, "InvalidArgument", "Invalid id")
    for account in S3_ACCOUNTS.values():
        if value.lower() == account.email.lower():
            return account.name
    raise AclError(
        400,
        "UnresolvableGrantByEmailAddress",
        "The e-mail address you provided does not match any account on record.",
    )


def acl_from_headers(headers: Mapping[str, str], owner: str, bucket_owner: str) -> Acl | None:
    """The ACL that ``x-amz-acl`` or the ``x-amz-grant-*`` headers (lower-case names) set,
    or None when the request has none of them."""
    canned = headers.get("x-amz-acl")
    present = [(h, p) for h, p in GRANT_HEADERS.items() if headers.get(h) is not None]
    if canned is not None and present:
        raise AclError(
            400, "InvalidRequest", "Specifying both Canned ACLs and Header Grants is not allowed"
        )
    if canned is not None:
        return canned_acl(canned.strip(), owner, bucket_owner)
    if not present:
        return None
    grants = [
        Grant(grantee, permission)
        for header, permission in present
        for grantee in _grantees_from_header(headers[header])
    ]
    return Acl(owner, _unique(grants))


def split_tag(tag: str) -> tuple[str, str]:
    """(namespace, local name) of an ElementTree tag (``{ns}Name``); the namespace is ""
    for a tag without one."""
    if tag.startswith("{"):
        namespace, _, name = tag[1:].partition("}")
        return namespace, name
    return "", tag


def local_name(tag: str) -> str:
    """An ElementTree tag without its namespace (S3's documents are read by local name)."""
    return split_tag(tag)[1]


def _child(element: ET.Element, name: str) -> ET.Element | None:
    for child in element:
        if local_name(child.tag) == name:
            return child
    return None


def _text(element: ET.Element, name: str) -> str | None:
    child = _child(element, name)
    return None if child is None else (child.text or "").strip()


def parse_xml(body: bytes, root: str, error: AclError) -> ET.Element:
    """The root element of a small S3 XML document, or ``error`` when the body is not
    well-formed, declares a DTD or has another root element."""
    if b"<!DOCTYPE" in body.upper() or b"<!ENTITY" in body.upper():
        raise error
    try:
        element = ET.fromstring(body)
    except ET.ParseError:
        raise error from None
    if local_name(element.tag) != root:
        raise error
    return element


def acl_from_xml(body: bytes, owner: str) -> Acl:
    """The ACL of a PutBucketAcl / PutObjectAcl body (AccessControlPolicy) for a resource
    that ``owner`` owns. An Owner other than ``owner`` is refused (403 AccessDenied)."""
    malformed = AclError(400, "MalformedACLError", MALFORMED_ACL)
    policy = parse_xml(body, "AccessControlPolicy", malformed)
    owner_element = _child(policy, "Owner")
    if owner_element is None or not _text(owner_element, "ID"):
        raise malformed
    if _text(owner_element, "ID") != canonical_id(owner):
        raise AclError(403, "AccessDenied", "Access Denied")
    grants: list[Grant] = []
    listing = _child(policy, "AccessControlList")
    for element in listing if listing is not None else ():
        if local_name(element.tag) != "Grant":
            raise malformed
        grantee = _child(element, "Grantee")
        permission = _text(element, "Permission")
        if grantee is None or permission not in PERMISSIONS:
            raise malformed
        kind = grantee.get(f"{{{XSI_NS}}}type", "")
        field = {"CanonicalUser": "ID", "Group": "URI", "AmazonCustomerByEmail": "EmailAddress"}
        if kind not in field or not _text(grantee, field[kind]):
            raise malformed
        resolve_as = {"CanonicalUser": "id", "Group": "uri", "AmazonCustomerByEmail": "email"}
        grants.append(
            Grant(_resolve(resolve_as[kind], _text(grantee, field[kind]) or ""), permission)
        )
    return Acl(owner, _unique(grants))


def _grantee_xml(grantee: str) -> str:
    attrs = f'xmlns:xsi="{XSI_NS}"'
    if grantee not in GROUPS:
        return (
            f'<Grantee {attrs} xsi:type="CanonicalUser"><ID>{canonical_id(grantee)}</ID>'
            f"<DisplayName>{escape(_display_name(grantee))}</DisplayName></Grantee>"
        )
    return f'<Grantee {attrs} xsi:type="Group"><URI>{escape(grantee)}</URI></Grantee>'


def acl_to_xml(acl: Acl) -> bytes:
    """The AccessControlPolicy document GetBucketAcl / GetObjectAcl answer with."""
    grants = "".join(
        f"<Grant>{_grantee_xml(g.grantee)}<Permission>{g.permission}</Permission></Grant>"
        for g in acl.grants
    )
    text = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<AccessControlPolicy xmlns="{S3_NS}"><Owner><ID>{canonical_id(acl.owner)}</ID>'
        f"<DisplayName>{escape(_display_name(acl.owner))}</DisplayName></Owner>"
        f"<AccessControlList>{grants}</AccessControlList></AccessControlPolicy>"
    )
    return text.encode()


def is_public_acl(acl: Acl) -> bool:
    """Whether the ACL grants anything to AllUsers or AuthenticatedUsers (AWS's "public")."""
    return any(g.grantee in (ALL_USERS, AUTHENTICATED_USERS) for g in acl.grants)


def acl_allows(acl: Acl, caller: str | None, permission: str, ignore_public: bool = False) -> bool:
    """Whether ``caller`` (an account name, or None for anonymous) has ``permission`` by
    this ACL: the owner has FULL_CONTROL implicitly, FULL_CONTROL implies every permission,
    AuthenticatedUsers is any signed caller, AllUsers everyone. ``ignore_public`` drops the
    grants to those two groups (Block Public Access's IgnorePublicAcls). An anonymous
    caller is :data:`ANONYMOUS_OWNER` for the objects anonymous callers wrote."""
    if (caller or ANONYMOUS_OWNER) == acl.owner:
        return True
    for grant in acl.grants:
        if grant.permission not in (permission, "FULL_CONTROL"):
            continue
        if grant.grantee == ALL_USERS or (grant.grantee == AUTHENTICATED_USERS and caller):
            if not ignore_public:
                return True
        elif grant.grantee == (caller or ANONYMOUS_OWNER):
            return True
    return False


def only_owner_grants(acl: Acl, bucket_owner: str) -> bool:
    """Whether S3 still accepts this ACL when ACLs are disabled: it grants only to its owner
    and the bucket owner, and the bucket owner has FULL_CONTROL (as owner or by a grant):
    private (of the bucket owner), bucket-owner-full-control and their equivalents."""
    full = acl.owner == bucket_owner or Grant(bucket_owner, "FULL_CONTROL") in acl.grants
    return full and all(g.grantee in (acl.owner, bucket_owner) for g in acl.grants)
