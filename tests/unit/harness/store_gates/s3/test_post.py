"""POST-policy uploads as the S3 gate checks them (harness.store_gates.s3.post), without a
cloud: the multipart reader, the policy conditions, the signatures botocore's POST signers
make, and whole forms read from an exchange."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from urllib3 import encode_multipart_formdata

from harness.emulators.s3 import S3Emulator
from harness.gate.protocol import Exchange
from harness.gate.rules import INVALID
from harness.gate.state import GateState
from harness.store_gates.s3.keys import AccessKey
from harness.store_gates.s3.post import (
    ALWAYS_EXEMPT,
    V2_EXEMPT,
    Denied,
    PostUpload,
    check_condition,
    check_policy,
    check_signature,
    decode_policy,
    expiration_time,
    parse_form,
    read_post_upload,
)
from tests.unit.hypothesis_budget import examples

KEYS = {"user": AccessKey("AKIAUSER", "user-secret"), "other": AccessKey("AKIAOTHER", "o-secret")}
BUCKET = "forms"
LATER = "2099-01-01T00:00:00Z"
field_names = st.from_regex(r"[a-z][a-z0-9_-]{0,15}", fullmatch=True).filter(lambda n: n != "file")
text = st.text(st.characters(exclude_categories=["Cs"]), max_size=40)


def _encode(fields: list[tuple[str, Any]]) -> tuple[str, bytes]:
    body, content_type = encode_multipart_formdata(fields)
    return content_type, body


def _code(error: pytest.ExceptionInfo[Denied]) -> tuple[int, str]:
    return error.value.verdict.status, error.value.verdict.code


# --- the multipart reader --------------------------------------------------------------------


@settings(max_examples=examples(60))
@given(
    fields=st.dictionaries(field_names, text, max_size=6),
    content=st.binary(max_size=300) | st.sampled_from([b"\r\n--", b"--\r\n\r\n", b"\r\n"]),
    filename=st.from_regex(r"[A-Za-z0-9._ -]{0,20}", fullmatch=True),
)
def test_parse_form_round_trips(fields: dict[str, str], content: bytes, filename: str) -> None:
    """Whatever the field values and the file's bytes (CRLFs and dashes included), the form
    reads back exactly; fields after the file are ignored, names are lower-cased."""
    parts: list[tuple[str, Any]] = list(fields.items())
    parts.append(("file", (filename, content, "application/octet-stream")))
    parts.append(("after", "ignored"))
    form = parse_form(*_encode(parts))
    assert form.fields == fields
    assert form.file == content
    assert form.filename == filename


def test_parse_form_names_and_repeats() -> None:
    content_type, body = _encode(
        [("Content-Type", "text/plain"), ("KEY", "a"), ("key", "b"), ("file", ("x", b"1"))]
    )
    form = parse_form(content_type, body)
    assert form.fields == {"content-type": "text/plain", "key": "a"}
    no_file = parse_form(*_encode([("key", "a")]))
    assert no_file.file is None and no_file.fields == {"key": "a"}


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("application/x-www-form-urlencoded", b"key=a"),
        ("multipart/form-data", b"--x\r\n\r\n--x--"),
        ("multipart/form-data; boundary=x", b"no boundary here"),
        ("multipart/form-data; boundary=x", b"--x\r\nContent-Disposition: form-data"),
        ("multipart/form-data; boundary=x", b"--x\r\nname: v\r\n\r\nunterminated"),
        ("multipart/form-data; boundary=x", b"--xjunk\r\n\r\nv\r\n--x--"),
    ],
)
def test_parse_form_refuses_malformed_bodies(content_type: str, body: bytes) -> None:
    with pytest.raises(Denied) as error:
        parse_form(content_type, body)
    assert _code(error) == (400, "MalformedPOSTRequest")


# --- conditions ------------------------------------------------------------------------------


@settings(max_examples=examples(100))
@given(value=text, prefix=text, field=st.sampled_from(["key", "acl", "x-amz-meta-a", "expires"]))
def test_starts_with(value: str, prefix: str, field: str) -> None:
    """``starts-with`` holds exactly when the value starts with the prefix (an empty prefix
    allows anything), on the fields that allow it; the field name's case does not matter."""
    condition = ["starts-with", f"${field.upper()}", prefix]
    if value.startswith(prefix):
        assert check_condition(condition, {field: value}) == field
    else:
        with pytest.raises(Denied) as error:
            check_condition(condition, {field: value})
        assert _code(error) == (403, "AccessDenied")
        expected = f"Invalid according to Policy: Policy Condition failed: {json.dumps(condition)}"
        assert error.value.verdict.message == expected


