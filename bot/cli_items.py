"""`galley poll RECIPE [--json]` (docs/design.md §29): an items recipe's poll now, its new
items recorded and its waiting items drafted, without Slack. Kept beside `bot/cli.py`,
which registers it."""

from __future__ import annotations

from typing import Annotated

import typer

from bot.cli_app import JsonFlag, app, explained_errors, open_galley
from bot.cli_output import EXIT_FAILED, out, print_json
from core.drafting_policies import DraftOutcome


@app.command()
def poll(
    recipe: Annotated[str, typer.Argument(help="An items recipe's name.")],
    as_json: JsonFlag = False,
) -> None:
    """Poll an items recipe's source now and draft its new items, oldest first."""
    with explained_errors():
        result = open_galley().poll(recipe)
    if as_json:
        print_json(result.to_json())
    else:
        out.print(result.describe(), markup=False, highlight=False)
        for drafted in result.drafted:
            out.print(drafted.describe(), markup=False, highlight=False)
    failed = any(drafted.outcome == DraftOutcome.FAILED for drafted in result.drafted)
    if result.failed is not None or failed:
        raise typer.Exit(EXIT_FAILED)
