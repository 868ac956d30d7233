"""The wrong checksums of the ``corrupt`` fault (harness.gate.corrupt), pure: each keeps its
form (so that clients parse it) and differs from the right one."""

from __future__ import annotations

import base64
import hashlib
import json
import re

from harness.gate.corrupt import (
    wrong_base64,
    wrong_etag,
    wrong_hash_list,
    wrong_headers,
    wrong_hex,
    wrong_json_digests,
    wrong_xml_etags,
)

DATA = b"some object"
MD5_HEX = hashlib.md5(DATA).hexdigest()
MD5_B64 = base64.b64encode(hashlib.md5(DATA).digest()).decode()


def test_hex_digits_all_differ() -> None:
    flipped = wrong_hex(MD5_HEX)
    assert re.fullmatch(r"[0-9a-f]{32}", flipped)
    assert all(a != b for a, b in zip(flipped, MD5_HEX, strict=True))
    assert wrong_hex(flipped) == MD5_HEX


def test_etags_keep_their_form() -> None:
    wrong = wrong_etag(f'"{MD5_HEX}"')
    assert wrong is not None and re.fullmatch(r'"[0-9a-f]{32}"', wrong) and MD5_HEX not in wrong
    multipart = wrong_etag(f'"{MD5_HEX}-3"')
    assert multipart is not None and multipart.endswith('-3"') and MD5_HEX not in multipart
    assert wrong_etag(MD5_HEX.upper()) == wrong_hex(MD5_HEX.upper())
    assert wrong_etag('"0x8DC5A1B2C3D4E5F"') is None  # Azure's opaque version


def test_base64_digests_keep_their_length() -> None:
    wrong = wrong_base64(MD5_B64)
    assert wrong is not None and wrong != MD5_B64
    raw = base64.b64decode(wrong)
    assert len(raw) == 16 and raw != hashlib.md5(DATA).digest()
    assert wrong_base64("not base64!") is None
    assert wrong_base64("") is None


def test_goog_hash_lists() -> None:
    value = f"crc32c=AAAAAA==,md5={MD5_B64}"
    wrong = wrong_hash_list(value)
    assert wrong is not None
    parts = dict(p.split("=", 1) for p in wrong.split(","))
    assert parts["crc32c"] == "/////w==" and parts["md5"] == wrong_base64(MD5_B64)
    assert wrong_hash_list("nothing") is None


def test_headers_replaced_only_where_present_and_parsable() -> None:
    headers = {"etag": f'"{MD5_HEX}"', "content-md5": MD5_B64, "x-ms-content-crc64": "??"}
    found = wrong_headers(
        lambda name: headers.get(name.lower()),
        etags=("ETag",),
        digests=("Content-MD5", "x-ms-content-crc64", "x-amz-meta-md5chksum"),
    )
    assert set(found) == {"ETag", "Content-MD5"}
    assert found["ETag"] == wrong_etag(headers["etag"])


def test_xml_etags() -> None:
    body = (
        b"<CompleteMultipartUploadResult><Key>k</Key><ETag>&quot;"
        + MD5_HEX.encode()
        + b"-2&quot;</ETag></CompleteMultipartUploadResult>"
    )
    wrong = wrong_xml_etags(body)
    assert wrong is not None and MD5_HEX.encode() not in wrong
    assert wrong.replace(wrong_hex(MD5_HEX).encode(), MD5_HEX.encode()) == body
    assert wrong_xml_etags(b"<Error><Code>InternalError</Code></Error>") is None


def test_json_digests_also_inside_a_rewrite_resource() -> None:
    upload = json.dumps({"name": "k", "md5Hash": MD5_B64, "crc32c": "AAAAAA=="}).encode()
    wrong = wrong_json_digests(upload, ("md5Hash", "crc32c"))
    assert wrong is not None
    got = json.loads(wrong)
    assert got["name"] == "k" and got["md5Hash"] == wrong_base64(MD5_B64)
    assert got["crc32c"] == "/////w=="
    rewrite = json.dumps({"done": True, "resource": {"md5Hash": MD5_B64}}).encode()
    wrapped = wrong_json_digests(rewrite, ("md5Hash",))
    assert wrapped is not None
    assert json.loads(wrapped)["resource"]["md5Hash"] == wrong_base64(MD5_B64)
    assert wrong_json_digests(b'{"name": "k"}', ("md5Hash",)) is None
    assert wrong_json_digests(b"[1, 2]", ("md5Hash",)) is None
    assert wrong_json_digests(b"not json", ("md5Hash",)) is None
