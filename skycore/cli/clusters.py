"""``skycore status``, ``stop``, ``start`` and ``down``."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import click
from rich.markup import escape

from skycore import execution
from skycore.cli.app import JSON_HELP, cli, console, styled
from skycore.cli.common import check_cluster_name, handle_errors, missing_clusters, require_clusters
from skycore.cli.output import print_json
from skycore.cli.output import table as new_table
from skycore.config import load_config
from skycore.core.clusters import existing_or_nodes, refresh_status
from skycore.core.nodes import node_ips, node_resources_text, node_statuses
from skycore.errors import ClusterError, ProvisionError, UserError
from skycore.humanize import ago
from skycore.state.clusters import ClusterRecord, cluster_events, list_clusters


@cli.command()
@click.argument("clusters", nargs=-1)
@click.option("-v", "--verbose", is_flag=True, help="Show nodes and the status history.")
@click.option("-r", "--refresh", is_flag=True, help="Ask the provider for the nodes' state.")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@handle_errors()
def status(clusters: tuple[str, ...], verbose: bool, refresh: bool, as_json: bool) -> None:
    """Show clusters (and with -v their nodes and every status change with its reason).

    With -r, clusters whose nodes no longer match the record (removed or stopped outside
    skycore) become INIT with the reason; 'skycore launch' repairs them.
    """
    require_clusters(clusters)
    records = [r for r in list_clusters() if not clusters or r.name in clusters]
    if not records and not as_json:
        console.print("No existing clusters.")
        return
    config = load_config() if (refresh or verbose) else None
    if refresh and config is not None:
        refreshed = [refresh_status(r.name, config) for r in records]
        records = [r for r in refreshed if r is not None]
    if as_json:
        print_json([_cluster_json(r) for r in records])
        return
    table = new_table(("NAME", "LAUNCHED", "NODES", "RESOURCES", "STATUS", "REASON"))
    nodes_of: dict[str, Any] = {}
    for r in records:
        if config is not None:
            try:
                nodes_of[r.name] = node_statuses(r.provider, r.name, config)
            except ProvisionError as e:
                nodes_of[r.name] = str(e)
        res = r.resources
        own = node_resources_text(r)
        desc = (
            f"{res.get('cloud') or r.provider}"
            + (f", {res['image_id']}" if res.get("image_id") else "")
            + (f", {own} per node" if own else "")
        )
        table.add_row(
            r.name,
            ago(r.created_at),
            str(r.num_nodes),
            desc,
            styled(r.status),
            escape(r.status_reason),
        )
    console.print(table)
    if not verbose:
        return
    for r in records:
        console.print(f"\n[bold]{r.name}[/bold]")
        nodes = nodes_of.get(r.name)
        ips = node_ips(r)
        for rank in range(r.num_nodes):
            st = nodes.get(rank) if isinstance(nodes, dict) else None
            ip = ips[rank] if rank < len(ips) else "-"
            shown = st.value if st else "gone"
            console.print(f"  node {rank} ({'head' if rank == 0 else 'worker'}): {shown}  ip={ip}")
        events = cluster_events(r.name)
        for ev in events:
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ev.ts))
            change = (
                f"{ev.from_status or '-'} -> {ev.to_status}"
                if ev.from_status != ev.to_status
                else f"{ev.to_status} (no change)"
            )
            console.print(f"  [dim]{when}[/dim]  {change:<24} {escape(ev.reason)}")


def _cluster_json(r: ClusterRecord) -> dict[str, Any]:
    """A cluster for ``status --json``."""
    return {
        "name": r.name,
        "status": r.status,
        "status_reason": r.status_reason,
        "num_nodes": r.num_nodes,
        "provider": r.provider,
        "cloud": r.resources.get("cloud"),
        "use_spot": bool(r.resources.get("use_spot", False)),
        "image_id": r.resources.get("image_id"),
        "disk_size": r.resources.get("disk_size"),
        "cpus": r.resources.get("cpus"),
        "memory": r.resources.get("memory"),
        "launched_at": r.created_at,
        "updated_at": r.updated_at,
        "node_ips": [n.get("ip") for n in (r.handle or {}).get("nodes", [])],
    }


def _each_cluster(names: tuple[str, ...], all_: bool, yes: bool, verb: str) -> list[str]:
    for name in names:
        check_cluster_name(name, "CLUSTER")
    if verb == "tear down":
        # A cluster with nodes but no record is one 'down' removes.
        config = load_config()
        missing = [n for n in names if not _record_or_nodes(n, config)]
        if missing:
            raise missing_clusters(missing)
    else:
        require_clusters(names)
    if all_:
        names = tuple(r.name for r in list_clusters())
    if not names:
        raise UserError(f"Name the cluster(s) to {verb} (or pass --all).")
    if not yes and not click.confirm(f"{verb.capitalize()} {', '.join(names)}?", default=True):
        raise click.Abort()
    return list(names)


def _record_or_nodes(name: str, config: Any) -> bool:
    """True when cluster ``name`` has a record or nodes."""
    try:
        existing_or_nodes(name, config)
    except ClusterError:
        return False
    return True


def _lifecycle_command(name: str, verb: str, action: Callable[..., Any], help_text: str) -> None:
    """Register ``skycore NAME CLUSTER... [-a] [-y]``: ``action`` on each named cluster."""

    @cli.command(name=name, help=help_text)
    @click.argument("clusters", nargs=-1)
    @click.option("-a", "--all", "all_", is_flag=True, help="Every cluster.")
    @click.option("-y", "--yes", is_flag=True, help="Skip the confirmation prompt.")
    @handle_errors()
    def command(clusters: tuple[str, ...], all_: bool, yes: bool) -> None:
        for cluster in _each_cluster(clusters, all_, yes, verb):
            action(cluster, console=console)


_lifecycle_command(
    "stop",
    "stop",
    execution.stop,
    "Stop clusters: drain cached mounts (no write is lost), unmount, stop the nodes.",
)
_lifecycle_command(
    "start",
    "start",
    execution.start,
    "Start stopped clusters: resume the nodes and mount their storage again.",
)
_lifecycle_command(
    "down",
    "tear down",
    execution.down,
    "Tear clusters down: drain, unmount, remove nodes, delete persistent: false storage.",
)
