"""The Google Cloud Storage store: ``store: gcs``, ``gs://bucket``, config section ``gcp``,
google-cloud-storage, rclone ``google cloud storage``."""

from __future__ import annotations

import contextlib
import io
import re
from functools import cache, cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from skycore.storage.api import AbstractStore, AccessInfo
from skycore.storage.common import StorageError, is_ip_address

if TYPE_CHECKING:
    from google.cloud import storage as gcs


class GcpConfig(BaseModel):
    """GCS endpoint, project and the user's bearer token (None: application default
    credentials); config.yaml section ``gcp``."""

    model_config = ConfigDict(extra="forbid")

    api_endpoint: str | None = None
    project: str = "skycore"
    access_token: str | None = None


def gcs_name_problem(name: str) -> str | None:
    """Google Cloud Storage bucket naming rules."""
    if not re.fullmatch(r"[a-z0-9._-]+", name):
        return "may contain only lowercase letters, digits, dashes, underscores and dots"
    if not (name[0].isalnum() and name[-1].isalnum()):
        return "must begin and end with a lowercase letter or digit"
    limit = 222 if "." in name else 63
    if not 3 <= len(name) <= limit:
        return f"must be 3 to {limit} characters long (it has {len(name)})"
    if any(not 1 <= len(part) <= 63 for part in name.split(".")):
        return "each dot-separated part must be 1 to 63 characters long"
    if is_ip_address(name):
        return "must not be formatted as an IP address"
    if name.startswith("goog"):
        return "must not begin with 'goog'"
    if "google" in name or "g00gle" in name:
        return "must not contain 'google' or close misspellings of it"
    return None


@cache
def _rejected() -> tuple[type[Exception], ...]:
    """The user's credentials refused: 401 from the service, or google-auth failing to
    refresh a bearer token the service rejected. Reads then fall back to anonymous access."""
    from google.api_core import exceptions as gexc
    from google.auth.exceptions import RefreshError

    return (gexc.Unauthorized, RefreshError)


@cache
def _denied() -> tuple[type[Exception], ...]:
    """Refused or forbidden (403)."""
    from google.api_core import exceptions as gexc

    return (gexc.Forbidden, *_rejected())


def gcs_rclone_endpoint(api_endpoint: str) -> str:
    """rclone's GCS endpoint for a google-cloud-storage api_endpoint."""
    return api_endpoint.rstrip("/") + "/storage/v1/"


