"""The S3 access model, free of any networking: a bucket's access settings (Object
Ownership, Block Public Access, bucket ACL, bucket policy) and the decision for one request,
in the order AWS documents (explicit Deny in the bucket policy; the bucket owner's account;
for an object, its owner; the policy's Allow; the ACL grants).

Identity policies are full access in this local cloud, so a caller's own account never
stands in its way: what decides is the resource side. Cross-account access needs a policy
Allow or an ACL grant; anonymous access needs one that names everyone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from harness.gate.rules import ALLOW, Verdict
from harness.store_gates.s3.acl import (
    ANONYMOUS_OWNER,
    S3_NS,
    Acl,
    AclError,
    Grant,
    acl_allows,
    acl_from_headers,
    is_public_acl,
    local_name,
    only_owner_grants,
    parse_xml,
    private_acl,
)
from harness.store_gates.s3.policy import ARN_PREFIX, BucketPolicy

OWNERSHIP_MODES = ("BucketOwnerEnforced", "BucketOwnerPreferred", "ObjectWriter")
DEFAULT_OWNERSHIP = "BucketOwnerEnforced"
"""Object Ownership of new buckets (AWS's default since April 2023)."""
ENFORCED = "BucketOwnerEnforced"
MALFORMED_XML = (
    "The XML you provided was not well-formed or did not validate against our published schema"
)
ACCESS_DENIED = Verdict(False, 403, "AccessDenied", "Access Denied")
NO_SUCH_BUCKET = Verdict(False, 404, "NoSuchBucket", "The specified bucket does not exist")
ACLS_NOT_SUPPORTED = Verdict(
    False, 400, "AccessControlListNotSupported", "The bucket does not allow ACLs"
)
ACL_WITH_ENFORCED = (
    "InvalidBucketAclWithObjectOwnership",
    "Bucket cannot have ACLs set with ObjectOwnership's BucketOwnerEnforced setting",
)
POLICY_ACTIONS = frozenset(("s3:getbucketpolicy", "s3:putbucketpolicy", "s3:deletebucketpolicy"))
"""Actions the bucket owner's account keeps even when its policy denies them (AWS's
lock-out protection), and that other accounts never get (405 MethodNotAllowed)."""
BUCKET_CONTEXT = frozenset(
    "s3:" + a
    for a in (
        "putobject",
        "deleteobject",
        "deleteobjectversion",
        "abortmultipartupload",
        "listmultipartuploadparts",
    )
)
"""Object actions decided by the bucket (its owner, policy and ACL WRITE), not by the
object's owner."""
BUCKET_PERMISSION = {
    **dict.fromkeys(
        ("s3:listbucket", "s3:listbucketversions", "s3:listbucketmultipartuploads"), "READ"
    ),
    **dict.fromkeys(BUCKET_CONTEXT - {"s3:deleteobjectversion"}, "WRITE"),
    "s3:getbucketacl": "READ_ACP",
    "s3:putbucketacl": "WRITE_ACP",
}
"""The bucket ACL permission that grants an action (AWS's ACL-to-policy mapping; WRITE
covers deleting versions only for the bucket owner, who needs no grant here)."""
OBJECT_PERMISSION = {
    **dict.fromkeys(("s3:getobject", "s3:getobjectversion", "s3:getobjecttorrent"), "READ"),
    **dict.fromkeys(("s3:getobjectacl", "s3:getobjectversionacl"), "READ_ACP"),
    **dict.fromkeys(("s3:putobjectacl", "s3:putobjectversionacl"), "WRITE_ACP"),
}
"""The object ACL permission that grants an action."""
PUBLIC_FLAG_BUCKET_ACTIONS = frozenset(
    ("s3:listbucket", "s3:listbucketversions", "s3:getbucketlocation")
)
PUBLIC_FLAG_OBJECT_ACTIONS = frozenset(("s3:getobject", "s3:getobjectversion"))
"""What the admin API's public flag allows everyone, as a built-in bucket policy would:
these actions on the bucket, those on ``bucket/*``."""
_FLAGS = ("BlockPublicAcls", "IgnorePublicAcls", "BlockPublicPolicy", "RestrictPublicBuckets")


@dataclass(frozen=True)
class PublicAccessBlock:
    """A bucket's Block Public Access settings. ``configured`` is False once
    DeletePublicAccessBlock removed them (GetPublicAccessBlock then answers 404)."""

    block_public_acls: bool = False
    ignore_public_acls: bool = False
    block_public_policy: bool = False
    restrict_public_buckets: bool = False
    configured: bool = True

    def flags(self) -> tuple[bool, bool, bool, bool]:
        """The four flags in the API's order (:data:`_FLAGS`)."""
        return (
            self.block_public_acls,
            self.ignore_public_acls,
            self.block_public_policy,
            self.restrict_public_buckets,
        )

    @staticmethod
    def from_xml(body: bytes) -> PublicAccessBlock:
        """The settings of a PutPublicAccessBlock body (absent flags are false)."""
        error = AclError(400, "MalformedXML", MALFORMED_XML)
        root = parse_xml(body, "PublicAccessBlockConfiguration", error)
        values = dict.fromkeys(_FLAGS, False)
        for child in root:
            name = local_name(child.tag)
            text = (child.text or "").strip().lower()
            if name not in values or text not in ("true", "false"):
                raise error
            values[name] = text == "true"
        return PublicAccessBlock(*(values[f] for f in _FLAGS))

    def to_xml(self) -> bytes:
        """The PublicAccessBlockConfiguration document GetPublicAccessBlock answers with."""
        body = "".join(
            f"<{name}>{str(flag).lower()}</{name}>"
            for name, flag in zip(_FLAGS, self.flags(), strict=True)
        )
        return (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            f'<PublicAccessBlockConfiguration xmlns="{S3_NS}">{body}'
            "</PublicAccessBlockConfiguration>"
        ).encode()

    def to_json(self) -> dict[str, bool]:
        """A JSON-serialisable form."""
        return {**dict(zip(_FLAGS, self.flags(), strict=True)), "configured": self.configured}

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> PublicAccessBlock:
        """The settings :meth:`to_json` made."""
        a, b, c, d = (bool(data.get(f, False)) for f in _FLAGS)
        return PublicAccessBlock(a, b, c, d, configured=bool(data.get("configured", True)))


DEFAULT_BLOCK = PublicAccessBlock(True, True, True, True)
"""Block Public Access of new buckets (all four on, as AWS has it since April 2023)."""
NO_BLOCK = PublicAccessBlock(configured=False)
"""No Block Public Access configuration (after DeletePublicAccessBlock)."""


@dataclass(frozen=True)
class BucketAccess:
    """Everything that decides access to one bucket and its objects."""

    owner: str
    ownership: str
    block: PublicAccessBlock
    acl: Acl
    policy: BucketPolicy | None = None
    ownership_set: bool = True
    """False once DeleteBucketOwnershipControls removed the setting (GetBucketOwnershipControls
    then answers 404 and objects belong to their writer, as with ObjectWriter)."""

    @staticmethod
    def new(
        owner: str, headers: Mapping[str, str], block: PublicAccessBlock = DEFAULT_BLOCK
    ) -> BucketAccess:
        """A new bucket's settings from its CreateBucket headers (lower-case names):
        ``x-amz-object-ownership`` and the ACL headers; ``block``: its Block Public Access
        (AWS's default: all on). Raises AclError as S3 answers."""
        mode = headers.get("x-amz-object-ownership", DEFAULT_OWNERSHIP).strip()
        if mode not in OWNERSHIP_MODES:
            raise AclError(400, "InvalidArgument", f"Invalid x-amz-object-ownership header: {mode}")
        acl = acl_from_headers(headers, owner, owner)
        if acl is None:
            return BucketAccess(owner, mode, block, private_acl(owner))
        if mode == ENFORCED and not only_owner_grants(acl, owner):
            raise AclError(400, *ACL_WITH_ENFORCED)
        if block.block_public_acls and is_public_acl(acl):
            raise AclError(
                400,
                "InvalidBucketAclWithBlockPublicAccessError",
                "Bucket cannot have public ACLs set with BlockPublicAccess enabled",
            )
        return BucketAccess(owner, mode, block, acl)

    def acls_enabled(self) -> bool:
        """Whether ACLs take part in access decisions (not BucketOwnerEnforced)."""
        return self.ownership != ENFORCED

    def with_acl(self, acl: Acl) -> BucketAccess:
        """These settings with another bucket ACL."""
        return replace(self, acl=acl)

    def with_policy(self, policy: BucketPolicy | None) -> BucketAccess:
        """These settings with another bucket policy (None: DeleteBucketPolicy)."""
        return replace(self, policy=policy)

    def with_block(self, block: PublicAccessBlock) -> BucketAccess:
        """These settings with other Block Public Access settings."""
        return replace(self, block=block)

    def with_ownership(self, mode: str | None) -> BucketAccess:
        """These settings with another Object Ownership (None:
        DeleteBucketOwnershipControls, which leaves objects to their writer)."""
        if mode is None:
            return replace(self, ownership="ObjectWriter", ownership_set=False)
        return replace(self, ownership=mode, ownership_set=True)

    def to_json(self) -> dict[str, Any]:
        """A JSON-serialisable form; the policy is kept as its text."""
        return {
            "owner": self.owner,
            "ownership": self.ownership,
            "ownership_set": self.ownership_set,
            "block": self.block.to_json(),
            "acl": self.acl.to_json(),
            "policy": None if self.policy is None else self.policy.text,
            "policy_bucket": None if self.policy is None else self.policy.bucket,
        }

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> BucketAccess:
        """The settings :meth:`to_json` made."""
        text = data.get("policy")
        policy = None if text is None else BucketPolicy.parse(text, data["policy_bucket"])
        return BucketAccess(
            owner=data["owner"],
            ownership=data["ownership"],
            block=PublicAccessBlock.from_json(data["block"]),
            acl=Acl.from_json(data["acl"]),
            policy=policy,
            ownership_set=bool(data.get("ownership_set", True)),
        )


def object_owner(bucket: BucketAccess, writer: str | None, acl: Acl | None) -> str:
    """Who owns an object ``writer`` (None: anonymous) puts with ``acl`` (None: no ACL
    headers): the bucket owner under BucketOwnerEnforced, and under BucketOwnerPreferred
    when the ACL gives the bucket owner FULL_CONTROL (bucket-owner-full-control); else the
    writer (:data:`ANONYMOUS_OWNER` for an anonymous one)."""
    if bucket.ownership == ENFORCED:
        return bucket.owner
    full_to_owner = acl is not None and Grant(bucket.owner, "FULL_CONTROL") in acl.grants
    if bucket.ownership == "BucketOwnerPreferred" and full_to_owner:
        return bucket.owner
    return writer or ANONYMOUS_OWNER


def object_acl_for_put(bucket: BucketAccess, writer: str | None, headers: Mapping[str, str]) -> Acl:
    """The ACL of an object that ``writer`` (None: anonymous) creates with PutObject, CopyObject or
    CreateMultipartUpload (ACL headers in ``headers``; none: private). Raises AclError for
    bad headers, for an ACL the bucket refuses (ACLs disabled, or public while
    BlockPublicAcls is on). The ACL's owner is the object's owner (:func:`object_owner`)."""
    acl = acl_from_headers(headers, writer or ANONYMOUS_OWNER, bucket.owner)
    if acl is not None:
        refusal = check_acl_change(bucket, acl)
        if refusal is not None:
            raise AclError(refusal.status, refusal.code, refusal.message)
    owner = object_owner(bucket, writer, acl)
    if acl is None or bucket.ownership == ENFORCED:
        return private_acl(owner)
    return Acl(owner, acl.grants)


def resource_arn(bucket: str, key: str | None = None) -> str:
    """The ARN of a bucket, or of one of its objects."""
    return ARN_PREFIX + bucket if key is None else f"{ARN_PREFIX}{bucket}/{key}"


def authorize(
    bucket: BucketAccess,
    caller: str | None,
    action: str,
    key: str | None = None,
    object_acl: Acl | None = None,
    context: Mapping[str, str] | None = None,
    public_flag: bool = False,
) -> Verdict:
    """Whether ``caller`` (an account name, None for anonymous) may perform the IAM
    ``action`` (s3:GetObject, ...) on the bucket, or on its object ``key``. ``object_acl``
    is the object's ACL (None: private, owned by the bucket owner); ``context`` holds the
    request's policy condition keys; ``public_flag`` (the admin API's) adds a built-in
    public policy statement (:data:`PUBLIC_FLAG_BUCKET_ACTIONS`,
    :data:`PUBLIC_FLAG_OBJECT_ACTIONS`), subject like any policy to explicit Deny,
    RestrictPublicBuckets and object ownership. Denials are 403 AccessDenied, except a
    bucket-policy action another account is allowed by the policy (405 MethodNotAllowed,
    as S3)."""
    act = action.lower()
    policy = bucket.policy
    decision = None
    if policy is not None:
        name = policy.bucket
        decision = policy.evaluate(caller, action, resource_arn(name, key), context)
    is_owner = caller is not None and caller == bucket.owner
    if decision == "Deny" and not (is_owner and act in POLICY_ACTIONS):
        return ACCESS_DENIED
    if public_flag and decision is None:
        flagged = PUBLIC_FLAG_BUCKET_ACTIONS if key is None else PUBLIC_FLAG_OBJECT_ACTIONS
        decision = "Allow" if act in flagged else None
    public_policy = public_flag or (policy is not None and policy.is_public())
    policy_allows = decision == "Allow" and (
        is_owner or not (bucket.block.restrict_public_buckets and public_policy)
    )
    ignore_public = bucket.block.ignore_public_acls
    if key is None or act in BUCKET_CONTEXT:
        if is_owner:
            return ALLOW
        if policy_allows:
            if act in POLICY_ACTIONS:
                return Verdict(
                    False,
                    405,
                    "MethodNotAllowed",
                    "The specified method is not allowed against this resource.",
                )
            return ALLOW
        permission = BUCKET_PERMISSION.get(act)
        if (
            permission is not None
            and bucket.acls_enabled()
            and acl_allows(bucket.acl, caller, permission, ignore_public)
        ):
            return ALLOW
        return ACCESS_DENIED
    owner = bucket.owner if object_acl is None or not bucket.acls_enabled() else object_acl.owner
    if (caller or ANONYMOUS_OWNER) == owner:
        return ALLOW
    if policy_allows and owner == bucket.owner:
        return ALLOW
    permission = OBJECT_PERMISSION.get(act)
    if (
        permission is not None
        and object_acl is not None
        and bucket.acls_enabled()
        and acl_allows(object_acl, caller, permission, ignore_public)
    ):
        return ALLOW
    return ACCESS_DENIED


def is_public_bucket(bucket: BucketAccess) -> bool:
    """Whether anonymous callers can reach the bucket by its ACL or policy, after Block
    Public Access (the console's "Public" badge, for the bucket level)."""
    by_acl = (
        bucket.acls_enabled() and is_public_acl(bucket.acl) and not bucket.block.ignore_public_acls
    )
    by_policy = (
        bucket.policy is not None
        and bucket.policy.is_public()
        and not bucket.block.restrict_public_buckets
    )
    return by_acl or by_policy


def check_acl_change(bucket: BucketAccess, acl: Acl) -> Verdict | None:
    """The refusal of an ACL for the bucket or one of its objects (PutBucketAcl,
    PutObjectAcl, an ACL on PutObject/CopyObject), or None when it is accepted."""
    if not bucket.acls_enabled() and not only_owner_grants(acl, bucket.owner):
        return ACLS_NOT_SUPPORTED
    if bucket.block.block_public_acls and is_public_acl(acl):
        return ACCESS_DENIED
    return None


def check_policy_change(bucket: BucketAccess, policy: BucketPolicy) -> Verdict | None:
    """The refusal of a PutBucketPolicy (BlockPublicPolicy and a public policy), or None."""
    if bucket.block.block_public_policy and policy.is_public():
        return ACCESS_DENIED
    return None


def check_ownership_change(bucket: BucketAccess, mode: str) -> Verdict | None:
    """The refusal of PutBucketOwnershipControls: BucketOwnerEnforced while the bucket ACL
    grants anyone but the bucket owner. None when accepted."""
    if mode == ENFORCED and not only_owner_grants(bucket.acl, bucket.owner):
        return Verdict(False, 400, *ACL_WITH_ENFORCED)
    return None


def check_change(op: str, bucket: BucketAccess, config: Any) -> Verdict | None:
    """The refusal of the configuration ``config`` that operation ``op`` sets, or None."""
    if config is None:
        return None
    if op in ("PutBucketAcl", "PutObjectAcl"):
        return check_acl_change(bucket, config)
    if op == "PutBucketPolicy":
        return check_policy_change(bucket, config)
    if op == "PutBucketOwnershipControls":
        return check_ownership_change(bucket, config)
    return None


def ownership_from_xml(body: bytes) -> str:
    """The Object Ownership a PutBucketOwnershipControls body sets (AclError if invalid)."""
    error = AclError(400, "MalformedXML", MALFORMED_XML)
    root = parse_xml(body, "OwnershipControls", error)
    rules = [child for child in root if local_name(child.tag) == "Rule"]
    if len(rules) != 1 or len(rules[0]) != 1 or len(root) != 1:
        raise error
    setting = rules[0][0]
    mode = (setting.text or "").strip()
    if local_name(setting.tag) != "ObjectOwnership" or mode not in OWNERSHIP_MODES:
        raise error
    return mode


def ownership_to_xml(mode: str) -> bytes:
    """The OwnershipControls document GetBucketOwnershipControls answers with."""
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<OwnershipControls xmlns="{S3_NS}"><Rule><ObjectOwnership>{mode}'
        "</ObjectOwnership></Rule></OwnershipControls>"
    ).encode()
