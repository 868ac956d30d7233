"""Azure Blob: Azurite (from npm, installed into ``$HARNESS_HOME/npm``) behind a gate that
only records write events; Azurite enforces accounts and public access itself."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

from harness.accounts import ACCOUNTS, USER
from harness.emulators.base import EmulatorError, RunningEmulator, installing_notice
from harness.procs import LOOPBACK, log_tail
from skycore.config import AzureConfig

AZURITE_PACKAGE = "azurite@3"


def npm_dir(home: Path) -> Path:
    """Where Azurite is installed (``$HARNESS_HOME/npm``)."""
    return home / "npm"


def azurite_blob_bin(home: Path) -> Path:
    """The ``azurite-blob`` launcher inside the harness-local npm folder."""
    return npm_dir(home) / "node_modules" / ".bin" / "azurite-blob"


def ensure_azurite(home: Path) -> Path:
    """Install Azurite into ``$HARNESS_HOME/npm`` unless it is there; return azurite-blob."""
    binary = azurite_blob_bin(home)
    if binary.exists():
        return binary
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
    return binary


def azurite_accounts() -> str:
    """``AZURITE_ACCOUNTS``: both identities as separate storage accounts."""
    return ";".join(f"{a.azure_account}:{a.azure_key}" for a in ACCOUNTS.values())


class AzureEmulator(RunningEmulator):
    """Azurite's blob service (data under ``$HARNESS_HOME/azurite``) behind the Azure gate."""

    store = "azure"
    startup_timeout = 60.0
    persistent = True

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

    def account_url(self, account: str) -> str:
        """Blob service URL of a storage account, through the gate."""
        return f"{self.endpoint}/{account}"

    def config_section(self) -> AzureConfig:
        account = ACCOUNTS[USER]
        return AzureConfig(
            account_name=account.azure_account,
            account_key=account.azure_key,
            endpoint_template=f"{self.endpoint}/{{account}}",
        )

    def client(self, owner: str | None = USER, account: str | None = None) -> Any:
        """A BlobServiceClient through the gate for ``owner``'s key (None: anonymous) on
        ``account`` (default: the owner's own account; the user's for anonymous)."""
        from azure.storage.blob import BlobServiceClient

        if account is None:
            account = ACCOUNTS[owner or USER].azure_account
        credential: Any = None
        if owner is not None:
            acct = ACCOUNTS[owner]
            credential = {"account_name": acct.azure_account, "account_key": acct.azure_key}
        return BlobServiceClient(self.account_url(account), credential=credential)

    def make_bucket(
        self,
        name: str,
        owner: str = USER,
        public: bool = False,
        objects: dict[str, bytes] | None = None,
    ) -> str:
        service = self.client(owner)
        container = service.create_container(name, public_access="container" if public else None)
        self.set_bucket_access(name, owner, public=public)
        for key, data in (objects or {}).items():
            container.upload_blob(key, data, overwrite=True)
        return f"azure://{ACCOUNTS[owner].azure_account}/{name}"

    def delete_bucket(self, name: str) -> None:
        from azure.core.exceptions import ResourceNotFoundError

        for owner in ACCOUNTS:
            try:
                self.client(owner).delete_container(name)
            except ResourceNotFoundError:
                continue
