"""GcsStore: a Google Cloud Storage bucket through google-cloud-storage."""

from __future__ import annotations

import contextlib
import io
from functools import cached_property
from pathlib import Path
from typing import Any

import google.oauth2.credentials
from google.api_core import exceptions as gexc
from google.auth.credentials import AnonymousCredentials
from google.cloud import storage as gcs
from google.resumable_media.common import InvalidResponse
from google.resumable_media.requests import ResumableUpload

from skycore.config import GcpConfig, SkycoreConfig
from skycore.storage import mounting
from skycore.storage.common import StorageAccessError, StorageError, StoreType
from skycore.storage.store import AbstractStore, AccessInfo


class GcsStore(AbstractStore):
    """A GCS bucket."""

    store_type = StoreType.GCS

    def __init__(self, name: str, config: SkycoreConfig, account: str | None = None) -> None:
        super().__init__(name, config, None)
        if config.gcp is None:
            raise StorageError("The skycore config has no 'gcp' section; GCS is not configured.")
        self.gcp: GcpConfig = config.gcp

    def _options(self) -> dict[str, Any]:
        return {"api_endpoint": self.gcp.api_endpoint} if self.gcp.api_endpoint else {}

    @cached_property
    def client(self) -> gcs.Client:
        """Client with the user's credentials (bearer token, or application defaults)."""
        creds = (
            google.oauth2.credentials.Credentials(self.gcp.access_token)
            if self.gcp.access_token
            else None
        )
        return gcs.Client(
            project=self.gcp.project, credentials=creds, client_options=self._options()
        )

    @cached_property
    def anon_client(self) -> gcs.Client:
        """Client sending anonymous requests (public buckets)."""
        return gcs.Client(
            project=self.gcp.project,
            credentials=AnonymousCredentials(),  # type: ignore[no-untyped-call]
            client_options=self._options(),
        )

    def _fail(self, action: str, e: Exception) -> StorageError:
        return StorageError(
            f"Could not {action} gs://{self.name}: {getattr(e, 'message', e)}. Check the gcp "
            "section of the skycore config and that the GCS endpoint is reachable."
        )

    def exists(self) -> bool:
        try:
            self.client.bucket(self.name).reload()
            return True
        except gexc.NotFound:
            return False
        except gexc.Forbidden:
            return True
        except gexc.GoogleAPIError as e:
            raise self._fail("check", e) from None

    def create(self) -> None:
        try:
            self.client.create_bucket(self.name)
        except gexc.Conflict:
            if self.access().can_write:
                return
            raise StorageAccessError(
                f"The GCS bucket name '{self.name}' is already taken by another account. "
                "Choose another name."
            ) from None
        except gexc.Forbidden:
            raise StorageAccessError(
                f"The GCS bucket name '{self.name}' is already taken by another account. "
                "Choose another name."
            ) from None
        except gexc.GoogleAPIError as e:
            raise self._fail("create", e) from None

    def list_keys(self, prefix: str = "") -> list[str]:
        try:
            try:
                return [b.name for b in self.client.list_blobs(self.name, prefix=prefix or None)]
            except gexc.Forbidden:
                blobs = self.anon_client.list_blobs(self.name, prefix=prefix or None)
                return [b.name for b in blobs]
        except gexc.GoogleAPIError as e:
            raise self._fail("list", e) from None

    def delete(self) -> int:
        keys = self.list_keys()
        bucket = self.client.bucket(self.name)

        def batch(chunk: list[str]) -> None:
            for key in chunk:
                with contextlib.suppress(gexc.NotFound):
                    bucket.blob(key).delete()

        try:
            self.run_parallel(batch, keys, 50)
            bucket.delete()
        except gexc.Forbidden:
            raise StorageAccessError(
                f"You may not delete gs://{self.name}: it belongs to another account."
            ) from None
        except gexc.GoogleAPIError as e:
            raise self._fail("delete", e) from None
        return len(keys)

    def _can_write(self) -> bool:
        """Start a resumable upload session and never finish it: needs write permission,
        creates no object."""
        base = (self.gcp.api_endpoint or "https://storage.googleapis.com").rstrip("/")
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
            raise self._fail("check write access to", e) from None
        return True

    def access(self) -> AccessInfo:
        try:
            try:
                list(self.client.list_blobs(self.name, max_results=1))
            except gexc.NotFound:
                return AccessInfo(exists=False, detail="does not exist")
            except gexc.Forbidden:
                try:
                    list(self.anon_client.list_blobs(self.name, max_results=1))
                except gexc.NotFound:
                    return AccessInfo(exists=False, detail="does not exist")
                except (gexc.Forbidden, gexc.Unauthorized):
                    return AccessInfo(exists=True, detail="private to another account")
                return AccessInfo(exists=True, can_read=True, anonymous=True, detail="public")
            writable = self._can_write()
            return AccessInfo(
                exists=True,
                can_read=True,
                can_write=writable,
                detail="yours" if writable else "public, read-only for you",
            )
        except gexc.GoogleAPIError as e:
            raise self._fail("check access to", e) from None

    def is_object(self, key: str) -> bool:
        if not key:
            return False
        for client in (self.client, self.anon_client):
            try:
                return bool(client.bucket(self.name).blob(key).exists())
            except gexc.Forbidden:
                continue
        return False

    def upload_file(self, path: Path, key: str) -> None:
        try:
            self.client.bucket(self.name).blob(key).upload_from_filename(str(path))
        except gexc.Forbidden:
            raise StorageAccessError(
                f"You may not write to gs://{self.name}: it belongs to another account."
            ) from None
        except gexc.GoogleAPIError as e:
            raise self._fail(f"upload {path} to", e) from None

    def rclone_remote(self, anonymous: bool = False) -> str:
        return (mounting.GCS_ANON_REMOTE if anonymous else mounting.GCS_REMOTE) + ":"
