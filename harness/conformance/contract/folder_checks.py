"""The listing and read checks of an API with one listing request (paged, with or without a
delimiter) and a read of a byte range by offset: the same logic on each such API, worded in
its terms by the class attributes its probes set."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import ClassVar

from harness.conformance.contract import Check, ContractFailure
from harness.conformance.contract.probes import BaseProbes, Folder


class FolderChecks(BaseProbes):
    """The delimiter, order, paging, ranged GET and range past the end checks; the probes
    give ``list_folder``, ``order_keys`` and ``read_range``, and the words below."""

    folder_parts: ClassVar[tuple[str, str]] = ("prefixes", "entries")
    """The two parts of a listing with a delimiter, in the API's words."""
    entries: ClassVar[str] = "entries"
    """What the API calls the objects it lists."""
    page_size: ClassVar[str] = "page size"
    """The listing's parameter of how many entries a page holds."""

    def list_folder(self, prefix: str, page: int = 1000) -> Folder:
        """(prefixes, names) of one folder with delimiter '/', every page, in page order."""
        raise NotImplementedError

    def order_keys(self, page: int) -> list[str]:
        """The names under order/ (put once), listed ``page`` a page, every page."""
        raise NotImplementedError

    def read_range(self, key: str, start: int, end: int | None) -> bytes:
        """The bytes ``start`` to ``end`` (included; None: to the end) of ``key``."""
        raise NotImplementedError

    def range_request(self, key: str, byte_range: str) -> str:
        """The read of ``key``'s ``byte_range`` (``bytes=10-19``), in the API's words."""
        raise NotImplementedError

    def paged_folder(self, page: int) -> Folder:
        """The folder tree/ listed ``page`` entries a page, as the paging check compares it."""
        return self.list_folder("tree/", page)

    def listing_checks(self) -> list[tuple[str, Check]]:
        """The delimiter, order and paging checks, named as the contract names them."""
        return [("delimiter", self.delimiter), ("order", self.order), ("paging", self.paging)]

    def read_checks(self) -> list[tuple[str, Check]]:
        """The conditional GET, ranged GET and range past the end checks."""
        return [
            ("conditional GET", self.conditional_get),
            ("ranged GET", self.ranged_get),
            ("range past the end", self.range_past_end),
        ]

    def conditional_get(self) -> None:
        """The API's conditional reads are honoured (each API's probes)."""
        raise NotImplementedError

    def delimiter(self) -> None:
        """Every folder's listing with delimiter '/' has every prefix and entry."""
        self.put_tree()
        self.check_delimiter(self.list_folder, self._listed_folder, self.folder_parts)

    def _listed_folder(self, folder: str) -> str:
        return f"{self.list_request} prefix={folder}"

    def order(self) -> None:
        """Listings are in name order."""
        self.check_order(
            self.order_keys,
            f"lists {self.entries} out of name order",
            f"{self.list_request} prefix=order/",
        )

    def paging(self) -> None:
        """Every page size gives the same listing, with and without a delimiter."""
        self.put_tree()
        self.check_key_paging(self.order_keys, self._paged_request("order/"))
        self.check_paging(self.paged_folder, self._paged_request("tree/"))

    def _paged_request(self, prefix: str) -> Callable[[int], str]:
        return lambda page: f"{self.list_request} prefix={prefix} {self.page_size}={page}"

    def ranged_get(self) -> None:
        """A ranged read gets those bytes."""
        key, data = "get/ranged", os.urandom(1000)
        self.put(key, data)
        got = self.read_range(key, 10, 19)
        if got != data[10:20]:
            raise ContractFailure(
                "serves a ranged GET wrongly",
                f"{self.range_request(key, 'bytes=10-19')} (of {len(data)} bytes)",
                f"{len(got)} bytes",
            )

    def range_past_end(self) -> None:
        """A read from the object's end is refused with 416."""
        key = "get/past-end"
        self.put(key, os.urandom(1000))
        self.check_range_past_end(
            lambda: self.read_range(key, 1000, None),
            416,
            f"{self.range_request(key, 'bytes=1000-')} (of 1000 bytes)",
        )