@settings(max_examples=examples(100))
@given(value=text, expected=text, dict_form=st.booleans())
def test_exact_match(value: str, expected: str, dict_form: bool) -> None:
    """``eq`` and the object form match the whole value, case-sensitively."""
    condition: Any = (
        {"X-Amz-Meta-Who": expected} if dict_form else ["eq", "$x-amz-meta-who", expected]
    )
    if value == expected:
        assert check_condition(condition, {"x-amz-meta-who": value}) == "x-amz-meta-who"
    else:
        with pytest.raises(Denied):
            check_condition(condition, {"x-amz-meta-who": value})


@pytest.mark.parametrize(
    "condition",
    [
        ["starts-with", "$success_action_status", ""],  # exact match only
        ["starts-with", "$bucket", "f"],
        ["starts-with", "$x-amz-credential", ""],
        ["starts-with", "$x-amz-storage-class", ""],
        ["eq", "key", "k"],  # no $
        ["eq", "$key"],  # arity
        ["in", "$key", "k"],  # unknown operator
        ["eq", "$key", 1],  # not a string
        {"key": 1},
        "key",
        ["eq", "$absent", "x"],
    ],
)
def test_conditions_s3_refuses(condition: Any) -> None:
    form = {"key": "k", "bucket": "forms", "success_action_status": "201"}
    with pytest.raises(Denied) as error:
        check_condition(condition, form)
    assert _code(error) == (403, "AccessDenied")


def test_condition_details() -> None:
    form = {"content-type": "text/plain, text/csv", "key": "k"}
    assert check_condition(["starts-with", "$Content-Type", "text/"], form) == "content-type"
    with pytest.raises(Denied):
        check_condition(["starts-with", "$Content-Type", "text/p"], form)
    assert check_condition(["eq", "$absent", ""], form) == "absent"
    with pytest.raises(Denied) as error:
        check_condition({"key": "k", "acl": "private"}, form)
    assert _code(error) == (400, "InvalidPolicyDocument")


# --- the policy document ---------------------------------------------------------------------


def _policy(*conditions: Any, expiration: str = LATER) -> dict[str, Any]:
    return {"expiration": expiration, "conditions": [{"bucket": BUCKET}, *conditions]}


FORM = {"bucket": BUCKET, "key": "up/a.txt", "policy": "p", "x-amz-signature": "s"}


def test_policy_expiration() -> None:
    assert expiration_time("2026-01-01T00:00:00Z") == expiration_time("2026-01-01T00:00:00.000Z")
    now = expiration_time("2026-01-01T00:00:00Z")
    ok = _policy(["starts-with", "$key", "up/"], expiration="2026-01-01T00:00:00Z")
    check_policy(ok, FORM, 1, ALWAYS_EXEMPT, now)
    with pytest.raises(Denied) as error:
        check_policy(ok, FORM, 1, ALWAYS_EXEMPT, now + 1)
    assert _code(error) == (403, "AccessDenied")
    assert error.value.verdict.message == "Invalid according to Policy: Policy expired."
    broken_policies: list[dict[str, Any]] = [
        {"conditions": []},
        {"expiration": "tomorrow", "conditions": []},
        {"expiration": LATER},
    ]
    for broken in broken_policies:
        with pytest.raises(Denied) as error:
            check_policy(broken, FORM, 1, ALWAYS_EXEMPT, now)
        assert _code(error) == (400, "InvalidPolicyDocument")


def test_policy_covers_every_field() -> None:
    """Every field but the exempt ones and x-ignore-* needs a condition, the bucket too."""
    form = {**FORM, "x-ignore-me": "1", "x-amz-meta-a": "1", "acl": "private"}
    with pytest.raises(Denied) as error:
        check_policy(_policy(["starts-with", "$key", ""]), form, 1, ALWAYS_EXEMPT, 0)
    assert error.value.verdict.message == (
        "Invalid according to Policy: Extra input fields: x-amz-meta-a, acl"
    )
    covered = _policy(["starts-with", "$key", ""], {"x-amz-meta-a": "1"}, {"acl": "private"})
    check_policy(covered, form, 1, ALWAYS_EXEMPT, 0)
    with pytest.raises(Denied) as error:
        check_policy(
            {"expiration": LATER, "conditions": [["starts-with", "$key", ""]]},
            form,
            1,
            ALWAYS_EXEMPT,
            0,
        )
    assert "Extra input fields: bucket" in error.value.verdict.message
    v2 = {"bucket": BUCKET, "key": "k", "awsaccesskeyid": "a", "signature": "s", "policy": "p"}
    check_policy(_policy({"key": "k"}), v2, 1, V2_EXEMPT, 0)
    with pytest.raises(Denied):
        check_policy(_policy({"key": "k"}), v2, 1, ALWAYS_EXEMPT, 0)


