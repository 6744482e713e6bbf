"""`galley report [--since 7d] [--by recipe|target] [--json|--csv]` (docs/design.md §38):
draft quality and results over a window, each figure in a sentence naming what it
counts, or the rows as JSON or CSV. Kept beside `bot/cli.py`, which registers it."""

from __future__ import annotations

import csv
import sys
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from bot.cli_app import JsonFlag, app, explained_errors, open_galley
from bot.cli_output import out, print_json

if TYPE_CHECKING:  # `--help` must not load the database layer
    from core.api.report import Report


class By(StrEnum):  # typer's choices; core's ReportBy has the same values
    RECIPE = "recipe"
    TARGET = "target"


@app.command()
def report(
    since: Annotated[
        str, typer.Option(metavar="DURATION", help="The window: the last 7d, 30d, 12w…")
    ] = "7d",
    by: Annotated[By, typer.Option(help="Results per recipe, or per recipe and target.")] = (
        By.RECIPE
    ),
    as_json: JsonFlag = False,
    as_csv: Annotated[bool, typer.Option("--csv", help="Print CSV with a header row.")] = False,
) -> None:
    """Draft quality (first-pass approvals, edits, time to decision, cost) and results
    (posts, engagement at each reading, lift) per recipe over a window."""
    from core.render import jsonable
    from core.setup.durations import parse_duration

    if as_json and as_csv:
        raise typer.BadParameter("--json or --csv, not both")
    try:
        parse_duration(since)
    except ValueError as refused:
        raise typer.BadParameter(str(refused), param_hint="--since") from None
    with explained_errors():
        found = open_galley().report(since, by.value)
    if as_json:
        posts = [jsonable(post) for post in found.posts]
        print_json({"rows": found.to_json(), "best": _best(found), "posts": posts})
    elif as_csv:
        print_csv(found.to_csv_rows())
    else:
        out.print(report_text(found), markup=False, highlight=False)


def _best(found: Report) -> dict[str, Any] | None:
    post = found.best
    if post is None:
        return None
    return {"recipe": post.recipe, "target": post.target, "url": post.url, "lift": post.lift}


def report_text(found: Report) -> str:
    """Each row's sentences, a blank line apart, and the window's best post."""
    blocks = ["\n".join(row.lines()) for row in found] or ["no recipe in the config"]
    post = found.best
    if post is not None:
        lift = f", lift {post.lift:.2f}x" if post.lift is not None else ""
        blocks.append(f"best post: {post.recipe} on {post.target}{lift}: {post.url or ''}")
    return "\n\n".join(blocks)


def print_csv(rows: list[dict[str, Any]]) -> None:
    if not rows:
        return
    writer = csv.DictWriter(sys.stdout, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
