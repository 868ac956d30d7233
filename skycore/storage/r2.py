"""The Cloudflare R2 store: ``store: r2``, ``r2://bucket``, config section ``r2``.

R2 speaks the S3 API at an account endpoint (``https://ACCOUNT_ID.r2.cloudflarestorage.com``)
with its own access keys, so the store is the S3 store with R2's name, URL scheme, config
model, bucket-name rules and rclone provider. This module and its emulator module
(harness/emulators/r2.py) are the whole store; docs/backends.md walks through both.
"""

from __future__ import annotations

from pydantic import model_validator

from skycore.storage.common import basic_name_problem
from skycore.storage.s3 import AwsConfig, S3Store


class R2Config(AwsConfig):
    """R2's account endpoint and the user's R2 access keys (config.yaml section ``r2``).

    Give ``account_id`` for the real service (the endpoint is derived from it) or
    ``endpoint_url`` for anything else (an emulator).
    """

    account_id: str | None = None
    region: str = "auto"

    @model_validator(mode="after")
    def _endpoint(self) -> R2Config:
        if self.endpoint_url is None:
            if not self.account_id:
                raise ValueError(
                    "the r2 section needs account_id (your Cloudflare account id) or endpoint_url"
                )
            self.endpoint_url = f"https://{self.account_id}.r2.cloudflarestorage.com"
        return self


def r2_name_problem(name: str) -> str | None:
    """Cloudflare R2 bucket naming rules."""
    return basic_name_problem(name, "[a-z0-9-]", "lowercase letters, digits and hyphens")


class R2Store(S3Store):
    """An R2 bucket (through boto3 at the account endpoint; rclone's Cloudflare provider)."""

    store_name = "r2"
    cloud = "cloudflare"
    config_model = R2Config
    bucket_label = "R2 bucket"
    rclone_provider = "Cloudflare"
    location_constraint = False  # R2 places buckets itself (region 'auto')

    @classmethod
    def name_problem(cls, name: str) -> str | None:
        return r2_name_problem(name)
