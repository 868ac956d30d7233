"""GCS's access model (harness.store_gates.gcs.access), request classification into
permissions (gcs_requests) and signed URL V4 verification (gcs_signed_urls), without a
cloud."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import parse_qs

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.accounts import OTHER, USER
from harness.gate.protocol import Exchange, Success
from harness.gate.rules import Bucket
from harness.gate.state import GateState
from harness.store_gates.gcs import access as ga
from harness.store_gates.gcs import signed_urls
from harness.store_gates.gcs.protocol import GcsGateProtocol
from harness.store_gates.gcs.requests import classify_gcs
from harness.store_gates.gcs.signed_urls import (
    SignedRequest,
    SignedUrlError,
    canonical_request,
    hmac_key,
    private_key,
    verify,
)
from tests.unit.hypothesis_budget import examples

CALLERS = (USER, OTHER, None)
VIEWER = "roles/storage.objectViewer"


def _bucket(*bindings: tuple[str, str], **settings_: object) -> ga.BucketAccess:
    iam = {"bindings": [{"role": r, "members": [m]} for r, m in bindings], "serial": 1}
    return ga.BucketAccess.parse(USER, {"iam": iam, **settings_})


def test_new_bucket_defaults_are_the_json_apis() -> None:
    settings_ = ga.new_bucket_settings({}, None, None)
    access = ga.BucketAccess.parse(USER, settings_)
    assert (access.uniform, access.prevention) == (False, "inherited")
    assert dict(access.bindings)["roles/storage.legacyBucketOwner"] == (
        f"projectEditor:{ga.PROJECT_NUMBER}",
        f"projectOwner:{ga.PROJECT_NUMBER}",
    )
    assert access.iam_permissions(USER) == ga.ALL_PERMISSIONS
    assert access.iam_permissions(OTHER) == frozenset()
    assert access.iam_permissions(None) == frozenset()
    uniform = ga.new_bucket_settings(
        {"iamConfiguration": {"uniformBucketLevelAccess": {"enabled": True}}}, None, None
    )
    roles = [b["role"] for b in uniform["iam"]["bindings"]]
    assert uniform["uniform"] and "roles/storage.legacyObjectReader" in roles


@pytest.mark.parametrize(
    ("member", "allowed"),
    [
        ("allUsers", {USER, OTHER, None}),
        ("allAuthenticatedUsers", {USER, OTHER}),
        (f"user:{ga.EMAILS[OTHER]}", {USER, OTHER}),
        (f"serviceAccount:{ga.EMAILS[OTHER]}", {USER, OTHER}),
        (f"projectViewer:{ga.PROJECT_NUMBER}", {USER}),
        ("group:everyone@example.com", {USER}),
        ("user:stranger@example.com", {USER}),
    ],
)
def test_members(member: str, allowed: set[str | None]) -> None:
    access = _bucket((VIEWER, member))
    got = {c for c in CALLERS if access.allows("storage.objects.get", c)}
    assert got == allowed


@pytest.mark.parametrize(
    ("role", "has", "lacks"),
    [
        (VIEWER, {"storage.objects.get", "storage.objects.list"}, {"storage.objects.create"}),
        ("roles/storage.objectCreator", {"storage.objects.create"}, {"storage.objects.get"}),
        ("roles/storage.legacyBucketReader", {"storage.objects.list"}, {"storage.objects.get"}),
        ("roles/storage.legacyObjectReader", {"storage.objects.get"}, {"storage.objects.list"}),
        (
            "roles/storage.objectAdmin",
            {"storage.objects.delete", "storage.objects.setIamPolicy"},
            {"storage.buckets.setIamPolicy"},
        ),
        ("roles/storage.admin", {"storage.buckets.setIamPolicy"}, set()),
        (
            "roles/storage.legacyBucketOwner",
            {"storage.buckets.setIamPolicy", "storage.objects.create"},
            {"storage.objects.get"},
        ),
    ],
)
def test_roles_give_what_gcs_documents(role: str, has: set[str], lacks: set[str]) -> None:
    perms = _bucket((role, f"user:{ga.EMAILS[OTHER]}")).iam_permissions(OTHER)
    assert has <= perms and not lacks & perms


def test_prevention_makes_public_grants_ineffective_and_refuses_new_ones() -> None:
    enforced = _bucket((VIEWER, "allUsers"), prevention="enforced")
    assert not enforced.allows("storage.objects.get", None)
    assert not enforced.allows("storage.objects.get", OTHER, [["allAuthenticatedUsers", "READER"]])
    body = {"bindings": [{"role": VIEWER, "members": ["allAuthenticatedUsers"]}]}
    with pytest.raises(ga.AccessError) as refused:
        ga.new_policy(enforced, body)
    assert refused.value.status == 412
    with pytest.raises(ga.AccessError):
        ga.check_acl(enforced, ga.predefined_acl("publicRead", USER))
    with pytest.raises(ga.AccessError):
        ga.new_bucket_settings(
            {"iamConfiguration": {"publicAccessPrevention": "enforced"}}, "publicRead", None
        )


def test_policy_etag_changes_with_each_set() -> None:
    access = ga.BucketAccess.parse(USER, {})
    policy = access.policy()
    body = {"etag": policy["etag"], "bindings": [{"role": VIEWER, "members": ["allUsers"]}]}
    new = ga.new_policy(access, body)
    after = ga.BucketAccess.parse(USER, {"iam": new})
    assert after.policy()["etag"] != policy["etag"]
    with pytest.raises(ga.AccessError) as stale:
        ga.new_policy(after, body)
    assert stale.value.status == 412
    with pytest.raises(ga.AccessError):
        ga.new_policy(after, {"bindings": [{"role": "roles/owner", "members": ["allUsers"]}]})


def _varint(etag: str) -> int:
    """The serial a policy etag encodes (field 1 of a protobuf: 0x08, then a varint)."""
    data = base64.b64decode(etag)
    assert data[0] == 0x08
    value = 0
    for shift, byte in enumerate(data[1:]):
        value |= (byte & 0x7F) << (7 * shift)
        assert bool(byte & 0x80) == (shift < len(data) - 2)
    return value


@given(st.integers(min_value=1, max_value=2**40), st.integers(min_value=1, max_value=2**40))
def test_policy_etags_name_their_serial(a: int, b: int) -> None:
    assert _varint(ga.policy_etag(a)) == a
    assert (ga.policy_etag(a) == ga.policy_etag(b)) == (a == b)


MEMBERS = ("allUsers", "allAuthenticatedUsers", f"user:{ga.EMAILS[OTHER]}")


@settings(max_examples=examples(40))
@given(st.lists(st.lists(st.sampled_from(MEMBERS), max_size=2), min_size=1, max_size=6))
def test_a_policy_and_its_serial_make_its_etag(changes: list[list[str]]) -> None:
    """Reading one policy twice gives one etag; every set (even to the same bindings)
    gives a new one, and each etag seen before is stale: 412."""
    settings_ = ga.new_bucket_settings({}, None, None)
    seen: list[str] = []
    for members in changes:
        current = ga.BucketAccess.parse(USER, settings_)
        policy = current.policy()
        assert ga.BucketAccess.parse(USER, json.loads(json.dumps(settings_))).policy() == policy
        assert policy["etag"] not in seen
        bindings = [{"role": VIEWER, "members": members}]
        for old in seen:
            with pytest.raises(ga.AccessError) as stale:
                ga.new_policy(current, {"etag": old, "bindings": bindings})
            assert stale.value.status == 412
        seen.append(policy["etag"])
        settings_ = {**settings_, "iam": ga.new_policy(current, {**policy, "bindings": bindings})}
    assert len(set(seen)) == len(changes)


def test_object_acls_count_only_without_uniform_access() -> None:
    acl = ga.predefined_acl("publicRead", USER)
    fine = _bucket()
    assert fine.allows("storage.objects.get", None, acl)
    assert not fine.allows("storage.objects.list", None, acl)
    assert not fine.allows("storage.objects.setIamPolicy", None, acl)
    uniform = _bucket(uniform=True)
    assert not uniform.allows("storage.objects.get", None, acl)
    with pytest.raises(ga.AccessError, match="uniform bucket-level access is enabled") as e:
        ga.check_acl(uniform, acl)
    assert e.value.status == 400


@pytest.mark.parametrize("name", ga.PREDEFINED_OBJECT_ACLS)
def test_predefined_object_acls(name: str) -> None:
    acl = ga.predefined_acl(name, OTHER)
    assert [f"user-{ga.EMAILS[OTHER]}", "OWNER"] in acl
    public = {e for e, _ in acl} & {"allUsers", "allAuthenticatedUsers"}
    assert bool(public) == (name in ("publicRead", "authenticatedRead"))
    assert ga.stored_acl(_bucket(), acl) is not None  # OTHER's own grant is kept
    owners = ga.predefined_acl(name, USER)
    assert (ga.stored_acl(_bucket(), owners) is None) == (not public)


def test_unknown_predefined_acl_is_refused() -> None:
    with pytest.raises(ga.AccessError):
        ga.predefined_acl("public-read", USER)


def test_iam_configuration() -> None:
    enabled = {"uniformBucketLevelAccess": {"enabled": True}, "publicAccessPrevention": "enforced"}
    assert ga.iam_configuration(enabled, False, "inherited") == (True, "enforced")
    assert ga.iam_configuration({"bucketPolicyOnly": {"enabled": True}}, False, "x") == (True, "x")
    assert ga.iam_configuration(None, True, "enforced") == (True, "enforced")
    with pytest.raises(ga.AccessError):
        ga.iam_configuration({"publicAccessPrevention": "sometimes"}, False, "inherited")


# --- classification ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "action"),
    [
        ("GET", "/storage/v1/b/b/o", "storage.objects.list"),
        ("GET", "/storage/v1/b/b/o/k?alt=media", "storage.objects.get"),
        ("GET", "/download/storage/v1/b/b/o/k", "storage.objects.get"),
        ("POST", "/upload/storage/v1/b/b/o?uploadType=multipart", "storage.objects.create"),
        ("DELETE", "/storage/v1/b/b/o/k", "storage.objects.delete"),
        ("PATCH", "/storage/v1/b/b/o/k", "storage.objects.update"),
        ("GET", "/storage/v1/b/b/o/k/acl", "storage.objects.getIamPolicy"),
        ("POST", "/storage/v1/b/b/o/k/acl", "storage.objects.setIamPolicy"),
        ("GET", "/storage/v1/b/b", "storage.buckets.get"),
        ("PATCH", "/storage/v1/b/b", "storage.buckets.update"),
        ("GET", "/storage/v1/b/b/iam", "storage.buckets.getIamPolicy"),
        ("PUT", "/storage/v1/b/b/iam", "storage.buckets.setIamPolicy"),
        ("POST", "/storage/v1/b/s/o/k/copyTo/b/d/o/k2", "storage.objects.create"),
        ("GET", "/b/k", "storage.objects.get"),
        ("PUT", "/b/k", "storage.objects.create"),
    ],
)
def test_classify_into_permissions(method: str, path: str, action: str) -> None:
    assert classify_gcs(method, path, {}).action == action


def test_copy_reads_its_source_object() -> None:
    access = classify_gcs(
        "POST", "/storage/v1/b/s/o/a%2Fb/rewriteTo/b/d/o/k?destinationPredefinedAcl=private", {}
    )
    assert access.detail.sources == (("s", "a/b"),)
    assert access.detail.predefined == "private"


# --- signed URLs -------------------------------------------------------------------------

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
STAMP = NOW.strftime("%Y%m%dT%H%M%SZ")


def _sign(account: str, path: str = "/b/k.txt", extra: str = "", expires: int = 600) -> str:
    """A raw query signed as the SDK does (independent code: hashlib and cryptography)."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding

    scope = f"{STAMP[:8]}/auto/storage/goog4_request"
    cred = f"{ga.EMAILS[account]}/{scope}".replace("@", "%40").replace("/", "%2F")
    query = (
        f"X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Credential={cred}&X-Goog-Date={STAMP}"
        f"&X-Goog-Expires={expires}&X-Goog-SignedHeaders=host{extra}"
    )
    req = SignedRequest("GET", path, query, {"host": "127.0.0.1:1"})
    digest = hashlib.sha256(canonical_request(req, "host").encode()).hexdigest()
    to_sign = f"GOOG4-RSA-SHA256\n{STAMP}\n{scope}\n{digest}".encode()
    sig = private_key(account).sign(to_sign, padding.PKCS1v15(), hashes.SHA256()).hex()
    return f"{query}&X-Goog-Signature={sig}"


