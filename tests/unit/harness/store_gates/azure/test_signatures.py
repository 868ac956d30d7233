"""The Azure gate's pure logic (no cloud): its Shared Key and SAS verification agrees with
the signatures the Azure SDK makes, refuses any change to a signed request, and its table of
what anonymous callers may do at each public access level."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from urllib.parse import quote, urlsplit

from azure.core.pipeline import PipelineContext, PipelineRequest
from azure.core.rest import HttpRequest
from azure.storage.blob import (
    AccountSasPermissions,
    BlobSasPermissions,
    ContainerSasPermissions,
    ResourceTypes,
    generate_account_sas,
    generate_blob_sas,
    generate_container_sas,
)
from azure.storage.blob._shared.authentication import SharedKeyCredentialPolicy
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.accounts import OTHER, USER
from harness.gate.rules import query_pairs
from harness.store_gates.azure.access import (
    ANONYMOUS_OPERATIONS,
    LEVELS,
    anonymous_allowed,
    public_level,
)
from harness.store_gates.azure.bookkeeping import ACCOUNTS, account_owner, path_account
from harness.store_gates.azure.requests import classify_azure, operation
from harness.store_gates.azure.signatures import check_sas, check_shared_key
from tests.unit.hypothesis_budget import examples

ACCOUNT = "acct"
KEY = "c2t5Y29yZS10ZXN0LWtleS1za3ljb3JlLXRlc3Qta2V5LXNreWNvcmUtdGVzdC1rZXk="
OTHER_KEY = "b3RoZXIta2V5LW90aGVyLWtleS1vdGhlci1rZXktb3RoZXIta2V5LW90aGVyLWtleQ=="
NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)

names = st.from_regex(r"[a-z0-9][a-z0-9-]{2,20}", fullmatch=True)
blob_names = st.text(
    st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=30
).filter(lambda n: not n.startswith("/") and n.strip() == n and "\\" not in n)
meta = st.dictionaries(
    st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True),
    st.from_regex(r"[a-zA-Z0-9 ]{0,10}", fullmatch=True).map(str.strip).filter(bool),
    max_size=4,
)


def signed(method: str, path: str, headers: dict[str, str], key: str = KEY) -> dict[str, str]:
    """``headers`` plus the Authorization the SDK's Shared Key policy makes for the request."""
    request = HttpRequest(method, f"http://127.0.0.1:1{path}", headers=dict(headers))
    SharedKeyCredentialPolicy(ACCOUNT, key).on_request(
        PipelineRequest(request, PipelineContext(None))
    )
    return {k.lower(): v for k, v in request.headers.items()}


def verify(method: str, path: str, headers: dict[str, str], now: datetime = NOW) -> str | None:
    parts = urlsplit(path)
    return check_shared_key(method, parts.path, parts.query, headers, ACCOUNT, KEY, now)


def base_headers(extra: dict[str, str]) -> dict[str, str]:
    return {"x-ms-date": format_datetime(NOW, usegmt=True), "x-ms-version": "2026-10-06", **extra}


@settings(max_examples=examples(60))
@given(container=names, blob=blob_names, metadata=meta, length=st.integers(0, 99))
def test_the_sdks_shared_key_signatures_verify(
    container: str, blob: str, metadata: dict[str, str], length: int
) -> None:
    path = f"/{ACCOUNT}/{container}/{quote(blob)}?comp=metadata&timeout=30"
    headers = base_headers({f"x-ms-meta-{k}": v for k, v in metadata.items()})
    headers["content-length"] = str(length)
    good = signed("PUT", path, headers)
    assert verify("PUT", path, good) is None
    assert verify("DELETE", path, good) is not None
    assert verify("PUT", path.replace("timeout=30", "timeout=31"), good) is not None
    assert verify("PUT", f"/{ACCOUNT}/{container}/x{quote(blob)}?comp=metadata", good)
    assert verify("PUT", path, {**good, "x-ms-meta-planted": "1"}) is not None


def test_shared_key_refusals() -> None:
    path = f"/{ACCOUNT}/c/b"
    good = signed("GET", path, base_headers({}))
    assert verify("GET", path, good) is None
    assert verify("GET", path, signed("GET", path, base_headers({}), key=OTHER_KEY))
    stale = verify("GET", path, good, now=NOW + timedelta(minutes=16))
    assert stale is not None and "date" in stale
    undated = {k: v for k, v in good.items() if k != "x-ms-date"}
    assert "not specified" in (verify("GET", path, undated) or "")
    other_signer = {**good, "authorization": good["authorization"].replace(ACCOUNT, "someone")}
    assert verify("GET", path, other_signer) is not None
    bearer = {**good, "authorization": "Bearer abc"}
    assert "Bearer" in (verify("GET", path, bearer) or "")


def sas_params(token: str) -> dict[str, str]:
    return dict(query_pairs(token))


