"""S3's POST-policy uploads (V4 and V2), through the real gate and moto, on S3 and R2: the
upload the SDK signs works, and each forgery of it gets S3's error code."""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
import requests

from harness.accounts import UNKNOWN, USER
from harness.emulators.s3 import S3Emulator
from tests.integration.harness.store_gates.s3.signing_helpers import (
    flip,
    signing_client,
    xml_error,
    xml_message,
)
from tests.integration.helpers import stores_of_kind

pytestmark = pytest.mark.parametrize("store_name", stores_of_kind(S3Emulator))


VERSIONS = [pytest.param("s3v4", id="v4"), pytest.param("s3", id="v2")]
"""botocore signature versions of a POST policy"""


# --- POST policy -----------------------------------------------------------------------------


def _post(
    s3: S3Emulator, bucket: str, fields: dict[str, str], content: bytes, filename: str = "f.txt"
) -> requests.Response:
    """A browser-style form upload: the fields, then the file."""
    return requests.post(
        f"{s3.endpoint}/{bucket}",
        data=fields,
        files={"file": (filename, content, "application/octet-stream")},
        timeout=10,
    )


def _signed_form(
    s3: S3Emulator,
    bucket: str,
    version: str,
    fields: dict[str, str],
    conditions: list[Any],
    expiration: float | None = None,
    owner: str = USER,
    secret: str | None = None,
) -> dict[str, str]:
    """Form fields signed by botocore's POST signers (S3SigV4PostAuth or HmacV1PostAuth)
    for a policy with ``conditions`` (the bucket's is added) expiring at ``expiration``
    (default: in an hour)."""
    from botocore.auth import HmacV1PostAuth, S3SigV4PostAuth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    key = s3.keys[owner]
    credentials = Credentials(key.access_key_id, secret or key.secret_access_key)
    when = time.gmtime(expiration if expiration is not None else time.time() + 3600)
    request = AWSRequest(method="POST", url=f"{s3.endpoint}/{bucket}")
    request.context["s3-presign-post-fields"] = dict(fields)
    request.context["s3-presign-post-policy"] = {
        "expiration": time.strftime("%Y-%m-%dT%H:%M:%SZ", when),
        "conditions": [{"bucket": bucket}, *conditions],
    }
    if version == "v4":
        S3SigV4PostAuth(credentials, "s3", s3.region).add_auth(request)
    else:
        HmacV1PostAuth(credentials).add_auth(request)
    return dict(request.context["s3-presign-post-fields"])


@pytest.mark.parametrize("version", VERSIONS)
def test_post_policy_sdk(s3: S3Emulator, bucket: str, version: str) -> None:
    """boto3's generate_presigned_post (V4 and V2 fields), with a key prefix and
    ``${filename}``, a size range, metadata and a Content-Type prefix: the upload works and
    the object is there."""
    client = signing_client(s3, version)
    post = client.generate_presigned_post(
        bucket,
        "uploads/${filename}",
        Fields={"Content-Type": "text/plain", "x-amz-meta-who": "form"},
        Conditions=[
            ["content-length-range", 1, 1024],
            ["starts-with", "$Content-Type", "text/"],
            {"x-amz-meta-who": "form"},
        ],
        ExpiresIn=300,
    )
    signed = "x-amz-signature" if version == "s3v4" else "signature"
    assert signed in post["fields"]
    resp = _post(s3, bucket, post["fields"], b"from a form", filename="hello.txt")
    assert resp.status_code == 204, resp.text
    assert s3.read_object(bucket, "uploads/hello.txt") == b"from a form"


POLICY: list[Any] = [
    ["starts-with", "$key", "in/"],
    ["starts-with", "$Content-Type", "text/"],
    {"x-amz-meta-who": "form"},
    {"success_action_status": "201"},
    ["content-length-range", 2, 64],
]
"""The conditions of the forms below (botocore adds the bucket and its signing fields)."""
FORM = {
    "key": "in/${filename}",
    "Content-Type": "text/plain",
    "x-amz-meta-who": "form",
    "success_action_status": "201",
}
Form = dict[str, str]


def _signature_field(form: Form) -> str:
    return "x-amz-signature" if "x-amz-signature" in form else "signature"


def _tamper_policy(form: Form) -> None:
    """Widen the key condition in the policy, keep the signature, upload elsewhere."""
    document = json.loads(base64.b64decode(form["policy"]))
    document["conditions"][1] = ["starts-with", "$key", ""]
    form["policy"] = base64.b64encode(json.dumps(document).encode()).decode()
    form["key"] = "elsewhere/${filename}"


def _alter_signature(form: Form) -> None:
    name = _signature_field(form)
    form[name] = flip(form[name][0]) + form[name][1:]


