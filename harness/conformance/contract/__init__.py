"""The emulator contract: probes, through the gate and with the store's own SDK, of what a
stand-in server must do for the conformance suite to mean anything (docs/backends.md, "What
a stand-in must do"). One module of probes per API, named by the emulator class's
``contract_probes``; :func:`run` runs them and returns every failure, each worded "the
emulator (not your store) does X", naming the request and the answer."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

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