@settings(max_examples=examples(40))
@given(container=names, blob=blob_names, hours=st.integers(1, 48))
def test_the_sdks_sas_verify_and_expire(container: str, blob: str, hours: int) -> None:
    now = datetime.now(UTC)
    expiry = now + timedelta(hours=hours)
    tokens = {
        "account": generate_account_sas(
            ACCOUNT, KEY, ResourceTypes(object=True), AccountSasPermissions(read=True), expiry
        ),
        "container": generate_container_sas(
            ACCOUNT,
            container,
            account_key=KEY,
            permission=ContainerSasPermissions(read=True),
            expiry=expiry,
        ),
        "blob": generate_blob_sas(
            ACCOUNT,
            container,
            blob,
            account_key=KEY,
            permission=BlobSasPermissions(read=True),
            expiry=expiry,
        ),
    }
    for token in tokens.values():
        params = sas_params(token)
        assert check_sas(params, ACCOUNT, KEY, container, blob, now) is None
        assert check_sas(params, ACCOUNT, OTHER_KEY, container, blob, now) is not None
        later = expiry + timedelta(seconds=1)
        assert "expiry" in (check_sas(params, ACCOUNT, KEY, container, blob, later) or "")
        widened = {**params, "sp": "rw"}
        assert check_sas(widened, ACCOUNT, KEY, container, blob, now) is not None
    blob_sas = sas_params(tokens["blob"])
    assert check_sas(blob_sas, ACCOUNT, KEY, container, blob + "x", now) is not None
    assert check_sas(blob_sas, ACCOUNT, KEY, container, None, now) is not None


def test_sas_start_time_in_the_future_is_refused() -> None:
    start = datetime.now(UTC) + timedelta(hours=1)
    token = generate_blob_sas(
        ACCOUNT,
        "c",
        "b",
        account_key=KEY,
        permission=BlobSasPermissions(read=True),
        expiry=start + timedelta(hours=1),
        start=start,
    )
    reason = check_sas(sas_params(token), ACCOUNT, KEY, "c", "b", datetime.now(UTC))
    assert reason is not None and "time frame" in reason


@given(st.one_of(st.none(), st.text(max_size=12)))
def test_public_level_is_always_a_level(value: str | None) -> None:
    assert public_level(value) in LEVELS
    assert public_level(value) == "off" or (value or "").strip().lower() in ("blob", "container")


READS = {"GetBlob", "GetBlobProperties", "GetBlobMetadata", "GetBlockList"}
WRITES = {"PutBlob", "CopyBlob", "PutBlock", "PutBlockList", "DeleteBlob", "SetContainerACL"}


def test_levels_open_reads_only_and_nest() -> None:
    assert ANONYMOUS_OPERATIONS["off"] == frozenset()
    assert READS == ANONYMOUS_OPERATIONS["blob"] < ANONYMOUS_OPERATIONS["container"]
    for level in LEVELS:
        for action in WRITES | {"GetContainerACL", "ListContainers", "GetUncommittedBlockList"}:
            assert not anonymous_allowed(level, action)
    assert anonymous_allowed("container", "ListBlobs")
    assert not anonymous_allowed("blob", "ListBlobs")


def test_operations_are_named_as_in_the_rest_reference() -> None:
    cases = {
        ("GET", "/a/c/b"): "GetBlob",
        ("HEAD", "/a/c/b"): "GetBlobProperties",
        ("GET", "/a/c/b?comp=metadata"): "GetBlobMetadata",
        ("GET", "/a/c/b?comp=blocklist"): "GetBlockList",
        ("GET", "/a/c/b?comp=blocklist&blocklisttype=all"): "GetUncommittedBlockList",
        ("PUT", "/a/c/b"): "PutBlob",
        ("PUT", "/a/c/b?comp=block&blockid=x"): "PutBlock",
        ("PUT", "/a/c/b?comp=blocklist"): "PutBlockList",
        ("DELETE", "/a/c/b"): "DeleteBlob",
        ("GET", "/a/c?restype=container"): "GetContainerProperties",
        ("GET", "/a/c?restype=container&comp=list"): "ListBlobs",
        ("GET", "/a/c?restype=container&comp=acl"): "GetContainerACL",
        ("PUT", "/a/c?restype=container"): "CreateContainer",
        ("PUT", "/a/c?restype=container&comp=acl"): "SetContainerACL",
        ("DELETE", "/a/c?restype=container"): "DeleteContainer",
        ("GET", "/a/?comp=list"): "ListContainers",
    }
    for (method, path), name in cases.items():
        assert operation(method, path, {}) == name, (method, path)
    assert operation("PUT", "/a/c/b", {"x-ms-copy-source": "http://x"}) == "CopyBlob"


def test_container_requests_carry_the_level_they_set() -> None:
    create = classify_azure("PUT", "/a/c?restype=container", {"x-ms-blob-public-access": "blob"})
    assert (create.action, create.detail, create.bucket) == ("CreateContainer", "blob", "c")
    private = classify_azure("PUT", "/a/c?restype=container&comp=acl", {})
    assert (private.action, private.detail) == ("SetContainerACL", "off")
    delete = classify_azure("DELETE", "/a/c?restype=container", {})
    assert delete.deletes_bucket and delete.detail is None


def test_the_storage_account_of_a_path() -> None:
    user, other = ACCOUNTS[USER], ACCOUNTS[OTHER]
    for path in (
        f"/{user.name}",
        f"/{user.name}/c/b?comp=list",
        f"//{user.name}/c",
        f"/{user.name}?x=/y",
    ):
        assert path_account(path) == (USER, user)
        assert account_owner(path) == USER
    assert path_account(f"/{other.name}/c") == (OTHER, other)
    for path in ("/", "", "/nobody/c", f"/c/{user.name}", f"/?{user.name}"):
        assert path_account(path) == (None, None)
        assert account_owner(path) is None
