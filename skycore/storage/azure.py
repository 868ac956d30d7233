"""The Azure Blob store: ``store: azure``, ``azure://account/container``, config section
``azure``, azure-storage-blob, rclone ``azureblob``.

Containers of the user's own account (``config.azure.account_name``) use the account key;
containers of any other account are reached anonymously (public containers only).
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from skycore.storage.api import AbstractStore, AccessInfo
from skycore.storage.common import StorageAccessError, basic_name_problem
from skycore.storage.upload_tuning import MiB, PartLimits

if TYPE_CHECKING:
    from azure.core.exceptions import HttpResponseError
    from azure.storage.blob import BlobServiceClient, ContainerClient


class AzureConfig(BaseModel):
    """The user's storage account and key (config.yaml section ``azure``).

    ``endpoint_template`` builds a blob endpoint for any account, e.g.
    ``http://127.0.0.1:10000/{account}`` for an emulator; real Azure uses the default.
    """

    model_config = ConfigDict(extra="forbid")

    account_name: str
    account_key: str
    endpoint_template: str = "https://{account}.blob.core.windows.net"

    def blob_endpoint(self, account: str | None = None) -> str:
        """Blob service URL of ``account`` (the user's own by default)."""
        return self.endpoint_template.format(account=account or self.account_name)


def azure_name_problem(name: str) -> str | None:
    """Azure Blob container naming rules."""
    basic = basic_name_problem(name, "[a-z0-9-]", "lowercase letters, digits and hyphens")
    return basic or ("must not contain two consecutive hyphens" if "--" in name else None)


def _error_code(e: HttpResponseError) -> str:
    return str(getattr(e, "error_code", "") or "")


class AzureBlobStore(AbstractStore):
    """A container of an Azure storage account."""

    store_name = "azure"
    cloud = "azure"
    config_model = AzureConfig
    bucket_label = "Azure container"
    url_has_account = True
    endpoint_label = "blob endpoint"
    section: AzureConfig
    upload_parts = PartLimits(
        MiB, 4000 * MiB, default_streams=16, default_chunk=4 * MiB,
        rule="an Azure block is at most 4000 MiB; skycore asks for 1 MiB or more",
    )  # fmt: skip
    cached_upload_config = (("MultiThreadCutoff", "1"),)
    """Cached mounts upload every non-empty file with rclone's multi-thread copy, which reads
    it straight from the cache file. rclone 1.75.2's other Azure upload paths send a copy of
    the file from a pooled buffer that they free when the SDK call returns; when the store
    answers (a 403, say) before it has read the body, the HTTP transport may still be reading
    that buffer, and the daemon panics (``lib/pool.(*RW).readPage: index out of range``,
    seen in CI under ``harness fault azure deny``), taking every mount of the node down.
    The cost: a small file is two requests (a block, then the block list) and rclone reads
    the new blob's properties back (a HEAD), three round trips where one PUT would do. A big
    file goes up 16 blocks at a time on any mount, ordered too: rclone's multi-thread upload
    takes the backend's ``upload_concurrency`` (16) unless ``--multi-thread-streams`` is set
    on the command line (fs/operations/multithread.go)."""

    @classmethod
    def name_problem(cls, name: str) -> str | None:
        return azure_name_problem(name)

    @classmethod
    def default_account(cls, section: Any) -> str | None:
        return str(section.account_name)

    @classmethod
    def rclone_config(cls, section: Any) -> str:
        return cls.rclone_remotes(
            {
                "type": "azureblob",
                "account": section.account_name,
                "key": section.account_key,
                "endpoint": section.blob_endpoint(),
                "no_check_container": "true",
            },
            {},
        )

    @classmethod
    def describe_account(cls, section: Any) -> str:
        """The blob endpoint and the account (never its key)."""
        return f"endpoint {section.blob_endpoint()}, credentials of account {section.account_name}"

    @property
    def own_account(self) -> bool:
        """True when the container lives in the user's own storage account."""
        return self.account == self.section.account_name

    @cached_property
    def service(self) -> BlobServiceClient:
        """Service client: account key for the user's account, anonymous for any other."""
        from azure.storage.blob import BlobServiceClient  # ~0.3 s to import: on first use

        assert self.account is not None
        credential = (
            {"account_name": self.section.account_name, "account_key": self.section.account_key}
            if self.own_account
            else None
        )
        return BlobServiceClient(
            account_url=self.section.blob_endpoint(self.account),
            credential=credential,
            retry_total=3,
            connection_timeout=10,
        )

    @property
    def container(self) -> ContainerClient:
        """Client of this container."""
        return self.service.get_container_client(self.name)

    @classmethod
    def error_text(cls, e: Exception) -> str:
        return str(e).splitlines()[0] if str(e) else type(e).__name__

    @classmethod
    def error_status(cls, e: Exception) -> int | None:
        status = getattr(e, "status_code", None)
        return status if isinstance(status, int) else None

    def exists(self) -> bool:
        return self.access().exists

    def create(self) -> None:
        from azure.core.exceptions import AzureError, ResourceExistsError

        if not self.own_account:
            raise StorageAccessError(
                f"Cannot create {self.url}: the account '{self.account}' is not yours "
                f"('{self.section.account_name}')."
            )
        try:
            self.container.create_container()
        except ResourceExistsError:
            return
        except AzureError as e:
            raise self.fail("create", e) from None

    def list_keys(self, prefix: str = "") -> list[str]:
        from azure.core.exceptions import AzureError

        try:
            return [b.name for b in self.container.list_blobs(name_starts_with=prefix or None)]
        except AzureError as e:
            raise self.fail("list", e) from None

    def delete(self) -> int:
        from azure.core.exceptions import AzureError, ResourceNotFoundError

        if not self.own_account:
            raise self.not_yours("delete")
        try:
            count = len(self.list_keys())
            self.container.delete_container()  # the service deletes every blob with it
        except ResourceNotFoundError:
            return 0
        except AzureError as e:
            raise self.fail("delete", e) from None
        return count

    def access(self) -> AccessInfo:
        from azure.core.exceptions import (
            AzureError,
            ClientAuthenticationError,
            HttpResponseError,
            ResourceNotFoundError,
        )

        hidden = AccessInfo(
            exists=True,
            detail=f"is private to account '{self.account}' or does not exist (Azure does not "
            "tell anonymous callers which)",
        )
        try:
            next(iter(self.container.list_blobs(results_per_page=1).by_page()), None)
        except ResourceNotFoundError as e:
            # With the account key: ContainerNotFound. Anonymous on another account: Azure
            # answers alike for a private and a missing container.
            if _error_code(e) == "ContainerNotFound" or self.own_account:
                return AccessInfo.missing()
            return hidden
        except ClientAuthenticationError:
            return hidden
        except HttpResponseError as e:
            if e.status_code in (401, 403):
                return hidden
            raise self.fail("check access to", e) from None
        except AzureError as e:
            raise self.fail("check access to", e) from None
        if self.own_account:
            return AccessInfo.readable(writable=True)
        return AccessInfo.public()

    def is_object(self, key: str) -> bool:
        from azure.core.exceptions import AzureError

        if not key:
            return False
        try:
            return bool(self.container.get_blob_client(key).exists())
        except AzureError:
            return False

    def upload_file(self, path: Path, key: str) -> None:
        from azure.core.exceptions import AzureError, HttpResponseError

        try:
            with open(path, "rb") as f:
                self.container.upload_blob(key, f, overwrite=True, max_concurrency=4)
        except HttpResponseError as e:
            if e.status_code in (401, 403, 404) and not self.own_account:
                raise self.not_yours("write to") from None
            raise self.fail(f"upload {path} to", e) from None
        except AzureError as e:
            raise self.fail(f"upload {path} to", e) from None

    def rclone_remote(self, anonymous: bool = False) -> str:
        """The user's own remote for the own account; for any other account an on-the-fly
        remote reading its public containers (no secret)."""
        if self.own_account and not anonymous:
            return self.remote_name() + ":"
        assert self.account is not None
        endpoint = self.section.blob_endpoint(self.account)
        return f':azureblob,account={self.account},endpoint="{endpoint}":'
