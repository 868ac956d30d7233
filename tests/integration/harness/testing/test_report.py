"""The matrix report: built from real pytest reports, rendered by headless Chromium."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from harness.cloud import system
from harness.testing import report


def sample() -> report.ReportData:
    data = report.ReportData()
    for mode in ("COPY", "MOUNT", "MOUNT_CACHED"):
        for kind in ("sky_managed", "public_not_by_user"):
            outcome = "failed" if (mode, kind) == ("MOUNT", "public_not_by_user") else "passed"
            data.cells.append(report.CellResult("aws", mode, kind, outcome, 1.25))
    data.timelines.append(
        report.Timeline("test_upload_order[aws]", [(0.1 * i, f"f{i}", 1024) for i in range(10)])
    )
    data.others.append(("test_upload_order.py::lost[aws]", "xfailed", 3.0))
    return data


def with_faults() -> report.ReportData:
    """sample() and fault scenarios on two stores: one not run on gcs, one that failed on
    gcs before it recorded anything."""
    data = sample()
    data.faults += [
        report.FaultScenario("a[s3]", "s3", "outage 30 s", "passed", 0, True, 31.0),
        report.FaultScenario("a[gcs]", "gcs", "outage 30 s", "failed", 2, False, None),
        report.FaultScenario("b[s3]", "s3", "spot preempted", "skipped", 0, None, None),
        report.FaultScenario("c[gcs]", "gcs", "test_drain", "failed", None, None, None),
    ]
    return data


def test_matrix_ids_parse():
    assert report.parse_matrix_id(
        "tests/smoke/test_mount_matrix.py::test_mount[gcp-MOUNT-sky_managed]"
    ) == (
        "gcp",
        "MOUNT",
        "sky_managed",
    )
    assert report.parse_matrix_id("tests/smoke/test_pipeline.py::test_x") is None
    # pytest-xdist's --dist loadgroup suffix, and a conformance run's nodeid.
    assert report.parse_matrix_id(
        "test_mount_matrix.py::test_mount[aws-COPY-sky_managed]@matrix-aws"
    ) == (
        "aws",
        "COPY",
        "sky_managed",
    )


def test_markdown_twin_and_png(tmp_path: Path):
    page, md = report.render(sample(), tmp_path / "report.html")
    text = md.read_text()
    assert "| sky_managed | ✔ 1.2s | ✔ 1.2s | ✔ 1.2s |" in text
    assert "✘" in text and "xfailed" in text
    png = tmp_path / "report.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "report.png" in page.read_text()


@pytest.fixture(scope="module")
def chromium() -> str:
    system.ensure_packages(need_node=False, extra={"chromium": "chromium"})
    path = shutil.which("chromium")
    assert path, "chromium was installed but is not on PATH"
    return path


def test_page_renders_in_headless_chromium(chromium: str, tmp_path: Path):
    """The page opens with the verdicts' grid, then the mount matrix."""
    page, _ = report.render(with_faults(), tmp_path / "report.html")
    flags = [
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
    ]  # fmt: skip
    dom = subprocess.run(
        [chromium, *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    first_table = dom.stdout.index("<table")
    assert dom.stdout.index('<table id="verdicts"') == first_table
    matrix = dom.stdout.split('id="matrix-aws"', 1)[1].split("</table>", 1)[0]
    assert matrix.count('class="passed"') == 5
    shot = tmp_path / "shot.png"
    subprocess.run(
        [chromium, *flags, f"--screenshot={shot}", "--window-size=1000,900", page.as_uri()],
        capture_output=True,
        timeout=120,
        check=True,
    )
    assert shot.stat().st_size > 10_000  # a real picture, not an empty page


def test_faults_section_per_store_with_shaded_spans(tmp_path: Path):
    """The "faults" section: per store, each scenario with files lost, order kept and time
    to durable; the timeline PNG shades each fault's span."""

    data = sample()
    DENY_SPAN: dict[str, object] = {"kind": "deny", "start": 0.0, "end": 30.0}
    uploads: list[list[object]] = [[31.0 + i, f"deny/k{i}.bin", 1024] for i in (3, 4, 0, 1, 2)]
    data.faults.append(
        report.FaultScenario(
            "t[aws]", "s3", "deny 30 s", "xfailed", 0, False, 35.5, [DENY_SPAN], uploads
        )
    )
    data.faults.append(
        report.FaultScenario("t2[gcp]", "gcs", "outage 30 s", "passed", 0, True, 31.0)
    )
    page, md = report.render(data, tmp_path / "report.html")
    text = md.read_text()
    assert "## Faults" in text and "### s3" in text and "### gcs" in text
    assert "| deny 30 s | xfailed | 0 | no | 35.5 |" in text
    assert "| outage 30 s | passed | 0 | yes | 31.0 |" in text
    assert "report-faults.png" in page.read_text()
    # the span is drawn: the PNG with the fault differs from the same plot without it
    with_span = report.plot_fault_timelines(data.faults[:1], tmp_path / "a.png")
    bare = report.FaultScenario("t[aws]", "s3", "deny 30 s", "xfailed", 0, False, 35.5, [], uploads)
    without = report.plot_fault_timelines([bare], tmp_path / "b.png")
    assert with_span and without and with_span.read_bytes() != without.read_bytes()


def test_the_page_opens_with_the_grid_and_the_upload_order(tmp_path: Path):
    """A store team comes for the store x mode x bucket-kind grid and the order timeline:
    both come before the list of other tests, on the page and in its markdown twin."""
    page, md = report.render(sample(), tmp_path / "report.html")
    for text, grid, order, others in (
        (page.read_text(), "id='matrix-aws'", "id='timeline'", "Other smoke tests"),
        (md.read_text(), "## aws", "## Upload order", "## Other smoke tests"),
    ):
        assert text.index(grid) < text.index(order) < text.index(others), text


def test_the_verdicts_grid_has_a_row_per_scenario_and_a_column_per_store(tmp_path: Path):
    """Each cell: the outcome, then order lost / files lost first, then what went right; a
    scenario not run on a store is "-"."""
    page, md = report.render(with_faults(), tmp_path / "report.html")
    text = md.read_text()
    assert "| scenario | gcs | s3 |" in text
    assert (
        "| outage 30 s | ✘ failed, order lost, 2 files lost | ✔ passed, order kept, nothing lost |"
        in text
    )
    assert "| spot preempted | - | skip skipped, nothing lost |" in text
    assert "| test_drain | ✘ failed, ended before its record | - |" in text
    assert "| test_drain | failed | - | - | - |" in text
    html = page.read_text()
    assert html.index("id='verdicts'") < html.index("id='matrix-aws'") < html.index("Faults")
    assert "<b class='bad'>order lost</b>" in html


def test_the_contract_findings_and_deviations_are_a_line_each(tmp_path: Path) -> None:
    import json

    from harness.testing.contract_summary import PROPERTY
    from harness.testing.report_collector import ReportCollector

    finding = {"store": "s3", "status": "finding", "check": "order", "modules": []}
    finding.update(text="the emulator (not your store) lists keys out of order", why="w")
    deviation = {"store": "gcs", "status": "deviation", "check": "conditional GET"}
    deviation.update(text="fake-gcs-server ignores it", why="", modules=[])
    report = pytest.TestReport(
        "harness/conformance/test_emulator_contract.py::test_the_emulator_keeps_the_contract",
        ("test_emulator_contract.py", 0, "t"),
        {},
        "passed",
        None,
        "call",
        user_properties=[(PROPERTY, json.dumps(finding)), (PROPERTY, json.dumps(deviation))],
    )
    collector = ReportCollector(tmp_path / "report.html")
    collector.add(report)
    page = collector.write()
    lines = [
        "gcs: deviation conditional GET: fake-gcs-server ignores it",
        "s3: finding order: the emulator (not your store) lists keys out of order (w)",
    ]
    assert json.loads(page.with_suffix(".json").read_text())["contract"] == lines[::-1]
    markdown = page.with_suffix(".md").read_text()
    assert all(f"- {line}" in markdown for line in lines), markdown
    assert "<li>s3: finding order: the emulator (not your store) lists" in page.read_text()
