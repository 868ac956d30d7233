"""A run against a target file (``--target FILE``): loading and activating it, the run id
shared with xdist workers, the report header, the target's credentials masked in every
report, and the deletion of the run's buckets at the end."""

from __future__ import annotations

import os
from typing import Any

import pytest

from harness.testing import redaction
from harness.testing.store_selection import explicit_store_selection

RUN_ID_KEY = "skycore_run_id"


def activate(config: pytest.Config) -> None:
    """Load ``--target`` (refused with one clear line if unusable) and point this process at
    it. The run id is the controller's (``--run-id`` or a new one); its xdist workers get it
    through ``workerinput`` (pytest_configure_node), so they name buckets as it cleans up."""
    from harness.targets import TargetError, check_run_id, load_target, new_run_id
    from harness.testing import access

    workerinput = getattr(config, "workerinput", None)
    given = config.getoption("--run-id", default=None)
    try:
        if workerinput is not None and workerinput.get(RUN_ID_KEY):
            run_id = workerinput[RUN_ID_KEY]
        else:
            run_id = check_run_id(given) if given else new_run_id()
    except TargetError as e:
        raise pytest.UsageError(str(e)) from None
    config.option.run_id = run_id
    path = config.getoption("--target", default=None)
    target = None
    if path and path != "local":
        try:
            target = load_target(path)
        except TargetError as e:
            raise pytest.UsageError(str(e)) from None
        chosen = explicit_store_selection(config)
        if chosen and chosen != [target.store]:
            raise pytest.UsageError(
                f"--store {' '.join(chosen)} conflicts with the target file {path}, which is "
                f"for store '{target.store}'; drop --store or use a target of that store."
            )
        redaction.activate(target.secrets())
    access.activate(target, run_id)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist: hand the controller's run id to a worker."""
    node.workerinput[RUN_ID_KEY] = node.config.option.run_id


def pytest_report_header(config: pytest.Config) -> list[str]:
    """In a target run: where it runs, the run's bucket names and what it creates."""
    from harness.testing import access
    from harness.testing import target_plan as plan

    target = access.target()
    if target is None:
        return []
    lines = [
        f"target: {target.path} (store {target.store}); every bucket of this run carries "
        f"{access.bucket_tag()} and is deleted when the run ends"
    ]
    if not os.environ.get(plan.PLAN_SHOWN_ENV):  # harness conform showed it before asking
        lines.append(plan.describe([target.store], f"the endpoint in {target.path}"))
    return lines


def clean_up(session: pytest.Session) -> None:
    """In a target run, delete every bucket of this run that a test left behind (also after
    a failure or Ctrl-C); from the controller only."""
    from harness.testing import access

    target = access.target()
    if target is None or hasattr(session.config, "workerinput"):
        return
    from harness.testing.target_cleanup import delete_run_buckets

    writer = session.config.get_terminal_writer()
    try:
        for line in delete_run_buckets(target, access.run_id()):
            writer.line(line)
    except Exception as e:  # say what is left; the matrix report is still written
        message = redaction.active().text(f"{type(e).__name__}: {e}")
        writer.line(
            f"clean-up of run {access.bucket_tag()} failed ({message}); delete what is left "
            f"with 'harness conform --sweep --target {target.path}' after an hour",
            red=True,
        )


@pytest.hookimpl(wrapper=True, trylast=True, specname="pytest_runtest_makereport")
def _redacted_report(item: pytest.Item, call: pytest.CallInfo[None]):
    """Mask a target's credentials in the report before any other wrapper or reporter sees
    it (trylast: the innermost wrapper)."""
    report = yield
    redaction.active().report(report)
    return report


@pytest.hookimpl(tryfirst=True)
def pytest_collectreport(report: pytest.CollectReport) -> None:
    """Mask a target's credentials in a collection error too."""
    redactor = redaction.active()
    if report.longrepr is not None:
        rendered = str(report.longrepr)
        if redactor.text(rendered) != rendered:
            report.longrepr = redactor.text(rendered)
