"""The emulator contract: probes, through the gate and with the store's own SDK, of what a
stand-in server must do for the conformance suite to mean anything (docs/backends.md, "What
a stand-in must do"). One module of probes per API, named by the emulator class's
``contract_probes``, with a ``RELIANCE`` table of which test modules rely on each check.

:func:`run` runs every check and returns a :class:`~harness.conformance.contract.results.Outcome`:
a failed check the suite relies on skips only the modules that rely on it; one no test
relies on is a finding; a deviation the emulator declares (``known_deviations``) is reported;
a crash of the harness's or a package's own code is reported as that, with its traceback."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib import import_module
from typing import TYPE_CHECKING

from harness.conformance.contract.crash import crash_report, is_crash
from harness.conformance.contract.reliance import EVERY_MODULE, Reliance
from harness.conformance.contract.results import CheckResult, Outcome, Status

if TYPE_CHECKING:
    from harness.emulators.base import RunningEmulator

PREFIX = "the emulator (not your store)"
"""Who a failure is about when the emulator is a stand-in."""
PRODUCT_PREFIX = "your store (its emulator runs the product itself)"
"""Who a failure is about when the emulator declares it is the product (``is_the_product``)."""

__all__ = [
    "PREFIX",
    "PRODUCT_PREFIX",
    "CheckResult",
    "ContractFailure",
    "Outcome",
    "contract_checks",
    "run",
]


class ContractFailure(Exception):
    """One check the emulator failed: what it does, the request and its answer."""

    def __init__(self, does: str, request: str, answer: str) -> None:
        self.does, self.request, self.answer = does, request, answer
        super().__init__(self.sentence(PREFIX))

    def sentence(self, subject: str) -> str:
        """The failure with ``subject`` doing it."""
        return f"{subject} {self.does}: {self.request} was answered {self.answer}"


Check = Callable[[], None]
"""One probe: returns if the emulator behaves, raises ContractFailure if not."""


def bucket_name(store: str, what: str, tag: str = "") -> str:
    """A fresh bucket name for the contract (lower case, valid on every API); ``tag``: a
    target run's tag (``PREFIX-RUNID``), which its clean-up finds the bucket by."""
    if tag:
        return f"{tag}-c{what}-{uuid.uuid4().hex[:6]}"[:63]
    return f"contract-{what}-{store}-{uuid.uuid4().hex[:10]}"[:63]


@contextmanager
def bucket(emulator: RunningEmulator, what: str, owner: str, tag: str = "") -> Iterator[str]:
    """A new private bucket of ``owner``, deleted (with its objects) afterwards."""
    name = bucket_name(emulator.store, what, tag)
    emulator.make_bucket(name, owner)
    try:
        yield name
    finally:
        emulator.delete_bucket(name)


def contract_checks(emulator_class: type[RunningEmulator]) -> tuple[str, ...]:
    """The names of the contract checks of ``emulator_class``'s API (what a ``Deviation``
    may name); empty if it names no probes."""
    if emulator_class.contract_probes is None:
        return ()
    return tuple(import_module(emulator_class.contract_probes).RELIANCE)


SETUP = "set-up"
"""The pseudo-check of entering the probes (making their buckets): every test relies on it."""


def run(emulator: RunningEmulator, tag: str = "") -> Outcome:
    """Every check of ``emulator``'s family, in order; ``tag``: a target run's tag for the
    names of the buckets the probes make."""
    product = bool(getattr(emulator, "is_the_product", False))
    outcome = Outcome(product=product)
    if emulator.contract_probes is None:
        return outcome
    module = import_module(emulator.contract_probes)
    reliance: dict[str, Reliance] = getattr(module, "RELIANCE", {})
    judge = _Judge(emulator, reliance, product)
    for deviation in judge.unknown_deviations(tuple(reliance)):
        outcome.results.append(deviation)
    try:
        probes = module.Probes(emulator)
        probes.tag = tag
        probes.__enter__()
    except Exception as e:  # the buckets could not be made: nothing else can run
        outcome.results.append(judge.raised(SETUP, e))
        return outcome
    try:
        for name, check in probes.checks():
            try:
                check()
            except Exception as e:
                outcome.results.append(judge.raised(name, e))
            else:
                outcome.results.append(judge.passed(name))
    finally:
        probes.__exit__(None, None, None)
    return outcome


class _Judge:
    """What one check's outcome means for ``emulator``: its reliance, its declared
    deviation, and whose failure it is."""

    def __init__(self, emulator: RunningEmulator, reliance: dict[str, Reliance], product: bool):
        self.emulator = emulator
        self.reliance = reliance
        self.subject = PRODUCT_PREFIX if product else PREFIX
        self.declared = {
            d.check: d.why
            for d in getattr(emulator, "known_deviations", ())
            if d.applies_to(emulator.implementation)
        }

    def unknown_deviations(self, checks: tuple[str, ...]) -> list[CheckResult]:
        """A declared deviation of a check the contract does not have (a typo, or a check
        renamed): each fails the contract test, naming the checks there are."""
        return [
            CheckResult(
                check,
                Status.STALE,
                f"{type(self.emulator).__name__}.known_deviations names the check {check!r}, "
                f"which the contract does not have; its checks: {', '.join(checks)}",
            )
            for check in self.declared
            if check not in checks
        ]

    def _relied(self, check: str) -> Reliance:
        return self.reliance.get(check, Reliance(EVERY_MODULE, "every test, to be safe"))

    def passed(self, check: str) -> CheckResult:
        if check not in self.declared:
            return CheckResult(check, Status.PASSED, "")
        return CheckResult(
            check,
            Status.STALE,
            f"the {check} check now passes on {self.emulator.implementation}: drop its "
            f"Deviation from {type(self.emulator).__name__}.known_deviations",
        )

    def raised(self, check: str, error: Exception) -> CheckResult:
        if is_crash(error, type(self.emulator).__module__.split(".")[0]):
            return CheckResult(check, Status.CRASH, crash_report(check, error))
        if not isinstance(error, ContractFailure):  # an SDK error the probe did not expect
            error = ContractFailure(f"fails the {check} check", check, repr(error))
        sentence = error.sentence(self.subject)
        if check in self.declared:
            text = f"{self.declared[check]} ({error.request}: {error.answer})"
            return CheckResult(check, Status.DEVIATION, text)
        relied = self._relied(check)
        if relied.finding_only:
            return CheckResult(check, Status.FINDING, sentence, why=relied.why)
        return CheckResult(check, Status.FAILED, sentence, list(relied.modules), relied.why)
