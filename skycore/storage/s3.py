"""The S3 store: ``store: s3``, ``s3://bucket``, config section ``aws``, boto3, rclone ``s3``.

``S3Store`` also serves S3-compatible stores: a subclass changes the class variables, the
config model and the rclone provider.
"""

from __future__ import annotations

import threading
import uuid
from functools import cache, cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import BaseModel, ConfigDict

from skycore.storage.api import AbstractStore, AccessInfo
from skycore.storage.common import StorageError, basic_name_problem, is_ip_address
from skycore.storage.upload_tuning import GiB, MiB, PartLimits

if TYPE_CHECKING:
    from boto3.s3.transfer import TransferConfig


@cache
def _transfer() -> TransferConfig:
    """boto3's upload settings (boto3 loads on first use: it costs ~0.15 s to import)."""
    from boto3.s3.transfer import TransferConfig

    return TransferConfig(multipart_threshold=64 * 1024 * 1024, max_concurrency=4)


def _code(e: ClientError) -> str:
    err: dict[str, Any] = e.response.get("Error", {})
    return str(err.get("Code", ""))


def _status(e: ClientError) -> int:
    return int(e.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))


class AwsConfig(BaseModel):
    """S3 endpoint and the user's credentials (config.yaml section ``aws``)."""

    model_config = ConfigDict(extra="forbid")

    endpoint_url: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None
    region: str = "us-east-1"


def s3_name_problem(name: str) -> str | None:
    """Amazon S3 general-purpose bucket naming rules."""
    problem = basic_name_problem(name, "[a-z0-9.-]", "lowercase letters, digits, dots and hyphens")
    if problem:
        return problem
    if ".." in name:
        return "must not contain two adjacent dots"
    if is_ip_address(name):
        return "must not be formatted as an IP address"
    if name.startswith(("xn--", "sthree-", "amzn-s3-demo-")):
        return "must not start with 'xn--', 'sthree-' or 'amzn-s3-demo-'"
    if name.endswith(("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")):
        return "must not end with '-s3alias', '--ol-s3', '.mrap', '--x-s3' or '--table-s3'"
    return None


_CLIENTS: dict[tuple[object, ...], Any] = {}
_CLIENTS_LOCK = threading.Lock()


