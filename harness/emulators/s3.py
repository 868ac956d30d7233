"""S3: moto's server behind the access gate."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from harness.accounts import ACCOUNTS, USER
from harness.emulators.base import EmulatorError, RunningEmulator
from harness.procs import LOOPBACK
from skycore.config import AwsConfig

REGION = "us-east-1"


class S3Emulator(RunningEmulator):
    """moto (``python -m moto.server``), in memory, behind the S3 gate."""

    store = "s3"
    startup_timeout = 90.0

    @classmethod
    def prepare(cls, home: Path) -> None:
        if importlib.util.find_spec("moto") is None or importlib.util.find_spec("flask") is None:
            raise EmulatorError(
                f"Cannot start the s3 emulator: moto's server is not installed in {sys.prefix}. "
                "Install it with 'pip install \"moto[server]\"' (or 'make venv')."
            )

    @classmethod
    def command(cls, home: Path, port: int, gate_port: int) -> tuple[list[str], dict[str, str]]:
        return [sys.executable, "-m", "moto.server", "-H", LOOPBACK, "-p", str(port)], {}

    def config_section(self) -> AwsConfig:
        account = ACCOUNTS[USER]
        return AwsConfig(
            endpoint_url=self.endpoint,
            access_key_id=account.s3_access_key_id,
            secret_access_key=account.s3_secret_access_key,
            region=REGION,
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
                region_name=REGION,
                config=Config(signature_version=UNSIGNED, **options),
            )
        account = ACCOUNTS[owner]
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id=account.s3_access_key_id,
            aws_secret_access_key=account.s3_secret_access_key,
            config=Config(**options),
        )

    def make_bucket(
        self,
        name: str,
        owner: str = USER,
        public: bool = False,
        objects: dict[str, bytes] | None = None,
    ) -> str:
        client = self.client(owner)
        client.create_bucket(Bucket=name)
        if public:
            self.set_bucket_access(name, owner, public=True)
        for key, data in (objects or {}).items():
            client.put_object(Bucket=name, Key=key, Body=data)
        return f"s3://{name}"

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
