"""`galley calendar [--days N] [--json]` (docs/design.md §23): what is due to publish, per
recipe and target, with its state, then the week at a glance (docs/design.md §36). Kept
beside `bot/cli.py`, which registers it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from bot.cli_app import JsonFlag, app, explained_errors, open_galley
from bot.cli_output import out, print_json, table

if TYPE_CHECKING:
    from core.api.week import Week


@app.command()
def calendar(
    days: Annotated[
        int, typer.Option(min=1, max=366, help="Show this many days ahead (and the last day).")
    ] = 7,
    as_json: JsonFlag = False,
) -> None:
    """The publication calendar: each recipe's slots and targets, with their state."""
    with explained_errors():
        galley = open_galley()
        found, week = galley.calendar(days), galley.week()
    if as_json:
        print_json({"calendar": found.to_json(), "week": week.to_json()})
        return
    rows = [
        [e.slot_at.isoformat(timespec="minutes"), e.recipe, e.target, _run(e.run, e.item), e.shown]
        for e in found
    ]
    out.print(
        table("publication calendar", ["slot (UTC)", "recipe", "target", "run", "state"], rows)
    )
    print_week(week)


def print_week(week: Week) -> None:
    """The week at a glance (docs/design.md §36), as the Home tab shows it."""
    from core.api.week import entry_text

    out.print(f"\nThe week (times in {week.zone}):", markup=False, highlight=False)
    for day in week.days:
        out.print(f"{day.day:%a %d %b}", markup=False, highlight=False)
        lines = [entry_text(e, week.zone) for e in day.entries] or ["nothing planned"]
        for line in lines:
            out.print(f"  {line}", markup=False, highlight=False)
    for waiting in week.items_waiting:
        titles = "; ".join(waiting.oldest)
        out.print(
            f"{waiting.recipe}: {waiting.count} item(s) found, not drafted yet: {titles}",
            markup=False,
            highlight=False,
        )


def _run(run: str, item: str | None) -> str:
    """An item run's id with its item's title and link (docs/design.md §29)."""
    return f"{run} {item}" if item else run
