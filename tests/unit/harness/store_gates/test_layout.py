"""Every store's gate package has the same roles (docs/backends.md, "A gate package's
layout"), and an outside S3-compatible store reuses the S3 package by subclassing its
protocol: a row in front of S3's route table classifies its own sub-resource, S3's rows
the rest."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import ClassVar
from urllib.parse import parse_qs, urlsplit

import pytest

from harness.accounts import USER
from harness.gate.protocol import Exchange, GateProtocol
from harness.gate.rules import Access, Kind
from harness.gate.state import GateState
from harness.store_gates.s3.keys import AccessKey
from harness.store_gates.s3.protocol import S3GateProtocol
from harness.store_gates.s3.requests import OBJECT_ROUTES, Route, S3Detail, Table

PACKAGES = ("s3_gate", "gcs_gate", "azure_gate")
ROLES = ("requests", "access", "signatures", "bookkeeping", "protocol")


@pytest.mark.parametrize("package", PACKAGES)
def test_every_gate_package_has_the_five_roles(package: str) -> None:
    for role in ROLES:
        importlib.import_module(f"harness.emulators.{package}.{role}")
    protocol = importlib.import_module(f"harness.emulators.{package}.protocol")
    classes = [
        value
        for value in vars(protocol).values()
        if isinstance(value, type)
        and issubclass(value, GateProtocol)
        and value.__module__ == protocol.__name__
    ]
    assert len(classes) == 1, classes


@pytest.mark.parametrize("package", PACKAGES)
def test_gate_modules_stay_small(package: str) -> None:
    folder = Path(importlib.import_module(f"harness.emulators.{package}").__file__ or "").parent
    sizes = {p.name: len(p.read_text().splitlines()) for p in folder.glob("*.py")}
    assert max(sizes.values()) <= 450, sizes


class VendorGateProtocol(S3GateProtocol):
    """An S3-compatible store with one call of its own (``POST /bucket/key?rename``)."""

    object_routes: ClassVar[Table] = (
        ("POST", "rename", Route(Kind.WRITE, "RenameObject", "s3:PutObject", "put")),
        *OBJECT_ROUTES,
    )


def classified(protocol: S3GateProtocol, method: str, path: str, home: Path) -> Access:
    ex = Exchange(
        method=method,
        path=path,
        headers={},
        query=parse_qs(urlsplit(path).query, keep_blank_values=True),
        state=GateState(home / "state.json"),
        upstream=("127.0.0.1", 1),
        read_body=lambda: b"",
    )
    return protocol.classify(ex)[0]


def test_an_outside_store_adds_a_route_by_subclassing(tmp_path: Path) -> None:
    keys = {USER: AccessKey("AKIAVENDOR0000000001", "vendor-secret")}
    vendor, s3 = VendorGateProtocol(keys, "us-east-1"), S3GateProtocol(keys, "us-east-1")
    renamed = classified(vendor, "POST", "/bkt/a.txt?rename", tmp_path)
    assert (renamed.kind, renamed.key, renamed.event, renamed.action) == (
        Kind.WRITE,
        "a.txt",
        "put",
        "s3:PutObject",
    )
    assert isinstance(renamed.detail, S3Detail) and renamed.detail.op == "RenameObject"
    plain = classified(s3, "POST", "/bkt/a.txt?rename", tmp_path)
    assert isinstance(plain.detail, S3Detail) and plain.detail.op == "PostObjectKey"
    for method, path in (("GET", "/bkt/a.txt?acl"), ("PUT", "/bkt?cors"), ("DELETE", "/bkt")):
        assert classified(vendor, method, path, tmp_path) == classified(s3, method, path, tmp_path)
