"""The `galley` executable: `galley [--debug] status [--json]` is answered before the
command-line app is built, since typer, click and every command's options cost a
`galley status` a fifth of its start-up (bench/cli_startup.py); every other command
line, `galley status --help` included, goes to the app in bot/cli.py.

A command imports some 400 modules (SQLAlchemy, pydantic, rich) and builds tens of
thousands of long-lived objects: the cyclic collector would scan them ~200 times during
start-up and once more at exit, a large share of `galley status`'s time. It stays off
until the command's modules are loaded (`imports_done`), and what is left is frozen
before the interpreter's exit sweep.
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Sequence

DEBUG_FLAG = "--debug"
# pydantic looks for plugins in every installed distribution's metadata when it builds
# its first model (about 180 here, 10 ms of a 0.37 s status); Galley uses none. Someone
# who wants one for `status` sets the variable themselves.
NO_PYDANTIC_PLUGINS = ("PYDANTIC_DISABLE_PLUGINS", "__all__")
STATUS_LINES = (["status"], ["status", "--json"])


def main() -> None:
    gc.disable()
    try:
        quick = status_line(sys.argv[1:])
        if quick is None:
            from bot.cli import app

            app()
        else:
            sys.exit(answer_status(debug=quick[0], as_json=quick[1]))
    finally:
        gc.freeze()


def status_line(arguments: Sequence[str]) -> tuple[bool, bool] | None:
    """(--debug given, --json given) when the arguments are a plain `status` command
    line; None for anything else, which the app parses."""
    arguments = list(arguments)
    debug = arguments[:1] == [DEBUG_FLAG]
    rest = arguments[1:] if debug else arguments
    if rest not in STATUS_LINES:
        return None
    return debug, rest == ["status", "--json"]


def answer_status(*, debug: bool, as_json: bool) -> int:
    """What the app's `status` command does, with the app's error handling; the exit
    code."""
    from bot.cli_output import debugging, explained
    from bot.cli_status import print_status, read_status
    from core.errors import GalleyError

    debugging["on"] = debug or os.environ.get("GALLEY_LOG_LEVEL", "").lower() == "debug"
    os.environ.setdefault(*NO_PYDANTIC_PLUGINS)
    try:
        report = read_status()
        print_status(report, as_json)
    except GalleyError as exc:
        return explained(exc)
    except KeyboardInterrupt:
        return 130  # as the app ends each of these (typer.core.TyperCommand.main)
    except EOFError:
        print("\nAborted!", file=sys.stderr)
        return 1
    except BrokenPipeError:  # `galley status | head -1`: no error at exit's flush
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return 0
