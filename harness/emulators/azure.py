"""Azure Blob: Azurite (from npm, installed into ``$HARNESS_HOME/npm``) behind a gate that
decides anonymous access by the containers' public levels and records write events (its
protocol: harness.store_gates.azure.protocol), and the SDK helpers tests use to reach it."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from filelock import FileLock

from harness.accounts import OTHER, UNKNOWN, USER
from harness.emulators.base import (
    EmulatorError,
    RunningEmulator,
    installing_notice,
    no_other_account,
)
from harness.gate.access_features import AccessFeatures
from harness.processes import LOOPBACK, log_tail
from harness.store_gates.azure.bookkeeping import ACCOUNTS, StorageAccount, account_key
from harness.store_gates.azure.protocol import AzureGateProtocol
from harness.store_gates.azure.requests import classify_azure

if TYPE_CHECKING:
    from harness.targets import Target

__all__ = ["ACCOUNTS", "AzureEmulator", "StorageAccount", "classify_azure"]

UNKNOWN_KEY = account_key("skycore-nobody")
"""The key the ``unknown`` caller signs with (of no account)."""

AZURITE_PACKAGE = "azurite@3"


def npm_dir(home: Path) -> Path:
    """Where Azurite is installed (``$HARNESS_HOME/npm``)."""
    return home / "npm"


def azurite_blob_bin(home: Path) -> Path:
    """The ``azurite-blob`` launcher inside the harness-local npm folder."""
    return npm_dir(home) / "node_modules" / ".bin" / "azurite-blob"


def ensure_azurite(home: Path) -> Path:
    """Install Azurite into ``$HARNESS_HOME/npm`` unless it is there; return azurite-blob.
    One install at a time (a file lock), whoever asks: ``harness up`` installs it beside
    the other emulators' start, outside their lock."""
    binary = azurite_blob_bin(home)
    home.mkdir(parents=True, exist_ok=True)
    with FileLock(str(home / "npm.lock"), timeout=900):  # npm links the binary before it ends
        if not binary.exists():
            _install_azurite(home, binary)
    return binary


def _install_azurite(home: Path, binary: Path) -> None:
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        raise EmulatorError(
            "Cannot start the azure emulator: Azurite needs node and npm, which are not on "
            "PATH. Install them (apt-get install nodejs npm) and start again."
        )
    target = npm_dir(home)
    target.mkdir(parents=True, exist_ok=True)
    log = home / "logs" / "npm-install.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    installing_notice(
        f"installing Azurite into {target} (npm install {AZURITE_PACKAGE}); this takes about a "
        f"minute, once. Progress: {log}"
    )
    with open(log, "ab") as out:
        try:
            result = subprocess.run(
                [
                    npm,
                    "install",
                    "--no-audit",
                    "--no-fund",
                    "--prefix",
                    str(target),
                    AZURITE_PACKAGE,
                ],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=900,
                check=False,
            )
            code: int | str = result.returncode
        except subprocess.TimeoutExpired:
            code = "timeout after 900 s"
    if code != 0 or not binary.exists():
        raise EmulatorError(
            f"Cannot start the azure emulator: 'npm install {AZURITE_PACKAGE}' into {target} "
            f"failed ({code}). {log} ends with:\n{log_tail(log)}\nCheck that the npm registry "
            f"is reachable, remove {target} and start again."
        )
    installing_notice(f"Azurite installed into {target}")


def azurite_accounts() -> str:
    """``AZURITE_ACCOUNTS``: both identities as separate storage accounts."""
    return ";".join(f"{a.name}:{a.key}" for a in ACCOUNTS.values())


AZURE_FEATURES = AccessFeatures(
    frozenset(("container_public_access",)), message="{what} is not implemented"
)
"""Azure's access mechanism: a container's public access level (off, blob, container)."""


