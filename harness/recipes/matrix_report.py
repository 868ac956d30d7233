"""The recipe matrix's side-by-side report, from the JSON files of its runs.

``python -m harness.recipes.matrix_report build/recipe-matrix -o build/recipe-matrix/report.html``
reads every ``<store>-<recipe>.json`` that harness.recipes.matrix wrote and writes the report
as HTML and Markdown (beside it, ``.md``): the promises each recipe makes, then one table per
store, one row per scenario, the recipes' columns side by side (order kept, files lost,
writer blocked with its longest write, time to durable). A promise a recipe makes and broke
is marked ✗ on its cell; one it does not make and that did not hold, ○; a test that failed
for another reason is named beside its scenario. Under each table:
the command that produced each run and its time, then each row's notes.
"""

from __future__ import annotations

import argparse
import html
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.recipes.matrix import (
    COLUMNS,
    DURABLE_COLUMN,
    LOST_COLUMN,
    ORDER_COLUMN,
    PROMISES,
    SCENARIOS,
    WRITER_COLUMN,
    Promise,
    Row,
    scenario_order,
)

BROKEN, UNKEPT = "✗", "○"
LEGEND = (
    f"{BROKEN}: a promise the recipe makes, broken (its test failed, or is a known break: "
    "an expected failure); "
    f"{UNKEPT}: did not hold, and the recipe does not promise it; —: not measured."
)
FIRST_RECIPE = "skycore"


@dataclass(frozen=True)
class Run:
    """One run's file: a store and a recipe, the command, its times and its rows."""

    store: str
    recipe: str
    command: str
    started: str
    session_s: float | None
    store_s: float | None
    rows: dict[str, Row]


@dataclass(frozen=True)
class Cell:
    """One cell: its text and its marks (BROKEN / UNKEPT with the promise and detail)."""

    text: str
    marks: tuple[tuple[str, str], ...] = ()

    @property
    def mark(self) -> str:
        """The strongest mark ('' if none)."""
        kinds = {m for m, _ in self.marks}
        return BROKEN if BROKEN in kinds else (UNKEPT if UNKEPT in kinds else "")


def load_runs(folder: Path) -> list[Run]:
    """Every run file in ``folder`` (``*.json``), sorted by store then recipe."""
    runs = []
    for path in sorted(folder.glob("*.json")):
        data: dict[str, Any] = json.loads(path.read_text())
        if not {"store", "recipe", "rows"} <= set(data):
            continue  # not a run of the matrix
        rows = [Row.from_dict(r) for r in data["rows"]]
        runs.append(
            Run(
                store=str(data["store"]),
                recipe=str(data["recipe"]),
                command=str(data.get("command", "")),
                started=str(data.get("started", "")),
                session_s=data.get("session_s"),
                store_s=data.get("store_s"),
                rows={r.scenario: r for r in rows},
            )
        )
    return sorted(runs, key=lambda r: (r.store, recipe_key(r.recipe)))


def recipe_key(recipe: str) -> tuple[int, str]:
    """skycore first, then the other recipes by name."""
    return (0 if recipe == FIRST_RECIPE else 1, recipe)


def _seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f} s" if value < 10 else f"{value:.1f} s"


def cell(row: Row | None, column: str) -> Cell:
    """The text of ``row``'s ``column``, marked with the verdicts about that column that did
    not hold (and a failed test's failure, on its first column, if no verdict explains it)."""
    if row is None:
        return Cell("not run")
    if column == ORDER_COLUMN:
        text = {None: "—", True: "yes", False: "no"}[row.order_kept]
    elif column == LOST_COLUMN:
        lost = "—" if row.files_lost is None else str(row.files_lost)
        text = lost if row.files is None or row.files_lost is None else f"{lost} of {row.files}"
        text += f" ({row.lost_note})" if row.lost_note else ""
    elif column == WRITER_COLUMN:
        blocked = {None: "—", True: "yes", False: "no"}[row.writer_blocked]
        longest = row.longest_wait_s
        text = blocked if longest is None else f"{blocked} ({_seconds(longest)})"
    elif column == DURABLE_COLUMN:
        text = _seconds(row.durable_s)
    else:
        raise ValueError(f"no column {column!r}")
    marks = [
        (BROKEN if v.made else UNKEPT, f"{v.promise}: {v.detail}")
        for v in row.verdicts
        if not v.ok and Promise(v.promise).column == column
    ]
    return Cell(text, tuple(marks))


