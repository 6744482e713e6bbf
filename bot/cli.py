"""The `galley` command line (README: Command line): a thin shell over `core.api.galley.Galley`.

Exit codes: 0 for every outcome but `failed` (1); 2 for usage, config and operator
errors (a database or Slack that cannot be reached, a port that is taken), each one
line naming the variable; `--debug` or GALLEY_LOG_LEVEL=debug adds the traceback.
`--json` prints exactly one JSON document on stdout; human output uses tables.

Imports here stay light: `--help` loads no database or HTTP library, and each command
loads only what it uses (the Anthropic SDK only when a model is called).
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
from datetime import timedelta
from typing import TYPE_CHECKING, Annotated

import typer

from bot.cli_app import JsonFlag, explained_errors, open_galley, open_services
from bot.cli_app import app as app  # with every command registered once this module loads
from bot.cli_output import EXIT_FAILED as EXIT_FAILED
from bot.cli_output import EXIT_USAGE as EXIT_USAGE
from bot.cli_output import debugging, imports_done
from bot.cli_output import err as err
from bot.cli_output import out as out
from bot.cli_output import print_json as print_json
from bot.cli_output import table as table
from bot.cli_status import print_status, read_status
from core.drafting_policies import DraftOutcome
from core.errors import ConfigError
from core.identity import CLI_ACTOR
from core.policies import FailReason, Finding
from core.states import RunState

if TYPE_CHECKING:
    from core.api.services import Services
    from core.drafting.claims import DraftResult


db_app = typer.Typer(help="Database schema.", no_args_is_help=True, rich_markup_mode=None)
app.add_typer(db_app, name="db")

Actor = Annotated[str, typer.Option("--as", help="Who is acting (recorded in history).")]


@app.command()
def draft(
    recipe: Annotated[str, typer.Argument(help="Recipe name.")],
    slot: Annotated[
        str | None,
        typer.Option(help="ISO date-time; without an offset, wall time in the recipe's zone."),
    ] = None,
    as_json: JsonFlag = False,
    actor: Actor = CLI_ACTOR,
    batch: Annotated[
        bool,
        typer.Option(
            "--batch",
            help="Send it through a Message Batch at half the price; `galley run` stores "
            "the answer (within batch_deadline, else it drafts it at once).",
        ),
    ] = False,
) -> None:
    """Draft one slot now (default: the most recent due slot), without Slack."""
    with explained_errors():
        result = open_galley().draft(recipe, slot, actor=actor, batch=batch)
    report_draft(result, as_json)


def report_draft(result: DraftResult, as_json: bool) -> None:
    """A draft's outcome on stdout; exit 1 when it failed, 2 when Anthropic refused the
    key (an operator error: one line on stderr naming ANTHROPIC_API_KEY)."""
    if as_json:
        print_json(result.to_json())
    else:
        why = result.detail or result.reason
        if result.detail and result.reason and not result.detail.startswith(result.reason):
            why = f"{result.reason}: {result.detail}"
        reason = f" ({why})" if why else ""
        out.print(f"{result.outcome}{reason}  run={result.run}  key={result.key}", highlight=False)
    if result.outcome == DraftOutcome.FAILED and result.reason == FailReason.AUTH:
        cause = result.detail or "the Anthropic API refused the key"
        err.print(f"ANTHROPIC_API_KEY: {cause}", markup=False, highlight=False, style="red")
        raise typer.Exit(EXIT_USAGE)
    if result.outcome == DraftOutcome.FAILED:
        raise typer.Exit(EXIT_FAILED)


@app.command()
def status(as_json: JsonFlag = False) -> None:
    """Each recipe's version, pause flag, review queue and next slot; uncertain runs."""
    with explained_errors():
        report = read_status()
    print_status(report, as_json)