class GcsStore(AbstractStore):
    """A GCS bucket.

    A file goes up in one stream whatever its size (``upload_parts`` None): rclone's GCS
    backend sends one resumable upload whose chunks go one after another (the Google API
    client's upload, 16 MiB chunks) and has neither a chunk writer nor a writer-at, so
    rclone's multi-thread upload cannot split it; GCS's own ways to send parts at once
    (parallel composite uploads, the XML API's multipart upload) are not in rclone's GCS
    backend."""

    store_name = "gcs"
    schemes = ("gs",)
    cloud = "gcp"
    config_section = "gcp"
    config_model = GcpConfig
    bucket_label = "GCS bucket"
    endpoint_label = "GCS endpoint"
    section: GcpConfig

    @classmethod
    def name_problem(cls, name: str) -> str | None:
        return gcs_name_problem(name)

    @classmethod
    def rclone_config(cls, section: Any) -> str:
        endpoint = gcs_rclone_endpoint(section.api_endpoint) if section.api_endpoint else None
        options: dict[str, str | None] = {
            "type": "google cloud storage",
            "endpoint": endpoint,
            "project_number": section.project,
            "bucket_policy_only": "true",
        }
        auth: dict[str, str | None] = (
            {"access_token": section.access_token} if section.access_token else {"env_auth": "true"}
        )
        return cls.rclone_remotes(options, auth, anonymous={"anonymous": "true"})

    @classmethod
    def describe_account(cls, section: Any) -> str:
        """The endpoint, the project and the kind of credentials (never the token)."""
        who = "an access token" if section.access_token else "application default credentials"
        endpoint = section.api_endpoint or "the default"
        return f"endpoint {endpoint}, project {section.project}, credentials: {who}"

    def _options(self) -> dict[str, Any]:
        return {"api_endpoint": self.section.api_endpoint} if self.section.api_endpoint else {}

    @cached_property
    def client(self) -> gcs.Client:
        """Client with the user's credentials (bearer token, or application defaults)."""
        import google.oauth2.credentials
        from google.cloud import storage as gcs  # ~0.1 s to import: on first use

        creds = (
            google.oauth2.credentials.Credentials(self.section.access_token)
            if self.section.access_token
            else None
        )
        return gcs.Client(
            project=self.section.project, credentials=creds, client_options=self._options()
        )

    @cached_property
    def anon_client(self) -> gcs.Client:
        """Client sending anonymous requests (public buckets)."""
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage as gcs

        return gcs.Client(
            project=self.section.project,
            credentials=AnonymousCredentials(),  # type: ignore[no-untyped-call]
            client_options=self._options(),
        )

    @classmethod
    def error_text(cls, e: Exception) -> str:
        return str(getattr(e, "message", e))

    @classmethod
    def error_status(cls, e: Exception) -> int | None:
        from google.api_core import exceptions as gexc

        code = getattr(e, "code", None) if isinstance(e, gexc.GoogleAPICallError) else None
        return code if isinstance(code, int) else None

    def exists(self) -> bool:
        from google.api_core import exceptions as gexc

        try:
            self.client.bucket(self.name).reload()
            return True
        except gexc.NotFound:
            return False
        except gexc.Forbidden:
            return True
        except _rejected():
            raise StorageError(
                f"Could not check {self.url}: the service rejected the credentials of the "
                f"{self.config_section} section of the skycore config (401). Check its "
                "access_token, or remove it to use application default credentials."
            ) from None
        except gexc.GoogleAPIError as e:
            raise self.fail("check", e) from None

    def create(self) -> None:
        from google.api_core import exceptions as gexc

        try:
            self.client.create_bucket(self.name)
        except gexc.Conflict:
            if self.access().can_write:
                return
            raise self.name_taken() from None
        except _denied():
            raise self.name_taken() from None
        except gexc.GoogleAPIError as e:
            raise self.fail("create", e) from None

    def list_keys(self, prefix: str = "") -> list[str]:
        from google.api_core import exceptions as gexc

        try:
            try:
                return [b.name for b in self.client.list_blobs(self.name, prefix=prefix or None)]
            except _denied():
                blobs = self.anon_client.list_blobs(self.name, prefix=prefix or None)
                return [b.name for b in blobs]
        except gexc.GoogleAPIError as e:
            raise self.fail("list", e) from None

    def delete(self) -> int:
        from google.api_core import exceptions as gexc

        keys = self.list_keys()
        bucket = self.client.bucket(self.name)

        def batch(chunk: list[str]) -> None:
            for key in chunk:
                with contextlib.suppress(gexc.NotFound):
                    bucket.blob(key).delete()

        try:
            self.run_parallel(batch, keys, 50)
            bucket.delete()
        except _denied():
            raise self.not_yours("delete") from None
        except gexc.GoogleAPIError as e:
            raise self.fail("delete", e) from None
        return len(keys)

    def _can_write(self) -> bool:
        """Start a resumable upload session and never finish it: needs write permission,
        creates no object."""
        from google.resumable_media.common import InvalidResponse
        from google.resumable_media.requests import ResumableUpload

        base = (self.section.api_endpoint or "https://storage.googleapis.com").rstrip("/")
        url = f"{base}/upload/storage/v1/b/{self.name}/o?uploadType=resumable"
        upload = ResumableUpload(url, chunk_size=256 * 1024)
        transport = self.client._http
        try:
            upload.initiate(
                transport,
                io.BytesIO(b""),
                {"name": ".skycore-access-probe"},
                "application/octet-stream",
                total_bytes=0,
            )
        except InvalidResponse as e:
            if getattr(e.response, "status_code", None) in (401, 403):
                return False
            raise self.fail("check write access to", e) from None
        return True

    def access(self) -> AccessInfo:
        from google.api_core import exceptions as gexc

        try:
            try:
                list(self.client.list_blobs(self.name, max_results=1))
            except gexc.NotFound:
                return AccessInfo.missing()
            except _denied():
                try:
                    list(self.anon_client.list_blobs(self.name, max_results=1))
                except gexc.NotFound:
                    return AccessInfo.missing()
                except _denied():
                    return AccessInfo.private()
                return AccessInfo.public()
            return AccessInfo.readable(self._can_write())
        except gexc.GoogleAPIError as e:
            raise self.fail("check access to", e) from None

    def is_object(self, key: str) -> bool:
        if not key:
            return False
        for client in (self.client, self.anon_client):
            try:
                return bool(client.bucket(self.name).blob(key).exists())
            except _denied():
                continue
        return False

    def upload_file(self, path: Path, key: str) -> None:
        from google.api_core import exceptions as gexc

        try:
            self.client.bucket(self.name).blob(key).upload_from_filename(str(path))
        except _denied():
            raise self.not_yours("write to") from None
        except gexc.GoogleAPIError as e:
            raise self.fail(f"upload {path} to", e) from None
