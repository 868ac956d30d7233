"""The S3 gate's decision and bookkeeping on the gate state, without a cloud: the admin
API's public flag as a built-in public policy statement, object ownership of object-level
writes, settings read for the bucket's current owner, atomic settings changes, what a
DeleteObjects answer clears, presigned requests told by their query, and answers() in step
with answer()."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from harness.accounts import OTHER, USER
from harness.emulators.s3 import S3Emulator
from harness.gate.protocol import Exchange
from harness.gate.rules import Access, Bucket
from harness.gate.state import GateState
from harness.store_gates.s3.access import (
    NO_BLOCK,
    BucketAccess,
    PublicAccessBlock,
    authorize,
)
from harness.store_gates.s3.acl import Acl, Grant, canned_acl, private_acl
from harness.store_gates.s3.bookkeeping import deleted_keys
from harness.store_gates.s3.mirror import ACCESS, SettingsCache, change_access
from harness.store_gates.s3.protocol import S3GateProtocol
from harness.store_gates.s3.upstream import GATE_KEY
from tests.unit.harness.store_gates.s3.decisions import allowed, with_policy

B = "bk"
GET, LIST, PUT = "s3:GetObject", "s3:ListBucket", "s3:PutObject"


flagged = partial(allowed, public_flag=True)
"""Whether authorize() allows the request with the admin API's public flag set."""


def test_public_flag_is_a_public_read_statement() -> None:
    open_bucket = BucketAccess.new(USER, {"x-amz-object-ownership": "ObjectWriter"}).with_block(
        NO_BLOCK
    )
    for caller in (None, OTHER):
        assert flagged(open_bucket, caller, GET, "k")
        assert flagged(open_bucket, caller, "s3:GetObjectVersion", "k")
        assert flagged(open_bucket, caller, LIST)
        assert flagged(open_bucket, caller, "s3:ListBucketVersions")
        assert flagged(open_bucket, caller, "s3:GetBucketLocation")
        assert not flagged(open_bucket, caller, PUT, "k")
        assert not flagged(open_bucket, caller, "s3:GetObjectAcl", "k")
        assert not flagged(open_bucket, caller, "s3:GetBucketAcl")
        assert not authorize(open_bucket, caller, GET, "k").allowed  # no flag, no read
    # only objects the bucket owner owns
    assert not flagged(open_bucket, None, GET, "k", private_acl(OTHER))
    assert flagged(open_bucket, OTHER, GET, "k", private_acl(OTHER))  # the object's owner
    # an explicit Deny wins
    denied = with_policy(
        open_bucket,
        {"Effect": "Deny", "Principal": "*", "Action": GET, "Resource": f"arn:aws:s3:::{B}/s/*"},
    )
    assert not flagged(denied, None, GET, "s/k") and flagged(denied, None, GET, "k")
    # RestrictPublicBuckets: a public statement helps no one outside the owner's account
    restricted = open_bucket.with_block(PublicAccessBlock(restrict_public_buckets=True))
    assert not flagged(restricted, None, GET, "k") and not flagged(restricted, OTHER, LIST)
    assert flagged(restricted, USER, GET, "k")
    named = with_policy(
        restricted,
        {
            "Effect": "Allow",
            "Principal": {"AWS": "*"},
            "Action": LIST,
            "Resource": f"arn:aws:s3:::{B}",
        },
    )
    assert not flagged(named, OTHER, LIST)
    assert not flagged(BucketAccess.new(USER, {}), None, GET, "k")  # AWS's defaults: blocked


def test_settings_follow_the_buckets_owner() -> None:
    cache = SettingsCache()
    settings = {ACCESS: BucketAccess.new(USER, {}).to_json()}
    mine = Bucket(USER, False, settings)
    assert cache.access(B, mine).owner == USER
    given = Bucket(OTHER, False, settings)  # the same settings object, another owner
    assert cache.access(B, given).owner == OTHER
    assert cache.access(B, Bucket(OTHER, False, {})) == BucketAccess.new(OTHER, {})
    public = Bucket(OTHER, True, {})
    assert cache.access(B, public) is cache.access(B, public)  # cached per Bucket


