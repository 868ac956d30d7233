"""GCS's access model, free of any networking: IAM roles and bindings on a bucket, uniform
bucket-level access, public access prevention and fine-grained object ACLs (predefined ACLs
included), evaluated into the permissions a caller has on a bucket or an object.

Accounts are the local cloud's names (harness.accounts); each has one e-mail address, which
IAM members (``user:`` or ``serviceAccount:``) and ACL entities (``user-``) name. The
bucket's owner (its creator) is the owner of the bucket's project and has every permission.
Settings live in the gate's bucket table (``Bucket.settings``) as JSON values:
``{"iam": {"bindings": [...], "version": 1, "serial": n}, "uniform": bool,
"prevention": "inherited" | "enforced", "defaultObjectAcl": [[entity, role], ...]}``; an
object's ACL, when it grants anything beyond the bucket owner, is its object metadata
``{"acl": [[entity, role], ...]}``.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.accounts import OTHER, USER
from harness.gate.errors import StoreError

PROJECT_NUMBER = "123456789012"
"""The number of the project every bucket of the local cloud belongs to."""
EMAILS: Mapping[str, str] = {
    USER: "user@skycore.iam.gserviceaccount.com",
    OTHER: "other@skycore-other.iam.gserviceaccount.com",
}
"""account -> its e-mail (a service account: it signs URLs too)"""

PUBLIC_MEMBERS = ("allUsers", "allAuthenticatedUsers")
PUBLIC_ENTITIES = PUBLIC_MEMBERS

_GET, _LIST = "storage.objects.get", "storage.objects.list"
_CREATE, _DELETE = "storage.objects.create", "storage.objects.delete"
_UPDATE = "storage.objects.update"
_OBJ_IAM = ("storage.objects.getIamPolicy", "storage.objects.setIamPolicy")
_MULTIPART = (
    "storage.multipartUploads.create",
    "storage.multipartUploads.abort",
    "storage.multipartUploads.listParts",
    "storage.multipartUploads.list",
)
_BUCKET_GET = "storage.buckets.get"
_BUCKET_MANAGE = tuple(f"storage.buckets.{p}" for p in ("update", "getIamPolicy", "setIamPolicy"))
_BUCKET_REST = ("storage.buckets.delete", "storage.buckets.list", "storage.buckets.create")
_BUCKET_ALL = (_BUCKET_GET, *_BUCKET_MANAGE, *_BUCKET_REST)
_OBJECTS_ALL = (_GET, _LIST, _CREATE, _DELETE, _UPDATE, *_OBJ_IAM)

ROLES: Mapping[str, frozenset[str]] = {
    "roles/storage.objectViewer": frozenset({_GET, _LIST}),
    "roles/storage.objectCreator": frozenset({_CREATE, *_MULTIPART[:3]}),
    "roles/storage.objectUser": frozenset({_GET, _LIST, _CREATE, _DELETE, _UPDATE, *_MULTIPART}),
    "roles/storage.objectAdmin": frozenset({*_OBJECTS_ALL, *_MULTIPART}),
    "roles/storage.bucketViewer": frozenset({_BUCKET_GET, "storage.buckets.list"}),
    "roles/storage.admin": frozenset({*_OBJECTS_ALL, *_MULTIPART, *_BUCKET_ALL}),
    "roles/storage.legacyBucketReader": frozenset({_BUCKET_GET, _LIST}),
    "roles/storage.legacyBucketWriter": frozenset(
        {_BUCKET_GET, _LIST, _CREATE, _DELETE, *_MULTIPART}
    ),
    "roles/storage.legacyBucketOwner": frozenset(
        {_BUCKET_GET, *_BUCKET_MANAGE, _LIST, _CREATE, _DELETE, *_MULTIPART}
    ),
    "roles/storage.legacyObjectReader": frozenset({_GET}),
    "roles/storage.legacyObjectOwner": frozenset({_GET, _UPDATE, *_OBJ_IAM}),
}
"""The predefined Cloud Storage roles and their storage permissions, as GCS documents them."""
ALL_PERMISSIONS = frozenset(p for perms in ROLES.values() for p in perms)

ACL_ROLES: Mapping[str, frozenset[str]] = {
    "READER": frozenset({_GET}),
    "OWNER": frozenset({_GET, _UPDATE, *_OBJ_IAM}),
}
"""An object ACL role -> the object permissions it gives."""

_PROJECT = f"{PROJECT_NUMBER}"
DEFAULT_BINDINGS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("roles/storage.legacyBucketOwner", (f"projectEditor:{_PROJECT}", f"projectOwner:{_PROJECT}")),
    ("roles/storage.legacyBucketReader", (f"projectViewer:{_PROJECT}",)),
)
"""A new bucket's IAM policy (GCS: the project's convenience groups, legacy roles)."""
UNIFORM_BINDINGS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("roles/storage.legacyObjectOwner", (f"projectEditor:{_PROJECT}", f"projectOwner:{_PROJECT}")),
    ("roles/storage.legacyObjectReader", (f"projectViewer:{_PROJECT}",)),
)
"""Added to a new bucket's policy when it is created with uniform bucket-level access."""

