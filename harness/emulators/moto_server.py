"""moto's server (``python -m moto.server``) with a key's ETag computed under the key's lock
and every request served as S3.

moto 5 keeps an object's bytes in a temporary file (``FakeKey._value_buffer``) and computes
its MD5 on the first read of ``FakeKey.etag`` (seek to 0, read, cache it in ``_etag``)
without taking ``FakeKey.lock``, which only the ``value`` getter takes. A PUT makes its key
visible in the bucket before its own response reads the ETag, so a ListObjects, HEAD or GET
of that key arriving then seeks and reads the same file at the same time: one of them hashes
part of the bytes (often none) and caches that. rclone then sees an ETag that is not the MD5
of what it uploaded, deletes the object ("corrupted on transfer: md5 hashes differ") and
uploads it again. The value setter writes without the lock too, but only into keys that are
not yet visible (a new key, an unpickled one), so it races with nobody.

moto's server also picks the service of a request from its Authorization header, read as a
SigV4 credential scope (``key/date/region/service/aws4_request``). A SigV2 header (``AWS
key:signature``) is no scope, and moto falls back to S3; but a base64 signature with exactly
four '/' splits into five parts, moto takes one as the service and answers 500 (about one
SigV2 request in 1,400). The harness runs moto for S3 alone, so a service that no moto
backend serves falls back to S3 too.

Run as ``python -m harness.emulators.moto_server [moto.server's arguments]``.
"""

from __future__ import annotations

from typing import Any

from moto.moto_server.werkzeug_app import DomainDispatcherApplication
from moto.s3.models import FakeKey
from moto.server import main as moto_main

_MOTO_ETAG: property = FakeKey.etag  # type: ignore[assignment]
"""moto's own ``FakeKey.etag``: computes the MD5 lazily and caches it."""


def _locked_etag(key: FakeKey) -> str:
    """moto's ETag, its first computation serialised with readers of the key's bytes."""
    if key._etag is not None:  # cached: nothing reads the file
        return str(_MOTO_ETAG.fget(key))  # type: ignore[misc]
    with key.lock:
        return str(_MOTO_ETAG.fget(key))  # type: ignore[misc]


_MOTO_INFER = DomainDispatcherApplication.infer_service_region_host
"""moto's own guess of a request's service host."""


def _known_service_host(
    app: DomainDispatcherApplication, environ: dict[str, Any], path: str
) -> str | None:
    """moto's guess, or None (moto's default service, S3) when no backend serves it."""
    host = _MOTO_INFER(app, environ, path)
    if host is not None and app.get_backend_for_host(host) is None:
        return None
    return host


def patch_moto() -> None:
    """Make ``FakeKey.etag`` take the key's lock, and a request for a service moto does not
    have go to S3 (idempotent)."""
    if not isinstance(_MOTO_ETAG, property) or _MOTO_ETAG.fget is None:
        raise RuntimeError("moto's FakeKey.etag is no longer a property: review this patch")
    FakeKey.etag = property(_locked_etag)  # type: ignore[assignment,method-assign]
    DomainDispatcherApplication.infer_service_region_host = _known_service_host  # type: ignore[assignment,method-assign]


def unpatch_moto() -> None:
    """Give moto its own ``FakeKey.etag`` and service guess back."""
    FakeKey.etag = _MOTO_ETAG  # type: ignore[assignment,method-assign]
    DomainDispatcherApplication.infer_service_region_host = _MOTO_INFER  # type: ignore[method-assign]


def main(argv: list[str] | None = None) -> None:
    """Patch moto, then run its server with ``argv`` (default: the command line's)."""
    patch_moto()
    moto_main(argv)


if __name__ == "__main__":
    main()
