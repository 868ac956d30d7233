"""The S3 access keys the gate knows: the key pair type, the key id a request names, the
owner and secret of a key id, and S3's refusals of an unknown key or a wrong signature
(both header signatures, ``signatures``, and POST forms, ``post``, use them)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from harness.gate.rules import Verdict


@dataclass(frozen=True)
class AccessKey:
    """An S3-style access key pair."""

    access_key_id: str
    secret_access_key: str


SIGV4 = "AWS4-HMAC-SHA256"
SIGV4_KEY = re.compile(r"Credential=([^/,\s]+)/")
SIGV2_KEY = re.compile(r"^AWS ([^:\s]+):")

SIGNATURE_MISMATCH = Verdict(
    False,
    403,
    "SignatureDoesNotMatch",
    "The request signature we calculated does not match the signature you provided. "
    "Check your key and signing method.",
)
UNKNOWN_KEY = Verdict(
    False,
    403,
    "InvalidAccessKeyId",
    "The AWS Access Key Id you provided does not exist in our records.",
)


def key_owner(keys: Mapping[str, AccessKey], access_key_id: str) -> tuple[str, str] | None:
    """(owner, secret) of an access key id among ``keys`` (owner -> key), None if unknown."""
    for owner, key in keys.items():
        if key.access_key_id == access_key_id:
            return owner, key.secret_access_key
    return None
