"""Deprecated path: the gate's access rules are harness.gate.rules."""

import warnings

from harness.gate.rules import (
    ALLOW,
    ANONYMOUS,
    INVALID,
    Access,
    Bucket,
    Kind,
    Verdict,
    decide,
    header,
    split_path,
)

__all__ = [
    "ALLOW",
    "ANONYMOUS",
    "INVALID",
    "Access",
    "Bucket",
    "Kind",
    "Verdict",
    "decide",
    "header",
    "split_path",
]

warnings.warn(
    "harness.gate_rules is deprecated; import from harness.gate.rules",
    DeprecationWarning,
    stacklevel=2,
)