def _verify(query: str, path: str = "/b/k.txt", seconds_later: float = 1) -> str:
    req = SignedRequest("GET", path, query, {"host": "127.0.0.1:1"})
    return verify(req, now=NOW.timestamp() + seconds_later)


def test_signed_url_names_its_signer() -> None:
    assert _verify(_sign(USER)) == USER
    assert _verify(_sign(OTHER)) == OTHER


def test_a_kept_key_is_read_back_and_a_damaged_one_is_derived_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key cache on its own: the derivation (half a second of CPU) is this process's key,
    and each call of it is counted."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    key = private_key(USER)
    derived: list[str] = []

    def derive_counted(account: str) -> rsa.RSAPrivateKey:
        derived.append(account)
        return key

    monkeypatch.setattr(signed_urls, "_derive_key", derive_counted)
    read = private_key.__wrapped__  # past the per-process cache
    assert read(USER).private_numbers() == key.private_numbers() and derived == [USER]
    (kept,) = (tmp_path / "skycore-harness" / "gcs-keys").iterdir()
    assert read(USER).private_numbers() == key.private_numbers() and derived == [USER]
    kept.write_bytes(b"-----BEGIN PRIVATE KEY-----\ndamaged\n")
    assert read(USER).private_numbers() == key.private_numbers() and derived == [USER, USER]
    assert b"damaged" not in kept.read_bytes()


