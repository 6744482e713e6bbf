"""The `galley` command line's typer app and what every command shares: the `--debug`
option, `--json`, Galley's errors explained in one line, and opening the facade or core's
services. Commands register on `app` here: bot/cli.py's own, and those in the cli_*.py
modules that bot/cli.py imports to register them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated

import typer

from bot.cli_output import debugging, explained, imports_done
from core.errors import GalleyError

if TYPE_CHECKING:
    from core.api.galley import Galley
    from core.api.services import Services


app = typer.Typer(
    name="galley",
    help="Galley drafts posts with Claude on a schedule, and never twice.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
JsonFlag = Annotated[bool, typer.Option("--json", help="Print one JSON document.")]


@app.callback()
def options(
    debug: Annotated[
        bool, typer.Option("--debug", help="Show the traceback behind an error.")
    ] = False,
) -> None:
    """Galley drafts posts with Claude on a schedule, and never twice."""
    debugging["on"] = debug or os.environ.get("GALLEY_LOG_LEVEL", "").lower() == "debug"


@contextmanager
def explained_errors() -> Iterator[None]:
    """Galley's own errors become one clear message and an exit code, not a traceback."""
    try:
        yield
    except GalleyError as exc:
        raise typer.Exit(explained(exc)) from None


def open_galley() -> Galley:
    from core.api.galley import Galley
    from core.setup.settings import load_settings

    imports_done()
    return Galley.from_settings(load_settings())


def open_services() -> Services:
    """Core's services without the facade: what `check` and `retry` need."""
    from core.api.services import Services
    from core.setup.settings import load_settings

    imports_done()
    return Services.from_settings(load_settings())
