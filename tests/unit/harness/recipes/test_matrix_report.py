"""The recipe matrix's report (harness.recipes.matrix_report) from fixed run files: one table
per store, one row per scenario in the catalogue's order, the recipes' columns side by side,
a broken promise marked ✗ and an unkept one the recipe does not make ○, the command and time
of each run, the notes; HTML and Markdown; the command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.recipes import matrix_report
from harness.recipes.matrix import COLUMNS, SCENARIOS

SKYCORE_CMD = "pytest tests/matrix -n 2 --dist loadgroup --store s3 --recipe skycore"
SKYPILOT_CMD = "pytest tests/matrix -n 2 --dist loadgroup --store s3 --recipe skypilot"


def verdict(promise: str, ok: bool, made: bool, detail: str = "seen") -> dict[str, Any]:
    return {"promise": promise, "ok": ok, "made": made, "detail": detail}


def row(scenario: str, recipe: str, store: str = "s3", **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "scenario": scenario,
        "store": store,
        "recipe": recipe,
        "transfers": None,
        "order_kept": True,
        "first_violation": None,
        "files": 50,
        "files_lost": 0,
        "writer_blocked": None,
        "longest_wait_s": 0.05,
        "durable_s": 3.125,
        "note": "",
        "verdicts": [],
        "outcome": "passed",
        "failure": None,
    }
    base.update(fields)
    return base


def run(store: str, recipe: str, command: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "store": store,
        "recipe": recipe,
        "command": command,
        "started": "2026-12-05 10:00:00",
        "session_s": 70.0,
        "store_s": 66.4,
        "rows": rows,
    }


@pytest.fixture
def runs_dir(tmp_path: Path) -> Path:
    """Three runs: s3 on both recipes, gcs on skycore only; and a JSON that is no run."""
    folder = tmp_path / "recipe-matrix"
    folder.mkdir()
    skycore = [
        row("job-scale", "skycore", writer_blocked=False, longest_wait_s=2.1, durable_s=46.0),
        row("order-1", "skycore", transfers=1, verdicts=[verdict("order kept", True, True)]),
        row("stop-start", "skycore", files=20),
        row("comp", "skycore", order_kept=None, files=3, longest_wait_s=None, durable_s=None),
    ]
    skypilot = [
        row(
            "order-1",
            "skypilot",
            transfers=1,
            order_kept=False,
            first_violation="event #1 (put order/file-001.bin)",
            outcome="failed",
            failure="PromiseBroken: order-1 on s3",
            verdicts=[verdict("order kept", False, True, "file-000 not visible")],
        ),
        row(
            "order-default",
            "skypilot",
            order_kept=False,
            verdicts=[verdict("order kept", False, False, "file-003 not visible")],
        ),
        row(
            "stop-start",
            "skypilot",
            files=20,
            lost_note="20 not there at stop",
            note="in the store: 0 of 20 when stop returned",
            verdicts=[verdict("drained before a stop", False, False, "20 of 20 not there")],
        ),
        row("comp", "skypilot", outcome="failed", failure="AssertionError: job exit 1"),
    ]
    files = {
        "s3-skycore.json": run("s3", "skycore", SKYCORE_CMD, skycore),
        "s3-skypilot.json": run("s3", "skypilot", SKYPILOT_CMD, skypilot),
        "gcs-skycore.json": run("gcs", "skycore", "pytest --store gcs", [row("comp", "skycore")]),
        "other.json": {"something": "else"},
    }
    for name, doc in files.items():
        (folder / name).write_text(json.dumps(doc))
    return folder


def table_of(md: str, store: str) -> list[list[str]]:
    """The cells of ``store``'s table in the Markdown report."""
    section = md.split(f"## {store}\n", 1)[1].strip().split("\n\n")[0]
    return [[c.strip() for c in line.strip("|").split(" | ")] for line in section.splitlines()]


def test_one_table_per_store_with_the_recipes_side_by_side(runs_dir: Path) -> None:
    md = matrix_report.markdown(matrix_report.load_runs(runs_dir))
    assert md.index("## gcs") < md.index("## s3")
    head, rule, *rows = table_of(md, "s3")
    assert head == ["scenario"] + [f"{r}: {c}" for r in ("skycore", "skypilot") for c in COLUMNS]
    assert rule == ["|".join(["---"] * len(head))]
    titles = [r[0].split(":")[0] for r in rows]
    assert titles == ["comp", "order-default", "order-1", "stop-start", "job-scale"]
    assert [r[0] for r in table_of(md, "gcs")[2:]] == [f"comp: {SCENARIOS['comp']}"]
    assert all(len(r) == len(head) for r in rows)


def test_cells_say_what_each_run_saw(runs_dir: Path) -> None:
    md = matrix_report.markdown(matrix_report.load_runs(runs_dir))
    rows = {r[0].split(":")[0]: r[1:] for r in table_of(md, "s3")[2:]}
    assert rows["job-scale"][:4] == ["yes", "0 of 50", "no (2.10 s)", "46.0 s"]
    assert rows["job-scale"][4:] == ["not run"] * 4  # skypilot has no such row
    assert rows["comp"][:4] == ["—", "0 of 3", "—", "—"]
    assert rows["stop-start"][:4] == ["yes", "0 of 20", "— (0.05 s)", "3.12 s"]


def test_a_broken_promise_and_an_unkept_one_are_marked(runs_dir: Path) -> None:
    md = matrix_report.markdown(matrix_report.load_runs(runs_dir))
    rows = {r[0].split(":")[0]: r[1:] for r in table_of(md, "s3")[2:]}
    skypilot = slice(4, 8)
    assert rows["order-1"][skypilot][0] == "**no ✗**"  # made with transfers: 1, broken
    assert rows["order-1"][0] == "yes"  # skycore kept it
    assert rows["order-default"][skypilot][0] == "**no ○**"  # not promised
    assert rows["stop-start"][skypilot][1] == "**0 of 20 (20 not there at stop) ○**"
    assert "✗ order kept: file-000 not visible" in md
    assert "first violation: event #1 (put order/file-001.bin)" in md
    assert "test failed: PromiseBroken: order-1 on s3" in md
    # A test that failed without breaking a promise is named beside its scenario.
    comp = next(r for r in table_of(md, "s3")[2:] if r[0].startswith("comp"))
    assert comp[0].endswith("(test failed on skypilot)")
    assert "AssertionError: job exit 1" in md


def test_each_run_names_its_command_and_time(runs_dir: Path) -> None:
    md = matrix_report.markdown(matrix_report.load_runs(runs_dir))
    s3 = md.split("## s3", 1)[1]
    assert f"- skycore: `{SKYCORE_CMD}` (started 2026-12-05 10:00:00, 66 s, session 70 s)" in s3
    assert f"- skypilot: `{SKYPILOT_CMD}`" in s3
    assert "| drained before a stop | yes: " in md and "| order kept | yes: always" in md


def test_html_and_markdown_are_written(runs_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out" / "report.html"
    assert matrix_report.main([str(runs_dir), "-o", str(out)]) == 0
    page = out.read_text()
    assert page.startswith("<!doctype html>") and page.count("<table>") == 3  # promises + 2
    assert "class='broken'" in page and "class='unkept'" in page
    assert SKYPILOT_CMD in page
    assert out.with_suffix(".md").read_text() == matrix_report.markdown(
        matrix_report.load_runs(runs_dir)
    )


def test_the_command_line_refuses_a_folder_without_runs(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "harness.recipes.matrix_report", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert f"no recipe matrix runs (*.json) in {tmp_path}" in done.stderr
