"""What a conformance run creates on a store, per test module: printed (and asked about)
before a run starts, and listed in docs/conformance.md. Figures are per store; MiB are
rounded up and include what the tests read back to check."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModuleCost:
    """One test module's footprint on one store."""

    module: str
    buckets: int
    objects: int
    mib_up: float
    mib_down: float
    what: str


# Upload order: 50 files of 1 KiB to 16 MiB (test_upload_order.sizes(): 106.6 MiB), once
# ordered and once with 4 transfers; a target run lists the bucket while they upload.
COSTS = (
    ModuleCost("test_emulator_contract", 0, 0, 0, 0, "the stand-in checks itself (local cloud)"),
    ModuleCost("test_mount_matrix", 12, 30, 1, 1, "3 modes x 4 bucket kinds, one cluster"),
    ModuleCost("test_comp_test", 5, 20, 1, 1, "the seed's comp_test.yaml"),
    ModuleCost("test_stop_start", 2, 6, 9, 9, "8 MiB written before stop, read back"),
    ModuleCost("test_upload_order", 2, 100, 214, 0, "50 files, ordered and with 4 transfers"),
    ModuleCost("test_multinode", 2, 5, 1, 0, "3 nodes share a bucket"),
)


def totals(costs: tuple[ModuleCost, ...] = COSTS) -> ModuleCost:
    """The sum of ``costs`` (one store)."""
    return ModuleCost(
        "total",
        sum(c.buckets for c in costs),
        sum(c.objects for c in costs),
        sum(c.mib_up for c in costs),
        sum(c.mib_down for c in costs),
        "",
    )


def describe(stores: list[str], target_label: str) -> str:
    """The text printed before a run: where, and what it creates per store."""
    total = totals()
    lines = [
        f"The conformance suite will run on {', '.join(stores)} ({target_label}). Per store "
        f"it creates up to {total.buckets} buckets and {total.objects} objects, uploads about "
        f"{total.mib_up:.0f} MiB and downloads about {total.mib_down:.0f} MiB, and deletes "
        "every bucket it made when it ends:",
    ]
    for c in COSTS:
        lines.append(
            f"  {c.module:<18} {c.buckets:>3} buckets {c.objects:>4} objects "
            f"{c.mib_up:>5.0f} MiB up {c.mib_down:>3.0f} MiB down  ({c.what})"
        )
    return "\n".join(lines)


PLAN_SHOWN_ENV = "HARNESS_CONFORM_PLAN_SHOWN"
"""Set by ``harness conform`` for the pytest it runs: the plan was printed (and agreed to), so
the report header does not print it again."""