class AzureEmulator(RunningEmulator):
    """Azurite's blob service (data under ``$HARNESS_HOME/azurite``) behind the Azure gate.

    A container lives in the storage account of its owner; helpers find that account through
    the gate's bucket table (the user's account for containers it does not know). Attached to
    a target file, the accounts, keys and blob endpoints are the target's, and a container's
    account is the first of the caller's own and the others' that holds it.
    """

    store = "azure"
    cli_alias = "azure"
    implementation = "Azurite"
    contract_probes = "harness.conformance.contract.azure"
    public_dataset = "opendatasets"
    access_features: ClassVar[AccessFeatures] = AZURE_FEATURES
    """A container's public access level (declared; the Azure gate models it)."""
    startup_timeout = 60.0
    persistent = True
    needs_node = True
    accounts: Mapping[str, StorageAccount] = ACCOUNTS
    """owner -> storage account (attached: the target's user and, if named, other)."""
    endpoint_templates: Mapping[str, str] = {}
    """account name -> blob endpoint template (attached; else the gate's ``/{account}``)."""
    denial_status = 404  # anonymous: ResourceNotFound (wrong keys and forged SAS get 403)

    @classmethod
    def prepare(cls, home: Path) -> None:
        ensure_azurite(home)

    @classmethod
    def command(cls, home: Path, port: int, gate_port: int) -> tuple[list[str], dict[str, str]]:
        location = home / "azurite"
        location.mkdir(parents=True, exist_ok=True)
        argv = [
            str(azurite_blob_bin(home)),
            "--blobHost",
            LOOPBACK,
            "--blobPort",
            str(port),
            "--location",
            str(location),
            "--skipApiVersionCheck",
            "--disableTelemetry",
            "--disableProductStyleUrl",
            "--loose",
        ]
        return argv, {"AZURITE_ACCOUNTS": azurite_accounts()}

    @classmethod
    def gate_protocol(cls) -> AzureGateProtocol:
        return AzureGateProtocol()

    @classmethod
    def sdk_errors(cls) -> tuple[type[BaseException], ...]:
        from azure.core.exceptions import HttpResponseError

        return (HttpResponseError,)

    def use_target(self, target: Target) -> None:
        """The target's storage accounts, keys and blob endpoint templates."""
        sections = {USER: target.section(USER)}
        if target.has_other:
            sections[OTHER] = target.section(OTHER)
        self.accounts = {
            owner: StorageAccount(section.account_name, section.account_key)
            for owner, section in sections.items()
        }
        # Later wins: the user's template for an account both sections name.
        self.endpoint_templates = {
            s.account_name: s.endpoint_template for s in reversed(sections.values())
        }
        self.target_endpoint = sections[USER].blob_endpoint()

    def account(self, owner: str) -> StorageAccount:
        """``owner``'s storage account (user or other)."""
        if owner not in self.accounts:
            raise no_other_account(self, owner)
        return self.accounts[owner]

    def account_url(self, account: str) -> str:
        """Blob service URL of a storage account, through the gate (attached: by the
        target's endpoint template, the user's for an account the target does not name)."""
        if self.target is None:
            return f"{self.endpoint}/{account}"
        template = self.endpoint_templates.get(account)
        if template is None:
            template = self.endpoint_templates[self.accounts[USER].name]
        return template.format(account=account)

    def _template(self, account: str) -> str:
        """The blob endpoint template skycore is given for ``account``."""
        if self.target is None:
            return f"{self.endpoint}/{{account}}"
        return self.endpoint_templates[account]

    def config_section(self, owner: str = USER) -> Any:
        from skycore.storage.azure import AzureConfig

        account = self.account(owner)
        return AzureConfig(
            account_name=account.name,
            account_key=account.key,
            endpoint_template=self._template(account.name),
        )

    def _own_account(self, owner: str | None) -> StorageAccount:
        """``owner``'s account; the user's for anonymous and unknown callers."""
        return self.account(owner) if owner in (USER, OTHER) else self.accounts[USER]

    def client(self, owner: str | None = USER, account: str | None = None) -> Any:
        """A BlobServiceClient through the gate for ``owner``'s key (None: anonymous;
        unknown: a key of no account) on storage ``account`` (default: the owner's own
        account; the user's for anonymous and unknown callers)."""
        from azure.storage.blob import BlobServiceClient

        if account is None:
            account = self._own_account(owner).name
        credential: Any = None
        if owner == UNKNOWN:
            credential = {"account_name": account, "account_key": UNKNOWN_KEY}
        elif owner is not None:
            acct = self.account(owner)
            credential = {"account_name": acct.name, "account_key": acct.key}
        return BlobServiceClient(self.account_url(account), credential=credential)

    def list_buckets(self, owner: str = USER) -> dict[str, float]:
        """``owner``'s containers (in their own account): name -> last modified (Azure keeps
        no creation time of a container)."""
        return {
            c.name: c.last_modified.timestamp() if c.last_modified else 0.0
            for c in self.client(owner).list_containers()
        }

    def account_of(self, container: str, caller: str | None = USER) -> str:
        """The storage account holding ``container``: its owner's (from the gate; attached:
        the first account of the caller's own and the others' that has it, asked with each
        account's key), else the caller's own (the user's for anonymous and unknown)."""
        own = self._own_account(caller)
        if self.target is None:
            owner = self.bucket_owner(container)
            return self.accounts[owner].name if owner is not None else own.name
        for account in (own, *(a for a in self.accounts.values() if a != own)):
            service = self.client(self._holder(account), account=account.name)
            if service.get_container_client(container).exists():
                return account.name
        return own.name

    def _holder(self, account: StorageAccount) -> str:
        """The owner whose key ``account`` is."""
        return next(o for o, a in self.accounts.items() if a == account)

    def _container(self, name: str, owner: str | None) -> Any:
        """``name`` in its storage account, as ``owner`` reaches it: with their key in their
        own account, anonymously in another's (nobody holds another account's key), with
        the wrong key for ``unknown``."""
        account = self.account_of(name, owner)
        if owner in (USER, OTHER) and self.account(owner).name != account:
            owner = None
        return self.client(owner, account=account).get_container_client(name)

    def bucket_url(self, name: str, owner: str = USER) -> str:
        return f"azure://{self.account(owner).name}/{name}"

    def create_bucket(self, name: str, owner: str, public: bool) -> Callable[[str, bytes], None]:
        """Create the container in ``owner``'s storage account through the gate, public at
        level ``container`` or private, the way a user would: the gate learns the owner and
        the level from the Create Container request itself."""
        service = self.client(owner)
        container = service.create_container(name, public_access="container" if public else None)
        return lambda key, data: container.upload_blob(key, data, overwrite=True)

    def set_public_access(self, name: str, level: str | None, owner: str = USER) -> None:
        """Change a container's public access level (None: off) through Set Container ACL,
        as a user would; the gate learns the new level from the request."""
        self.client(owner).get_container_client(name).set_container_access_policy(
            signed_identifiers={}, public_access=level
        )

    def delete_bucket(self, name: str) -> None:
        """Delete container ``name`` from every account that has it (each with its own key;
        no gate admin call, so the same attached to a target)."""
        from azure.core.exceptions import ResourceNotFoundError

        for owner in self.accounts:
            try:
                self.client(owner).delete_container(name)
            except ResourceNotFoundError:
                continue

    def bucket_exists(self, name: str, owner: str = USER) -> bool:
        return bool(self.client(owner).get_container_client(name).exists())

    def list_keys(self, bucket: str, owner: str | None = USER) -> list[str]:
        return sorted(self._container(bucket, owner).list_blob_names())

    def read_object(self, bucket: str, key: str, owner: str | None = USER) -> bytes:
        return bytes(self._container(bucket, owner).download_blob(key).readall())

    def write_object(self, bucket: str, key: str, data: bytes, owner: str | None = USER) -> None:
        self._container(bucket, owner).upload_blob(key, data, overwrite=True)

    def delete_object(self, bucket: str, key: str, owner: str | None = USER) -> None:
        self._container(bucket, owner).delete_blob(key)

    def rclone_config(self, owner: str | None = USER, bucket: str | None = None) -> str:
        if bucket is not None:
            account = self.account_of(bucket, owner)
        else:
            account = self._own_account(owner).name
        if owner in (USER, OTHER) and self.account(owner).name != account:
            owner = None  # another account's container: read anonymously, as skycore does
        lines = [
            "type = azureblob",
            f"account = {account}",
            f"endpoint = {self.account_url(account)}",
        ]
        if owner == UNKNOWN:
            lines.append(f"key = {UNKNOWN_KEY}")
        elif owner is not None:
            lines.append(f"key = {self.account(owner).key}")
        return "[remote]\n" + "\n".join(lines) + "\n"