class S3Store(AbstractStore):
    """An S3 bucket."""

    store_name = "s3"
    cloud = "aws"
    config_section = "aws"
    config_model = AwsConfig
    bucket_label = "S3 bucket"
    rclone_provider: ClassVar[str] = "AWS"
    """rclone's ``provider`` for this S3 service."""
    location_constraint: ClassVar[bool] = True
    """create_bucket sends the region as LocationConstraint (outside us-east-1)."""
    section: AwsConfig
    upload_parts = PartLimits(
        5 * MiB, 5 * GiB, default_streams=4, default_chunk=5 * MiB,
        rule="an S3 multipart upload takes parts of 5 MiB to 5 GiB",
    )  # fmt: skip

    @classmethod
    def error_status(cls, e: Exception) -> int | None:
        return (_status(e) or None) if isinstance(e, ClientError) else None

    @classmethod
    def name_problem(cls, name: str) -> str | None:
        return s3_name_problem(name)

    @classmethod
    def rclone_provider_for(cls, section: Any) -> str:
        """rclone's ``provider``: AWS, or Other for any other endpoint of a store that keeps
        AWS's; a store naming its own ``rclone_provider`` always gets it."""
        aws = cls.rclone_provider == S3Store.rclone_provider
        return "Other" if aws and section.endpoint_url else cls.rclone_provider

    @classmethod
    def rclone_config(cls, section: Any) -> str:
        options: dict[str, str | None] = {
            "type": "s3",
            "provider": cls.rclone_provider_for(section),
            "region": section.region,
            "endpoint": section.endpoint_url,
            "force_path_style": "true",
            "no_check_bucket": "true",
            # No HEAD after each upload (the PUT's answer is checked): with ordered cached
            # mounts (one transfer at a time) it costs a round trip per file.
            "no_head": "true",
        }
        creds: dict[str, str | None] = {"env_auth": "true"}
        if section.access_key_id:
            creds = {
                "env_auth": "false",
                "access_key_id": section.access_key_id,
                "secret_access_key": section.secret_access_key,
            }
        return cls.rclone_remotes(options, creds, anonymous={"env_auth": "false"})

    @classmethod
    def describe_account(cls, section: Any) -> str:
        """The endpoint and the access key id (never the secret)."""
        who = section.access_key_id or "the default AWS credential chain"
        return f"endpoint {section.endpoint_url or 'the default'}, credentials of user {who}"

    def _make_client(self, anonymous: bool) -> Any:
        """One boto3 client per endpoint, credentials and signing mode, shared by every
        S3Store of the process (a new Session costs ~0.5 s of CPU; clients are
        thread-safe)."""
        aws = self.section
        key = (aws.endpoint_url, aws.region, aws.access_key_id, aws.secret_access_key, anonymous)
        with _CLIENTS_LOCK:
            client = _CLIENTS.get(key)
            if client is None:
                client = _CLIENTS[key] = self._new_client(anonymous)
            return client

    def _new_client(self, anonymous: bool) -> Any:
        import boto3
        from botocore import UNSIGNED
        from botocore.config import Config

        cfg = Config(
            s3={"addressing_style": "path"},
            retries={"max_attempts": 6, "mode": "standard"},
            connect_timeout=10,
            read_timeout=120,
            max_pool_connections=32,
            signature_version=UNSIGNED if anonymous else None,
        )
        kwargs: dict[str, Any] = {"region_name": self.section.region, "config": cfg}
        if self.section.endpoint_url:
            kwargs["endpoint_url"] = self.section.endpoint_url
        if not anonymous and self.section.access_key_id:
            kwargs["aws_access_key_id"] = self.section.access_key_id
            kwargs["aws_secret_access_key"] = self.section.secret_access_key
        return boto3.session.Session().client("s3", **kwargs)

    @cached_property
    def client(self) -> Any:
        """boto3 S3 client with the user's credentials."""
        return self._make_client(anonymous=False)

    @cached_property
    def anon_client(self) -> Any:
        """boto3 S3 client sending unsigned (anonymous) requests."""
        return self._make_client(anonymous=True)

    # --- operations ---------------------------------------------------------------------------
    def exists(self) -> bool:
        try:
            self.client.head_bucket(Bucket=self.name)
            return True
        except ClientError as e:
            if _status(e) == 404 or _code(e) in ("404", "NoSuchBucket"):
                return False
            if _status(e) == 403:
                return True
            raise self.fail("check", e) from None
        except BotoCoreError as e:
            raise self.fail("check", e) from None

    def create(self) -> None:
        kwargs: dict[str, Any] = {"Bucket": self.name}
        if self.location_constraint and self.section.region != "us-east-1":
            kwargs["CreateBucketConfiguration"] = {"LocationConstraint": self.section.region}
        try:
            self.client.create_bucket(**kwargs)
        except ClientError as e:
            if _code(e) == "BucketAlreadyOwnedByYou":
                return
            if _code(e) in ("BucketAlreadyExists", "AccessDenied") or _status(e) in (403, 409):
                if self._owned():
                    return
                raise self.name_taken() from None
            raise self.fail("create", e) from None

    def _owned(self) -> bool:
        """True if the user's own buckets (ListBuckets) include this one: S3-compatible
        servers (and AWS for some callers) answer a CreateBucket of one's own bucket with a
        409 BucketAlreadyExists, which then means "yours already", not "taken"."""
        try:
            pages = self.client.get_paginator("list_buckets").paginate()
            return any(b.get("Name") == self.name for p in pages for b in p.get("Buckets", []))
        except (ClientError, BotoCoreError):
            return False  # cannot list (no s3:ListAllMyBuckets): the 409 stands

    def list_keys(self, prefix: str = "") -> list[str]:
        keys: list[str] = []
        try:
            for client in (self.client, self.anon_client):
                try:
                    pages = client.get_paginator("list_objects_v2").paginate(
                        Bucket=self.name, Prefix=prefix
                    )
                    for page in pages:
                        keys.extend(obj["Key"] for obj in page.get("Contents", []))
                    return keys
                except ClientError as e:
                    if _status(e) != 403 or client is self.anon_client:
                        raise
                    keys = []
        except (ClientError, BotoCoreError) as e:
            raise self.fail("list", e) from None
        return keys

    def delete(self) -> int:
        keys = self.list_keys()

        def batch(chunk: list[str]) -> None:
            resp = self.client.delete_objects(
                Bucket=self.name, Delete={"Objects": [{"Key": k} for k in chunk], "Quiet": True}
            )
            if resp.get("Errors"):
                first = resp["Errors"][0]
                raise StorageError(
                    f"Could not delete {self.url}/{first.get('Key')}: "
                    f"{first.get('Message', first.get('Code'))}."
                )

        try:
            self.run_parallel(batch, keys, 1000)
            self.client.delete_bucket(Bucket=self.name)
        except ClientError as e:
            if _status(e) == 403:
                raise self.not_yours("delete") from None
            raise self.fail("delete", e) from None
        return len(keys)

    def _can_write(self) -> bool:
        """Start and abort a multipart upload: needs write permission, leaves no object."""
        key = f".skycore-access-probe-{uuid.uuid4().hex}"
        try:
            resp = self.client.create_multipart_upload(Bucket=self.name, Key=key)
        except ClientError as e:
            if _status(e) == 403:
                return False
            raise
        self.client.abort_multipart_upload(Bucket=self.name, Key=key, UploadId=resp["UploadId"])
        return True

    def access(self) -> AccessInfo:
        try:
            try:
                self.client.list_objects_v2(Bucket=self.name, MaxKeys=1)
            except ClientError as e:
                if _status(e) == 404 or _code(e) == "NoSuchBucket":
                    return AccessInfo.missing()
                if _status(e) != 403:
                    raise
                try:
                    self.anon_client.list_objects_v2(Bucket=self.name, MaxKeys=1)
                except ClientError as e2:
                    if _status(e2) == 404:
                        return AccessInfo.missing()
                    return AccessInfo.private()
                return AccessInfo.public()
            return AccessInfo.readable(self._can_write())
        except (ClientError, BotoCoreError) as e:
            raise self.fail("check access to", e) from None

    def is_object(self, key: str) -> bool:
        if not key:
            return False
        for client in (self.client, self.anon_client):
            try:
                client.head_object(Bucket=self.name, Key=key)
                return True
            except ClientError as e:
                if _status(e) != 403:
                    return False
        return False

    def upload_file(self, path: Path, key: str) -> None:
        try:
            self.client.upload_file(str(path), self.name, key, Config=_transfer())
        except (ClientError, BotoCoreError) as e:
            raise self.fail(f"upload {path} to", e) from None
        except Exception as e:  # boto3's S3UploadFailedError wraps ClientError
            if "AccessDenied" in str(e) or "403" in str(e):
                raise self.not_yours("write to") from None
            raise self.fail(f"upload {path} to", e) from None
