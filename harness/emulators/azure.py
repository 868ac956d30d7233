"""Azure Blob: Azurite (from npm, installed into ``$HARNESS_HOME/npm``) behind a gate that
only records write events; Azurite enforces accounts and public access itself."""

from __future__ import annotations

import base64
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import unquote, urlsplit

from harness.accounts import OTHER, UNKNOWN, USER
from harness.emulators.base import EmulatorError, RunningEmulator, installing_notice
from harness.gate_protocol import Exchange, GateProtocol, UpstreamResponse
from harness.gate_rules import Access, Kind, Verdict, header, split_path
from harness.procs import LOOPBACK, log_tail


@dataclass(frozen=True)
class StorageAccount:
    """An Azure storage account and its key."""

    name: str
    key: str


def _key(seed: str) -> str:
    return base64.b64encode((seed * 8).encode()[:64]).decode()


ACCOUNTS: dict[str, StorageAccount] = {
    USER: StorageAccount("skyuser", _key("skycore-user-")),
    OTHER: StorageAccount("skyother", _key("skycore-other")),
}
"""owner -> storage account; the ``unknown`` caller signs with a key of no account."""
UNKNOWN_KEY = _key("skycore-nobody")

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
    return ";".join(f"{a.name}:{a.key}" for a in ACCOUNTS.values())


# --- the gate protocol ---------------------------------------------------------------------


def classify_azure(method: str, path: str, headers: Mapping[str, str]) -> Access:
    """Classify an Azure Blob request (``/<account>/<container>/<blob>``) for event
    recording only: Azurite enforces access itself, so every request passes."""
    raw_path, query = split_path(path)
    segs = raw_path.lstrip("/").split("/", 2)
    if len(segs) < 3 or not segs[2]:
        container = unquote(segs[1]) if len(segs) > 1 and segs[1] else None
        restype = query.get("restype", [""])[0].lower()
        deletes = method.upper() == "DELETE" and restype == "container" and container is not None
        return Access(Kind.PASS, container, deletes_bucket=deletes)
    container, blob = unquote(segs[1]), unquote(segs[2])
    comp = query.get("comp", [""])[0].lower()
    method = method.upper()
    event: str | None = None
    if method == "PUT":
        if not comp:
            event = "copy" if header(headers, "x-ms-copy-source") else "put"
        elif comp == "blocklist":
            event = "commit"
    elif method == "DELETE" and not comp:
        event = "delete"
    return Access(Kind.PASS, container, blob, event=event)


