"""Cloudflare R2: its own moto instance behind its own gate, speaking the S3 protocol with
R2's own access keys, region ``auto`` and ``r2://`` URLs.

R2 is S3-compatible, so this module reuses the S3 emulator and its gate protocol by
subclassing; everything that makes it R2 (name, scheme, identities, the public bucket, the
config section, its access mechanisms) is here. Its store module is skycore/storage/r2.py.

R2 has no ACLs, bucket policies or Block Public Access: its gate answers those calls 501
NotImplemented, as R2 does, and a bucket is made public by its public setting (the gate's
admin API here; R2's dashboard for a real account).
"""

from __future__ import annotations

from typing import ClassVar

from harness.accounts import OTHER, UNKNOWN, USER
from harness.emulators.s3 import AccessKey, S3Emulator
from harness.gate.access_features import AccessFeatures

R2_FEATURES = AccessFeatures(frozenset(("public_bucket_setting",)))
"""R2's access mechanisms: no ACLs, bucket policies, Block Public Access or Object Ownership
(its S3 API answers their calls 501 NotImplemented "<Operation> not implemented"); a bucket
is public by its r2.dev subdomain or a custom domain, switched on in the dashboard."""


class R2Emulator(S3Emulator):
    """moto, in memory, behind a gate that knows only R2's keys."""

    store = "r2"
    cli_alias = "cloudflare"
    scheme = "r2"
    region = "auto"
    public_dataset = "cloudflare-public-datasets"
    keys: ClassVar[dict[str, AccessKey]] = {
        USER: AccessKey(
            "2f0e1c9a7b6d4e3f8a1b2c3d4e5f6a01",
            "c0ffee00r2user0000000000000000000000000000000000000000000000000001",
        ),
        OTHER: AccessKey(
            "8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b02",
            "c0ffee00r2other000000000000000000000000000000000000000000000000002",
        ),
        UNKNOWN: AccessKey(
            "00000000000000000000000000000000",
            "0000000000000000000000000000000000000000000000000000000000000000",
        ),
    }
    """owner -> R2 access key (32 hex digits, as R2 issues them); never an S3 key."""
    access_features: ClassVar[AccessFeatures] = R2_FEATURES
    public_setting_fix = (
        "in the Cloudflare dashboard, R2 > the bucket > Settings > Public access (allow "
        "the r2.dev subdomain or connect a custom domain)"
    )

    def rclone_config(self, owner: str | None = USER, bucket: str | None = None) -> str:
        return (
            super()
            .rclone_config(owner, bucket)
            .replace("provider = Other", "provider = Cloudflare")
        )