def test_keys_are_deterministic_and_distinct() -> None:
    user = private_key(USER).public_key().public_numbers()
    assert user != private_key(OTHER).public_key().public_numbers()
    assert user.n.bit_length() == 2048


@pytest.mark.parametrize(
    ("forge", "code"),
    [
        (
            lambda q: q.replace("SignedHeaders=host", "SignedHeaders=host%3Bx-goog-meta-a"),
            "SignatureDoesNotMatch",
        ),
        (lambda q: q[:-2] + ("00" if not q.endswith("00") else "11"), "SignatureDoesNotMatch"),
        (
            lambda q: q.replace(ga.EMAILS[USER].replace("@", "%40"), "x%40y"),
            "SignatureDoesNotMatch",
        ),
        (lambda q: q.replace("X-Goog-Expires=600", "X-Goog-Expires=900"), "SignatureDoesNotMatch"),
        (lambda q: q + "&generation=3", "SignatureDoesNotMatch"),
        (lambda q: q.replace("X-Goog-Expires=600", "X-Goog-Expires=604801"), None),
        (lambda q: q.replace("GOOG4-RSA-SHA256", "GOOG4-HMAC-SHA256"), "SignatureDoesNotMatch"),
        (lambda q: q.replace("GOOG4-RSA-SHA256", "AWS4-HMAC-SHA256"), None),
    ],
)
def test_forgeries_fail(forge: object, code: str | None) -> None:
    query = forge(_sign(USER))  # type: ignore[operator]
    with pytest.raises(SignedUrlError) as refused:
        _verify(query)
    if code:
        assert (refused.value.code, refused.value.status) == (code, 403)
    else:
        assert refused.value.status == 400