def failed_otherwise(row: Row | None) -> bool:
    """True if ``row``'s test failed, and not for a promise its recipe makes."""
    broken = row is not None and any(v.made and not v.ok for v in row.verdicts)
    return row is not None and row.outcome in ("failed", "error") and not broken


@dataclass(frozen=True)
class Table:
    """One store's table: the recipes (columns), the scenarios (rows) and the runs."""

    store: str
    recipes: list[str]
    scenarios: list[str]
    runs: dict[str, Run]

    def cells(self, scenario: str) -> list[Cell]:
        """The scenario's cells, the recipes' columns side by side."""
        return [
            cell(self.runs[recipe].rows.get(scenario), column)
            for recipe in self.recipes
            for column in COLUMNS
        ]

    def title(self, scenario: str) -> str:
        """The scenario's title, naming the recipes whose test failed for another reason
        than a broken promise (see the notes)."""
        title = f"{scenario}: {SCENARIOS[scenario]}" if scenario in SCENARIOS else scenario
        failed = [r for r in self.recipes if failed_otherwise(self.runs[r].rows.get(scenario))]
        return title + (f" (test failed on {', '.join(failed)})" if failed else "")

    def notes(self) -> list[str]:
        """Per scenario and recipe: what a cell's marks stand for, the first violation,
        the note and a failure."""
        out = []
        for scenario in self.scenarios:
            for recipe in self.recipes:
                row = self.runs[recipe].rows.get(scenario)
                if row is None:
                    continue
                parts = [f"{BROKEN if v.made else UNKEPT} {v.promise}: {v.detail}"
                         for v in row.verdicts if not v.ok]  # fmt: skip
                told = " ".join(parts)
                if row.first_violation and row.first_violation not in told:
                    parts.append(f"first violation: {row.first_violation}")
                if row.note:
                    parts.append(row.note)
                if row.outcome in ("failed", "error"):
                    parts.append(f"test {row.outcome}: {row.failure or ''}")
                if row.outcome == "xfailed":
                    parts.append("a known break (KNOWN_BROKEN): the test is an expected failure")
                if parts:
                    out.append(f"{scenario} ({recipe}): " + "; ".join(parts))
        return out


def tables(runs: Sequence[Run]) -> list[Table]:
    """One table per store, scenarios in the catalogue's order (harness.recipes.matrix)."""
    found = []
    for store in sorted({r.store for r in runs}):
        mine = {r.recipe: r for r in runs if r.store == store}
        recipes = sorted(mine, key=recipe_key)
        scenarios = sorted({s for r in mine.values() for s in r.rows}, key=scenario_order)
        found.append(Table(store, recipes, scenarios, mine))
    return found


def _run_times(run: Run) -> str:
    """``started WHEN, N s, session M s`` of one run."""
    took = f"{run.store_s:.0f} s" if run.store_s is not None else "?"
    session = f", session {run.session_s:.0f} s" if run.session_s is not None else ""
    return f"started {run.started}, {took}{session}"


def _run_line(run: Run) -> str:
    return f"{run.recipe}: `{run.command}` ({_run_times(run)})"


def promises_markdown() -> list[str]:
    """The promises table: a row per promise, a column per recipe."""
    recipes = sorted(PROMISES, key=recipe_key)
    lines = ["| promise | " + " | ".join(recipes) + " |", "|---" * (len(recipes) + 1) + "|"]
    for promise in Promise:
        terms = [next((t for t in PROMISES[r] if t.promise is promise), None) for r in recipes]
        texts = [f"yes: {t.when}" if t else "no" for t in terms]
        lines.append(f"| {promise.value} | " + " | ".join(texts) + " |")
    return lines


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(runs: Sequence[Run]) -> str:
    """The whole report as Markdown."""
    out = ["# Mount recipes side by side", "", "## Promises", "", *promises_markdown(), ""]
    out += [LEGEND, ""]
    for table in tables(runs):
        head = ["scenario"] + [f"{r}: {c}" for r in table.recipes for c in COLUMNS]
        out += [f"## {table.store}", "", "| " + " | ".join(head) + " |"]
        out.append("|---" * len(head) + "|")
        for scenario in table.scenarios:
            cells = [table.title(scenario)]
            cells += [f"**{c.text} {c.mark}**" if c.mark else c.text for c in table.cells(scenario)]
            out.append("| " + " | ".join(_md(c) for c in cells) + " |")
        out += ["", "Runs:", ""]
        out += [f"- {_run_line(table.runs[r])}" for r in table.recipes]
        notes = table.notes()
        if notes:
            out += ["", "Notes:", ""] + [f"- {_md(n)}" for n in notes]
        out.append("")
    return "\n".join(out)