@app.command()
def runs(
    state: Annotated[RunState | None, typer.Option(help="Only runs in this state.")] = None,
    limit: Annotated[
        int, typer.Option(min=1, max=1000, help="At most this many (up to 1000), newest first.")
    ] = 50,
    before: Annotated[
        str | None,
        typer.Option(metavar="RUN", help="Start below this run: the last one of a page."),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Recent runs, newest slot first, a page at a time (`--before` the last run shown)."""
    from core.api.views import RunList

    with explained_errors():
        found = open_galley().runs(state, limit + 1, before)  # one more: is there a next page
    page = RunList(found[:limit])
    if as_json:  # the next page: --before the last id of this one
        print_json({"runs": page.to_json()})
        return
    following = page[-1].id if len(found) > limit else None
    rows = [[r.label(), r.state, r.reason, r.draft_key, r.attempts] for r in page]
    out.print(table("runs", ["run", "state", "reason", "draft key", "model calls"], rows))
    if following is not None:
        out.print(f"older: galley runs --before {following}", highlight=False)


@app.command()
def show(
    ref: Annotated[str, typer.Argument(metavar="RUN|DRAFT_KEY", help="A run id or a draft key.")],
    as_json: JsonFlag = False,
) -> None:
    """A draft's text, revisions, decisions, attempts (with causes) and effects."""
    with explained_errors():
        detail = open_galley().show(ref)
    if as_json:
        print_json(detail.to_json())
    else:
        # a terminal's width (COLUMNS first), else 200 columns when piped, as `out` has
        width = shutil.get_terminal_size((200, 24)).columns
        out.print(detail.rendered(width), markup=False, highlight=False)


@app.command()
def bump(
    recipe: Annotated[str, typer.Argument(help="Recipe name.")],
    reason: Annotated[str | None, typer.Option(help="Why, for the history.")] = None,
    actor: Actor = CLI_ACTOR,
) -> None:
    """Raise a recipe's version: the only way to a second draft for a drafted slot."""
    with explained_errors():
        bumped = open_galley().bump_recipe(recipe, actor=actor, reason=reason)
    out.print(bumped.describe(), markup=False, highlight=False)


@app.command()
def pause(
    target: Annotated[str, typer.Argument(help="Recipe name, or `all`.")],
    reason: Annotated[str | None, typer.Option(help="Why, shown in status.")] = None,
    actor: Actor = CLI_ACTOR,
) -> None:
    """Stop drafting for a recipe (or all) until resumed."""
    with explained_errors():
        names = open_galley().pause(target, actor=actor, reason=reason)
    out.print("paused: " + ", ".join(names), highlight=False)


@app.command()
def resume(
    target: Annotated[str, typer.Argument(help="Recipe name, or `all`.")],
    actor: Actor = CLI_ACTOR,
) -> None:
    """Let a paused recipe (or all) draft again."""
    with explained_errors():
        names = open_galley().resume(target, actor=actor)
    out.print("resumed: " + ", ".join(names), highlight=False)


@app.command()
def resolve(
    run_id: Annotated[str, typer.Argument(metavar="RUN", help="The run id.")],
    finding: Annotated[Finding, typer.Argument(help="What you found at the destination.")],
    actor: Actor = CLI_ACTOR,
) -> None:
    """Settle an uncertain run: `published` closes it; `absent` publishes it once."""
    with explained_errors():
        galley = open_galley()
        out.print(galley.resolve(run_id, finding, actor=actor), highlight=False)


@app.command()
def retry(
    run_id: Annotated[str, typer.Argument(metavar="RUN", help="The run id.")],
    actor: Actor = CLI_ACTOR,
) -> None:
    """Draft a failed run's slot again (no bump needed), or publish an uncertain run once
    more (you accept the risk of a repeat)."""
    with explained_errors():
        done = open_services().retry(run_id, actor=actor)  # the one retry routing
    if isinstance(done, str):
        out.print(done, markup=False, highlight=False)
    else:
        report_draft(done, as_json=False)


@app.command()
def cancel(
    run_id: Annotated[str, typer.Argument(metavar="RUN", help="The run id.")],
    actor: Actor = CLI_ACTOR,
) -> None:
    """Stop a run's further steps; lists the effects that had already completed."""
    with explained_errors():
        out.print(open_galley().cancel(run_id, actor=actor), highlight=False)


@app.command()
def skip(
    run_id: Annotated[str, typer.Argument(metavar="RUN", help="The run id.")],
    actor: Actor = CLI_ACTOR,
) -> None:
    """Give up on a failed run's slot: it will not be drafted again."""
    with explained_errors():
        out.print(open_galley().skip(run_id, actor=actor), highlight=False)


@app.command()
def run(
    shutdown_grace: Annotated[
        int, typer.Option(min=0, help="Seconds running model calls get after SIGTERM.")
    ] = 30,
) -> None:
    """Run the bot: scheduler, Slack, review outbox, sweeper, health and metrics."""
    from bot.logs import configure_logging, library_lines_held
    from core.setup.settings import load_settings

    with explained_errors():
        settings = load_settings()
        configure_logging(settings.galley_log_format, settings.galley_log_level)
        with library_lines_held(debugging["on"]) as held:
            from bot.run import Bot  # Slack and uvicorn load only for the bot itself

            bot = Bot(settings, shutdown_grace=timedelta(seconds=shutdown_grace))
            imports_done()
            # a refused app token is found when the socket opens, within serve()
            code = bot.serve(started=held.release if held else None)
    # Drafting threads still waiting on a model call past the grace must not hold the
    # process open (the interpreter would join them at exit): leave now; their claims
    # stop beating and another process takes them over within takeover_after.
    logging.shutdown()
    sys.stdout.flush()
    os._exit(code)


@app.command()
def check(
    as_json: JsonFlag = False,
    online: Annotated[
        bool,
        typer.Option(
            "--online", help="Prove each target's credentials, read each source; posts nothing."
        ),
    ] = False,
) -> None:
    """Validate the config, each publish target's secret and the database; show each
    recipe's next five slots. `--online`: each destination's credentials proved against
    its service without posting (Slack: auth.test) and each source read once, one line
    each, exit 2 on a failure."""
    from core.operations.digest import known_warnings
    from core.setup.serving import unserved
    from core.slots.schedule import describe, next_slots

    with explained_errors():
        services = open_services()
        missing = unserved(services.config)  # one line per target or source it cannot serve
        if missing:
            raise ConfigError(missing)
    if online:
        prove_online(services)
        return
    warnings = known_warnings(services.config, services.clock.now())  # docs/design.md §36
    if not as_json:
        for warning in warnings:
            out.print(f"warning: {warning}", markup=False, highlight=False)
    with explained_errors():
        now = services.clock.now()
        report = {
            name: (recipe, next_slots(recipe, now, 5))
            for name, recipe in services.config.recipes.items()
        }
    if as_json:
        print_json(
            {
                "recipes": [
                    {
                        "name": name,
                        "schedule": recipe.schedule,
                        "timezone": recipe.timezone,
                        "description": describe(recipe.schedule),
                        "next_slots": [
                            {
                                "run": slot.run_id(name),
                                "at": slot.fire_at.astimezone(recipe.zone).isoformat(),
                                "dst": slot.dst,
                            }
                            for slot in slots
                        ],
                    }
                    for name, (recipe, slots) in report.items()
                ],
                "warnings": warnings,
            }
        )
        return
    out.print(f"config ok: {len(report)} recipes; database at {services.store.current_revision()}")
    for name, (recipe, slots) in report.items():
        rows = [
            [slot.run_id(name), slot.fire_at.astimezone(recipe.zone).isoformat(), slot.dst or ""]
            for slot in slots
        ]
        title = f"{name}: {describe(recipe.schedule)} ({recipe.timezone})"
        out.print(table(title, ["run", "fires at", "DST"], rows))


def prove_online(services: Services) -> None:
    """One line per destination: Slack's `auth.test`, then each publish target's proof,
    then each source read once (a required one that fails fails the check)."""
    from bot.online import check_sources, prove_everything

    proofs = prove_everything(services.config)
    sources = check_sources(services.config, services.clock.now())
    for line in [*proofs, *sources]:
        out.print(str(line), markup=False, highlight=False)
    if not all(proof.ok for proof in proofs) or any(check.blocking for check in sources):
        raise typer.Exit(2)


@db_app.command("upgrade")
def db_upgrade() -> None:
    """Create or migrate the database schema to the newest version."""
    from core.setup.settings import load_settings
    from core.store.engine import Store

    with explained_errors():
        store = Store(load_settings().galley_database_url)
        store.upgrade()
    out.print(f"database at revision {store.current_revision()}", highlight=False)


# Commands kept in their own modules register on `app` (bot/cli_app.py) when imported:
# importing them here is what puts them on the command line.
from bot import cli_calendar as _calendar  # noqa: E402, F401
from bot import cli_decisions as _decisions  # noqa: E402, F401
from bot import cli_items as _items  # noqa: E402, F401
from bot import cli_posts as _posts  # noqa: E402, F401
from bot import cli_report as _report  # noqa: E402, F401
from bot import cli_review  # noqa: E402, F401
from bot import cli_sources as _sources  # noqa: E402, F401
from bot import cli_stats as _stats  # noqa: E402, F401
