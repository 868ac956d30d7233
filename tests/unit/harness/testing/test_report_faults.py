"""The fault grid of the matrix report plots each file at its rank in creation order (what
the scenario recorded), not at its name's rank; the grid fits one screen; the collector
carries the creation order from a scenario's record into the report's JSON."""

from __future__ import annotations

import json
from pathlib import Path

import numpy
import pytest

from harness.testing.report_collector import FAULTS_PROPERTY, ReportCollector
from harness.testing.report_data import FaultScenario, ReportData
from harness.testing.report_plots import draw_fault_grid, fault_points, uploads_gid
from harness.testing.store_selection import markers

# Named so that name order differs from creation order (as the writer scenario does).
CREATED = ["cold/e-first.bin", "cold/c-second.bin", "cold/a-third.bin", "cold/d-fourth.bin"]


def scenario(
    uploaded: list[str],
    created: list[str] | None = CREATED,
    order_kept: bool | None = None,
    store: str = "s3",
    name: str = "writer during deny (until written)",
) -> FaultScenario:
    uploads: list[list[object]] = [[10.0 + i, key, 4096] for i, key in enumerate(uploaded)]
    kept = (uploaded == created) if order_kept is None else order_kept
    span: dict[str, object] = {"kind": "deny", "start": 0.0, "end": 9.0}
    return FaultScenario("t", store, name, "passed", 0, kept, 14.0, [span], uploads, created)


def plotted_ys(scenarios: list[FaultScenario], which: FaultScenario) -> list[float]:
    """The y values handed to matplotlib for ``which``'s uploads in the fault grid."""
    fig = draw_fault_grid(scenarios)
    lines = [line for ax in fig.axes for line in ax.lines if line.get_gid() == uploads_gid(which)]
    assert len(lines) == 1
    return [float(y) for y in numpy.asarray(lines[0].get_ydata(), dtype=float)]


def test_uploads_in_creation_order_rise_whatever_their_names() -> None:
    """Uploaded in creation order: the line only rises, though the names sort otherwise
    (by name the ranks would be 3, 1, 0, 2)."""
    sc = scenario(CREATED)
    assert sorted(CREATED) != CREATED
    points = fault_points(sc)
    assert (points.ys, points.by_creation, any(points.late)) == ([0, 1, 2, 3], True, False)
    assert plotted_ys([sc], sc) == [0, 1, 2, 3]


def test_an_upload_after_a_newer_file_drops_and_is_marked() -> None:
    uploaded = [CREATED[1], CREATED[0], CREATED[2], CREATED[3]]
    points = fault_points(scenario(uploaded))
    assert points.ys == [1, 0, 2, 3]
    assert points.late == [False, True, False, False]


def test_a_kept_order_is_the_creation_order_when_none_was_recorded() -> None:
    """An older record without ``created``: order kept means the uploads' first-seen order
    is the creation order."""
    sc = scenario([*CREATED, CREATED[0]], created=None, order_kept=True)
    points = fault_points(sc)
    assert (points.ys, points.by_creation) == ([0, 1, 2, 3, 0], True)


def test_without_a_creation_order_the_panel_says_it_ranks_by_name() -> None:
    sc = scenario(CREATED, created=None, order_kept=False)
    points = fault_points(sc)
    assert (points.ys, points.by_creation) == ([3, 1, 0, 2], False)


def test_fourteen_scenarios_on_four_stores_fit_one_screen() -> None:
    """Small multiples: a row per scenario, a column per store, one figure of at most
    1600 x 1000 px; a row's panels share their axes."""
    stores = ["azure", "gcs", "r2", "s3"]
    scenarios = [
        scenario(CREATED, store=store, name=f"scenario {i}") for i in range(14) for store in stores
    ]
    fig = draw_fault_grid(scenarios)
    width, height = fig.get_size_inches() * fig.dpi
    assert width <= 1600 and height <= 1000
    assert len(fig.axes) == 14 * 4
    row = fig.axes[:4]
    assert all(ax.get_shared_x_axes().joined(row[0], ax) for ax in row)
    assert all(ax.get_shared_y_axes().joined(row[0], ax) for ax in row)
    assert [ax.get_title() for ax in row] == stores


def test_a_store_without_the_scenario_gets_an_empty_panel() -> None:
    ran = scenario(CREATED, store="s3")
    other = scenario(CREATED, store="gcs", name="another scenario")
    fig = draw_fault_grid([ran, other])
    assert len(fig.axes) == 4
    assert plotted_ys([ran, other], ran) == [0, 1, 2, 3]


def call_report(nodeid: str, outcome: str, record: dict[str, object] | None) -> pytest.TestReport:
    props = [] if record is None else [(FAULTS_PROPERTY, json.dumps(record))]
    return pytest.TestReport(
        nodeid=nodeid,
        location=("f", 1, "t"),
        keywords={"scenario": 1},
        outcome=outcome,  # type: ignore[arg-type]
        longrepr=None,
        when="call",
        user_properties=props,
    )


def test_a_scenario_that_failed_before_its_record_still_gets_its_cell(tmp_path: Path) -> None:
    """A failed scenario test without a record is a row of its own (its test's name) on
    its store, not a cell left out of the verdicts."""
    marker = markers()["s3"]
    nodeid = f"tests/smoke/test_fault_lifecycle.py::test_detached_drain[{marker}]@faults-{marker}"
    collector = ReportCollector(tmp_path / "report.html")
    collector.add(call_report(nodeid, "failed", None))
    (sc,) = collector.data.faults
    assert (sc.store, sc.scenario, sc.outcome, sc.lost) == (
        "s3",
        "test_detached_drain",
        "failed",
        None,
    )


@pytest.mark.parametrize("created", [CREATED, None])
def test_the_collector_carries_the_creation_order_into_the_json(
    tmp_path: Path, created: list[str] | None
) -> None:
    record = {
        "store": "s3",
        "scenario": "writer during deny (until written)",
        "lost": 0,
        "order_kept": True,
        "durable_s": 14.0,
        "faults": [],
        "uploads": [[10.0 + i, key, 4096] for i, key in enumerate(CREATED)],
    }
    if created is not None:
        record["created"] = created
    collector = ReportCollector(tmp_path / "report.html")
    collector.add(call_report("tests/smoke/test_faults.py::test_writer[aws]", "passed", record))
    collector.write()
    (sc,) = ReportData.from_json((tmp_path / "report.json").read_text()).faults
    assert sc.created == created
    assert sc.creation_order() == CREATED
    assert (tmp_path / "report-faults.png").exists()
