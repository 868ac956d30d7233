"""The two identities of the local cloud: ``user`` (whose credentials skycore gets) and
``other`` (another account that owns the public-not-by-user buckets)."""

from __future__ import annotations

import base64
from dataclasses import dataclass

USER = "user"
OTHER = "other"
OWNERS = (USER, OTHER)


@dataclass(frozen=True)
class Account:
    """Credentials of one identity in every store."""

    owner: str
    s3_access_key_id: str
    s3_secret_access_key: str
    gcs_token: str
    azure_account: str
    azure_key: str


def _azure_key(seed: str) -> str:
    return base64.b64encode((seed * 8).encode()[:64]).decode()


ACCOUNTS: dict[str, Account] = {
    USER: Account(
        owner=USER,
        s3_access_key_id="AKIASKYCOREUSER00001",
        s3_secret_access_key="skycore-user-secret-key-000000000000001",
        gcs_token="ya29.skycore-user",
        azure_account="skyuser",
        azure_key=_azure_key("skycore-user-"),
    ),
    OTHER: Account(
        owner=OTHER,
        s3_access_key_id="AKIASKYCOREOTHER0002",
        s3_secret_access_key="skycore-other-secret-key-00000000000002",
        gcs_token="ya29.skycore-other",
        azure_account="skyother",
        azure_key=_azure_key("skycore-other"),
    ),
}


def owner_of_s3_key(access_key_id: str) -> str | None:
    """The identity behind an S3 access key id, or None when the key is unknown."""
    return next((a.owner for a in ACCOUNTS.values() if a.s3_access_key_id == access_key_id), None)


def owner_of_gcs_token(token: str) -> str | None:
    """The identity behind a GCS bearer token, or None when the token is unknown."""
    return next((a.owner for a in ACCOUNTS.values() if a.gcs_token == token), None)
