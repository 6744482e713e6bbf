"""`galley calendar [--days N] [--json]` (docs/design.md §23): what is due to publish, per
recipe and target, with its state. Kept beside `bot/cli.py`, which registers it."""

from __future__ import annotations

from typing import Annotated

import typer

from bot.cli_app import JsonFlag, app, explained_errors, open_galley
from bot.cli_output import out, print_json, table


@app.command()
def calendar(
    days: Annotated[
        int, typer.Option(min=1, max=366, help="Show this many days ahead (and the last day).")
    ] = 7,
    as_json: JsonFlag = False,
) -> None:
    """The publication calendar: each recipe's slots and targets, with their state."""
    with explained_errors():
        found = open_galley().calendar(days)
    if as_json:
        print_json({"calendar": found.to_json()})
        return
    rows = [
        [e.slot_at.isoformat(timespec="minutes"), e.recipe, e.target, _run(e.run, e.item), e.shown]
        for e in found
    ]
    out.print(
        table("publication calendar", ["slot (UTC)", "recipe", "target", "run", "state"], rows)
    )


def _run(run: str, item: str | None) -> str:
    """An item run's id with its item's title and link (docs/design.md §29)."""
    return f"{run} {item}" if item else run