STYLE = """body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0}
td,th{border:1px solid #999;padding:4px 8px;vertical-align:top;font-size:90%}
th.recipe{background:#eef}td.broken{background:#f8c8c8;font-weight:bold}
td.unkept{background:#fdf0c0}code{font-size:90%}li{margin:.2em 0}"""


def html_report(runs: Sequence[Run]) -> str:
    """The whole report as one HTML page."""
    e = html.escape
    out = ["<!doctype html><html><head><meta charset='utf-8'>", "<title>Mount recipes</title>"]
    out += [f"<style>{STYLE}</style></head><body><h1>Mount recipes side by side</h1>"]
    recipes = sorted(PROMISES, key=recipe_key)
    out.append("<h2>Promises</h2><table><tr><th>promise</th>")
    out += [f"<th>{e(r)}</th>" for r in recipes] + ["</tr>"]
    for promise in Promise:
        out.append(f"<tr><td>{e(promise.value)}</td>")
        for r in recipes:
            term = next((t for t in PROMISES[r] if t.promise is promise), None)
            out.append(f"<td>{e('yes: ' + term.when) if term else 'no'}</td>")
        out.append("</tr>")
    out.append(f"</table><p>{e(LEGEND)}</p>")
    for table in tables(runs):
        out.append(f"<h2>{e(table.store)}</h2><table><tr><th rowspan='2'>scenario</th>")
        out += [f"<th class='recipe' colspan='{len(COLUMNS)}'>{e(r)}</th>" for r in table.recipes]
        heads = "".join(f"<th>{e(c)}</th>" for _ in table.recipes for c in COLUMNS)
        out.append(f"</tr><tr>{heads}")
        out.append("</tr>")
        for scenario in table.scenarios:
            out.append(f"<tr><td>{e(table.title(scenario))}</td>")
            for c in table.cells(scenario):
                css = {BROKEN: "broken", UNKEPT: "unkept"}.get(c.mark, "")
                tip = e("; ".join(f"{m} {d}" for m, d in c.marks), quote=True)
                text = e(f"{c.text} {c.mark}".strip())
                out.append(f"<td class='{css}' title='{tip}'>{text}</td>")
            out.append("</tr>")
        out.append("</table><p>Runs:</p><ul>")
        for r in table.recipes:
            run = table.runs[r]
            out.append(f"<li>{e(r)}: <code>{e(run.command)}</code> ({e(_run_times(run))})</li>")
        out.append("</ul>")
        notes = table.notes()
        if notes:
            out.append("<p>Notes:</p><ul>" + "".join(f"<li>{e(n)}</li>" for n in notes) + "</ul>")
    out.append("</body></html>")
    return "\n".join(out)


def write(folder: Path, output: Path, md: Path | None = None) -> tuple[Path, Path]:
    """Write the report of the runs in ``folder``: HTML at ``output``, Markdown at ``md``
    (default: ``output`` with ``.md``). FileNotFoundError if there is no run."""
    runs = load_runs(folder)
    if not runs:
        raise FileNotFoundError(f"no recipe matrix runs (*.json) in {folder}")
    md = md or output.with_suffix(".md")
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(html_report(runs))
    md.write_text(markdown(runs))
    return output, md


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: FOLDER [-o REPORT.html] [--md REPORT.md]."""
    parser = argparse.ArgumentParser(
        prog="python -m harness.recipes.matrix_report", description=__doc__.splitlines()[0]
    )
    parser.add_argument("folder", type=Path, help="the runs' JSON files (build/recipe-matrix)")
    parser.add_argument("-o", "--output", type=Path, help="the HTML report (FOLDER/report.html)")
    parser.add_argument("--md", type=Path, help="the Markdown report (the HTML's name, .md)")
    args = parser.parse_args(argv)
    output = args.output or args.folder / "report.html"
    try:
        html_path, md_path = write(args.folder, output, args.md)
    except FileNotFoundError as exc:
        print(f"matrix_report: {exc}", file=sys.stderr)
        return 2
    print(f"recipe matrix report: {html_path} and {md_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
