"""The matrix report's pictures: the upload-order timeline, and the fault scenarios as a
grid of small multiples (rows: scenarios, columns: stores)."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.testing.report_data import FaultScenario, Timeline

if TYPE_CHECKING:
    from matplotlib.figure import Figure

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
LATE = "#d62728"
PANEL_W, PANEL_H, LABEL_W, MAX_W, MAX_H = 3.2, 0.62, 2.3, 16.0, 10.0  # inches, at 100 dpi


@dataclass(frozen=True)
class FaultPoints:
    """What a scenario's panel plots: upload time against the file's rank (in creation
    order when known, else in name order), and which uploads came after a newer file's."""

    xs: list[float]
    ys: list[int]
    by_creation: bool
    late: list[bool]


def fault_points(sc: FaultScenario) -> FaultPoints:
    """The points of one scenario's panel. A key missing from the creation order (none
    should be) ranks after the known ones, by name."""
    keys = [str(u[1]) for u in sc.uploads]
    created = sc.creation_order()
    ranked = created if created is not None else sorted(set(keys))
    ranked = ranked + sorted(set(keys) - set(ranked))
    rank = {key: i for i, key in enumerate(ranked)}
    ys = [rank[k] for k in keys]
    late, top = [], -1
    for y in ys:
        late.append(y < top)
        top = max(top, y)
    return FaultPoints([float(str(u[0])) for u in sc.uploads], ys, created is not None, late)


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_timelines(timelines: list[Timeline], path: Path) -> Path | None:
    """Creation index (the keys are named in creation order) against upload completion time,
    one line per run: a line that only rises means creation order was kept. None with no
    data."""
    if not timelines:
        return None
    plt = _pyplot()
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


def verdict(sc: FaultScenario) -> str:
    """A panel's verdict in a few characters: outcome, files lost, order."""
    parts = [{"passed": "✔", "failed": "✘", "skipped": "skip"}.get(sc.outcome, sc.outcome)]
    if sc.lost is None:
        parts.append("no record")
    elif sc.lost:
        parts.append(f"{sc.lost} lost")
    if sc.order_kept is False:
        parts.append("order lost")
    return " ".join(parts)


def uploads_gid(sc: FaultScenario) -> str:
    """The id of the line of a scenario's uploads in the fault grid."""
    return f"uploads {sc.store}: {sc.scenario}"


def _panel(ax: Any, sc: FaultScenario, kinds: set[str]) -> None:
    pts = fault_points(sc)
    end = max([*pts.xs, sc.durable_s or 0.0, 1.0])
    for span in sc.faults:
        kind = str(span.get("kind"))
        kinds.add(kind)
        start, stop = float(str(span.get("start", 0.0))), float(str(span.get("end", end)))
        ax.axvspan(start, stop, color=FAULT_COLORS.get(kind, "#cccccc"), alpha=0.3, lw=0)
    if sc.durable_s is not None:
        ax.axvline(sc.durable_s, color="#2e7d32", lw=0.8, ls=":")
    ax.plot(pts.xs, pts.ys, color="black", lw=0.8, marker="o", markersize=2, gid=uploads_gid(sc))
    bad = [(x, y) for x, y, late in zip(pts.xs, pts.ys, pts.late, strict=True) if late]
    if bad:
        ax.plot(*zip(*bad, strict=True), ls="", marker="o", markersize=3.5, color=LATE)
    wrong = sc.outcome in ("failed", "xpassed") or bool(sc.lost) or sc.order_kept is False
    if wrong:
        ax.set_facecolor("#fbe3e3")
    note = verdict(sc) + ("" if pts.by_creation or not pts.xs else "  (y: name order)")
    ax.text(0.01, 0.93, note, transform=ax.transAxes, fontsize=6, va="top", zorder=5,
            color=LATE if wrong else "#2e7d32",
            bbox={"facecolor": "white", "alpha": 0.8, "lw": 0, "pad": 0.5})  # fmt: skip


def draw_fault_grid(scenarios: list[FaultScenario]) -> Figure:
    """The fault scenarios as small multiples: one row per scenario (axes shared along it),
    one column per store; each fault's span shaded, the time to durable dotted, an upload
    that came after a newer file's in red."""
    plt = _pyplot()
    from matplotlib.patches import Patch
    from matplotlib.ticker import MaxNLocator

    names = list(dict.fromkeys(sc.scenario for sc in scenarios))
    stores = sorted({sc.store for sc in scenarios})
    cell = {(sc.scenario, sc.store): sc for sc in scenarios}
    width = min(MAX_W, LABEL_W + 0.3 + PANEL_W * len(stores))
    height = min(MAX_H, 1.3 + PANEL_H * len(names))
    fig, axes = plt.subplots(
        len(names), len(stores), figsize=(width, height), dpi=100, squeeze=False,
        sharex="row", sharey="row",
    )  # fmt: skip
    kinds: set[str] = set()
    for r, name in enumerate(names):
        top = max([0, *(y for sc in scenarios if sc.scenario == name for y in fault_points(sc).ys)])
        axes[r, 0].set_ylim(-0.6, max(top, 1) + 0.6)
        for c, store in enumerate(stores):
            ax = axes[r, c]
            ax.tick_params(labelsize=6, length=2, pad=1)
            ax.yaxis.set_major_locator(MaxNLocator(nbins=3, integer=True))
            ax.xaxis.set_major_locator(MaxNLocator(nbins=4))
            if r == 0:
                ax.set_title(store, fontsize=9, fontweight="bold")
            if c == 0:
                label = textwrap.fill(name, 34)
                ax.set_ylabel(label, rotation=0, ha="right", va="center", fontsize=7)
            sc = cell.get((name, store))
            if sc is None:
                ax.text(0.5, 0.5, "not run", transform=ax.transAxes, fontsize=6,
                        ha="center", va="center", color="#888")  # fmt: skip
                continue
            _panel(ax, sc, kinds)
    handles = [Patch(color=FAULT_COLORS.get(k, "#ccc"), alpha=0.3, label=k) for k in sorted(kinds)]
    handles += [
        plt.Line2D([], [], color="black", marker="o", markersize=2, lw=0.8, label="upload"),
        plt.Line2D([], [], color=LATE, marker="o", ls="", label="after a newer file's"),
        plt.Line2D([], [], color="#2e7d32", ls=":", label="all durable"),
    ]
    fig.legend(handles=handles, loc="upper center", ncol=len(handles), fontsize=7,
               frameon=False, bbox_to_anchor=(0.5, 1.0))  # fmt: skip
    fig.supxlabel("s after the scenario started (each row its own scale)", fontsize=8)
    fig.text(0.005, 0.5, "file, by creation order (0: the first created)", rotation=90,
             va="center", fontsize=8)  # fmt: skip
    fig.subplots_adjust(
        left=LABEL_W / width, right=1 - 0.15 / width, top=1 - 0.55 / height,
        bottom=0.45 / height, hspace=0.35, wspace=0.06,
    )  # fmt: skip
    return fig


def plot_fault_timelines(scenarios: list[FaultScenario], path: Path) -> Path | None:
    """The fault grid (:func:`draw_fault_grid`) as a PNG at ``path``. None with no data."""
    if not scenarios:
        return None
    plt = _pyplot()
    fig = draw_fault_grid(scenarios)
    fig.savefig(path)
    plt.close(fig)
    return path
