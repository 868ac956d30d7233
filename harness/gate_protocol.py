"""Deprecated path: the gate protocol contract is harness.gate.protocol."""

import warnings

from harness.gate.protocol import Exchange, GateProtocol, UpstreamResponse

__all__ = ["Exchange", "GateProtocol", "UpstreamResponse"]

warnings.warn(
    "harness.gate_protocol is deprecated; import from harness.gate.protocol",
    DeprecationWarning,
    stacklevel=2,
)
