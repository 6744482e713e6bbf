"""Core's container (core/api/services.py) and the bot's surfaces that take it: one admin
rule for every surface, one retry routing, listeners from one table, and a facade that
shows only what the README documents."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from slack_sdk import WebClient
from sqlmodel import select

from bot.commands import CommandContext, answer, retry_run
from bot.handlers import LISTENERS, Listeners
from bot.slack_surface import SlackChannels
from bot.wiring import Publishers
from core.api.galley import Galley
from core.api.services import Services
from core.drafting_policies import AttemptOutcome, DraftOutcome
from core.errors import ModelCallFailed, NotPermitted
from core.models import RecipeRow
from core.ports import DraftRequest, ModelReply
from core.setup.config import Recipe, parse_config
from core.slots.schedule import Slot
from core.store.engine import Store
from core.testing import FrozenClock, InstantDrafter
from tests.conftest import config_text, make_config

RECIPE, SLOT = "weekly-update", "2026-11-23T09:00"
RUN = f"{RECIPE}@{SLOT}"
PEOPLE = 'approvers = ["U0EDITOR", "U0OPS"]\nadmins = ["U0ADMIN", "S0OPS"]'


class OpsGroup:
    """A directory whose one user group, S0OPS, holds U0OPS."""

    def group_members(self, group_id: str) -> frozenset[str]:
        return frozenset({"U0OPS"}) if group_id == "S0OPS" else frozenset()


def _services(store: Store, drafter: object | None = None) -> Services:
    text = config_text().replace(
        'review_channel = "C0REVIEW"', f'review_channel = "C0REVIEW"\n{PEOPLE}'
    )
    return Services(
        parse_config(text),
        store,
        drafter=drafter,  # type: ignore[arg-type]
        clock=FrozenClock(datetime.fromisoformat("2026-11-25T12:00+00:00")),
        directory=OpsGroup(),
    )


class DraftingPoolSpy:
    """What `/galley` hands the bot's `Work`, written down instead of drafted."""

    def __init__(self, told: list[str]) -> None:
        self.told = told

    def start_draft(
        self, recipe: Recipe, slot: Slot | None, actor: str, tell: Callable[[str], object]
    ) -> None:
        self.told.append(f"pool: {recipe.name} {slot and slot.run_id(recipe.name)} by {actor}")


def _context(services: Services, user: str, told: list[str]) -> CommandContext:
    work = DraftingPoolSpy(told)
    return CommandContext(services, user, work, told.append)  # type: ignore[arg-type]


def rows(store: Store, table: type[Any]) -> list[Any]:
    with store.read() as session:
        return list(session.exec(select(table)).all())


def _paused(store: Store) -> bool:
    found = rows(store, RecipeRow)
    return bool(found and found[0].paused)


@pytest.mark.parametrize(
    ("user", "admin"),
    [("U0ADMIN", True), ("U0OPS", True), ("U0EDITOR", False), ("U0STRANGER", False)],
)
def test_every_surface_asks_the_one_admin_rule(store: Store, user: str, admin: bool) -> None:
    """Listed by id or through a user group: `/galley` (and so a Home button, which is its
    command), the alert buttons' check and the notebook agree, person by person."""
    services = _services(store)
    told: list[str] = []

    assert services.may_administer(user) is admin  # the alert buttons' and Home's check
    reply = answer("pause all testing", _context(services, user, told))
    assert (reply == "Only Galley's admins may `pause`.") is not admin
    assert _paused(store) is admin

    notebook = Galley.over(services, user=user)
    if admin:
        assert notebook.resume("all") == [RECIPE]
    else:
        with pytest.raises(NotPermitted):
            notebook.resume("all")
    assert not _paused(store)


class FailsOnce:
    """A drafter refused once for our credentials (the run fails before it has a draft),
    then answering."""

    def __init__(self) -> None:
        self.calls = 0

    def draft(self, request: DraftRequest) -> ModelReply:
        self.calls += 1
        if self.calls == 1:
            raise ModelCallFailed(AttemptOutcome.AUTH, "401 from the API")
        return ModelReply("Draft text.", request.model, "req", "end_turn", 10, 20, 0, 0)


