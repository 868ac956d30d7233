"""The emulator contract: probes, through the gate and with the store's own SDK, of what a
stand-in server must do for the conformance suite to mean anything (docs/backends.md, "What
a stand-in must do"). One module of probes per API, named by the emulator class's
``contract_probes``; :func:`run` runs them and returns every failure, each worded "the
emulator (not your store) does X", naming the request and the answer."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.emulators.base import RunningEmulator

PREFIX = "the emulator (not your store)"


class ContractFailure(Exception):
    """One check the emulator failed: what it does, the request and its answer."""

    def __init__(self, does: str, request: str, answer: str) -> None:
        self.does, self.request, self.answer = does, request, answer
        super().__init__(f"{PREFIX} {does}: {request} was answered {answer}")


Check = Callable[[], None]
"""One probe: returns if the emulator behaves, raises ContractFailure if not."""


def bucket_name(store: str, what: str) -> str:
    """A fresh bucket name for the contract (lower case, valid on every API)."""
    return f"contract-{what}-{store}-{uuid.uuid4().hex[:10]}"[:63]


@contextmanager
def bucket(emulator: RunningEmulator, what: str, owner: str) -> Iterator[str]:
    """A new private bucket of ``owner``, deleted (with its objects) afterwards."""
    name = bucket_name(emulator.store, what)
    emulator.make_bucket(name, owner)
    try:
        yield name
    finally:
        emulator.delete_bucket(name)


@dataclass
class Outcome:
    """What the contract found: failures (the emulator is not trusted) and known
    deviations (reported, trusted)."""

    failures: list[str] = field(default_factory=list)
    deviations: list[str] = field(default_factory=list)
    checks: int = 0


def run(emulator: RunningEmulator) -> Outcome:
    """Every check of ``emulator``'s family, in order. A check that raises anything but
    ContractFailure is reported as a failure of its own."""
    outcome = Outcome()
    if emulator.contract_probes is None:
        return outcome
    from importlib import import_module

    module = import_module(emulator.contract_probes)
    deviations: dict[tuple[str, str], str] = getattr(module, "KNOWN_DEVIATIONS", {})
    with module.Probes(emulator) as probes:
        for check_name, check in probes.checks():
            outcome.checks += 1
            known = deviations.get((emulator.implementation, check_name))
            try:
                check()
            except ContractFailure as e:
                if known is None:
                    outcome.failures.append(str(e))
                else:
                    outcome.deviations.append(f"{check_name}: {known} ({e.request}: {e.answer})")
                continue
            except Exception as e:  # an SDK error the probe did not expect
                outcome.failures.append(
                    str(ContractFailure(f"fails the {check_name} check", check_name, repr(e)))
                )
                continue
            if known is not None:
                outcome.failures.append(
                    f"the {check_name} check now passes on {emulator.implementation}: drop its "
                    f"entry from {emulator.contract_probes}.KNOWN_DEVIATIONS"
                )
    return outcome


def expected_listing(keys: list[str], prefix: str, delimiter: str = "/") -> tuple[list, list]:
    """(common prefixes, keys) that a listing of ``keys`` under ``prefix`` with
    ``delimiter`` returns, both in key order."""
    prefixes: set[str] = set()
    direct: list[str] = []
    for key in keys:
        if not key.startswith(prefix):
            continue
        rest = key[len(prefix) :]
        if delimiter in rest:
            prefixes.add(prefix + rest.split(delimiter, 1)[0] + delimiter)
        else:
            direct.append(key)
    return sorted(prefixes), sorted(direct)


def folders(keys: list[str], root: str) -> list[str]:
    """Every folder prefix (ending in '/') of ``keys`` at or under ``root``."""
    found = {root}
    for key in keys:
        parts = key[len(root) :].split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            found.add(root + "/".join(parts[:depth]) + "/")
    return sorted(found)


TREE = [
    "tree/top.txt",
    "tree/a/x.txt",
    "tree/a/b/y.txt",
    "tree/a/b/c/z.txt",
    "tree/d/e/f/g.txt",
    "tree/h/i/j/k/l.txt",
]
"""Keys whose folders hold objects at every depth, and folders with only deeper objects."""

ORDER = [
    "order/a-b",
    "order/a/b",
    "order/a/c/d",
    "order/a0",
    "order/A",
    "order/a b",
    "order/a.b",
    "order/b",
    "order/z",
    "order/\u00e9",
]
"""Keys whose key (UTF-8 byte) order differs from a folder walk's file-name order."""


Folder = tuple[list[str], list[str]]
"""(prefixes, entries) of one folder listed with delimiter '/'."""


def put_while_listing(
    put: Callable[[str, bytes], Any],
    listing: Callable[[], dict[str, str]],
    bodies: Mapping[str, bytes],
) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """Upload ``bodies`` four at a time while another thread lists them without pause:
    (key -> what ``put`` returned, every (key, digest) the listings saw meanwhile)."""
    seen: list[tuple[str, str]] = []
    done = threading.Event()

    def lister() -> None:
        while not done.is_set():
            seen.extend(listing().items())

    with ThreadPoolExecutor(5) as pool:
        watcher = pool.submit(lister)
        try:  # a failed upload must stop the lister, or the pool never ends
            puts = {key: pool.submit(put, key, data) for key, data in bodies.items()}
            answers = {key: f.result() for key, f in puts.items()}
        finally:
            done.set()
        watcher.result()
    return answers, seen


def check_delimiter(
    list_folder: Callable[[str], Folder], request: Callable[[str], str], names: tuple[str, str]
) -> None:
    """Every folder of TREE listed with delimiter '/' has every prefix and entry:
    ``request(folder)`` names the listing, ``names`` its two parts in the API's words."""
    for folder in folders(TREE, "tree/"):
        got = list_folder(folder)
        want = expected_listing(TREE, folder)
        if sorted(got[0]) != want[0] or sorted(got[1]) != want[1]:
            raise ContractFailure(
                "drops or invents entries of a listing with a delimiter",
                f"{request(folder)} delimiter=/ (entries: {', '.join(TREE)})",
                f"{names[0]} {got[0]} and {names[1]} {got[1]}, not {want[0]} and {want[1]}",
            )


def check_paging(list_folder: Callable[[int], Folder], request: Callable[[int], str]) -> None:
    """The folder tree/ listed with delimiter '/' one and two entries a page is what one
    page gives (``list_folder(page_size)``; ``request(page_size)`` names the listing)."""
    whole = list_folder(1000)
    for page in (1, 2):
        paged = list_folder(page)
        if paged != whole:
            raise ContractFailure(
                "pages a delimiter listing differently from the whole listing",
                f"{request(page)} delimiter=/, every page",
                f"{paged}, not {whole}",
            )