@settings(max_examples=examples(100))
@given(size=st.integers(0, 100), low=st.integers(0, 100), high=st.integers(0, 100))
def test_content_length_range(size: int, low: int, high: int) -> None:
    """The file's size must lie in [low, high]: below is EntityTooSmall, above
    EntityTooLarge (400); bounds may be numbers or digit strings."""
    policy = _policy(["starts-with", "$key", ""], ["content-length-range", low, str(high)])
    if size < low:
        expected: tuple[int, str] | None = (400, "EntityTooSmall")
    elif size > high:
        expected = (400, "EntityTooLarge")
    else:
        expected = None
    if expected is None:
        check_policy(policy, FORM, size, ALWAYS_EXEMPT, 0)
    else:
        with pytest.raises(Denied) as error:
            check_policy(policy, FORM, size, ALWAYS_EXEMPT, 0)
        assert _code(error) == expected


def test_bad_size_range_is_a_failed_condition() -> None:
    for bad in (["content-length-range", 1], ["content-length-range", "a", 2]):
        with pytest.raises(Denied) as error:
            check_policy(_policy(["starts-with", "$key", ""], bad), FORM, 1, ALWAYS_EXEMPT, 0)
        assert _code(error) == (403, "AccessDenied")


def test_decode_policy() -> None:
    document = _policy()
    assert decode_policy(base64.b64encode(json.dumps(document).encode()).decode()) == document
    for bad in (
        "not base64!",
        base64.b64encode(b"{nope").decode(),
        base64.b64encode(b"[]").decode(),
    ):
        with pytest.raises(Denied) as error:
            decode_policy(bad)
        assert _code(error) == (400, "InvalidPolicyDocument")


# --- signatures, with botocore's own POST signers --------------------------------------------


def _signed(
    version: str,
    fields: dict[str, str],
    conditions: list[Any],
    key: AccessKey = KEYS["user"],
    expiration: str = LATER,
) -> dict[str, str]:
    from botocore.auth import HmacV1PostAuth, S3SigV4PostAuth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    request = AWSRequest(method="POST", url=f"http://localhost/{BUCKET}")
    request.context["s3-presign-post-fields"] = dict(fields)
    request.context["s3-presign-post-policy"] = {
        "expiration": expiration,
        "conditions": [{"bucket": BUCKET}, *conditions],
    }
    credentials = Credentials(key.access_key_id, key.secret_access_key)
    if version == "v4":
        S3SigV4PostAuth(credentials, "s3", "us-east-1").add_auth(request)
    else:
        HmacV1PostAuth(credentials).add_auth(request)
    return {k.lower(): v for k, v in request.context["s3-presign-post-fields"].items()}


@pytest.mark.parametrize("version", ["v4", "v2"])
def test_signatures(version: str) -> None:
    fields = _signed(version, {"key": "k"}, [{"key": "k"}])
    assert check_signature(fields, KEYS) == (
        "user",
        ALWAYS_EXEMPT if version == "v4" else V2_EXEMPT,
    )
    other = _signed(version, {"key": "k"}, [{"key": "k"}], key=KEYS["other"])
    assert check_signature(other, KEYS)[0] == "other"
    signature = "x-amz-signature" if version == "v4" else "signature"
    forged = _signed(
        version, {"key": "k"}, [{"key": "k"}], key=AccessKey(KEYS["user"].access_key_id, "x")
    )
    tampered = {**fields, "policy": base64.b64encode(b'{"conditions": []}').decode()}
    altered = {**fields, signature: fields[signature][::-1]}
    for bad in (forged, tampered, altered):
        with pytest.raises(Denied) as error:
            check_signature(bad, KEYS)
        assert _code(error) == (403, "SignatureDoesNotMatch")
        assert error.value.identity == "user"
    unknown = _signed(version, {"key": "k"}, [], key=AccessKey("AKIANOBODY", "s"))
    with pytest.raises(Denied) as error:
        check_signature(unknown, KEYS)
    assert _code(error) == (403, "InvalidAccessKeyId") and error.value.identity == INVALID
    for missing in (signature, "policy"):
        with pytest.raises(Denied) as error:
            check_signature({k: v for k, v in fields.items() if k != missing}, KEYS)
        assert _code(error) == (400, "InvalidArgument")
        assert "Bucket POST must contain a field named" in error.value.verdict.message