PREDEFINED_OBJECT_ACLS = (
    "authenticatedRead",
    "bucketOwnerFullControl",
    "bucketOwnerRead",
    "private",
    "projectPrivate",
    "publicRead",
)
PREDEFINED_BUCKET_ACLS = (
    "authenticatedRead",
    "private",
    "projectPrivate",
    "publicRead",
    "publicReadWrite",
)
_BUCKET_ACL_BINDINGS = {
    "publicRead": ("roles/storage.legacyBucketReader", "allUsers"),
    "publicReadWrite": ("roles/storage.legacyBucketWriter", "allUsers"),
    "authenticatedRead": ("roles/storage.legacyBucketReader", "allAuthenticatedUsers"),
}

Acl = list[list[str]]
"""An object ACL: [[entity, role], ...]."""


class AccessError(StoreError, ValueError):
    """A request the access model refuses outright: HTTP status, GCS reason, message."""


PREVENTION_MESSAGE = (
    "The member bindings allUsers and allAuthenticatedUsers are not allowed since public "
    "access prevention is enforced."
)


def uniform_acl_error(what: str) -> AccessError:
    """The 400 GCS answers to an ACL call on a bucket with uniform bucket-level access."""
    return AccessError(
        400,
        "invalid",
        f"Cannot use ACL API to {what} when uniform bucket-level access is enabled. Read more "
        "at https://cloud.google.com/storage/docs/uniform-bucket-level-access",
    )


def email_account(email: str) -> str | None:
    """The account with e-mail ``email``, None if none has it."""
    return next((a for a, e in EMAILS.items() if e.lower() == email.lower()), None)


def member_matches(member: str, identity: str | None, owner: str) -> bool:
    """True if IAM ``member`` names caller ``identity`` (None: anonymous) of a bucket owned
    by ``owner``."""
    if member == "allUsers":
        return True
    if identity is None:
        return False
    if member == "allAuthenticatedUsers":
        return True
    kind, _, name = member.partition(":")
    if kind in ("user", "serviceAccount"):
        return email_account(name) == identity
    if kind in ("projectOwner", "projectEditor", "projectViewer"):
        return identity == owner
    return False  # group:, domain:, principal sets: nobody of the local cloud


def entity_matches(entity: str, identity: str | None, owner: str) -> bool:
    """True if object ACL ``entity`` names ``identity`` (None: anonymous)."""
    if entity == "allUsers":
        return True
    if identity is None:
        return False
    if entity == "allAuthenticatedUsers":
        return True
    if entity.startswith("user-"):
        return email_account(entity[5:]) == identity
    if entity.startswith("project-"):
        return identity == owner
    return False


