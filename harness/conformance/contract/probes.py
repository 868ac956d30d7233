"""What every API's contract probes share: :class:`BaseProbes` (the emulator, the user's
bucket, and the checks whose logic is the same on every API, each worded by the caller in
its API's terms) and the key sets they list (:data:`TREE`, :data:`ORDER`)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar, NamedTuple

from harness.accounts import OTHER, USER
from harness.conformance.contract import ContractFailure, bucket

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


def random_bodies(prefix: str, count: int) -> dict[str, bytes]:
    """``count`` keys under ``prefix`` with random bodies of 64 to 256 KiB."""
    return {f"{prefix}{i:02d}": os.urandom(64 * 1024 * (1 + i % 4)) for i in range(count)}


class Listed(NamedTuple):
    """One object a listing showed while uploads ran: its key, its digest as listed, and
    whether the key's upload had been answered before that listing was sent."""

    key: str
    digest: str
    answered: bool


@dataclass(frozen=True)
class ConditionalRead:
    """One conditional GET: ``read()`` sends it; ``refused(error)`` is true for the refusal
    it must get (None: it must serve the object); ``request`` and ``want`` name both."""

    request: str
    want: str
    read: Callable[[], bytes]
    refused: Callable[[Exception], bool] | None


class BaseProbes:
    """The probes of one API for one emulator: a subclass names its checks (``checks()``),
    enters a bucket of the user's (:meth:`own_bucket`) and words each failure."""

    credential: ClassVar[str] = "key"
    """What the API calls an account's secret, in the failures' words."""
    list_request: ClassVar[str] = "the listing"
    """The API's listing request, in the failures' words."""

    def __init__(self, emulator: Any) -> None:
        self.emulator = emulator
        self.tag = ""
        """A target run's tag for bucket names (empty on the local cloud)."""
        self._order_put = False
        self._stack = ExitStack()

    def own_bucket(self, what: str) -> str:
        """A new bucket of the user's, deleted on exit."""
        return self._stack.enter_context(bucket(self.emulator, what, USER, self.tag))

    def other_bucket(self, what: str) -> Any:
        """A new bucket of the other account's (a context manager), or None in a target run
        whose file names no other account."""
        target = getattr(self.emulator, "target", None)
        if target is not None and not target.has_other:
            return None
        return bucket(self.emulator, what, OTHER, self.tag)

    def put(self, key: str, data: bytes) -> Any:
        """Write ``data`` to ``key`` in the user's bucket (each API's probes)."""
        raise NotImplementedError

    def listing(self, prefix: str) -> dict[str, str]:
        """key -> digest of every object under ``prefix`` (each API's probes)."""
        raise NotImplementedError

    def put_tree(self) -> None:
        """The TREE keys, each holding its own name."""
        for key in TREE:
            self.put(key, key.encode())

    def put_batch(self) -> list[str]:
        """The twelve keys under batch/ that a batch delete deletes, put."""
        keys = [f"batch/{i:02d}" for i in range(12)]
        for key in keys:
            self.put(key, b"d")
        return keys

    def check_none_left(self, prefix: str, does: str) -> None:
        """Nothing is listed under ``prefix`` (its keys were deleted)."""
        left = sorted(self.listing(prefix))
        if left:
            raise ContractFailure(does, f"{self.list_request} prefix={prefix}", f"{left}")

    def put_order_keys(self) -> None:
        """The ORDER keys, put once (the order and paging checks both list them)."""
        if not self._order_put:
            for key in ORDER:
                self.put(key, b"o")
            self._order_put = True

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def answer(self, error: BaseException) -> str:
        """``error`` as the API's answer (status, code, message), for a failure."""
        return f"{type(error).__name__}: {error}"

    @staticmethod
    def put_while_listing(
        put: Callable[[str, bytes], Any],
        listing: Callable[[], dict[str, str]],
        bodies: Mapping[str, bytes],
    ) -> tuple[dict[str, Any], list[Listed]]:
        """Upload ``bodies`` four at a time while another thread lists them without pause:
        (key -> what ``put`` returned, every object the listings showed meanwhile)."""
        seen: list[Listed] = []
        answered_at: dict[str, float] = {}
        done = threading.Event()

        def upload(key: str, data: bytes) -> Any:
            answer = put(key, data)
            answered_at[key] = time.monotonic()
            return answer

        def lister() -> None:
            while not done.is_set():
                sent = time.monotonic()
                for key, digest in listing().items():
                    answered = key in answered_at and answered_at[key] <= sent
                    seen.append(Listed(key, digest, answered))

        with ThreadPoolExecutor(5) as pool:
            watcher = pool.submit(lister)
            try:  # a failed upload must stop the lister, or the pool never ends
                puts = {key: pool.submit(upload, key, data) for key, data in bodies.items()}
                answers = {key: f.result() for key, f in puts.items()}
            finally:
                done.set()
            watcher.result()
        return answers, seen

    def check_listed_digests(
        self,
        during: Iterable[Listed],
        prefix: str,
        bodies: Mapping[str, bytes],
        digest: Callable[[bytes], str],
        does: str,
        field: str,
        unanswered_may_lack: bool = False,
    ) -> None:
        """Every digest the listings of ``prefix`` gave, ``during`` the uploads and after
        them, is ``digest`` of the key's body; ``field`` names the digest in the API's
        words. ``unanswered_may_lack``: an object listed while its upload was still
        unanswered may show no digest yet (for an API whose contract has a check of its own
        that nothing is listed before its upload is whole)."""
        after = self.listing(prefix)
        listing = f"{self.list_request} prefix={prefix}"
        listed = [*during, *(Listed(key, got, True) for key, got in after.items())]
        for key, got, answered in listed:
            want = digest(bodies[key])
            if got == want or (unanswered_may_lack and not got and not answered):
                continue
            raise ContractFailure(does, f"{listing} (for {key}, MD5 {want})", f"{field} {got}")

    @staticmethod
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

    @staticmethod
    def check_order(list_keys: Callable[[int], list[str]], does: str, request: str) -> None:
        """ORDER listed in one page (``list_keys(page_size)``) is in key order; ``request``
        names the listing."""
        want = sorted(ORDER)
        got = list_keys(1000)
        if got != want:
            raise ContractFailure(does, request, f"{got}, not {want}")

    @staticmethod
    def check_key_paging(
        list_keys: Callable[[int], list[str]], request: Callable[[int], str]
    ) -> None:
        """ORDER listed two entries a page, every page, is what one page gives;
        ``request(page_size)`` names the listing."""
        whole = list_keys(1000)
        paged = list_keys(2)
        if paged != whole:
            raise ContractFailure(
                "pages a listing differently from the whole listing (keys lost, repeated or "
                "moved across pages)",
                request(2),
                f"{paged}, not {whole}",
            )

    @staticmethod
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

    def check_conditional_reads(self, reads: Iterable[ConditionalRead], data: bytes) -> None:
        """Each read is refused as it must be, or serves ``data``."""
        for case in reads:
            does = f"ignores a conditional GET (want {case.want})"
            try:
                got = case.read()
            except Exception as e:
                if case.refused is not None and case.refused(e):
                    continue
                raise ContractFailure(does, case.request, self.answer(e)) from e
            if case.refused is not None or got != data:
                raise ContractFailure(does, case.request, f"{len(got)} bytes")

    def check_range_past_end(self, read: Callable[[], bytes], refused: int, request: str) -> None:
        """A read of a range that starts at the object's end is refused with HTTP 416 (status
        ``refused`` of the SDK's error), never served: ``read()`` sends it."""
        try:
            got = read()
        except Exception as e:
            status = getattr(e, "status_code", None) or getattr(e, "code", None)
            response = getattr(e, "response", None)
            if isinstance(response, dict):
                status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if status == refused:
                return
            raise ContractFailure(
                "answers a range past the object's end oddly (want HTTP 416)",
                request,
                self.answer(e),
            ) from e
        raise ContractFailure(
            "serves a range that starts at the object's end (want HTTP 416)",
            request,
            f"{len(got)} bytes",
        )

    def check_declared(
        self, write_read: Callable[[bytes], bytes], data: bytes, request: str
    ) -> None:
        """A declared account's credential works: ``write_read(data)`` writes ``data`` and
        reads it back; ``request`` names both."""
        try:
            back = write_read(data)
        except Exception as e:
            raise ContractFailure(
                f"refuses a declared {self.credential}", request, self.answer(e)
            ) from e
        if back != data:
            raise ContractFailure("serves other data", request, f"{back!r}")

    def check_other_account(
        self,
        what: str,
        write_read: Callable[[str, bytes], bytes],
        data: bytes,
        request: Callable[[str], str],
    ) -> None:
        """The other account's credential works in a bucket of its own (``what`` names the
        bucket; none in a target run with no other account): ``write_read(bucket, data)``
        writes ``data`` and reads it back; ``request(bucket)`` names both."""
        theirs_bucket = self.other_bucket(what)
        if theirs_bucket is not None:
            with theirs_bucket as theirs:
                self.check_declared(partial(write_read, theirs), data, request(theirs))

    def check_unknown_refused(
        self,
        call: Callable[[], object],
        refused: Callable[[BaseException], bool],
        request: str,
        errors: tuple[type[BaseException], ...] = (Exception,),
    ) -> None:
        """A credential no account has is refused: ``call()`` raises one of ``errors`` for
        which ``refused`` is true; ``request`` names the call."""
        try:
            call()
        except errors as e:
            if refused(e):
                return
            raise ContractFailure(
                f"answers an unknown {self.credential} oddly", request, self.answer(e)
            ) from e
        raise ContractFailure(f"accepts an unknown {self.credential}", request, "HTTP 200")
