"""S3: moto's server behind the access gate (its protocol: harness.store_gates.s3.protocol),
and the SDK helpers tests use to reach it."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from harness.accounts import OTHER, UNKNOWN, USER
from harness.emulators.base import EmulatorError, PublicAccessUnavailable, RunningEmulator
from harness.emulators.launcher import harness_pythonpath
from harness.gate.access_features import S3_FEATURES, AccessFeatures
from harness.processes import LOOPBACK
from harness.store_gates.s3.keys import AccessKey
from harness.store_gates.s3.protocol import S3GateProtocol
from harness.store_gates.s3.upstream import GATE_KEY

if TYPE_CHECKING:
    from harness.targets import Target

__all__ = ["AccessKey", "S3Emulator", "S3GateProtocol"]

MOTO_SERVER = "harness.emulators.moto_server"
"""Run with ``python -m``: moto's server, patched (see that module)."""


def public_read_policy(bucket: str) -> dict[str, Any]:
    """A bucket policy that lets everyone read the bucket's objects and list it."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "PublicRead",
                "Effect": "Allow",
                "Principal": "*",
                "Action": "s3:GetObject",
                "Resource": f"arn:aws:s3:::{bucket}/*",
            },
            {
                "Sid": "PublicList",
                "Effect": "Allow",
                "Principal": "*",
                "Action": "s3:ListBucket",
                "Resource": f"arn:aws:s3:::{bucket}",
            },
        ],
    }


class _Refused(Exception):
    """The account is not allowed to delete the bucket (another account may be)."""


def _account_key(target: Target, owner: str, section: Any) -> AccessKey:
    """``owner``'s key pair from its config section of ``target``."""
    if not section.access_key_id or not section.secret_access_key:
        raise EmulatorError(
            f"Target file {target.path}: {owner}.access_key_id and {owner}.secret_access_key "
            "are needed (the suite signs its own requests with them); add both to the "
            f"'{owner}' section."
        )
    return AccessKey(section.access_key_id, section.secret_access_key)


def made_up_keys(store: str) -> dict[str, AccessKey]:
    """Access keys of ``store``'s emulator accounts (USER, OTHER) and a key no account has
    (UNKNOWN), each ``store``'s own: ``<STORE><OWNER>KEY000N`` and ``<store>-<owner>-secret-``
    padded to 40 characters."""
    tag = "".join(c for c in store.upper() if c.isalnum())
    return {
        owner: AccessKey(
            f"{tag}{owner.upper()}KEY{n:04d}", f"{store}-{owner}-secret-".ljust(40, "0")
        )
        for n, owner in enumerate((USER, OTHER, UNKNOWN), start=1)
    }