@dataclass(frozen=True)
class BucketAccess:
    """A bucket's parsed access settings (cheap to query; build once per settings value)."""

    owner: str
    bindings: tuple[tuple[str, tuple[str, ...]], ...]
    uniform: bool = False
    prevention: str = "inherited"
    serial: int = 1
    public_flag: bool = False
    """The gate admin's public flag: as if allUsers had roles/storage.objectViewer."""
    default_object_acl: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, owner: str, settings: Mapping[str, Any], public: bool = False) -> BucketAccess:
        """Read the bucket table's settings (defaults for what is missing)."""
        iam = settings.get("iam") or {}
        raw = iam.get("bindings")
        bindings = DEFAULT_BINDINGS if raw is None else _bindings(raw)
        default_acl = tuple((str(e), str(r)) for e, r in settings.get("defaultObjectAcl") or ())
        return cls(
            owner,
            bindings,
            bool(settings.get("uniform", False)),
            str(settings.get("prevention", "inherited")),
            int(iam.get("serial", 1)),
            public,
            default_acl,
        )

    @property
    def enforced(self) -> bool:
        """Public access prevention is enforced."""
        return self.prevention == "enforced"

    def iam_permissions(self, identity: str | None) -> frozenset[str]:
        """What the bucket's IAM policy gives ``identity`` on the bucket and its objects."""
        if identity == self.owner:
            return ALL_PERMISSIONS
        found: set[str] = set()
        if self.public_flag and not self.enforced:
            found |= ROLES["roles/storage.objectViewer"]
        for role, members in self.bindings:
            perms = ROLES.get(role)
            if perms is None or perms <= found:
                continue
            for member in members:
                if self.enforced and member in PUBLIC_MEMBERS:
                    continue
                if member_matches(member, identity, self.owner):
                    found |= perms
                    break
        return frozenset(found)

    def acl_permissions(self, acl: Iterable[Sequence[str]], identity: str | None) -> frozenset[str]:
        """What an object ACL gives ``identity`` (nothing under uniform bucket-level access)."""
        if self.uniform:
            return frozenset()
        found: set[str] = set()
        for entity, role in acl:
            if self.enforced and entity in PUBLIC_ENTITIES:
                continue
            if entity_matches(entity, identity, self.owner):
                found |= ACL_ROLES.get(role, frozenset())
        return frozenset(found)

    def allows(
        self, permission: str, identity: str | None, acl: Iterable[Sequence[str]] | None = None
    ) -> bool:
        """True if ``identity`` has ``permission`` here (``acl``: the object's, if any)."""
        if permission in self.iam_permissions(identity):
            return True
        return acl is not None and permission in self.acl_permissions(acl, identity)

    def policy(self) -> dict[str, Any]:
        """The bucket's IAM policy as the JSON API returns it (storage#policy)."""
        return {
            "kind": "storage#policy",
            "version": 1,
            "etag": policy_etag(self.serial),
            "bindings": [{"role": r, "members": list(m)} for r, m in self.bindings],
        }


def _bindings(raw: Any) -> tuple[tuple[str, tuple[str, ...]], ...]:
    out = []
    for item in raw if isinstance(raw, list) else ():
        if isinstance(item, dict) and isinstance(item.get("role"), str):
            members = item.get("members") or []
            out.append((item["role"], tuple(str(m) for m in members if isinstance(m, str))))
    return tuple(out)


def policy_etag(serial: int) -> str:
    """A policy etag the way GCS writes them (base64 of a small varint)."""
    data = bytearray([0x08])
    n = serial
    while True:
        byte, n = n & 0x7F, n >> 7
        data.append(byte | (0x80 if n else 0))
        if not n:
            return base64.b64encode(bytes(data)).decode()


def new_policy(current: BucketAccess, body: Mapping[str, Any]) -> dict[str, Any]:
    """The ``iam`` setting after a setIamPolicy with ``body``; raises AccessError (412 under
    public access prevention, 412 on a stale etag, 400 on an unknown role)."""
    etag = body.get("etag")
    if etag and etag != policy_etag(current.serial):
        raise AccessError(412, "conditionNotMet", "Precondition Failed")
    bindings = _bindings(body.get("bindings") or [])
    for role, members in bindings:
        if role not in ROLES:
            raise AccessError(400, "invalid", f"Role {role} is not supported for this resource.")
        if current.enforced and any(m in PUBLIC_MEMBERS for m in members):
            raise AccessError(412, "conditionNotMet", PREVENTION_MESSAGE)
    return {
        "bindings": [{"role": r, "members": list(m)} for r, m in bindings if m],
        "version": 1,
        "serial": current.serial + 1,
    }


def new_bucket_settings(
    body: Mapping[str, Any], predefined: str | None, default_object_acl: str | None
) -> dict[str, Any]:
    """A new bucket's settings from its insert body (``iamConfiguration``) and the
    ``predefinedAcl`` / ``predefinedDefaultObjectAcl`` query parameters. Raises AccessError."""
    uniform, prevention = iam_configuration(body.get("iamConfiguration"), False, "inherited")
    if uniform and (predefined or default_object_acl):
        raise uniform_acl_error("set a predefined ACL")
    bindings = [(r, list(m)) for r, m in DEFAULT_BINDINGS]
    if uniform:
        bindings += [(r, list(m)) for r, m in UNIFORM_BINDINGS]
    if predefined in _BUCKET_ACL_BINDINGS:
        role, member = _BUCKET_ACL_BINDINGS[predefined]
        if prevention == "enforced":
            raise AccessError(412, "conditionNotMet", PREVENTION_MESSAGE)
        bindings.append((role, [member]))
    settings: dict[str, Any] = {
        "iam": {
            "bindings": [{"role": r, "members": m} for r, m in bindings],
            "version": 1,
            "serial": 1,
        },
        "uniform": uniform,
        "prevention": prevention,
    }
    if default_object_acl:
        settings["defaultObjectAcl"] = predefined_acl(default_object_acl, None)
    return settings