def grant_added(permission: str, n: int, access: BucketAccess) -> BucketAccess:
    return access.with_acl(Acl(access.acl.owner, (*access.acl.grants, Grant(f"g{n}", permission))))


def test_settings_changes_are_atomic(tmp_path: Path) -> None:
    """Two threads adding grants to one bucket's ACL, each from the settings as it reads
    them: every grant is there at the end (a lost update would drop some for good)."""
    state = GateState(tmp_path / "state.json")
    state.set_bucket(B, USER, False, {ACCESS: BucketAccess.new(USER, {}).to_json()})
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)

    def add(permission: str) -> None:
        for n in range(150):
            change_access(state, B, USER, partial(grant_added, permission, n))

    try:
        threads = [threading.Thread(target=add, args=(p,)) for p in ("READ", "WRITE")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    known = state.bucket(B)
    assert known is not None
    grants = BucketAccess.from_json(known.settings[ACCESS]).acl.grants
    assert len(grants) == 1 + 2 * 150
    change_access(state, B, OTHER, partial(grant_added, "READ", -1))  # not its owner
    assert state.bucket(B) == known  # OTHER's view of it is stale: nothing written


def test_deleted_keys_are_the_deleted_entries_only() -> None:
    body = (
        b'<?xml version="1.0"?><DeleteResult>'
        b"<Deleted><Key>a&amp;b</Key></Deleted>"
        b"<Error><Key>locked</Key><Code>AccessDenied</Code></Error>"
        b"<Deleted><Key>v</Key><VersionId>3</VersionId></Deleted>"
        b"<Deleted><Key>m</Key><DeleteMarker>true</DeleteMarker>"
        b"<DeleteMarkerVersionId>9</DeleteMarkerVersionId></Deleted>"
        b"</DeleteResult>"
    )
    assert deleted_keys(body) == [("a&b", False), ("v", True), ("m", False)]


@pytest.fixture
def protocol() -> S3GateProtocol:
    return S3Emulator.gate_protocol()


@pytest.fixture
def state(tmp_path: Path) -> Iterator[GateState]:
    yield GateState(tmp_path / "state.json")


def exchange(
    state: GateState, method: str, path: str, headers: dict[str, str] | None = None
) -> Exchange:
    return Exchange(
        method=method,
        path=path,
        headers=headers or {},
        query=parse_qs(urlsplit(path).query, keep_blank_values=True),
        state=state,
        upstream=("127.0.0.1", 1),
        read_body=lambda: b"",
    )


def decide(protocol: S3GateProtocol, ex: Exchange, identity: str | None) -> bool:
    access: Access = protocol.classify(ex)[0]
    return protocol.decide(ex, access, identity).allowed


@pytest.mark.parametrize(
    ("method", "query"),
    [
        ("PUT", "tagging"),
        ("DELETE", "tagging"),
        ("PUT", "retention"),
        ("PUT", "legal-hold"),
        ("POST", "restore"),
        ("GET", "tagging"),
    ],
)
def test_object_level_writes_are_the_objects_owners(
    protocol: S3GateProtocol, state: GateState, method: str, query: str
) -> None:
    writer = BucketAccess.new(USER, {"x-amz-object-ownership": "ObjectWriter"})
    state.set_bucket(B, USER, False, {ACCESS: writer.to_json()})
    state.set_object_meta(B, "theirs", {"acl": private_acl(OTHER).to_json()})
    ex = exchange(state, method, f"/{B}/theirs?{query}")
    assert not decide(protocol, ex, USER)  # the bucket owner does not own the object
    assert decide(protocol, ex, OTHER)
    mine = exchange(state, method, f"/{B}/mine?{query}")
    assert decide(protocol, mine, USER) and not decide(protocol, mine, OTHER)


def test_admin_public_flag_in_the_decision(protocol: S3GateProtocol, state: GateState) -> None:
    state.set_bucket(B, USER, True)  # no settings: AWS's defaults, RestrictPublicBuckets on
    assert not decide(protocol, exchange(state, "GET", f"/{B}/k"), None)
    open_bucket = BucketAccess.new(USER, {"x-amz-object-ownership": "ObjectWriter"})
    state.set_bucket(B, USER, True, {ACCESS: open_bucket.with_block(NO_BLOCK).to_json()})
    state.set_object_meta(B, "theirs", {"acl": private_acl(OTHER).to_json()})
    assert decide(protocol, exchange(state, "GET", f"/{B}/k"), None)
    assert decide(protocol, exchange(state, "GET", f"/{B}?list-type=2"), None)
    assert not decide(protocol, exchange(state, "GET", f"/{B}/theirs"), None)
    assert not decide(protocol, exchange(state, "PUT", f"/{B}/k"), None)
    # the copy source: the same rule (here into a bucket anyone may write to)
    drop = BucketAccess.new(OTHER, {"x-amz-object-ownership": "ObjectWriter"})
    drop = drop.with_block(NO_BLOCK).with_acl(canned_acl("public-read-write", OTHER, OTHER))
    state.set_bucket("dst", OTHER, False, {ACCESS: drop.to_json()})
    for key, may_copy in (("theirs", False), ("k", True)):
        copy = exchange(state, "PUT", "/dst/c", {"x-amz-copy-source": f"/{B}/{key}"})
        assert decide(protocol, copy, None) is may_copy


def test_presigned_is_told_by_the_query(protocol: S3GateProtocol, state: GateState) -> None:
    state.set_bucket(B, USER, False)
    odd = exchange(state, "GET", f"/{B}/x-amz-credential=1")
    access = protocol.classify(odd)[0]
    assert GATE_KEY.access_key_id in protocol.upstream_headers(odd, access, None)["Authorization"]
    presigned = exchange(state, "GET", f"/{B}/k?X-Amz-Credential=AKIA%2F1&X-Amz-Signature=s")
    assert protocol.upstream_headers(presigned, protocol.classify(presigned)[0], USER) == {}
    v2 = exchange(state, "GET", f"/{B}/k?AWSAccessKeyId=AKIA&Signature=s&Expires=1")
    assert protocol.upstream_headers(v2, protocol.classify(v2)[0], USER) == {}


# The gate answers requests for the access configuration itself (a server behind it, such as
# rclone serve s3, may not know the sub-resource), and never forwards them; it forwards the rest
# (CORS is not modelled). Paths after the bucket's, by method.
ANSWERED = {
    "PUT": ("?policy", "?acl"),
    "DELETE": ("?policy",),
    "GET": (
        "?acl",
        "?policy",
        "?policyStatus",
        "?ownershipControls",
        "?publicAccessBlock",
        "/k?acl",
    ),
}
FORWARDED = {"OPTIONS": ("/k",), "GET": ("?cors", "/k", ""), "PUT": ("?cors",)}


def requests(answered: bool, paths: dict[str, tuple[str, ...]]) -> list[tuple[str, str, bool]]:
    """(method, path, answered) of each of ``paths``, a bucket's sub-paths by method."""
    return [(method, f"/{B}{tail}", answered) for method, tails in paths.items() for tail in tails]


@pytest.mark.parametrize(
    ("method", "path", "answered"), requests(True, ANSWERED) + requests(False, FORWARDED)
)
def test_answers_is_in_step_with_answer(
    protocol: S3GateProtocol, state: GateState, method: str, path: str, answered: bool
) -> None:
    state.set_bucket(B, USER, False)
    cors = {"origin": "http://a.com", "access-control-request-method": "GET"}
    ex = exchange(state, method, path, cors)
    access = protocol.classify(ex)[0]
    assert protocol.answers(access) is answered
    assert (protocol.answer(ex, access, USER) is not None) is answered