def test_tampered_path_and_expiry() -> None:
    with pytest.raises(SignedUrlError, match="signature"):
        _verify(_sign(USER), path="/b/other.txt")
    with pytest.raises(SignedUrlError) as expired:
        _verify(_sign(USER, expires=60), seconds_later=61)
    assert expired.value.code == "ExpiredToken"
    assert "Request has expired" in expired.value.message
    with pytest.raises(SignedUrlError):
        _verify(_sign(USER), seconds_later=-3600)  # not valid yet


@settings(max_examples=examples(25))
@given(st.text(alphabet="abc/ _~%+é", min_size=1, max_size=12))
def test_any_object_name_verifies(name: str) -> None:
    from urllib.parse import quote

    path = "/b/" + quote(name, safe="/~")
    assert _verify(_sign(USER, path=path), path=path) == USER


def _hmac_sign(account: str, path: str = "/b/k.txt", key_id: str | None = None) -> str:
    """A raw query signed with ``account``'s HMAC key, as GCS documents GOOG4-HMAC-SHA256."""
    import hmac

    access_id, secret = hmac_key(account)
    scope = f"{STAMP[:8]}/us/storage/goog4_request"
    cred = f"{key_id or access_id}/{scope}".replace("@", "%40").replace("/", "%2F")
    query = (
        f"X-Goog-Algorithm=GOOG4-HMAC-SHA256&X-Goog-Credential={cred}&X-Goog-Date={STAMP}"
        "&X-Goog-Expires=600&X-Goog-SignedHeaders=host"
    )
    req = SignedRequest("GET", path, query, {"host": "127.0.0.1:1"})
    digest = hashlib.sha256(canonical_request(req, "host").encode()).hexdigest()
    to_sign = f"GOOG4-HMAC-SHA256\n{STAMP}\n{scope}\n{digest}".encode()
    key = ("GOOG4" + secret).encode()
    for part in (STAMP[:8], "us", "storage", "goog4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    sig = hmac.new(key, to_sign, hashlib.sha256).hexdigest()
    return f"{query}&X-Goog-Signature={sig}"


def test_hmac_signed_urls() -> None:
    assert _verify(_hmac_sign(USER)) == USER
    assert _verify(_hmac_sign(OTHER)) == OTHER
    assert hmac_key(USER) != hmac_key(OTHER)
    with pytest.raises(SignedUrlError, match="signature"):
        _verify(_hmac_sign(USER), path="/b/other.txt")
    with pytest.raises(SignedUrlError, match="signature"):  # USER's secret, OTHER's id
        _verify(_hmac_sign(USER, key_id=hmac_key(OTHER)[0]))
    with pytest.raises(SignedUrlError, match="signature"):  # an HMAC signature for an e-mail
        _verify(_hmac_sign(USER, key_id=ga.EMAILS[USER]))


# --- the protocol over a real gate state ---------------------------------------------------


class RacingState(GateState):
    """A gate state where another request's write lands right after the next read of a
    bucket: between what a request reads and what it writes, as two threads may."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.interleave: list[Callable[[], object]] = []

    def bucket(self, name: str | None) -> Bucket | None:
        found = super().bucket(name)
        while self.interleave:
            self.interleave.pop()()
        return found


@dataclass
class Upstream:
    """The emulator's 200 as on_success sees it."""

    status: int = 200

    def header(self, name: str) -> str | None:
        return None


def _exchange(state: GateState, method: str, path: str, body: bytes = b"") -> Exchange:
    query = parse_qs(path.partition("?")[2], keep_blank_values=True)
    return Exchange(method, path, {}, query, state, ("127.0.0.1", 9), lambda: body)


@pytest.fixture
def state(tmp_path: Path) -> RacingState:
    made = RacingState(tmp_path / "state.json")
    made.set_bucket("bk", USER, public=False, settings=ga.new_bucket_settings({}, None, None))
    return made


def _set_policy(
    proto: GcsGateProtocol,
    state: RacingState,
    etag: str,
    member: str,
    meanwhile: Callable[[], object] | None = None,
) -> int:
    """setIamPolicy through the protocol; ``meanwhile`` runs after the decision, right
    after the answer's first read of the bucket."""
    body = {"etag": etag, "bindings": [{"role": VIEWER, "members": [member]}]}
    ex = _exchange(state, "PUT", "/storage/v1/b/bk/iam", json.dumps(body).encode())
    access, _ = proto.classify(ex)
    assert proto.decide(ex, access, USER).allowed
    state.interleave.extend([meanwhile] if meanwhile else [])
    answer = proto.answer(ex, access, USER)
    assert answer is not None
    return answer.status


def test_two_set_policies_with_one_etag_cannot_both_win(state: RacingState) -> None:
    """The etag is checked in the same atomic change that stores the policy: the second of
    two concurrent sets with one etag is refused (412), not a silent lost update."""
    proto = GcsGateProtocol({})
    etag = ga.policy_etag(1)
    first: list[int] = []
    second = _set_policy(
        proto,
        state,
        etag,
        f"user:{ga.EMAILS[OTHER]}",
        meanwhile=lambda: first.append(_set_policy(proto, state, etag, "allUsers")),
    )
    assert (first, second) == ([200], 412)
    known = proto.bucket_access(state, "bk")
    assert known is not None and known.bindings == ((VIEWER, ("allUsers",)),)
    assert _set_policy(proto, state, ga.policy_etag(2), "allAuthenticatedUsers") == 200


def _patch_bucket(
    proto: GcsGateProtocol,
    state: RacingState,
    config: Mapping[str, object],
    meanwhile: Callable[[], object] | None = None,
) -> None:
    """A bucket PATCH through the protocol; ``meanwhile`` as for :func:`_set_policy`."""
    body = json.dumps({"iamConfiguration": config}).encode()
    ex = _exchange(state, "PATCH", "/storage/v1/b/bk", body)
    access, _ = proto.classify(ex)
    assert proto.decide(ex, access, USER).allowed
    state.interleave.extend([meanwhile] if meanwhile else [])
    data = json.dumps({"kind": "storage#bucket", "name": "bk"}).encode()
    proto.on_success(Success(ex, access, USER, Upstream(), data))


def test_concurrent_bucket_patches_keep_each_others_change(state: RacingState) -> None:
    """A patch of public access prevention alone keeps the uniform access another patch
    just enabled (the new settings are computed from the current ones, atomically)."""
    proto = GcsGateProtocol({})
    uniform = {"uniformBucketLevelAccess": {"enabled": True}}
    enforced = {"publicAccessPrevention": "enforced"}
    _patch_bucket(proto, state, enforced, meanwhile=lambda: _patch_bucket(proto, state, uniform))
    known = proto.bucket_access(state, "bk")
    assert known is not None and (known.uniform, known.prevention) == (True, "enforced")


def test_an_invalid_iam_configuration_is_refused_before_the_emulator(
    state: RacingState,
) -> None:
    proto = GcsGateProtocol({})
    body = json.dumps({"iamConfiguration": {"publicAccessPrevention": "sometimes"}})
    ex = _exchange(state, "PATCH", "/storage/v1/b/bk", body.encode())
    access, _ = proto.classify(ex)
    verdict = proto.decide(ex, access, USER)
    assert (verdict.allowed, verdict.status, verdict.code) == (False, 400, "invalid")
    assert not proto.decide(ex, access, OTHER).allowed  # and 403 first for a stranger
    assert proto.decide(ex, access, OTHER).status == 403


@pytest.mark.parametrize(
    ("method", "path", "answered"),
    [
        ("GET", "/storage/v1/b/bk/iam", True),
        ("PUT", "/storage/v1/b/bk/iam", True),
        ("GET", "/storage/v1/b/bk/iam/testPermissions?permissions=storage.objects.get", True),
        ("GET", "/storage/v1/b/bk/o/k/acl", True),
        ("GET", "/storage/v1/b/bk/o/k/acl/allUsers", True),
        ("POST", "/storage/v1/b/bk/o/k/acl", True),
        ("DELETE", "/storage/v1/b/bk/o/k/acl/allUsers", True),
        ("GET", "/storage/v1/b/bk/acl", False),
        ("GET", "/storage/v1/b/bk/defaultObjectAcl", False),
        ("GET", "/storage/v1/b/bk", False),
        ("PATCH", "/storage/v1/b/bk", False),
        ("GET", "/storage/v1/b/bk/o", False),
        ("GET", "/storage/v1/b/bk/o/k", False),
        ("PATCH", "/storage/v1/b/bk/o/k", False),
        ("DELETE", "/storage/v1/b/bk/o/k", False),
        ("POST", "/upload/storage/v1/b/bk/o?uploadType=media&name=k", False),
        ("GET", "/bk/k", False),
        ("GET", "/storage/v1/b", False),
    ],
)
def test_answers_is_in_step_with_answer(
    state: RacingState, method: str, path: str, answered: bool
) -> None:
    """The gate's quick ``answers`` check says yes exactly for what ``answer`` answers."""
    proto = GcsGateProtocol({})
    ex = _exchange(state, method, path, b"{}")
    access, _ = proto.classify(ex)
    assert proto.answers(access) is answered
    if not answered:
        assert proto.answer(ex, access, USER) is None
    elif "/acl" not in path:  # (object ACL answers ask the emulator whether the object exists)
        answer = proto.answer(ex, access, USER)
        assert answer is not None and answer.status == 200
        gone = _exchange(state, method, path.replace("/bk/", "/unknown/"), b"{}")
        unknown, _ = proto.classify(gone)
        assert proto.answers(unknown) and proto.answer(gone, unknown, USER) is None