def _xml_escape(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class AzureGateProtocol(GateProtocol):
    """Azure Blob: every request passes (Azurite checks keys and public access); the gate
    records blob writes."""

    def classify(self, ex: Exchange) -> tuple[Access, str | None]:
        return classify_azure(ex.method, ex.path, ex.headers), None

    def error_body(self, ex: Exchange, verdict: Verdict, access: Access) -> tuple[str, bytes]:
        xml = (
            '<?xml version="1.0" encoding="utf-8"?>\n<Error>'
            f"<Code>{verdict.code}</Code><Message>{_xml_escape(verdict.message)}</Message>"
            "</Error>"
        )
        return "application/xml", xml.encode()

    def fault_verdict(self, status: int) -> Verdict:
        codes = {
            503: (
                "ServerBusy",
                "The server is currently unable to receive requests. Please retry your request.",
            ),
            500: (
                "InternalError",
                "The server encountered an internal error. Please retry the request.",
            ),
            403: (
                "AuthenticationFailed",
                "Server failed to authenticate the request. Make sure "
                "the value of the Authorization header is formed correctly including the "
                "signature.",
            ),
        }
        code, message = codes.get(status, ("ServerBusy", "The server is busy."))
        return Verdict(False, status, code, message)

    def error_headers(self, verdict: Verdict) -> dict[str, str]:
        return {"x-ms-error-code": verdict.code}

    def after_success(
        self,
        ex: Exchange,
        access: Access,
        identity: str | None,
        up: UpstreamResponse,
        data: bytes,
    ) -> bytes:
        if access.deletes_bucket and access.bucket:
            ex.state.drop_bucket(access.bucket)
            return data
        if access.event is None or access.bucket is None or access.key is None:
            return data
        size = 0
        if access.event == "put":
            size = ex.content_length()
        elif access.event != "delete":
            size = _blob_size(ex)
        ex.state.record(access.bucket, access.key, size, access.event)
        return data


def _blob_size(ex: Exchange) -> int:
    """Blob size via the SDK, signed with the storage account's key."""
    segs = urlsplit(ex.path).path.lstrip("/").split("/", 2)
    account = next((a for a in ACCOUNTS.values() if a.name == segs[0]), None)
    if account is None or len(segs) < 3:
        return -1
    from azure.storage.blob import BlobClient

    host, port = ex.upstream
    blob = BlobClient(
        f"http://{host}:{port}/{account.name}",
        container_name=unquote(segs[1]),
        blob_name=unquote(segs[2]),
        credential={"account_name": account.name, "account_key": account.key},
        retry_total=0,
    )
    try:
        return int(blob.get_blob_properties().size)
    except Exception:
        return -1


# --- the emulator --------------------------------------------------------------------------


class AzureEmulator(RunningEmulator):
    """Azurite's blob service (data under ``$HARNESS_HOME/azurite``) behind the Azure gate.

    A container lives in the storage account of its owner; helpers find that account through
    the gate's bucket table (the user's account for containers it does not know).
    """

    store = "azure"
    cli_alias = "azure"
    implementation = "Azurite"
    public_dataset = "opendatasets"
    startup_timeout = 60.0
    persistent = True
    needs_node = True
    public_read_ignores_bad_credentials = True
    accounts: ClassVar[dict[str, StorageAccount]] = ACCOUNTS

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

    def account_url(self, account: str) -> str:
        """Blob service URL of a storage account, through the gate."""
        return f"{self.endpoint}/{account}"

    def config_section(self) -> Any:
        from skycore.storage.azure import AzureConfig

        account = ACCOUNTS[USER]
        return AzureConfig(
            account_name=account.name,
            account_key=account.key,
            endpoint_template=f"{self.endpoint}/{{account}}",
        )

    def client(self, owner: str | None = USER, account: str | None = None) -> Any:
        """A BlobServiceClient through the gate for ``owner``'s key (None: anonymous;
        unknown: a key of no account) on storage ``account`` (default: the owner's own
        account; the user's for anonymous and unknown callers)."""
        from azure.storage.blob import BlobServiceClient

        if account is None:
            account = ACCOUNTS[owner if owner in ACCOUNTS else USER].name
        credential: Any = None
        if owner == UNKNOWN:
            credential = {"account_name": account, "account_key": UNKNOWN_KEY}
        elif owner is not None:
            acct = ACCOUNTS[owner]
            credential = {"account_name": acct.name, "account_key": acct.key}
        return BlobServiceClient(self.account_url(account), credential=credential)

    def account_of(self, container: str, caller: str | None = USER) -> str:
        """The storage account holding ``container``: its owner's (from the gate), else the
        caller's own (the user's for anonymous and unknown callers)."""
        owner = self.bucket_owner(container) or caller
        return ACCOUNTS[owner if owner in ACCOUNTS else USER].name

    def _container(self, name: str, owner: str | None) -> Any:
        return self.client(owner, account=self.account_of(name, owner)).get_container_client(name)

    def bucket_url(self, name: str, owner: str = USER) -> str:
        return f"azure://{ACCOUNTS[owner].name}/{name}"

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
        return self.bucket_url(name, owner)

    def delete_bucket(self, name: str) -> None:
        from azure.core.exceptions import ResourceNotFoundError

        for owner in ACCOUNTS:
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
            account = ACCOUNTS[owner if owner in ACCOUNTS else USER].name
        lines = [
            "type = azureblob",
            f"account = {account}",
            f"endpoint = {self.endpoint}/{account}",
        ]
        if owner == UNKNOWN:
            lines.append(f"key = {UNKNOWN_KEY}")
        elif owner is not None:
            lines.append(f"key = {ACCOUNTS[owner].key}")
        return "[remote]\n" + "\n".join(lines) + "\n"


EMULATOR = AzureEmulator
