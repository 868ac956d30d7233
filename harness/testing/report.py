"""The matrix report: an HTML page (and a markdown twin) that opens with the fault
scenarios' verdicts (scenario x store), then the mount matrix as a grid of store x mode x
bucket kind, the upload-order timeline and the fault scenarios' timelines as PNG plots."""

from __future__ import annotations

import html
from pathlib import Path

from harness.testing.report_data import CellResult, FaultScenario, ReportData, Timeline
from harness.testing.report_plots import FAULT_COLORS, plot_fault_timelines, plot_timelines

__all__ = [
    "FAULT_COLORS",
    "CellResult",
    "FaultScenario",
    "ReportData",
    "Timeline",
    "parse_matrix_id",
    "plot_fault_timelines",
    "plot_timelines",
    "render",
]

MODES = ("COPY", "MOUNT", "MOUNT_CACHED")
KINDS = ("sky_managed", "external_private_by_user", "external_public_by_user", "public_not_by_user")
SYMBOL = {"passed": "✔", "failed": "✘", "xfailed": "xfail", "xpassed": "XPASS", "skipped": "skip"}
COLOR = {"passed": "#c8f7c5", "failed": "#f7c5c5", "xfailed": "#fcefc2", "xpassed": "#f7c5c5"}


def parse_matrix_id(nodeid: str) -> tuple[str, str, str] | None:
    """(cloud, mode, kind) from an id like ``...::test_mount[ID-MOUNT_CACHED-sky_managed]``."""
    if "::test_mount[" not in nodeid:
        return None
    # pytest-xdist's --dist loadgroup appends "@GROUP" to the nodeid.
    parts = nodeid.split("[", 1)[1].split("@", 1)[0].rstrip("]").split("-", 2)
    return (parts[0], parts[1], parts[2]) if len(parts) == 3 else None


def fault_verdict(f: FaultScenario) -> tuple[str, list[str]]:
    """A scenario's verdict on one store: its outcome, then what is known of the order and
    of the files lost, problems first."""
    order = {True: ["order kept"], False: ["order lost"], None: []}[f.order_kept]
    lost = [f"{f.lost} file{'s' if f.lost != 1 else ''} lost" if f.lost else "nothing lost"]
    if f.lost is None:
        lost = ["ended before its record"]
    return f"{SYMBOL.get(f.outcome, f.outcome)} {f.outcome}", sorted(order + lost, key=_fine)


def _verdict_grid(data: ReportData) -> tuple[list[str], list[str]]:
    """One table that opens the page: a row per fault scenario, a column per store, each
    cell the scenario's verdict on that store."""
    if not data.faults:
        return [], []
    names = list(dict.fromkeys(f.scenario for f in data.faults))
    stores = sorted({f.store for f in data.faults})
    cell = {(f.scenario, f.store): f for f in data.faults}
    page = ["<h2>Fault scenarios at a glance</h2><table id='verdicts'><tr><th>scenario</th>"
            + "".join(f"<th>{html.escape(s)}</th>" for s in stores) + "</tr>"]  # fmt: skip
    md = ["## Fault scenarios at a glance", "", "| scenario | " + " | ".join(stores) + " |",
          "|---|" + "---|" * len(stores)]  # fmt: skip
    for name in names:
        tds, mds = [], []
        for store in stores:
            f = cell.get((name, store))
            if f is None:
                tds.append("<td>-</td>")
                mds.append("-")
                continue
            head, facts = fault_verdict(f)
            shown = [x if _fine(x) else f"<b class='bad'>{x}</b>" for x in facts]
            color = COLOR.get(f.outcome, "#fff")
            tds.append(
                f"<td style='background:{color}' class='{f.outcome}'>{head}"
                f"<br><small>{' · '.join(shown)}</small></td>"
            )
            mds.append(f"{head}, {', '.join(facts)}")
        page.append(f"<tr><th style='text-align:left'>{html.escape(name)}</th>{''.join(tds)}</tr>")
        md.append(f"| {name} | " + " | ".join(mds) + " |")
    page.append("</table>")
    md.append("")
    return page, md


def _fine(fact: str) -> bool:
    return fact in ("order kept", "nothing lost")