def iam_configuration(raw: Any, uniform: bool, prevention: str) -> tuple[bool, str]:
    """(uniform, prevention) after applying a bucket resource's ``iamConfiguration``."""
    if not isinstance(raw, dict):
        return uniform, prevention
    for key in ("uniformBucketLevelAccess", "bucketPolicyOnly"):
        value = raw.get(key)
        if isinstance(value, dict) and "enabled" in value:
            uniform = bool(value["enabled"])
            break
    value = raw.get("publicAccessPrevention")
    if isinstance(value, str):
        if value not in ("inherited", "enforced", "unspecified"):
            raise AccessError(400, "invalid", f"Invalid value for publicAccessPrevention: {value}")
        prevention = "inherited" if value == "unspecified" else value
    return uniform, prevention


def iam_configuration_resource(access: BucketAccess) -> dict[str, Any]:
    """The ``iamConfiguration`` of a bucket resource."""
    enabled = {"enabled": access.uniform}
    return {
        "bucketPolicyOnly": enabled,
        "uniformBucketLevelAccess": enabled,
        "publicAccessPrevention": access.prevention,
    }


def _project(team: str) -> str:
    return f"project-{team}-{PROJECT_NUMBER}"


def _owner_entry(account: str | None) -> Acl:
    email = EMAILS.get(account or "")
    return [[f"user-{email}", "OWNER"]] if email else []


def predefined_acl(name: str, uploader: str | None) -> Acl:
    """An object ACL from a ``predefinedAcl`` value (``uploader``: the writing account).
    Raises AccessError for an unknown name."""
    who = _owner_entry(uploader)
    owners, editors, viewers = _project("owners"), _project("editors"), _project("viewers")
    table: dict[str, Acl] = {
        "private": [],
        "projectPrivate": [[owners, "OWNER"], [editors, "OWNER"], [viewers, "READER"]],
        "publicRead": [["allUsers", "READER"]],
        "authenticatedRead": [["allAuthenticatedUsers", "READER"]],
        "bucketOwnerRead": [[owners, "READER"]],
        "bucketOwnerFullControl": [[owners, "OWNER"]],
    }
    if name not in table:
        raise AccessError(400, "invalid", f"Invalid argument: predefinedAcl={name}")
    return table[name] + who


def default_acl(access: BucketAccess, uploader: str | None) -> Acl:
    """A new object's ACL without a predefined one: the bucket's default object ACL (GCS:
    projectPrivate) and its uploader as OWNER."""
    if access.default_object_acl:
        acl = [list(e) for e in access.default_object_acl]
        return acl + [e for e in _owner_entry(uploader) if e not in acl]
    return predefined_acl("projectPrivate", uploader)


def acl_from_resource(items: Any) -> Acl:
    """An ACL from a JSON ``acl`` list of objectAccessControls. Raises AccessError."""
    acl: Acl = []
    for item in items if isinstance(items, list) else ():
        entity = item.get("entity") if isinstance(item, dict) else None
        role = item.get("role") if isinstance(item, dict) else None
        if not isinstance(entity, str) or role not in ACL_ROLES:
            raise AccessError(400, "invalid", "Invalid argument: object ACL entry.")
        acl.append([entity, str(role)])
    return acl


def check_acl(access: BucketAccess, acl: Acl) -> None:
    """Raise AccessError if ``acl`` cannot be set on an object of this bucket."""
    if access.uniform:
        raise uniform_acl_error("update an object ACL")
    if access.enforced and any(e in PUBLIC_ENTITIES for e, _ in acl):
        raise AccessError(412, "conditionNotMet", PREVENTION_MESSAGE)


def stored_acl(access: BucketAccess, acl: Acl) -> dict[str, Any] | None:
    """Object metadata for ``acl``: None when it gives nobody but the bucket owner anything
    (the gate keeps nothing for such objects)."""
    for entity, _role in acl:
        if entity in PUBLIC_ENTITIES:
            return {"acl": acl}
        if entity.startswith("user-") and email_account(entity[5:]) not in (None, access.owner):
            return {"acl": acl}
    return None


def acl_resource(acl: Acl, bucket: str, key: str) -> list[dict[str, Any]]:
    """An ACL as a JSON list of storage#objectAccessControl."""
    out = []
    for entity, role in acl:
        item: dict[str, Any] = {
            "kind": "storage#objectAccessControl",
            "bucket": bucket,
            "object": key,
            "entity": entity,
            "role": role,
            "etag": "CAE=",
        }
        if entity.startswith("user-"):
            item["email"] = entity[5:]
        out.append(item)
    return out