class S3Emulator(RunningEmulator):
    """moto's server, in memory, behind the S3 gate; started through
    harness.emulators.moto_server (moto with a key's ETag computed under the key's lock).

    An S3-compatible store reuses it by subclassing: its own name, scheme, region, keys and
    public bucket, its own moto process and gate. A subclass that names its own ``store``
    and not its ``scheme``, ``cli_alias`` or ``public_dataset`` gets ``scheme = store``, no
    alias, ``public_dataset = "<store>-public-datasets"`` and ``keys = made_up_keys(store)``
    (never S3's own).
    """

    store = "s3"
    cli_alias: ClassVar[str | None] = "aws"
    implementation = "moto"
    contract_probes = "harness.conformance.contract.s3"
    scheme: ClassVar[str] = "s3"
    region: ClassVar[str] = "us-east-1"
    public_dataset = "digitalcorpora"
    startup_timeout = 90.0
    keys: ClassVar[dict[str, AccessKey]] = {
        USER: AccessKey("AKIASKYCOREUSER00001", "skycore-user-secret-key-000000000000001"),
        OTHER: AccessKey("AKIASKYCOREOTHER0002", "skycore-other-secret-key-00000000000002"),
        UNKNOWN: AccessKey("AKIAUNKNOWNKEY000000", "not-a-known-secret"),
    }
    """owner -> access key; ``unknown`` is a key the gate does not know."""
    access_features: ClassVar[AccessFeatures] = S3_FEATURES
    """S3's mechanisms; a store with fewer declares its own (R2, B2): its gate answers the
    others' calls with the store's error, and make_public uses what it has."""
    public_setting_fix: ClassVar[str] = "in the store's console"
    """What the user does to make a bucket public, for a store whose buckets are public by a
    setting outside its API (``public_bucket_setting``), named when the harness cannot."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        name = cls.__dict__.get("store")
        if isinstance(name, str):
            own = cls.__dict__
            cls.scheme = own.get("scheme", name)
            cls.cli_alias = own.get("cli_alias")
            cls.public_dataset = own.get("public_dataset", f"{name}-public-datasets")
            cls.keys = own.get("keys") or made_up_keys(name)

    @classmethod
    def prepare(cls, home: Path) -> None:
        if importlib.util.find_spec("moto") is None or importlib.util.find_spec("flask") is None:
            raise EmulatorError(
                f"Cannot start the {cls.store} emulator: moto's server is not installed in "
                f"{sys.prefix}. Install it with 'pip install \"moto[server]\"' (or 'make venv')."
            )

    @classmethod
    def command(cls, home: Path, port: int, gate_port: int) -> tuple[list[str], dict[str, str]]:
        argv = [sys.executable, "-m", MOTO_SERVER, "-H", LOOPBACK, "-p", str(port)]
        return argv, {"PYTHONPATH": harness_pythonpath()}

    @classmethod
    def gate_protocol(cls) -> S3GateProtocol:
        known = {owner: key for owner, key in cls.keys.items() if owner != UNKNOWN}
        return S3GateProtocol(known, cls.region, cls.access_features)

    @classmethod
    def sdk_errors(cls) -> tuple[type[BaseException], ...]:
        from botocore.exceptions import ClientError

        return (ClientError,)

    @classmethod
    def upstream_keys(cls) -> list[AccessKey]:
        """Every key the server behind the gate must accept: the accounts' (the gate forwards
        their signed requests as they are) and the gate's own (it signs what it forwards for
        anonymous callers and its own HEADs with it). moto checks no signature; a server
        that does (``rclone serve s3 --auth-key``) must be given all of them."""
        return [key for owner, key in cls.keys.items() if owner != UNKNOWN] + [GATE_KEY]

    # --- a target file instead of the local cloud ------------------------------------------

    def use_target(self, target: Target) -> None:
        """The target's endpoint (None: the service's default), region and the accounts'
        keys; ``unknown`` stays a key no service knows."""
        user = target.section(USER)
        self.target_endpoint = user.endpoint_url
        # Instance attributes shadowing the class's: this instance talks to the target.
        self.region = user.region  # type: ignore[misc]
        keys = {USER: _account_key(target, USER, user), UNKNOWN: type(self).keys[UNKNOWN]}
        self.owner_endpoints = {USER: user.endpoint_url}
        if target.has_other:
            other = target.section(OTHER)
            keys[OTHER] = _account_key(target, OTHER, other)
            # Each account's own endpoint (an R2 endpoint names the account).
            self.owner_endpoints[OTHER] = other.endpoint_url
        self.keys = keys  # type: ignore[misc]

    def endpoint_of(self, owner: str | None) -> str | None:
        """The endpoint ``owner``'s requests go to (anonymous ones: the user's)."""
        if self.target is None:
            return self.endpoint
        return self.owner_endpoints.get(owner or USER, self.target_endpoint)

    def _key(self, owner: str) -> AccessKey:
        """``owner``'s key; an error naming the target file when it has no such account."""
        if self.target is None or owner in self.keys:
            return self.keys[owner]
        raise EmulatorError(
            f"There is no {owner} account in the target file {self.target.path}: add an "
            f"'{owner}' section (its access_key_id and secret_access_key) to run what needs it."
        )

    def config_section(self, owner: str = USER) -> Any:
        """``owner``'s config section (``AwsConfig``, ``R2Config``, ...): the target file's
        when attached, else the gate's endpoint with ``owner``'s keys."""
        from skycore.stores import get_store_class

        if self.target is not None:
            self._key(owner)
            return self.target.section(owner)
        key = self._key(owner)
        return get_store_class(self.store).config_model(
            endpoint_url=self.endpoint,
            access_key_id=key.access_key_id,
            secret_access_key=key.secret_access_key,
            region=self.region,
        )

    def client(self, owner: str | None = USER) -> Any:
        """A boto3 S3 client through the gate (path-style; unsigned if owner is None)."""
        import boto3
        from botocore import UNSIGNED
        from botocore.config import Config

        options: dict[str, Any] = {"s3": {"addressing_style": "path"}}
        if owner is None:
            return boto3.client(
                "s3",
                endpoint_url=self.endpoint_of(None),
                region_name=self.region,
                config=Config(signature_version=UNSIGNED, **options),
            )
        key = self._key(owner)
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_of(owner),
            region_name=self.region,
            aws_access_key_id=key.access_key_id,
            aws_secret_access_key=key.secret_access_key,
            config=Config(**options),
        )

    def list_buckets(self, owner: str = USER) -> dict[str, float]:
        """``owner``'s buckets (ListBuckets, every page): name -> CreationDate (Unix s)."""
        client = self.client(owner)
        found: dict[str, float] = {}
        for page in client.get_paginator("list_buckets").paginate():
            for bucket in page.get("Buckets", []):
                found[bucket["Name"]] = bucket["CreationDate"].timestamp()
        return found

    def bucket_url(self, name: str, owner: str = USER) -> str:
        return f"{self.scheme}://{name}"

    def create_bucket(self, name: str, owner: str, public: bool) -> Callable[[str, bytes], None]:
        """Create the bucket as a user does (with the region as LocationConstraint where the
        store sends one), public by :meth:`make_public`. With S3's ACLs and no bucket
        policies, each object is written public-read too (a bucket ACL covers listing only)."""
        from skycore.stores import get_store_class

        client = self.client(owner)
        if public and self.target is not None:
            self.check_public_possible()  # before anything is created
        kwargs: dict[str, Any] = {"Bucket": name}
        constrained = getattr(get_store_class(self.store), "location_constraint", False)
        if constrained and self.region != "us-east-1":
            kwargs["CreateBucketConfiguration"] = {"LocationConstraint": self.region}
        client.create_bucket(**kwargs)
        extra: dict[str, str] = {}
        if public:
            self.make_public(name, owner)
            features = self.access_features
            if features.has("acls") and not features.has("bucket_policies"):
                extra["ACL"] = "public-read"
        return lambda key, data: client.put_object(Bucket=name, Key=key, Body=data, **extra)

    def make_public(self, name: str, owner: str = USER) -> None:
        """The first mechanism the store has (``access_features``): a bucket policy letting
        everyone read and list it, after DeletePublicAccessBlock (S3); else the canned ACL
        ``public-read`` (B2); else the store's public setting, which here is the gate's admin
        API (the dashboard's switch) and against a target PublicAccessUnavailable."""
        features = self.access_features
        client = self.client(owner)
        if features.has("bucket_policies"):
            if features.has("block_public_access"):
                client.delete_public_access_block(Bucket=name)
            client.put_bucket_policy(Bucket=name, Policy=json.dumps(public_read_policy(name)))
        elif features.any_acls:
            client.put_bucket_acl(Bucket=name, ACL="public-read")
        else:
            self.check_public_possible()
            self.set_bucket_access(name, owner, public=True)

    def is_public(self, name: str, owner: str = USER) -> bool:
        """Asked the store's way: its policy status (S3), its bucket ACL's AllUsers READ
        grant (ACLs), or the gate's public flag (a public setting; PublicAccessUnavailable
        against a target)."""
        features = self.access_features
        client = self.client(owner)
        if features.has("bucket_policies"):
            status = client.get_bucket_policy_status(Bucket=name)["PolicyStatus"]
            if status.get("IsPublic"):
                return True
        if features.any_acls:
            grants = client.get_bucket_acl(Bucket=name).get("Grants", [])
            return any(
                g.get("Grantee", {}).get("URI", "").endswith("/global/AllUsers")
                and g.get("Permission") in ("READ", "FULL_CONTROL")
                for g in grants
            )
        if features.has("public_bucket_setting"):
            self.check_public_possible()
            info = self._admin("GET", "buckets").get(name)
            return bool(info and info.get("public"))
        return False

    def check_public_possible(self) -> None:
        """Raise PublicAccessUnavailable when the store has no API to make a bucket public
        and this instance talks to a target (the local gate's admin API stands in for the
        store's console)."""
        features = self.access_features
        if features.has("bucket_policies") or features.any_acls:
            return
        if not features.has("public_bucket_setting"):
            raise EmulatorError(
                f"The {self.store} emulator declares no way to make a bucket public "
                f"(access_features: {sorted(features.mechanisms)}); declare "
                "'bucket_policies', 'acls', 'canned_acls' or 'public_bucket_setting'."
            )
        if self.target is not None:
            raise PublicAccessUnavailable(
                f"The {self.store} store has no API call that makes a bucket public (no bucket "
                "policies, no ACLs): its buckets are public by a setting outside the S3 API, so "
                f"the harness cannot make its test buckets public at {self.endpoint} and the "
                "public bucket kinds are skipped against a target. A bucket is made public "
                f"outside the API: {self.public_setting_fix}."
            )

    def delete_bucket(self, name: str) -> None:
        """Delete ``name``, its objects and unfinished multipart uploads; nothing if it does
        not exist. In the local cloud as the owner the gate recorded; attached to a target,
        as the user, then as the other account if the user is refused. Raises
        EmulatorError when no account may delete it or the server fails."""
        if self.target is None:
            owners = [self.bucket_owner(name) or USER]
        else:
            owners = [owner for owner in (USER, OTHER) if owner in self.keys]
        refused: list[str] = []
        for owner in owners:
            try:
                self._empty_and_delete(name, owner)
                return
            except _Refused as e:
                refused.append(f"{owner}: {e}")
        raise EmulatorError(
            f"Cannot delete the {self.store} bucket '{name}' at {self.endpoint}: "
            f"{'; '.join(refused)}. Delete it by hand with its owner's credentials."
        )

    def _empty_and_delete(self, name: str, owner: str) -> None:
        """Empty and delete ``name`` as ``owner``; _Refused on AccessDenied."""
        from botocore.exceptions import ClientError

        client = self.client(owner)
        try:
            for page in client.get_paginator("list_objects_v2").paginate(Bucket=name):
                keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
                if keys:
                    client.delete_objects(Bucket=name, Delete={"Objects": keys, "Quiet": True})
            for upload in self._uploads(client, name):
                client.abort_multipart_upload(
                    Bucket=name, Key=upload["Key"], UploadId=upload["UploadId"]
                )
            client.delete_bucket(Bucket=name)
        except ClientError as e:
            code = e.response.get("Error", {}).get("Code", "")
            status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code == "NoSuchBucket":
                return
            if code in ("AccessDenied", "AllAccessDisabled") or status == 403:
                raise _Refused(f"{code or status} {e}") from None
            raise EmulatorError(
                f"Cannot delete the {self.store} bucket '{name}' as {owner}: the server "
                f"answered {code or status}: {e}"
            ) from None

    @staticmethod
    def _uploads(client: Any, name: str) -> list[dict[str, Any]]:
        """The bucket's unfinished multipart uploads (every page); none where the server
        keeps no such list (answers NotImplemented, or NoSuchUpload on a fresh bucket)."""
        from botocore.exceptions import ClientError

        uploads: list[dict[str, Any]] = []
        try:
            for page in client.get_paginator("list_multipart_uploads").paginate(Bucket=name):
                uploads += page.get("Uploads", [])
        except ClientError as e:
            code = e.response.get("Error", {}).get("Code", "")
            status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code in ("NoSuchUpload", "NotImplemented") or status == 501:
                return []
            raise
        return uploads

    def bucket_exists(self, name: str, owner: str = USER) -> bool:
        return name in self.list_buckets(owner)

    def list_keys(self, bucket: str, owner: str | None = USER) -> list[str]:
        pages = self.client(owner).get_paginator("list_objects_v2").paginate(Bucket=bucket)
        return sorted(o["Key"] for page in pages for o in page.get("Contents", []))

    def read_object(self, bucket: str, key: str, owner: str | None = USER) -> bytes:
        return bytes(self.client(owner).get_object(Bucket=bucket, Key=key)["Body"].read())

    def write_object(self, bucket: str, key: str, data: bytes, owner: str | None = USER) -> None:
        self.client(owner).put_object(Bucket=bucket, Key=key, Body=data)

    def delete_object(self, bucket: str, key: str, owner: str | None = USER) -> None:
        self.client(owner).delete_object(Bucket=bucket, Key=key)

    def rclone_config(self, owner: str | None = USER, bucket: str | None = None) -> str:
        lines = [
            "type = s3",
            "provider = Other",
            f"endpoint = {self.endpoint_of(owner)}",
            f"region = {self.region}",
            "force_path_style = true",
        ]
        if owner is not None:
            key = self._key(owner)
            lines += [
                f"access_key_id = {key.access_key_id}",
                f"secret_access_key = {key.secret_access_key}",
            ]
        return "[remote]\n" + "\n".join(lines) + "\n"
