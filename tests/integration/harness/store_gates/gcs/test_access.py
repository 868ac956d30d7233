"""GCS's access model through the gate, with the real google-cloud-storage SDK (or raw
requests for forged ones): IAM bindings, uniform bucket-level access, public access
prevention, fine-grained object ACLs and signed URLs V4."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest
import requests

from harness.accounts import OTHER, USER
from harness.emulators.fleet import RunningEmulator
from harness.emulators.gcs import EMAILS, GcsEmulator
from tests.names import unique_name

pytestmark = pytest.mark.gcp

DATA = b"some bytes\n"
VIEWER = "roles/storage.objectViewer"


@pytest.fixture
def gcs(emulators: dict[str, RunningEmulator]) -> GcsEmulator:
    emulator = emulators["gcs"]
    assert isinstance(emulator, GcsEmulator)
    return emulator


@pytest.fixture
def bucket(gcs: GcsEmulator) -> Iterator[Any]:
    """A new private bucket of USER (the API's defaults) holding ``a.txt`` and ``b.txt``."""
    name = unique_name("ga")
    made = gcs.client(USER).create_bucket(name)
    for key in ("a.txt", "b.txt"):
        made.blob(key).upload_from_string(DATA)
    yield made
    gcs.delete_bucket(name)


def _denied(gcs: GcsEmulator, call: Any) -> None:
    with pytest.raises(gcs.sdk_errors()):
        call()


def _bind(bucket: Any, role: str, member: str) -> None:
    policy = bucket.get_iam_policy()
    policy.bindings.append({"role": role, "members": {member}})
    bucket.set_iam_policy(policy)


def _unbind(bucket: Any, role: str, member: str) -> None:
    policy = bucket.get_iam_policy()
    for binding in policy.bindings:
        if binding["role"] == role:
            binding["members"].discard(member)
    bucket.set_iam_policy(policy)


def _read(gcs: GcsEmulator, owner: str | None, bucket: str, key: str = "a.txt") -> bytes:
    return bytes(gcs.client(owner).bucket(bucket).blob(key).download_as_bytes())


# --- IAM -------------------------------------------------------------------------------


def test_new_bucket_policy_is_the_projects_and_private(gcs: GcsEmulator, bucket: Any) -> None:
    policy = bucket.get_iam_policy()
    roles = {b["role"]: set(b["members"]) for b in policy.bindings}
    assert "projectOwner:123456789012" in roles["roles/storage.legacyBucketOwner"]
    assert not any("allUsers" in m for m in roles.values())
    _denied(gcs, lambda: _read(gcs, None, bucket.name))
    _denied(gcs, lambda: _read(gcs, OTHER, bucket.name))
    _denied(gcs, lambda: gcs.client(OTHER).bucket(bucket.name).get_iam_policy())
    bucket.reload()
    assert bucket.iam_configuration.uniform_bucket_level_access_enabled is False
    assert bucket.iam_configuration.public_access_prevention == "inherited"


def test_all_users_object_viewer_reads_and_lists_but_never_writes(
    gcs: GcsEmulator, bucket: Any
) -> None:
    _bind(bucket, "roles/storage.objectViewer", "allUsers")
    for caller in (None, OTHER):
        assert _read(gcs, caller, bucket.name) == DATA
        assert gcs.list_keys(bucket.name, caller) == ["a.txt", "b.txt"]
        _denied(gcs, lambda c=caller: gcs.write_object(bucket.name, "x", b"x", c))
        _denied(gcs, lambda c=caller: gcs.delete_object(bucket.name, "a.txt", c))
    _denied(gcs, lambda: gcs.client(None).bucket(bucket.name).get_iam_policy())
    _unbind(bucket, "roles/storage.objectViewer", "allUsers")
    _denied(gcs, lambda: _read(gcs, None, bucket.name))
    _denied(gcs, lambda: gcs.list_keys(bucket.name, OTHER))


def test_all_authenticated_users_excludes_anonymous(gcs: GcsEmulator, bucket: Any) -> None:
    _bind(bucket, "roles/storage.objectViewer", "allAuthenticatedUsers")
    assert _read(gcs, OTHER, bucket.name) == DATA
    _denied(gcs, lambda: _read(gcs, None, bucket.name))


def test_a_binding_for_the_other_account(gcs: GcsEmulator, bucket: Any) -> None:
    other = gcs.client(OTHER).bucket(bucket.name)
    asked = ["storage.objects.create", "storage.objects.get", "storage.buckets.setIamPolicy"]
    assert other.test_iam_permissions(asked) == []
    _bind(bucket, "roles/storage.objectCreator", f"serviceAccount:{EMAILS[OTHER]}")
    assert other.test_iam_permissions(asked) == ["storage.objects.create"]
    other.blob("from-other").upload_from_string(b"hi")
    _denied(gcs, lambda: _read(gcs, OTHER, bucket.name))  # creator, not viewer
    assert _read(gcs, OTHER, bucket.name, "from-other") == b"hi"  # its own object: OWNER
    _bind(bucket, "roles/storage.objectAdmin", f"user:{EMAILS[OTHER]}")
    assert _read(gcs, OTHER, bucket.name) == DATA
    other.blob("b.txt").delete()
    _unbind(bucket, "roles/storage.objectAdmin", f"user:{EMAILS[OTHER]}")
    _denied(gcs, lambda: other.blob("a.txt").delete())


def test_set_iam_policy_checks_its_etag_and_needs_the_permission(
    gcs: GcsEmulator, bucket: Any
) -> None:
    from google.api_core.exceptions import PreconditionFailed

    stale = bucket.get_iam_policy()
    _bind(bucket, "roles/storage.objectViewer", "allUsers")
    with pytest.raises(PreconditionFailed):
        bucket.set_iam_policy(stale)
    theirs = gcs.client(OTHER).bucket(bucket.name)
    _denied(gcs, lambda: theirs.set_iam_policy(stale))


def test_concurrent_set_iam_policies_with_one_etag_one_wins(gcs: GcsEmulator, bucket: Any) -> None:
    """setIamPolicy checks its etag atomically with the change: of several concurrent sets
    made from one read of the policy, exactly one succeeds, the others get 412."""
    url = f"{gcs.endpoint}/storage/v1/b/{bucket.name}/iam"
    token = {"Authorization": f"Bearer {gcs.tokens[USER]}"}
    etag = requests.get(url, headers=token, timeout=10).json()["etag"]
    members = ["allUsers", "allAuthenticatedUsers", f"user:{EMAILS[OTHER]}"] * 2

    def put(member: str) -> int:
        policy = {"etag": etag, "bindings": [{"role": VIEWER, "members": [member]}]}
        return requests.put(url, json=policy, headers=token, timeout=30).status_code

    with ThreadPoolExecutor(len(members)) as pool:
        statuses = sorted(pool.map(put, members))
    assert statuses == [200] + [412] * (len(members) - 1)


def test_an_invalid_iam_configuration_is_refused(gcs: GcsEmulator, bucket: Any) -> None:
    url = f"{gcs.endpoint}/storage/v1/b/{bucket.name}"
    token = {"Authorization": f"Bearer {gcs.tokens[USER]}"}
    body = {"iamConfiguration": {"publicAccessPrevention": "sometimes"}}
    resp = requests.patch(url, json=body, headers=token, timeout=10)
    assert resp.status_code == 400
    assert resp.json()["error"]["errors"][0]["reason"] == "invalid"
    bucket.reload()
    assert bucket.iam_configuration.public_access_prevention == "inherited"


# --- uniform bucket-level access, public access prevention -------------------------------


def test_uniform_access_refuses_acl_calls_and_ignores_acls(gcs: GcsEmulator, bucket: Any) -> None:
    from google.api_core.exceptions import BadRequest

    blob = bucket.blob("a.txt")
    blob.make_public()
    assert requests.get(_xml_url(gcs, bucket.name, "a.txt"), timeout=10).content == DATA
    bucket.iam_configuration.uniform_bucket_level_access_enabled = True
    bucket.patch()
    bucket.reload()
    assert bucket.iam_configuration.uniform_bucket_level_access_enabled is True
    with pytest.raises(BadRequest, match="uniform bucket-level access is enabled"):
        bucket.blob("b.txt").make_public()
    with pytest.raises(BadRequest, match="uniform bucket-level access is enabled"):
        bucket.blob("c.txt").upload_from_string(b"c", predefined_acl="publicRead")
    _denied(gcs, lambda: _read(gcs, None, bucket.name))  # a.txt's ACL no longer counts
    bucket.iam_configuration.uniform_bucket_level_access_enabled = False
    bucket.patch()
    assert _read(gcs, None, bucket.name) == DATA  # ... and counts again


def test_public_access_prevention_refuses_public_grants(gcs: GcsEmulator, bucket: Any) -> None:
    from google.api_core.exceptions import PreconditionFailed

    _bind(bucket, "roles/storage.objectViewer", "allUsers")
    assert _read(gcs, None, bucket.name) == DATA
    bucket.iam_configuration.public_access_prevention = "enforced"
    bucket.patch()
    _denied(gcs, lambda: _read(gcs, None, bucket.name))  # the old binding stops working
    with pytest.raises(PreconditionFailed, match="public access prevention"):
        _bind(bucket, "roles/storage.objectViewer", "allAuthenticatedUsers")
    with pytest.raises(PreconditionFailed):
        bucket.blob("b.txt").make_public()
    _unbind(bucket, "roles/storage.objectViewer", "allUsers")  # a policy with it: refused
    _bind(bucket, "roles/storage.objectViewer", f"user:{EMAILS[OTHER]}")  # not public: fine
    assert _read(gcs, OTHER, bucket.name) == DATA


# --- fine-grained object ACLs -----------------------------------------------------------


def _xml_url(gcs: GcsEmulator, bucket: str, key: str) -> str:
    return f"{gcs.endpoint}/{bucket}/{key}"


def test_public_read_acl_makes_only_that_object_public(gcs: GcsEmulator, bucket: Any) -> None:
    bucket.blob("pub.txt").upload_from_string(b"pub", predefined_acl="publicRead")
    made_public = bucket.blob("a.txt")
    made_public.make_public()
    assert made_public.acl.all().get_roles() == {"READER"}
    assert _read(gcs, None, bucket.name, "pub.txt") == b"pub"
    assert _read(gcs, None, bucket.name, "a.txt") == DATA
    assert requests.get(_xml_url(gcs, bucket.name, "pub.txt"), timeout=10).content == b"pub"
    denied = requests.get(_xml_url(gcs, bucket.name, "b.txt"), timeout=10)
    assert denied.status_code == 403
    _denied(gcs, lambda: _read(gcs, None, bucket.name, "b.txt"))
    _denied(gcs, lambda: gcs.list_keys(bucket.name, None))  # an object ACL lists nothing
    _denied(gcs, lambda: gcs.write_object(bucket.name, "pub.txt", b"x", OTHER))
    bucket.blob("a.txt").acl.save_predefined("private")
    _denied(gcs, lambda: _read(gcs, None, bucket.name, "a.txt"))


def test_object_acl_entries_and_their_owner(gcs: GcsEmulator, bucket: Any) -> None:
    blob = bucket.blob("a.txt")
    blob.acl.reload()
    assert blob.acl.user(EMAILS[USER]).get_roles() == {"OWNER"}
    blob.acl.user(EMAILS[OTHER]).grant_read()
    blob.acl.save()
    assert _read(gcs, OTHER, bucket.name) == DATA
    _denied(gcs, lambda: _read(gcs, None, bucket.name))
    theirs = gcs.client(OTHER).bucket(bucket.name).blob("a.txt")
    _denied(gcs, lambda: theirs.acl.save_predefined("publicRead"))  # READER is not OWNER
    entity = f"user-{EMAILS[OTHER]}"
    resp = requests.delete(
        f"{gcs.endpoint}/storage/v1/b/{bucket.name}/o/a.txt/acl/{entity}",
        headers={"Authorization": f"Bearer {gcs.tokens[USER]}"},
        timeout=10,
    )
    assert resp.status_code == 204
    _denied(gcs, lambda: _read(gcs, OTHER, bucket.name))


def test_concurrent_object_acl_entries_are_all_kept(gcs: GcsEmulator, bucket: Any) -> None:
    """Entries added to one object's ACL at the same time are all kept (each change is
    made to the ACL as it is then, not as it was when the request was decided)."""
    url = f"{gcs.endpoint}/storage/v1/b/{bucket.name}/o/a.txt/acl"
    token = {"Authorization": f"Bearer {gcs.tokens[USER]}"}
    entities = ["allUsers", "allAuthenticatedUsers", f"user-{EMAILS[OTHER]}"]

    def add(entity: str) -> int:
        entry = {"entity": entity, "role": "READER"}
        return requests.post(url, json=entry, headers=token, timeout=30).status_code

    for _ in range(4):
        with ThreadPoolExecutor(len(entities)) as pool:
            assert list(pool.map(add, entities)) == [200] * len(entities)
        items = requests.get(url, headers=token, timeout=10).json()["items"]
        assert set(entities) <= {i["entity"] for i in items}
        bucket.blob("a.txt").acl.save_predefined("private")


def test_copy_with_a_destination_predefined_acl(gcs: GcsEmulator, bucket: Any) -> None:
    source = bucket.blob("a.txt")
    token = {"Authorization": f"Bearer {gcs.tokens[USER]}"}
    url = (
        f"{gcs.endpoint}/storage/v1/b/{bucket.name}/o/a.txt/copyTo/b/{bucket.name}/o/copy.txt"
        "?destinationPredefinedAcl=publicRead"
    )
    assert requests.post(url, headers=token, timeout=10).status_code == 200
    assert _read(gcs, None, bucket.name, "copy.txt") == DATA
    assert source.exists()
    _denied(gcs, lambda: _read(gcs, None, bucket.name, "a.txt"))


# --- signed URLs V4 ----------------------------------------------------------------------


def _signed_get_and_put_work(
    gcs: GcsEmulator, sign: Callable[..., str], bucket: str, key: str, body: bytes
) -> str:
    """A URL ``sign`` signs as the user reads a.txt, and one for a PUT writes ``key``;
    returns the GET URL."""
    url = sign(bucket, "a.txt", USER)
    assert requests.get(url, timeout=10).content == DATA
    put = sign(bucket, key, USER, method="PUT")
    assert requests.put(put, data=body, timeout=10).status_code == 200
    assert _read(gcs, USER, bucket, key) == body
    return url


def test_signed_url_from_the_sdk_works(gcs: GcsEmulator, bucket: Any) -> None:
    _signed_get_and_put_work(gcs, gcs.signed_url, bucket.name, "up.txt", b"up")
    theirs = gcs.signed_url(bucket.name, "a.txt", OTHER)  # signed, but not allowed
    denied = requests.get(theirs, timeout=10)
    assert denied.status_code == 403 and b"AccessDenied" in denied.content


def test_hmac_signed_urls(gcs: GcsEmulator, bucket: Any) -> None:
    url = _signed_get_and_put_work(gcs, gcs.hmac_signed_url, bucket.name, "hmac.txt", b"h")
    for forged in (url.replace("/a.txt?", "/b.txt?"), url[:-4] + "0000"):
        resp = requests.get(forged, timeout=10)
        assert resp.status_code == 403 and b"SignatureDoesNotMatch" in resp.content
    theirs = requests.get(gcs.hmac_signed_url(bucket.name, "a.txt", OTHER), timeout=10)
    assert theirs.status_code == 403


def _with_query(url: str, **changes: str) -> str:
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    query.update(changes)
    return urlunsplit(parts._replace(query=urlencode(query)))


def test_forged_signed_urls_fail(gcs: GcsEmulator, bucket: Any) -> None:
    good = gcs.signed_url(bucket.name, "a.txt", USER)
    sig = dict(parse_qsl(urlsplit(good).query))["X-Goog-Signature"]
    flipped = ("0" if sig[0] != "0" else "1") + sig[1:]
    by_other_key = gcs.signed_url(bucket.name, "a.txt", OTHER)
    other_sig = dict(parse_qsl(urlsplit(by_other_key).query))["X-Goog-Signature"]
    forged = {
        "altered signature": _with_query(good, **{"X-Goog-Signature": flipped}),
        "wrong key": _with_query(good, **{"X-Goog-Signature": other_sig}),
        "tampered path": good.replace("/a.txt?", "/b.txt?"),
        "tampered query": _with_query(good, generation="1"),
        "longer expiry": _with_query(good, **{"X-Goog-Expires": "700"}),
    }
    for what, url in forged.items():
        resp = requests.get(url, timeout=10)
        assert resp.status_code == 403, what
        assert b"<Code>SignatureDoesNotMatch</Code>" in resp.content, what


def test_expired_and_overlong_signed_urls_fail(gcs: GcsEmulator, bucket: Any) -> None:
    two_hours_ago = datetime.now(UTC) - timedelta(hours=2)
    resp = requests.get(_signed_at(gcs, bucket.name, two_hours_ago, 3600), timeout=10)
    assert resp.status_code == 400 and b"<Code>ExpiredToken</Code>" in resp.content
    assert b"Request has expired" in resp.content
    assert requests.get(_signed_at(gcs, bucket.name, two_hours_ago, 3 * 3600), timeout=10).ok
    good = gcs.signed_url(bucket.name, "a.txt", USER)
    week = _with_query(good, **{"X-Goog-Expires": str(8 * 24 * 3600)})
    resp = requests.get(week, timeout=10)
    assert resp.status_code == 400 and b"X-Goog-Expires" in resp.content


def _signed_at(gcs: GcsEmulator, bucket: str, when: datetime, seconds: int) -> str:
    """A URL for a.txt signed by the SDK's V4 signer as if at ``when``."""
    from google.cloud.storage._signing import generate_signed_url_v4

    return str(
        generate_signed_url_v4(
            gcs.signing_credentials(USER),
            resource=f"/{bucket}/a.txt",
            expiration=seconds,
            api_access_endpoint=gcs.endpoint,
            _request_timestamp=when.strftime("%Y%m%dT%H%M%SZ"),
        )
    )


def test_public_bucket_kinds_are_made_with_iam(gcs: GcsEmulator) -> None:
    name = unique_name("gk")
    gcs.make_bucket(name, owner=OTHER, public=True, objects={"k": b"v"})
    try:
        policy = gcs.client(OTHER).bucket(name).get_iam_policy()
        viewers = next(b for b in policy.bindings if b["role"] == "roles/storage.objectViewer")
        assert "allUsers" in viewers["members"]
        assert gcs.read_object(name, "k", None) == b"v"
        assert gcs.list_keys(name, USER) == ["k"]
        _denied(gcs, lambda: gcs.write_object(name, "x", b"x", USER))
    finally:
        gcs.delete_bucket(name)
