"""What every `galley` command prints through, and how an error ends one: the consoles,
tables, JSON and exit codes, without typer, so that `galley status` can answer before
the command-line app is built (bot/launch.py; bench/cli_startup.py measures it)."""

from __future__ import annotations

import gc
import sys
import traceback
from typing import TYPE_CHECKING, Any

from rich.console import Console

from core.errors import (
    BadDecisionQuery,
    ConfigError,
    DatabaseNotReady,
    DatabaseUnavailable,
    GalleyError,
    PortUnavailable,
    SlackUnavailable,
    SlotError,
    UnknownRecipe,
    UnknownRun,
)

if TYPE_CHECKING:
    from rich.table import Table

EXIT_FAILED = 1
EXIT_USAGE = 2
USAGE_ERRORS = (
    BadDecisionQuery,
    ConfigError,
    UnknownRecipe,
    UnknownRun,
    SlotError,
    DatabaseNotReady,
    DatabaseUnavailable,
    SlackUnavailable,
    PortUnavailable,
)

# Piped output is read by scripts and people's terminals alike: never cut a run id.
out = Console(width=None if sys.stdout.isatty() else 200, soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)
debugging = {"on": False}  # --debug or GALLEY_LOG_LEVEL=debug: tracebacks behind errors


def explained(error: GalleyError) -> int:
    """Galley's own error as one clear message on stderr (and the traceback when
    debugging); the exit code it ends the command with."""
    if debugging["on"]:
        traceback.print_exc()
    for line in str(error).splitlines():
        err.print(line, markup=False, highlight=False, style="red")
    return EXIT_USAGE if isinstance(error, USAGE_ERRORS) else EXIT_FAILED


def imports_done() -> None:
    """Collect garbage again from here on, sparing the objects start-up built (see
    bot/launch.py)."""
    gc.freeze()
    gc.enable()


def print_json(document: Any) -> None:
    import json

    sys.stdout.write(json.dumps(document, default=str) + "\n")


def table(title: str, columns: list[str], rows: list[list[Any]]) -> Table:
    from rich.table import Table

    grid = Table(title=title, title_justify="left")
    for column in columns:
        grid.add_column(column)
    for row in rows:
        grid.add_row(*["" if v is None else str(v) for v in row])
    return grid