CONDITION_FAILED = "Invalid according to Policy: Policy Condition failed: "
FORGERIES: dict[str, tuple[dict[str, Any], Callable[[Form], Any], bytes, int, str, str]] = {
    # how: (signing changes, change to the signed form, file, status, code, message part)
    "wrong-secret": ({"secret": "x"}, dict, b"ok", 403, "SignatureDoesNotMatch", ""),
    "unknown-key": ({"owner": UNKNOWN}, dict, b"ok", 403, "InvalidAccessKeyId", ""),
    "tampered-policy": ({}, _tamper_policy, b"ok", 403, "SignatureDoesNotMatch", ""),
    "altered-signature": ({}, _alter_signature, b"ok", 403, "SignatureDoesNotMatch", ""),
    "expired": (
        {"expiration": time.time() - 60},
        dict,
        b"ok",
        403,
        "AccessDenied",
        "Invalid according to Policy: Policy expired.",
    ),
    "key-prefix": (
        {},
        lambda f: f.update(key="out/${filename}"),
        b"ok",
        403,
        "AccessDenied",
        CONDITION_FAILED + '["starts-with", "$key", "in/"]',
    ),
    "content-type": (
        {},
        lambda f: f.update({"Content-Type": "image/png"}),
        b"ok",
        403,
        "AccessDenied",
        CONDITION_FAILED + '["starts-with", "$Content-Type", "text/"]',
    ),
    "metadata": (
        {},
        lambda f: f.update({"x-amz-meta-who": "someone else"}),
        b"ok",
        403,
        "AccessDenied",
        CONDITION_FAILED + '{"x-amz-meta-who": "form"}',
    ),
    "status": (
        {},
        lambda f: f.update(success_action_status="200"),
        b"ok",
        403,
        "AccessDenied",
        CONDITION_FAILED + '{"success_action_status": "201"}',
    ),
    "extra-field": (
        {},
        lambda f: f.update({"x-amz-meta-extra": "not in the policy"}),
        b"ok",
        403,
        "AccessDenied",
        "Invalid according to Policy: Extra input fields: x-amz-meta-extra",
    ),
    "too-large": (
        {},
        dict,
        b"x" * 65,
        400,
        "EntityTooLarge",
        "Your proposed upload exceeds the maximum allowed size",
    ),
    "too-small": (
        {},
        dict,
        b"x",
        400,
        "EntityTooSmall",
        "Your proposed upload is smaller than the minimum allowed size",
    ),
    "no-key": (
        {},
        lambda f: f.pop("key"),
        b"ok",
        400,
        "InvalidArgument",
        "Bucket POST must contain a field named 'key'.",
    ),
    "no-signature": (
        {},
        lambda f: f.pop(_signature_field(f)),
        b"ok",
        400,
        "InvalidArgument",
        "Bucket POST must contain a field named",
    ),
}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("how", FORGERIES)
def test_post_policy_forged(s3: S3Emulator, bucket: str, version: str, how: str) -> None:
    """A POST upload with a forged signature or a form its policy does not allow gets S3's
    error (status, code and message) and writes nothing; the same form unforged works."""
    signing, change, content, status, code, message = FORGERIES[how]
    sigv = "v4" if version == "s3v4" else "v2"
    form = _signed_form(s3, bucket, sigv, FORM, POLICY, **signing)
    change(form)
    resp = _post(s3, bucket, form, content)
    assert xml_error(resp) == (status, code), resp.text
    assert message in xml_message(resp)
    assert s3.list_keys(bucket) == ["seed"]
    fine = _signed_form(s3, bucket, sigv, FORM, POLICY)
    resp = _post(s3, bucket, fine, b"fine")
    assert resp.status_code == 201, resp.text
    assert s3.read_object(bucket, "in/f.txt") == b"fine"


@pytest.mark.parametrize("version", VERSIONS)
def test_post_policy_other_bucket_and_no_file(s3: S3Emulator, bucket: str, version: str) -> None:
    """A policy signed for one bucket does not upload to another of the same owner's (its
    bucket condition fails); a form without a file is InvalidArgument."""
    sigv = "v4" if version == "s3v4" else "v2"
    form = _signed_form(s3, bucket, sigv, FORM, POLICY)
    other = f"sig-{uuid.uuid4().hex[:12]}"
    s3.make_bucket(other, owner=USER, public=False)
    try:
        resp = _post(s3, other, form, b"ok")
        assert xml_error(resp) == (403, "AccessDenied")
        assert xml_message(resp) == f'{CONDITION_FAILED}{{"bucket": "{bucket}"}}'
        assert s3.list_keys(other) == []
    finally:
        s3.delete_bucket(other)
    fields_only = {name: (None, value) for name, value in form.items()}
    resp = requests.post(f"{s3.endpoint}/{bucket}", files=fields_only, timeout=10)
    assert xml_error(resp) == (400, "InvalidArgument")
    assert xml_message(resp) == "POST requires exactly one file upload per request."
