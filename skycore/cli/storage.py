"""``skycore storage ls`` and ``skycore storage delete``: buckets skycore created or used."""

from __future__ import annotations

import click
from rich.markup import escape

from skycore.cli.app import JSON_HELP, cli, console, styled
from skycore.cli.common import handle_errors
from skycore.cli.output import print_json
from skycore.cli.output import table as new_table
from skycore.errors import UserError


@cli.group()
def storage() -> None:
    """Buckets skycore created or used."""


@storage.command(name="ls")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@handle_errors()
def storage_ls(as_json: bool) -> None:
    """List buckets."""
    from skycore.storage import catalog

    rows = catalog.list_storage_rows()
    if as_json:
        print_json(
            [
                {
                    "name": r.name,
                    "store": r.store,
                    "kind": r.kind,
                    "persistent": r.persistent,
                    "source": None if r.source == "-" else r.source,
                    "status": r.status,
                    "created_at": r.created_at,
                }
                for r in rows
            ]
        )
        return
    if not rows:
        console.print("No storage.")
        return
    table = new_table(("NAME", "STORE", "KIND", "PERSISTENT", "CREATED", "SOURCE", "STATUS"))
    for r in rows:
        table.add_row(
            r.name,
            r.store,
            r.kind,
            "yes" if r.persistent else "no",
            r.age,
            escape(r.source),
            styled(r.status),
        )
    console.print(table)


@storage.command(name="delete")
@click.argument("names", nargs=-1)
@click.option("-a", "--all", "all_", is_flag=True, help="Every sky-managed bucket.")
@click.option("-y", "--yes", is_flag=True, help="Skip the confirmation prompt.")
@handle_errors()
def storage_delete(names: tuple[str, ...], all_: bool, yes: bool) -> None:
    """Delete sky-managed buckets (never external ones)."""
    from skycore.storage import catalog

    if all_:
        names = tuple(r.name for r in catalog.list_storage_rows() if r.kind == "sky-managed")
    if not names:
        raise UserError("Name the storage to delete (see 'skycore storage ls'), or pass --all.")
    if not yes and not click.confirm(f"Delete storage {', '.join(names)}?", default=True):
        raise click.Abort()
    for name in names:
        try:
            console.print(catalog.delete_storage(name))
        except catalog.StorageInUse as e:
            if not all_:
                raise
            console.print(f"Kept {name}: {e}", highlight=False)