def _fault_section(data: ReportData, html_path: Path) -> tuple[list[str], list[str]]:
    """The "faults" section: the uploads of every scenario on every store over time, the
    faults shaded (one picture of small multiples); then, per store, each scenario with
    files lost, order kept and time to durable."""
    page: list[str] = []
    md: list[str] = []
    if not data.faults:
        return page, md
    png = plot_fault_timelines(data.faults, html_path.with_name(html_path.stem + "-faults.png"))
    page.append("<h2>Faults</h2>")
    md += ["## Faults", ""]
    if png:
        page.append(f"<img id='fault-timeline' src='{png.name}' style='max-width:100%'>")
        md += [f"![uploads under faults]({png.name})", ""]
    for store in sorted({f.store for f in data.faults}):
        rows = [f for f in data.faults if f.store == store]
        page.append(
            f"<h3>{html.escape(store)}</h3><table id='faults-{html.escape(store)}'><tr>"
            "<th>scenario</th><th>result</th><th>files lost</th><th>order kept</th>"
            "<th>time to durable (s)</th></tr>"
        )
        md += [f"### {store}", "", "| scenario | result | files lost | order kept | "
               "time to durable (s) |", "|---|---|---|---|---|"]  # fmt: skip
        for f in rows:
            durable = "-" if f.durable_s is None else f"{f.durable_s:.1f}"
            kept = {True: "yes", False: "no", None: "-"}[f.order_kept]
            lost = "-" if f.lost is None else str(f.lost)
            color = COLOR.get(f.outcome, "#fff")
            page.append(
                f"<tr><td style='text-align:left'>{html.escape(f.scenario)}</td>"
                f"<td style='background:{color}' class='{f.outcome}'>{f.outcome}</td>"
                f"<td>{lost}</td><td>{kept}</td><td>{durable}</td></tr>"
            )
            md.append(f"| {f.scenario} | {f.outcome} | {lost} | {kept} | {durable} |")
        page.append("</table>")
        md.append("")
    return page, md


def _grid_rows(data: ReportData, cloud: str) -> list[list[CellResult | None]]:
    cells = {(c.mode, c.kind): c for c in data.cells if c.cloud == cloud}
    return [[cells.get((mode, kind)) for mode in MODES] for kind in KINDS]


def render(data: ReportData, html_path: Path) -> tuple[Path, Path]:
    """Write the HTML page, its markdown twin and the PNG; return (html, markdown)."""
    html_path.parent.mkdir(parents=True, exist_ok=True)
    png = plot_timelines(data.timelines, html_path.with_suffix(".png"))
    clouds = sorted({c.cloud for c in data.cells})
    md = ["# skycore smoke matrix", ""]
    page = [
        "<!doctype html><html><head><meta charset='utf-8'><title>skycore smoke matrix</title>",
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;"
        "margin-bottom:1.5em}td,th{border:1px solid #999;padding:4px 10px;text-align:center}"
        "th{background:#eee}.bad{color:#b00020}</style></head><body>"
        "<h1>skycore smoke matrix</h1>",
    ]
    verdict_page, verdict_md = _verdict_grid(data)
    page += verdict_page
    md += verdict_md
    if data.contract:
        page.append("<h2>Emulator contract: findings and deviations</h2><ul id='contract'>")
        page += [f"<li>{html.escape(line)}</li>" for line in sorted(data.contract)]
        page.append("</ul>")
        md += ["## Emulator contract: findings and deviations", ""]
        md += [f"- {line}" for line in sorted(data.contract)] + [""]
    for cloud in clouds:
        page.append(f"<h2>{html.escape(cloud)}</h2><table id='matrix-{html.escape(cloud)}'>")
        page.append("<tr><th>bucket kind</th>" + "".join(f"<th>{m}</th>" for m in MODES) + "</tr>")
        md += [f"## {cloud}", "", "| bucket kind | " + " | ".join(MODES) + " |",
               "|---|" + "---|" * len(MODES)]  # fmt: skip
        for kind, row in zip(KINDS, _grid_rows(data, cloud), strict=True):
            tds, mds = [], []
            for cell in row:
                if cell is None:
                    tds.append("<td>-</td>")
                    mds.append("-")
                    continue
                text = f"{SYMBOL.get(cell.outcome, cell.outcome)} {cell.seconds:.1f}s"
                color = COLOR.get(cell.outcome, "#fff")
                tds.append(f"<td style='background:{color}' class='{cell.outcome}'>{text}</td>")
                mds.append(text)
            page.append(f"<tr><th>{kind}</th>{''.join(tds)}</tr>")
            md.append(f"| {kind} | " + " | ".join(mds) + " |")
        page.append("</table>")
        md.append("")
    # What a store team came for first: the verdicts and the grid (above), the upload
    # order, the faults; every other test comes after.
    if png:
        page.append(f"<h2>Upload order</h2><img id='timeline' src='{png.name}' width='800'>")
        md += ["## Upload order", "", f"![upload order timeline]({png.name})", ""]
    fault_page, fault_md = _fault_section(data, html_path)
    page += fault_page
    md += fault_md
    if data.others:
        page.append("<h2>Other smoke tests</h2><table><tr><th>test</th><th>result</th>"
                    "<th>seconds</th></tr>")  # fmt: skip
        md += ["## Other smoke tests", "", "| test | result | seconds |", "|---|---|---|"]
        for test_id, outcome, seconds in data.others:
            page.append(
                f"<tr><td style='text-align:left'>{html.escape(test_id)}</td>"
                f"<td class='{outcome}'>{outcome}</td><td>{seconds:.1f}</td></tr>"
            )
            md.append(f"| {test_id} | {outcome} | {seconds:.1f} |")
        page.append("</table>")
        md.append("")
    page.append("</body></html>")
    html_path.write_text("\n".join(page))
    md_path = html_path.with_suffix(".md")
    md_path.write_text("\n".join(md))
    return html_path, md_path
