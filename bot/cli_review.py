"""The reviewer's commands of the `galley` command line (docs/design.md §22): approve,
reject and redraft one revision, with the same rules as Slack's buttons and the notebook
(`core/api/desk.py` `Desk`, `core/review/queue.py`, `core/review/approvals.py`). Registered on
`bot.cli_app.app` when bot/cli.py imports this module.

Who acts is `--as`, or GALLEY_USER: their approver role is checked as Slack checks it.
Exit 0 when the decision or redraft counted, 1 when it was refused (and says why).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Annotated

import typer

from bot.cli_app import app, explained_errors, open_galley
from bot.cli_output import EXIT_FAILED, out
from core.identity import CLI_ACTOR
from core.policies import Refusal

if TYPE_CHECKING:
    from core.api.views import Answer

Key = Annotated[str, typer.Argument(metavar="DRAFT_KEY", help="The draft key.")]
Revision = Annotated[
    int | None, typer.Option(help="The revision you read (default: the current one).")
]
Person = Annotated[str | None, typer.Option("--as", help="Who decides (default: GALLEY_USER).")]


def _person(actor: str | None) -> str:
    return actor or os.environ.get("GALLEY_USER") or CLI_ACTOR


def _told(answer: Answer, person: str) -> None:
    out.print(answer.message, markup=False, highlight=False)
    if answer.refusal == Refusal.NOT_APPROVER:  # the command line's own way to say who
        out.print(
            f"(deciding as {person}: name an approver with --as U… or GALLEY_USER)",
            markup=False,
            highlight=False,
        )
    if not answer.accepted:
        raise typer.Exit(EXIT_FAILED)


@app.command()
def approve(key: Key, revision: Revision = None, actor: Person = None) -> None:
    """Approve one revision of a waiting draft (approvals_required people decide)."""
    with explained_errors():
        galley = open_galley()
        read = galley.show(key) if revision is None else key
        person = _person(actor)
        answer = galley.approve(read, revision, user=person)
    _told(answer, person)


@app.command()
def reject(
    key: Key,
    reason: Annotated[str | None, typer.Option(help="Why, kept for the recipe.")] = None,
    revision: Revision = None,
    actor: Person = None,
) -> None:
    """Reject one revision of a waiting draft: it decides at once."""
    with explained_errors():
        galley = open_galley()
        read = galley.show(key) if revision is None else key
        person = _person(actor)
        answer = galley.reject(read, revision, reason=reason, user=person)
    _told(answer, person)


@app.command()
def redraft(
    key: Key,
    note: Annotated[str, typer.Option("--note", help="What to change, for the model.")],
    revision: Revision = None,
    actor: Person = None,
) -> None:
    """Ask the model for the next revision of a waiting draft, with a note."""
    with explained_errors():
        galley = open_galley()
        read = galley.show(key) if revision is None else key
        person = _person(actor)
        answer = galley.redraft(read, note, revision, user=person)
    _told(answer, person)
