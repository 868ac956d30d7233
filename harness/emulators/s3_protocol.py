"""Moved to harness.emulators.s3_gate.protocol (the S3 gate is a package now); this module
keeps the old import path of the S3 gate protocol working for store packages."""

from harness.emulators.s3_gate.protocol import S3GateProtocol, classify_s3

__all__ = ["S3GateProtocol", "classify_s3"]
