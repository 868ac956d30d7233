"""Recovery strategies: where a managed job's cluster is launched again after a preemption.

SkyPilot's two strategies are kept by name. FAILOVER retries the region the job ran in first,
then the others; EAGER_NEXT_REGION tries the other regions first and comes back to the same
one last. The local cloud has a single region (every node is a container on one engine), so
both relaunch in that region; the order logic is what a multi-region provider plugs into.

The policy numbers live here too: how often a launch that gets no nodes is retried (with
backoff) before the job is FAILED_NO_RESOURCE, and when a user-code failure may restart.
"""

from __future__ import annotations

from dataclasses import dataclass

from skycore.state.managed_jobs import JobStatus, ManagedJob

FAILOVER = "FAILOVER"
EAGER_NEXT_REGION = "EAGER_NEXT_REGION"
STRATEGIES = (FAILOVER, EAGER_NEXT_REGION)

# Every provider's regions; the docker provider has one.
REGIONS: dict[str, list[str]] = {"docker": ["local"]}

# A launch that cannot get its nodes is retried this many times per region, waiting
# BACKOFF_S[i] before retry i (the last value repeats).
LAUNCH_RETRIES_PER_REGION = 3
BACKOFF_S = (1.0, 2.0, 4.0)


@dataclass(frozen=True)
class Strategy:
    """The order of regions for a launch, and whether a failure may restart the job."""

    name: str
    provider: str

    def regions(self, last_region: str | None) -> list[str]:
        """Regions to try, in order, for a (re)launch after running in ``last_region``."""
        regions = list(REGIONS.get(self.provider, ["default"]))
        if last_region is None or last_region not in regions:
            return regions
        others = [r for r in regions if r != last_region]
        if self.name == EAGER_NEXT_REGION:
            return [*others, last_region]
        return [last_region, *others]

    def launch_plan(self, last_region: str | None) -> list[tuple[str, float]]:
        """(region, seconds to wait before the try) for every launch try, in order."""
        plan: list[tuple[str, float]] = []
        for region in self.regions(last_region):
            for i in range(LAUNCH_RETRIES_PER_REGION):
                wait = 0.0 if i == 0 else BACKOFF_S[min(i - 1, len(BACKOFF_S) - 1)]
                plan.append((region, wait))
        return plan


def may_restart_on_error(job: ManagedJob) -> bool:
    """True if a user-code failure (FAILED / FAILED_SETUP) may restart the job once more."""
    return job.restarts_on_errors < job.max_restarts_on_errors


def user_failure_status(setup_failed: bool) -> JobStatus:
    """The terminal status of a user-code failure that may not restart."""
    return JobStatus.FAILED_SETUP if setup_failed else JobStatus.FAILED


def strategy_for(name: str | None, provider: str) -> Strategy:
    """The strategy named in ``resources.job_recovery.strategy`` (FAILOVER by default)."""
    chosen = (name or FAILOVER).upper()
    if chosen not in STRATEGIES:
        chosen = FAILOVER
    return Strategy(chosen, provider)
