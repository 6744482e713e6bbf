"""`galley sources RECIPE [--slot ISO] [--json]` (docs/design.md §27): what that run
would read, read now, without drafting or storing. Kept beside `bot/cli.py`, which
registers it."""

from __future__ import annotations

from typing import Annotated

import typer

from bot.cli_app import JsonFlag, app, explained_errors, open_galley
from bot.cli_output import out, print_json


@app.command()
def sources(
    recipe: Annotated[str, typer.Argument(help="Recipe name.")],
    slot: Annotated[
        str | None,
        typer.Option(help="The run's slot: ISO wall time or instant (default: the latest due)."),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """What a run would read from its sources, without drafting: the window and the items
    (an items recipe: what its next poll would find new)."""
    with explained_errors():
        preview = open_galley().sources(recipe, slot)
    if as_json:
        print_json(preview.to_json())
    else:
        out.print(str(preview), markup=False, highlight=False)
    if any(failure.required for failure in preview.failures):
        raise typer.Exit(1)
