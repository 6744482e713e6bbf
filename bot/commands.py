"""`/galley` subcommands: parse the text, check who may, call one operator method.

Replies are plain mrkdwn strings sent ephemerally by the handler. Bad arguments get the
usage line, never a stack trace; Galley's own errors become one sentence.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass

from bot.blocks import help_text
from core.config import Recipe
from core.errors import GalleyError
from core.operator import Galley
from core.permissions import may_administer
from core.policies import Finding
from core.ports import Directory
from core.schedule import Slot
from core.states import RunState

OPEN_TO_EVERYONE = frozenset({"help", "status", "runs"})
USAGE = {
    "help": "/galley help",
    "status": "/galley status",
    "run": "/galley run <recipe>",
    "bump": "/galley bump <recipe> [reason]",
    "pause": "/galley pause <recipe|all> [reason]",
    "resume": "/galley resume <recipe|all>",
    "runs": "/galley runs [state]",
    "resolve": "/galley resolve <run> published|absent",
    "retry": "/galley retry <run>",
    "cancel": "/galley cancel <run>",
}


# (recipe, slot or None for the latest, actor, tell): draft on the pool, then tell how it went
StartDraft = Callable[[Recipe, Slot | None, str, Callable[[str], object]], None]


class UsageError(ValueError):
    """The words of a command are off; the reply is its usage line."""


@dataclass(frozen=True)
class CommandContext:
    galley: Galley
    directory: Directory
    user: str
    start_draft: StartDraft  # hands a manual run to the drafting pool
    tell: Callable[[str], object]  # a later message to the same person (the outcome)


def answer(text: str, context: CommandContext) -> str:
    """The reply to `/galley <text>` from `context.user`."""
    try:
        words = shlex.split(text)
    except ValueError:
        return "Unbalanced quotes.\n" + help_text()
    if not words or words[0] not in USAGE:
        return help_text()
    verb, args = words[0], words[1:]
    if verb not in OPEN_TO_EVERYONE and not may_administer(
        context.galley.config.slack, context.directory, context.user
    ):
        return f"Only Galley's admins may `{verb}`."
    try:
        return _COMMANDS[verb](args, context)
    except UsageError:
        return f"Usage: `{USAGE[verb]}`"
    except GalleyError as exc:
        return str(exc)


def _status(args: list[str], context: CommandContext) -> str:
    _no_more(args, 0)
    report = context.galley.status()
    lines = [
        f"*{r.name}* v{r.version} · {r.pending}/{r.pending_limit} waiting"
        + (f" · paused ({r.paused_reason or 'no reason'})" if r.paused else "")
        + (f" · next {r.next_slot}" if r.next_slot else "")
        for r in report.recipes
    ]
    if report.uncertain:
        lines.append("Uncertain runs: " + ", ".join(f"`{run}`" for run in report.uncertain))
    return "\n".join(lines) or "No recipes."


def _run(args: list[str], context: CommandContext) -> str:
    _no_more(args, 1)
    recipe = context.galley.recipe(_first(args))
    context.start_draft(recipe, None, context.user, context.tell)
    return f"Drafting *{recipe.name}* for its most recent slot; I will tell you how it went."


def _bump(args: list[str], context: CommandContext) -> str:
    name = _first(args)
    reason = " ".join(args[1:]) or None
    return context.galley.bump_recipe(name, actor=context.user, reason=reason).describe()


def _pause(args: list[str], context: CommandContext) -> str:
    reason = " ".join(args[1:]) or None
    names = context.galley.pause(_first(args), actor=context.user, reason=reason)
    return "Paused: " + ", ".join(f"*{n}*" for n in names)


def _resume(args: list[str], context: CommandContext) -> str:
    _no_more(args, 1)
    names = context.galley.resume(_first(args), actor=context.user)
    return "Resumed: " + ", ".join(f"*{n}*" for n in names)


def _runs(args: list[str], context: CommandContext) -> str:
    _no_more(args, 1)
    try:
        state = RunState(args[0]) if args else None
    except ValueError:
        raise UsageError from None
    found = context.galley.runs(state, limit=15)
    if not found:
        return "No runs."
    return "\n".join(f"`{r.id}` {r.state}" + (f" ({r.reason})" if r.reason else "") for r in found)


def _resolve(args: list[str], context: CommandContext) -> str:
    if len(args) != 2:
        raise UsageError
    try:
        finding = Finding(args[1])
    except ValueError:
        raise UsageError from None
    return context.galley.resolve(args[0], finding, actor=context.user)


def _retry(args: list[str], context: CommandContext) -> str:
    _no_more(args, 1)
    return retry_run(_first(args), context.galley, context.start_draft, context.user, context.tell)


def retry_run(
    run_id: str, galley: Galley, start_draft: StartDraft, user: str, tell: Callable[[str], object]
) -> str:
    """A failed draft is drafted again on the pool (never on a Slack listener's thread);
    an uncertain publication is tried once more."""
    failed = galley.failed_drafting(run_id)
    if failed is None:
        return galley.retry(run_id, actor=user)
    recipe, slot = failed
    start_draft(recipe, slot, user, tell)
    return f"`{run_id}` is being drafted again; you will be told how it went."


def _cancel(args: list[str], context: CommandContext) -> str:
    _no_more(args, 1)
    return context.galley.cancel(_first(args), actor=context.user)


def _help(args: list[str], context: CommandContext) -> str:
    return help_text()


def _first(args: list[str]) -> str:
    if not args:
        raise UsageError
    return args[0]


def _no_more(args: list[str], allowed: int) -> None:
    if len(args) > allowed:
        raise UsageError


_COMMANDS: dict[str, Callable[[list[str], CommandContext], str]] = {
    "help": _help,
    "status": _status,
    "run": _run,
    "bump": _bump,
    "pause": _pause,
    "resume": _resume,
    "runs": _runs,
    "resolve": _resolve,
    "retry": _retry,
    "cancel": _cancel,
}
