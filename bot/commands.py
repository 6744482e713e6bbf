"""`/galley` subcommands: parse the text, check who may, call one core operation.

Replies are plain mrkdwn strings sent ephemerally by the handler. Bad arguments get the
usage line, never a stack trace; Galley's own errors become one sentence.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass

from bot.blocks import help_text
from bot.mrkdwn import escape_mrkdwn
from bot.work import Work
from core.api.galley import plain_description
from core.api.queries import list_runs, read_status
from core.api.services import Services
from core.api.views import RunSummary
from core.errors import GalleyError
from core.policies import Finding, Trigger
from core.setup.config import Recipe
from core.slots.schedule import Slot
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
    "post": "/galley post [recipe]",
}


class UsageError(ValueError):
    """The words of a command are off; the reply is its usage line."""


@dataclass(frozen=True)
class CommandContext:
    services: Services  # the bot's core services (bot/wiring.py)
    user: str
    work: Work  # `start_draft`: a person's draft on the drafting pool
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
    if verb not in OPEN_TO_EVERYONE and not context.services.may_administer(context.user):
        return f"Only Galley's admins may `{verb}`."
    try:
        return _COMMANDS[verb](args, context)
    except UsageError:
        return f"Usage: `{USAGE[verb]}`"
    except GalleyError as exc:
        return str(exc)


def _status(args: list[str], context: CommandContext) -> str:
    _no_more(args, 0)
    services = context.services
    with services.store.read() as session:
        report = read_status(session, services.config, services.clock.now())
    lines = [
        f"*{r.name}* v{r.version} · {r.pending}/{r.pending_limit} waiting"
        + (f" · paused ({r.paused_reason or 'no reason'})" if r.paused else "")
        + (f" · {r.in_batch} in a batch" if r.in_batch else "")
        + (f" · next {r.next_slot}" if r.next_slot else "")
        for r in report.recipes
    ]
    if report.uncertain:
        lines.append("Uncertain runs: " + ", ".join(f"`{run}`" for run in report.uncertain))
    return "\n".join(lines) or "No recipes."


def _run(args: list[str], context: CommandContext) -> str:
    _no_more(args, 1)
    recipe = context.services.recipe(_first(args))
    context.work.start_draft(recipe, None, context.user, context.tell)
    if recipe.trigger == Trigger.ITEMS:
        return f"Polling *{recipe.name}* now; I will tell you what it found."
    return f"Drafting *{recipe.name}* for its most recent slot; I will tell you how it went."


def _bump(args: list[str], context: CommandContext) -> str:
    name = _first(args)
    reason = " ".join(args[1:]) or None
    return context.services.recipes.bump(name, actor=context.user, reason=reason).describe()


def _pause(args: list[str], context: CommandContext) -> str:
    reason = " ".join(args[1:]) or None
    names = context.services.recipes.pause(_first(args), actor=context.user, reason=reason)
    return "Paused: " + ", ".join(f"*{n}*" for n in names)


def _resume(args: list[str], context: CommandContext) -> str:
    _no_more(args, 1)
    names = context.services.recipes.resume(_first(args), actor=context.user)
    return "Resumed: " + ", ".join(f"*{n}*" for n in names)


def _runs(args: list[str], context: CommandContext) -> str:
    _no_more(args, 1)
    try:
        state = RunState(args[0]) if args else None
    except ValueError:
        raise UsageError from None
    with context.services.store.read() as session:
        found = list_runs(session, state, 15, None)
    if not found:
        return "No runs."
    return "\n".join(
        f"`{r.id}` {r.state}" + (f" ({r.reason})" if r.reason else "") + _item_of(r) for r in found
    )


def _item_of(run: RunSummary) -> str:
    """An item run's item (docs/design.md §29), inert: feed text is untrusted."""
    if run.item_title is None:
        return ""
    link = f" {escape_mrkdwn(run.item_link)}" if run.item_link else ""
    return f": {escape_mrkdwn(run.item_title)}{link}"


def _resolve(args: list[str], context: CommandContext) -> str:
    if len(args) != 2:
        raise UsageError
    try:
        finding = Finding(args[1])
    except ValueError:
        raise UsageError from None
    return context.services.resolver.resolve(args[0], finding, actor=context.user)


def _retry(args: list[str], context: CommandContext) -> str:
    _no_more(args, 1)
    return retry_run(_first(args), context)


def retry_run(run_id: str, context: CommandContext) -> str:
    """`Services.retry`'s routing: a failed draft is drafted again on the pool (never on a
    Slack listener's thread); an uncertain publication is tried once more."""

    def on_the_pool(recipe: Recipe, slot: Slot) -> str:
        context.work.start_draft(recipe, slot, context.user, context.tell)
        return f"`{run_id}` is being drafted again; you will be told how it went."

    done = context.services.retry(run_id, actor=context.user, draft_again=on_the_pool)
    return done if isinstance(done, str) else plain_description(done)


def _cancel(args: list[str], context: CommandContext) -> str:
    _no_more(args, 1)
    return context.services.resolver.cancel(_first(args), actor=context.user)


def _post(args: list[str], context: CommandContext) -> str:
    """Reached only where no form can open (a Home button): the slash command opens one."""
    return "Type `/galley post [recipe]` in a channel: it opens a form for your post."


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
    "post": _post,
}
