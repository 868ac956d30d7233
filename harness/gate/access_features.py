"""The access mechanisms a store has, declared by its emulator (``access_features``).

A store's buckets are made public, and access is decided, only by the mechanisms it
declares: the S3 gate answers a call of one the store lacks with the store's own error
(e.g. 501 NotImplemented), and the harness makes a bucket public through the first
mechanism the store has (harness.emulators.s3.S3Emulator.make_public). Pure data, in the
gate package because every gate loads it: its code is in every gate's version, and a
store's declaration is part of its gate protocol's configuration.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.gate.rules import Verdict

MECHANISMS: dict[str, str] = {
    "bucket_policies": "S3 bucket policies (Put/Get/DeleteBucketPolicy, GetBucketPolicyStatus)",
    "acls": "S3 ACLs: grants and canned ACLs on buckets and objects (Get/PutBucketAcl, "
    "Get/PutObjectAcl, ACL headers on writes)",
    "canned_acls": "bucket ACLs 'private' and 'public-read' only, set by the x-amz-acl header; "
    "objects have their bucket's ACL (Backblaze B2)",
    "block_public_access": "S3 Block Public Access (Put/Get/DeletePublicAccessBlock)",
    "object_ownership": "S3 Object Ownership (x-amz-object-ownership, "
    "Put/Get/DeleteBucketOwnershipControls)",
    "public_bucket_setting": "a bucket's public switch set outside the storage API (in the "
    "provider's dashboard, e.g. a public domain for the bucket; the gate's admin API here)",
    "iam_policies": "bucket IAM policies (GCS setIamPolicy)",
    "uniform_bucket_level_access": "GCS uniform bucket-level access (object ACLs off)",
    "public_access_prevention": "GCS public access prevention",
    "object_acls": "GCS object ACLs and predefinedAcl",
    "container_public_access": "Azure container public access level (off, blob, container)",
}
"""Every mechanism a store may declare, with what it stands for."""


@dataclass(frozen=True)
class AccessFeatures:
    """The access mechanisms of one store (names of :data:`MECHANISMS`) and the error it
    answers to a call of a mechanism it lacks (``message`` may name ``{what}``: the
    operation, or the header and its value)."""

    mechanisms: frozenset[str]
    status: int = 501
    code: str = "NotImplemented"
    message: str = "{what} not implemented"

    def __post_init__(self) -> None:
        unknown = sorted(self.mechanisms - MECHANISMS.keys())
        if unknown:
            raise ValueError(
                f"Unknown access mechanism(s) {', '.join(unknown)}; known: "
                f"{', '.join(MECHANISMS)} (harness.gate.access_features)."
            )
        if {"acls", "canned_acls"} <= self.mechanisms:
            raise ValueError("Declare either 'acls' (S3's full ACLs) or 'canned_acls', not both.")

    def has(self, mechanism: str) -> bool:
        """True if the store has ``mechanism`` (a name of :data:`MECHANISMS`)."""
        if mechanism not in MECHANISMS:
            known = ", ".join(MECHANISMS)
            raise ValueError(f"Unknown access mechanism {mechanism!r}; known: {known}.")
        return mechanism in self.mechanisms

    @property
    def any_acls(self) -> bool:
        """True if the store has ACLs of either kind."""
        return bool({"acls", "canned_acls"} & self.mechanisms)

    def lacking(self, what: str) -> Verdict:
        """The store's answer to ``what`` (an operation, or a header and its value) of a
        mechanism it does not have."""
        return Verdict(False, self.status, self.code, self.message.format(what=what))


S3_FEATURES = AccessFeatures(
    frozenset(("bucket_policies", "acls", "block_public_access", "object_ownership")),
    message="A header you provided implies functionality that is not implemented",
)
"""Amazon S3: every S3 mechanism (the default of every S3-compatible emulator)."""
