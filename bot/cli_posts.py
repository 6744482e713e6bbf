"""A person's own posts from the command line (docs/design.md §37): `galley post RECIPE
[--at ISO] --text-file F [--target T=FILE …]` and `galley import plan.csv [--skip-bad]`.
Registered on `bot.cli_app.app` when bot/cli.py imports this module.

Who wrote it is `--as`, else GALLEY_USER, else `cli`: the name the decision log keeps.
Exit 0 when the post or plan was added (or was there already), 1 when it was refused.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from bot.cli_app import JsonFlag, app, explained_errors, open_galley
from bot.cli_output import EXIT_FAILED, EXIT_USAGE, err, out, print_json
from core.identity import CLI_ACTOR

MAX_TEXT_FILE = 1024 * 1024  # a post's text file: far beyond any platform's limit

Person = Annotated[str | None, typer.Option("--as", help="Who wrote it (default: GALLEY_USER).")]


def _person(actor: str | None) -> str:
    return actor or os.environ.get("GALLEY_USER") or CLI_ACTOR


def _read_text(path: Path) -> str:
    try:
        with path.open("rb") as file:
            data = file.read(MAX_TEXT_FILE + 1)
    except OSError as exc:
        err.print(f"{path}: {exc.strerror or exc}", markup=False, highlight=False)
        raise typer.Exit(EXIT_USAGE) from None
    if len(data) > MAX_TEXT_FILE:
        err.print(f"{path} is over 1 MB: no post is that long", markup=False, highlight=False)
        raise typer.Exit(EXIT_USAGE)
    return data.decode("utf-8", errors="replace").strip()


def _targets(pairs: list[str]) -> dict[str, str]:
    """`--target bluesky:acme.bsky.social=bsky.txt`: a text of its own for one target."""
    texts: dict[str, str] = {}
    for pair in pairs:
        target, mark, name = pair.rpartition("=")
        if not mark or not target or not name:
            err.print(f"--target {pair!r}: write TARGET=FILE", markup=False, highlight=False)
            raise typer.Exit(EXIT_USAGE)
        texts[target] = _read_text(Path(name))
    return texts


@app.command()
def post(
    recipe: Annotated[str, typer.Argument(help="The recipe whose targets and stages it uses.")],
    text_file: Annotated[Path, typer.Option("--text-file", help="The post's text.")],
    at: Annotated[
        str | None, typer.Option("--at", help="When to publish (ISO; default: once approved).")
    ] = None,
    target: Annotated[
        list[str] | None, typer.Option("--target", help="TARGET=FILE: a text for one target.")
    ] = None,
    post_id: Annotated[str | None, typer.Option("--id", help="Name the post.")] = None,
    actor: Person = None,
    as_json: JsonFlag = False,
) -> None:
    """Write a post yourself: it goes to review like a model's draft, with no model call."""
    text, texts = _read_text(text_file), _targets(target or [])
    with explained_errors():
        written = open_galley().post(
            recipe, text, at, targets=texts, post_id=post_id, actor=_person(actor)
        )
    if as_json:
        print_json(written.to_json())
        return
    for run in written.added:
        out.print(f"{run}: written, waiting for review", markup=False, highlight=False)
    for run in written.already:
        out.print(f"{run}: already there", markup=False, highlight=False)


@app.command(name="import")
def import_(
    plan: Annotated[Path, typer.Argument(help="A CSV: publish_at, recipe, text[, id, image, alt]")],
    skip_bad: Annotated[
        bool, typer.Option("--skip-bad", help="Add the good rows even if some are bad.")
    ] = False,
    actor: Person = None,
    as_json: JsonFlag = False,
) -> None:
    """Import a plan: each row a person's post at review; the same file twice adds nothing."""
    with explained_errors():
        done = open_galley().import_plan(plan, skip_bad=skip_bad, actor=_person(actor))
    if as_json:
        print_json(done.to_json())
    else:
        for line in done.describe():
            out.print(line, markup=False, highlight=False)
    if done.refused:
        raise typer.Exit(EXIT_FAILED)
