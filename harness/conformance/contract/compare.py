"""The local stand-in against the real service, check by check: the same contract probes
run on both, and every check whose outcome differs is a line (what the stand-in did, what
the service did). That is how a team learns where its emulator lies."""

from __future__ import annotations

from dataclasses import dataclass

from harness.conformance.contract.results import CheckResult, Outcome, Status


@dataclass(frozen=True)
class Difference:
    """One check whose outcome differs: on the stand-in, on the service."""

    check: str
    stand_in: str
    service: str

    def line(self, store: str) -> str:
        return f"{store} {self.check}: stand-in {self.stand_in}; service {self.service}"


def describe(result: CheckResult | None) -> str:
    """A check's outcome in a few words (its sentence's first line when it did not pass)."""
    if result is None:
        return "did not run it"
    if result.status is Status.PASSED:
        return "passed"
    return f"{result.status}: {result.text.splitlines()[0]}"


def differences(stand_in: Outcome, service: Outcome) -> tuple[list[Difference], int]:
    """(the checks whose outcome differs, how many agree), in the probes' order."""
    local = {r.check: r for r in stand_in.results}
    remote = {r.check: r for r in service.results}
    checks = list(dict.fromkeys([*local, *remote]))
    found: list[Difference] = []
    for check in checks:
        mine, theirs = local.get(check), remote.get(check)
        passed = [r is not None and r.status is Status.PASSED for r in (mine, theirs)]
        if passed[0] and passed[1]:
            continue
        if mine is not None and theirs is not None and mine.status is theirs.status:
            continue
        found.append(Difference(check, describe(mine), describe(theirs)))
    return found, len(checks) - len(found)
