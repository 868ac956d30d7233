"""S3: moto's server behind the access gate (its protocol: harness.emulators.s3_gate.protocol),
and the SDK helpers tests use to reach it."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from harness.accounts import OTHER, UNKNOWN, USER
from harness.cloud.procs import LOOPBACK
from harness.emulators.base import EmulatorError, RunningEmulator
from harness.emulators.s3_gate.protocol import S3GateProtocol
from harness.emulators.s3_gate.signatures import AccessKey

__all__ = ["AccessKey", "S3Emulator", "S3GateProtocol"]


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


class S3Emulator(RunningEmulator):
    """moto (``python -m moto.server``), in memory, behind the S3 gate.

    An S3-compatible store reuses it by subclassing: its own name, scheme, region, keys and
    public bucket, its own moto process and gate.
    """

    store = "s3"
    cli_alias = "aws"
    implementation = "moto"
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

    @classmethod
    def prepare(cls, home: Path) -> None:
        if importlib.util.find_spec("moto") is None or importlib.util.find_spec("flask") is None:
            raise EmulatorError(
                f"Cannot start the {cls.store} emulator: moto's server is not installed in "
                f"{sys.prefix}. Install it with 'pip install \"moto[server]\"' (or 'make venv')."
            )

    @classmethod
    def command(cls, home: Path, port: int, gate_port: int) -> tuple[list[str], dict[str, str]]:
        return [sys.executable, "-m", "moto.server", "-H", LOOPBACK, "-p", str(port)], {}

    @classmethod
    def gate_protocol(cls) -> S3GateProtocol:
        known = {owner: key for owner, key in cls.keys.items() if owner != UNKNOWN}
        return S3GateProtocol(known, cls.region)

    @classmethod
    def sdk_errors(cls) -> tuple[type[BaseException], ...]:
        from botocore.exceptions import ClientError

        return (ClientError,)

    def config_section(self) -> Any:
        """The store's own config model (``AwsConfig``, ``R2Config``, ...) for the user."""
        from skycore.storage.registry import get_store_class

        key = self.keys[USER]
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
                endpoint_url=self.endpoint,
                region_name=self.region,
                config=Config(signature_version=UNSIGNED, **options),
            )
        key = self.keys[owner]
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=self.region,
            aws_access_key_id=key.access_key_id,
            aws_secret_access_key=key.secret_access_key,
            config=Config(**options),
        )

    def bucket_url(self, name: str, owner: str = USER) -> str:
        return f"{self.scheme}://{name}"

    def create_bucket(self, name: str, owner: str, public: bool) -> Callable[[str, bytes], None]:
        """Create the bucket as a user does on AWS: a private bucket is just created; a
        public one also has its Block Public Access removed and a bucket policy that lets
        everyone read and list it."""
        client = self.client(owner)
        client.create_bucket(Bucket=name)
        if public:
            client.delete_public_access_block(Bucket=name)
            client.put_bucket_policy(Bucket=name, Policy=json.dumps(public_read_policy(name)))
        return lambda key, data: client.put_object(Bucket=name, Key=key, Body=data)

    def delete_bucket(self, name: str) -> None:
        from botocore.exceptions import ClientError

        client = self.client(self.bucket_owner(name) or USER)
        try:
            for page in client.get_paginator("list_objects_v2").paginate(Bucket=name):
                keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
                if keys:
                    client.delete_objects(Bucket=name, Delete={"Objects": keys, "Quiet": True})
            uploads = client.list_multipart_uploads(Bucket=name).get("Uploads", [])
            for up in uploads:
                client.abort_multipart_upload(Bucket=name, Key=up["Key"], UploadId=up["UploadId"])
            client.delete_bucket(Bucket=name)
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") != "NoSuchBucket":
                raise

    def bucket_exists(self, name: str, owner: str = USER) -> bool:
        buckets = self.client(owner).list_buckets().get("Buckets", [])
        return name in {b["Name"] for b in buckets}

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
            f"endpoint = {self.endpoint}",
            f"region = {self.region}",
            "force_path_style = true",
        ]
        if owner is not None:
            key = self.keys[owner]
            lines += [
                f"access_key_id = {key.access_key_id}",
                f"secret_access_key = {key.secret_access_key}",
            ]
        return "[remote]\n" + "\n".join(lines) + "\n"