def test_anonymous_forms() -> None:
    assert check_signature({"key": "k"}, KEYS) == (None, frozenset())
    with pytest.raises(Denied) as error:
        check_signature({"key": "k", "policy": "p"}, KEYS)
    assert _code(error) == (403, "AccessDenied")


# --- whole uploads ---------------------------------------------------------------------------


def _exchange(
    tmp_path: Path, fields: dict[str, str], content: bytes | None, filename: str = "a.txt"
) -> Exchange:
    parts: list[tuple[str, Any]] = list(fields.items())
    if content is not None:
        parts.append(("file", (filename, content, "text/plain")))
    content_type, body = _encode(parts)
    return Exchange(
        method="POST",
        path=f"/{BUCKET}",
        headers={"content-type": content_type, "content-length": str(len(body))},
        query={},
        state=GateState(tmp_path / "state.json"),
        upstream=("127.0.0.1", 1),
        read_body=lambda: body,
    )


@pytest.mark.parametrize("version", ["v4", "v2"])
def test_read_post_upload(tmp_path: Path, version: str) -> None:
    conditions = [
        ["starts-with", "$key", "up/"],
        ["content-length-range", 1, 10],
        {"acl": "private"},
    ]
    fields = _signed(version, {"key": "up/${filename}", "acl": "private"}, conditions)
    upload = read_post_upload(_exchange(tmp_path, fields, b"hello"), BUCKET, KEYS)
    assert upload == PostUpload(BUCKET, "up/a.txt", "user", None, "private", fields, 5)
    too_big = read_post_upload(_exchange(tmp_path, fields, b"x" * 11), BUCKET, KEYS)
    assert too_big.identity == "user" and too_big.verdict is not None
    assert too_big.verdict.code == "EntityTooLarge"
    outside = read_post_upload(_exchange(tmp_path, fields, b"x", filename="../a"), BUCKET, KEYS)
    assert outside.key == "up/../a" and outside.verdict is None  # the prefix still holds
    elsewhere = _signed(version, {"key": "other/${filename}", "acl": "private"}, conditions)
    denied = read_post_upload(_exchange(tmp_path, elsewhere, b"x"), BUCKET, KEYS)
    assert denied.verdict is not None and denied.verdict.code == "AccessDenied"
    expired = _signed(version, {"key": "up/x"}, conditions[:1], expiration="2000-01-01T00:00:00Z")
    old = read_post_upload(_exchange(tmp_path, expired, b"x"), BUCKET, KEYS)
    assert old.verdict is not None and old.verdict.message.endswith("Policy expired.")


def test_read_post_upload_refusals(tmp_path: Path) -> None:
    anonymous = read_post_upload(_exchange(tmp_path, {"key": "a/${filename}"}, b"x"), BUCKET, KEYS)
    assert (anonymous.identity, anonymous.verdict, anonymous.key) == (None, None, "a/a.txt")
    no_key = read_post_upload(_exchange(tmp_path, {"acl": "private"}, b"x"), BUCKET, KEYS)
    assert no_key.verdict is not None and no_key.verdict.code == "InvalidArgument"
    no_file = read_post_upload(_exchange(tmp_path, {"key": "k"}, None), BUCKET, KEYS)
    assert no_file.verdict is not None
    assert no_file.verdict.message == "POST requires exactly one file upload per request."
    unknown = _signed("v4", {"key": "k"}, [{"key": "k"}], key=AccessKey("AKIANOBODY", "s"))
    invalid = read_post_upload(_exchange(tmp_path, unknown, b"x"), BUCKET, KEYS)
    assert invalid.identity == INVALID and invalid.verdict is not None
    ex = _exchange(tmp_path, {"key": "k"}, b"x")
    ex.headers = {"content-type": "text/plain"}
    malformed = read_post_upload(ex, BUCKET, KEYS)
    assert malformed.verdict is not None and malformed.verdict.code == "MalformedPOSTRequest"


def test_the_emulators_keys_sign_forms(tmp_path: Path) -> None:
    """The S3 emulator's own keys (owner -> key) are what the gate verifies with."""
    keys = {o: k for o, k in S3Emulator.keys.items() if o != "unknown"}
    fields = _signed("v4", {"key": "k"}, [{"key": "k"}], key=keys["user"])
    assert read_post_upload(_exchange(tmp_path, fields, b"x"), BUCKET, keys).identity == "user"
    assert time.time() < expiration_time(LATER)
