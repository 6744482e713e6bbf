"""`galley stats [RECIPE] [--days N] [--json]` (docs/design.md §28): how published posts
did, each with its latest engagement reading and score, and the best of them. Kept
beside `bot/cli.py`, which registers it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from bot.cli_app import JsonFlag, app, explained_errors, open_galley
from bot.cli_output import out, print_json, table

if TYPE_CHECKING:  # `--help` must not load the database layer
    from core.publishing.engagement import PostStats, StatsList


@app.command()
def stats(
    recipe: Annotated[str | None, typer.Argument(help="Only this recipe's posts.")] = None,
    days: Annotated[
        int, typer.Option(min=1, max=3660, help="Posts published in this many days.")
    ] = 30,
    as_json: JsonFlag = False,
) -> None:
    """How published posts did: likes, reposts, replies, quotes and score, per post."""
    with explained_errors():
        found = open_galley().stats(recipe, days)
    best = found.best()
    if as_json:
        print_json({"posts": found.to_json(), "best": None if best is None else best.url})
        return
    out.print(table(f"engagement, last {days} days", COLUMNS, rows_of(found)))
    if best is not None:
        out.print(
            f"best: {best.recipe} on {best.target}, score {best.score}: {best.url or best.run}"
        )


COLUMNS = ["published (UTC)", "recipe", "target", "state", "read", "likes", "reposts",
           "replies", "quotes", "score", "link"]  # fmt: skip


def rows_of(found: StatsList) -> list[list[object]]:
    return [_row(post) for post in found]


def _row(post: PostStats) -> list[object]:
    """A post's counts, or why it has none (`not read`, `no engagement: webhook`): an
    unread post's zeros are not likes nobody gave."""
    counts: list[object] = [post.likes, post.reposts, post.replies, post.quotes, post.score]
    return [
        post.published_at.isoformat(timespec="minutes"),
        post.recipe,
        post.target,
        post.state,
        post.unread or post.reading or "",
        *([""] * len(counts) if post.unread else counts),
        post.url or "",
    ]
