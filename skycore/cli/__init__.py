"""The ``skycore`` command line (click + rich), shaped like SkyPilot's ``sky``.

launch, exec, status, stop, start, down, queue, logs, cancel, storage ls|delete, check, jobs.
Errors a user can cause print as one paragraph (exit 2, or the error's own exit code);
stage failures print the log tail and path (exit 1); failed jobs exit 100.
"""

from __future__ import annotations

from skycore.cli import check, clusters, jobs, launch, managed_jobs, storage
from skycore.cli.app import cli

__all__ = ["check", "cli", "clusters", "jobs", "launch", "main", "managed_jobs", "storage"]

cli.add_command(managed_jobs.jobs)


def main() -> None:
    """Entry point of the ``skycore`` script."""
    cli()
