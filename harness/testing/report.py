"""The matrix report: an HTML page (and a markdown twin) with the mount matrix as a grid of
store x mode x bucket kind, and the upload-order timeline as a PNG plot."""

from __future__ import annotations

import html
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

MODES = ("COPY", "MOUNT", "MOUNT_CACHED")
KINDS = ("sky_managed", "external_private_by_user", "external_public_by_user", "public_not_by_user")
SYMBOL = {"passed": "✔", "failed": "✘", "xfailed": "xfail", "xpassed": "XPASS", "skipped": "skip"}
COLOR = {"passed": "#c8f7c5", "failed": "#f7c5c5", "xfailed": "#fcefc2", "xpassed": "#f7c5c5"}


@dataclass
class CellResult:
    """One mount-matrix case."""

    cloud: str
    mode: str
    kind: str
    outcome: str
    seconds: float


@dataclass
class Timeline:
    """Upload completions of one upload-order run: (seconds since first, key, size)."""

    test_id: str
    points: list[tuple[float, str, int]]


@dataclass
class FaultScenario:
    """One fault scenario on one store (tests/smoke/test_faults.py): what it measured.
    Times are seconds since the scenario started; ``faults`` are spans {kind, start, end}."""

    test_id: str
    store: str
    scenario: str
    outcome: str
    lost: int
    order_kept: bool | None
    """None: the scenario does not check the order."""
    durable_s: float | None
    faults: list[dict[str, object]] = field(default_factory=list)
    uploads: list[list[object]] = field(default_factory=list)  # [t, key, size]


@dataclass
class ReportData:
    """Everything the report shows."""

    cells: list[CellResult] = field(default_factory=list)
    timelines: list[Timeline] = field(default_factory=list)
    others: list[tuple[str, str, float]] = field(default_factory=list)  # (test id, outcome, s)
    faults: list[FaultScenario] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)


def parse_matrix_id(nodeid: str) -> tuple[str, str, str] | None:
    """(cloud, mode, kind) from an id like ``...::test_mount[ID-MOUNT_CACHED-sky_managed]``."""
    if "::test_mount[" not in nodeid:
        return None
    # pytest-xdist's --dist loadgroup appends "@GROUP" to the nodeid.
    parts = nodeid.split("[", 1)[1].split("@", 1)[0].rstrip("]").split("-", 2)
    return (parts[0], parts[1], parts[2]) if len(parts) == 3 else None


def plot_timelines(timelines: list[Timeline], path: Path) -> Path | None:
    """Creation index (keys sort in creation order) against upload completion time, one line
    per run: a line that only rises means creation order was kept. None with no data."""
    if not timelines:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4), dpi=100)
    for line in timelines:
        created = {key: i for i, key in enumerate(sorted({p[1] for p in line.points}))}
        xs = [p[0] for p in line.points]
        ys = [created[p[1]] for p in line.points]
        ax.plot(xs, ys, marker="o", markersize=3, label=line.test_id[-60:])
    ax.set_xlabel("upload completed (s after the first)")
    ax.set_ylabel("creation index of the file")
    ax.set_title("MOUNT_CACHED upload order (a line that only rises = creation order)")
    ax.legend(fontsize=6, loc="lower right")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


FAULT_COLORS = {
    "outage": "#888888",
    "errors": "#e07b39",
    "latency": "#3b7dd8",
    "bandwidth": "#6aa84f",
    "stream-bandwidth": "#a4c639",
    "reset": "#c0392b",
    "deny": "#8e44ad",
    "corrupt": "#d4ac0d",
}


def plot_fault_timelines(scenarios: list[FaultScenario], path: Path) -> Path | None:
    """One panel per fault scenario: upload completions (creation index against time) with
    each fault drawn as a shaded span. None with no data."""
    if not scenarios:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(
        len(scenarios), 1, figsize=(8, 2.2 * len(scenarios)), dpi=100, squeeze=False
    )
    for ax, sc in zip(axes[:, 0], scenarios, strict=True):
        order = {key: i for i, key in enumerate(sorted({str(u[1]) for u in sc.uploads}))}
        xs = [float(str(u[0])) for u in sc.uploads]
        ys = [order[str(u[1])] for u in sc.uploads]
        end = max([*xs, 1.0])
        seen: set[str] = set()
        for span in sc.faults:
            kind = str(span.get("kind"))
            start = float(str(span.get("start", 0.0)))
            stop = float(str(span.get("end", end)))
            label = kind if kind not in seen else None
            seen.add(kind)
            ax.axvspan(start, stop, color=FAULT_COLORS.get(kind, "#cccccc"), alpha=0.25,
                       label=label)  # fmt: skip
        ax.plot(xs, ys, marker="o", markersize=3, linestyle="-", color="black")
        ax.set_title(f"{sc.store}: {sc.scenario}", fontsize=8)
        ax.set_xlabel("s after the scenario started", fontsize=7)
        ax.set_ylabel("creation index", fontsize=7)
        if seen:
            ax.legend(fontsize=6, loc="lower right")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def _fault_section(data: ReportData, html_path: Path) -> tuple[list[str], list[str]]:
    """The "faults" section: per store, each scenario with files lost, order kept and time
    to durable; then the timelines with the faults shaded."""
    page: list[str] = []
    md: list[str] = []
    if not data.faults:
        return page, md
    png = plot_fault_timelines(data.faults, html_path.with_name(html_path.stem + "-faults.png"))
    page.append("<h2>Faults</h2>")
    md += ["## Faults", ""]
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
            color = COLOR.get(f.outcome, "#fff")
            page.append(
                f"<tr><td style='text-align:left'>{html.escape(f.scenario)}</td>"
                f"<td style='background:{color}' class='{f.outcome}'>{f.outcome}</td>"
                f"<td>{f.lost}</td><td>{kept}</td><td>{durable}</td></tr>"
            )
            md.append(f"| {f.scenario} | {f.outcome} | {f.lost} | {kept} | {durable} |")
        page.append("</table>")
        md.append("")
    if png:
        page.append(f"<img id='fault-timeline' src='{png.name}' width='800'>")
        md += [f"![uploads under faults]({png.name})", ""]
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
        "th{background:#eee}</style></head><body><h1>skycore smoke matrix</h1>",
    ]
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
    # What a store team came for first: the grid (above), the upload order, the faults;
    # every other test comes after.
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
