"""Our moto launch (harness.emulators.moto_server) serves every request as S3: moto reads a
SigV2 Authorization header (``AWS key:signature``) as a SigV4 credential scope, and a
signature with exactly four '/' gave it a service no backend serves (HTTP 500 on the wire).

moto's own request dispatcher is driven in-process with the headers of such a request."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from moto.moto_server.werkzeug_app import DomainDispatcherApplication
from moto.server import create_backend_app

from harness.emulators import moto_server

SLASHED_SIGV2 = "AWS AKIASKYCOREUSER00001:n0/ecktiEAp/x+1/Qz9k/Lm2Ab3="
"""A SigV2 header whose base64 signature has exactly four '/' (as one in ~1,400 has)."""
PLAIN_SIGV2 = "AWS AKIASKYCOREUSER00001:n0+ecktiEAp2x+1Qz9kLm2Ab3="
SIGV4 = (
    "AWS4-HMAC-SHA256 Credential=AKIASKYCOREUSER00001/20261204/us-east-1/s3/aws4_request, "
    "SignedHeaders=host;x-amz-date, Signature=" + "0" * 64
)


@pytest.fixture
def dispatcher() -> Iterator[DomainDispatcherApplication]:
    """moto's dispatcher with the harness's patch, undone after the test."""
    moto_server.patch_moto()
    try:
        yield DomainDispatcherApplication(create_backend_app)
    finally:
        moto_server.unpatch_moto()


def _backend(app: DomainDispatcherApplication, authorization: str, path: str = "/") -> str:
    """The backend moto picks for a GET of ``path`` signed with ``authorization``."""
    environ = {"HTTP_AUTHORIZATION": authorization, "PATH_INFO": path, "HTTP_HOST": "127.0.0.1"}
    host = app.infer_service_region_host(environ, path) or "s3.us-east-1.amazonaws.com"
    return str(app.get_backend_for_host(host))


def test_unpatched_moto_takes_a_slashed_sigv2_signature_for_a_service() -> None:
    app = DomainDispatcherApplication(create_backend_app)
    assert _backend(app, SLASHED_SIGV2) == "None"  # no backend: moto answers 500


@pytest.mark.parametrize("authorization", [SLASHED_SIGV2, PLAIN_SIGV2, SIGV4])
@pytest.mark.parametrize("path", ["/", "/bucket", "/bucket/key"])
def test_every_signed_request_goes_to_s3(
    dispatcher: DomainDispatcherApplication, authorization: str, path: str
) -> None:
    assert _backend(dispatcher, authorization, path) == "s3"
