"""`galley decisions`: the decision log (docs/design.md §35) as a table, one JSON document
or CSV. Kept beside `bot/cli.py`, which registers it; reads through `Galley.decisions`."""

from __future__ import annotations

import csv
import sys
from typing import Annotated

import typer

from bot.cli_app import JsonFlag, app, explained_errors, open_galley
from bot.cli_output import out, print_json

PAGE = 100  # rows shown without --since


@app.command()
def decisions(
    since: Annotated[
        str | None,
        typer.Option(metavar="DATE", help="From this date (UTC) or ISO time on: every one."),
    ] = None,
    recipe: Annotated[str | None, typer.Option(help="Only this recipe's.")] = None,
    limit: Annotated[
        int | None, typer.Option(min=1, help=f"At most this many (default {PAGE} without --since).")
    ] = None,
    before: Annotated[
        int | None, typer.Option(metavar="ID", help="Start below this id: the last of a page.")
    ] = None,
    as_json: JsonFlag = False,
    as_csv: Annotated[bool, typer.Option("--csv", help="Print CSV with a header row.")] = False,
) -> None:
    """Every approval, rejection, edit, redraft, unapprove and resolution, newest first:
    who, when (UTC and the recipe's zone), which revision and its text hash, the outcome."""
    if as_json and as_csv:
        raise typer.BadParameter("--json or --csv, not both")
    with explained_errors():
        found = open_galley().decisions(
            since, recipe=recipe, limit=limit or (None if since else PAGE), before=before
        )
    if as_json:
        print_json({"decisions": found.to_json()})
    elif as_csv:
        names = found.field_names()
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(names)
        writer.writerows(
            [v.isoformat() if hasattr(v, "isoformat") else v for v in row]
            for row in found.records(names)
        )
    else:
        out.print(str(found), markup=False, highlight=False)