def test_a_failed_draft_is_retried_on_the_pool_from_slack_and_at_once_elsewhere(
    store: Store,
) -> None:
    """`Services.retry` is the one routing: `/galley retry` and the alert's Retry hand the
    slot to the drafting pool (nothing drafted on the listener's thread); the CLI and the
    notebook draft it now. Either way the same slot, without a bump."""
    drafter = FailsOnce()
    services = _services(store, drafter)
    galley = Galley.over(services)
    assert galley.draft(RECIPE, SLOT, actor="U0ADMIN").outcome == DraftOutcome.FAILED
    told: list[str] = []

    said = retry_run(RUN, _context(services, "U0ADMIN", told))

    assert said == f"`{RUN}` is being drafted again; you will be told how it went."
    assert told == [f"pool: {RECIPE} {RUN} by U0ADMIN"]
    assert drafter.calls == 1  # handed to the pool: no model call here
    assert "drafted" in galley.retry(RUN, actor="U0ADMIN")
    assert drafter.calls == 2
    [recipe] = rows(store, RecipeRow)
    assert recipe.version == 1


def test_a_container_built_over_slack_publishers_measures_everything_by_their_one_rule(
    store: Store,
) -> None:
    """The bot's container is built with its destinations: drafting, redrafting and every
    Approve measure by one rule, and it counts the Slack channel a notebook's cannot."""
    text = config_text() + 'publish = { to = "slack", channel = "C0ANNOUNCE" }\n'
    publishers = Publishers(SlackChannels(WebClient(token="xoxb-test")), environ={})
    services = Services(
        parse_config(text), store, drafter=InstantDrafter(), destinations=publishers
    )
    rule = services.fits
    assert services.destinations is publishers
    assert services.drafting.fits is rule and services.redrafting.fits is rule
    assert services.desk().fits is rule
    [fit] = rule.measure(services.recipe(RECIPE), "Ship it & celebrate")
    assert (fit.label, fit.count) == ("Slack", len("Ship it &amp; celebrate"))
    core_only = Services(parse_config(text), store, drafter=InstantDrafter())
    assert core_only.fits.measure(core_only.recipe(RECIPE), "Ship it") == ()


def test_every_listener_in_the_table_is_a_listener_method() -> None:
    methods = [method for _, _, method in LISTENERS]
    assert len(set(methods)) == len(methods)
    assert all(getattr(Listeners, m.__name__) is m for m in methods)
    matchers = [(kind, str(matcher)) for kind, matcher, _ in LISTENERS]
    assert len(set(matchers)) == len(matchers)  # each request answered by one listener


# What the README's notebook section documents, and nothing else.
FACADE = {
    "approve",
    "attempts",
    "bump",
    "bump_recipe",
    "calendar",
    "cancel",
    "closest_seen",
    "decisions",
    "draft",
    "drafts",
    "edit",
    "effects",
    "events",
    "feedback",
    "from_settings",
    "opened",
    "import_plan",
    "over",
    "pause",
    "plots",
    "poll",
    "post",
    "recipe_record",
    "redraft",
    "reject",
    "report",
    "resolve",
    "sources",
    "stats",
    "resume",
    "retry",
    "run_now",
    "runs",
    "show",
    "skip",
    "status",
    "week",  # docs/design.md §36: the week at a glance
}


def test_the_facade_shows_only_what_the_readme_documents(store: Store) -> None:
    galley = Galley(make_config(), store, drafter=InstantDrafter())
    public = {name for name in dir(galley) if not name.startswith("_")}
    assert public == FACADE
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    notebook = readme[readme.index("import galley") : readme.index("Reading needs no running bot")]
    undocumented = {
        name for name in FACADE - {"from_settings", "over", "opened"} if name not in notebook
    }
    assert undocumented == set()


def test_the_readme_names_what_galley_draft_prints_and_its_exit_codes() -> None:
    """The command table's `galley draft` row: every outcome it can print (the queue is
    the scheduler's alone) and the exit codes `report_draft` and `explained` end with."""
    from bot.cli_output import EXIT_FAILED, EXIT_USAGE

    readme = (Path(__file__).parents[2] / "README.md").read_text()
    [row] = [line for line in readme.splitlines() if line.startswith("| `galley draft RECIPE")]
    printed = set(DraftOutcome) - {DraftOutcome.QUEUED}
    assert {outcome for outcome in printed if f"`{outcome}`" not in row} == set()
    assert f"{EXIT_FAILED} when drafting failed" in row and "Exit 0" in row
    assert f"{EXIT_USAGE} when Anthropic refused `ANTHROPIC_API_KEY`" in row
    assert "--batch" in row


def test_the_readme_source_table_names_githubs_keys() -> None:
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    [row] = [line for line in readme.splitlines() if line.startswith("| `sources[].kind`")]
    github = row[row.index("`github`") : row.index("`slack`")]
    assert {key for key in ("repo", "items", "api") if f"`{key}`" not in github} == set()
