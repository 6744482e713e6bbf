"""The core services of one config and one database, built once and shared: drafting,
redrafting, settling runs, recipe changes, who is acting. The operator facade
(`core/api/galley.py` `Galley`), the CLI and the bot's container (`bot/wiring.py`) take
this; nothing here knows Slack or renders anything.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import cached_property
from typing import TYPE_CHECKING

from core.errors import ConfigError, DatabaseUnavailable, NotPermitted, SlotError, UnknownRun
from core.policies import FailReason, Role
from core.ports import Clock, Directory, Drafter, SystemClock
from core.review.permissions import ListedOnly
from core.setup.config import Config, Recipe, load_config
from core.setup.settings import Settings
from core.slots.publish_time import slots_due_by
from core.slots.schedule import (
    Slot,
    latest_slot_at_or_before,
    slot_at_instant,
    slot_at_wall,
    slot_of_run,
)
from core.states import RunState
from core.store.engine import URL_VARIABLE, Store, normalise_url
from core.store.rows import run_row

if TYPE_CHECKING:
    from core.api.desk import Desk, People
    from core.drafting.attempts import Backoff
    from core.drafting.batch_drafter import BatchDrafter
    from core.drafting.batch_entries import Later
    from core.drafting.batch_pass import BatchPass
    from core.drafting.claims import DraftResult
    from core.drafting.fit import FitRule
    from core.drafting.service import DraftingService
    from core.images.library import ImageLibrary
    from core.operations.resolution import Resolver
    from core.publishing.destinations import Destinations
    from core.review.alt_text import AltTextProposer
    from core.review.redrafting import RedraftService
    from core.scheduling.items import ItemPoller
    from core.scheduling.recipe_changes import RecipeChanges

BATCH_CALL_TIMEOUT = timedelta(seconds=30)
DRAFTING_FAILURES = frozenset(reason.value for reason in FailReason if reason.while_drafting)
# (recipe, slot) of a failed draft, drafted again somewhere else (the bot's pool): what to say
DraftAgain = Callable[[Recipe, Slot], str]


class Services:
    """Built lazily, once each: a reader (`galley status`) never loads the drafting
    stack or the model client. Built whole: `destinations` (the bot's, Slack channels
    among them; core's own otherwise) fixes the one fit rule every part measures by."""

    def __init__(
        self,
        config: Config,
        store: Store,
        *,
        drafter: Drafter | None = None,
        clock: Clock | None = None,
        backoff: Backoff | None = None,
        directory: Directory | None = None,
        batch_client: BatchDrafter | None = None,
        destinations: Destinations | None = None,
    ) -> None:
        self.config, self.store = config, store
        self.clock = clock or SystemClock()
        self.directory = directory or ListedOnly()  # resolves user groups (S…) in config
        self._drafter, self._backoff = drafter, backoff
        self._batch_client = batch_client
        self._destinations = destinations
        self._drafting: DraftingService | None = None

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        clock: Clock | None = None,
        directory: Directory | None = None,
        existing_database: bool = False,
        destinations: Destinations | None = None,
    ) -> Services:
        """`existing_database`: refuse a SQLite file that is not there rather than create
        an empty one (a reader pointed at the wrong place must be told, not answered
        "nothing yet"). `destinations`: the bot's, Slack channels among them."""
        config = load_config(settings.galley_config)
        if existing_database:
            _require_sqlite_file(settings.galley_database_url)
        store = Store(settings.galley_database_url)
        store.ensure_schema()
        return cls(
            config,
            store,
            drafter=anthropic_drafter(settings),
            clock=clock,
            directory=directory,
            batch_client=batch_client(settings, _slowest_call(config)),
            destinations=destinations,
        )

    def recipe(self, name: str) -> Recipe:
        return self.config.recipe(name)

    # --- drafting -----------------------------------------------------------------------

    @property
    def drafting(self) -> DraftingService:
        from core.drafting.service import DraftingService

        if self._drafter is None:
            raise ConfigError(["ANTHROPIC_API_KEY is not set: it is needed to draft"])
        if self._drafting is None:
            from core.drafting.basis import RunBasis, SourceAccess
            from core.drafting.batch_queue import BatchQueue

            self._drafting = DraftingService(
                self.store,
                self._drafter,
                clock=self.clock,
                backoff=self._backoff,
                fits=self.fits,
                batches=BatchQueue(self.store, self.clock),
                basis=RunBasis(self.store, self.clock, SourceAccess.of(self.config)),
            )
        return self._drafting

    @cached_property
    def items(self) -> ItemPoller:
        """Polls of items recipes (docs/design.md §29), drafting through `drafting`."""
        from core.scheduling.items import ItemPoller

        return ItemPoller(self.store, self.drafting, self.clock)

    def batch_pass(self, later: Later | None = None) -> BatchPass | None:
        """The pass that sends, polls and stores Message Batches (docs/design.md §21);
        None without ANTHROPIC_API_KEY. `later` runs a synchronous fallback call (the
        bot's drafting pool); inline by default."""
        if self._batch_client is None:
            return None
        from core.drafting.batch_pass import BatchPass

        recipes = self.config.recipes
        slowest = _slowest_call(self.config)
        takeover = max((r.takeover_after for r in recipes.values()), default=slowest)
        return BatchPass(
            self.store,
            dict(recipes),
            self.drafting,
            self._batch_client,
            clock=self.clock,
            lease=2 * slowest + takeover,  # a create always answers, or times out, within it
            later=later,
        )

    @cached_property
    def redrafting(self) -> RedraftService:
        """Reviewers' redrafts (docs/design.md §22), on the drafting service's worker."""
        from core.review.redrafting import RedraftService

        drafter = self.drafting.drafter if self._drafter is not None else None
        worker = self.drafting.worker if drafter is not None else None
        return RedraftService(
            self.store,
            self.config,
            self.clock,
            drafter,
            worker=worker,
            backoff=self._backoff,
            fits=self.fits,
        )

    @cached_property
    def destinations(self) -> Destinations:
        """Every recipe's publishers: those given (the bot's, Slack channels among them),
        else core's own, which have no Slack channel (the CLI, a notebook)."""
        if self._destinations is not None:
            return self._destinations
        from core.publishing.destinations import Destinations

        return Destinations()

    @cached_property
    def fits(self) -> FitRule:
        """What approvals, review messages and the model's request measure drafts against
        (core/drafting/fit.py): one rule over `destinations`, built on first use."""
        from core.drafting.fit import FitRule

        return FitRule(self.destinations.publishers_for, self.images.facts)

    @cached_property
    def images(self) -> ImageLibrary:
        """Image bytes kept once by hash (docs/design.md §32)."""
        from core.images.library import ImageLibrary

        return ImageLibrary(self.store, self.clock)

    @cached_property
    def alt_texts(self) -> AltTextProposer | None:
        """Alt text proposed by the model for an image without one (docs/design.md §32);
        None without ANTHROPIC_API_KEY (people write it)."""
        from core.review.alt_text import AltTextProposer

        if self._drafter is None:
            return None
        return AltTextProposer(self.store, self.config, self.clock, self._drafter, self.images)

    def prepare_drafting(self) -> float | None:
        """Build the drafting service and load the model client now, before any slot is
        due (the bot, at start-up): a fresh process then drafts at once instead of paying
        seconds of imports inside its first call's claim. Seconds it took; None without
        a drafter (no ANTHROPIC_API_KEY) or with one that needs no preparing."""
        if self._drafter is None:
            return None
        began = time.monotonic()
        prepare = getattr(self.drafting.drafter, "prepare", None)  # an adapter with set-up cost
        if prepare is None:
            return None
        prepare()
        return time.monotonic() - began

    def resolve_slot(self, recipe: Recipe, slot: str | datetime | None) -> Slot:
        """A person's slot: None (the most recent due one), naive wall time, or an instant."""
        if slot is None:  # drafting ahead, the latest slot whose drafting fire has come
            latest = latest_slot_at_or_before(recipe, slots_due_by(recipe, self.clock.now()))
            if latest is None:
                raise SlotError(f"{recipe.name}: no slot of {recipe.schedule!r} is due yet")
            return latest
        if isinstance(slot, str):
            try:
                slot = datetime.fromisoformat(slot)
            except ValueError:
                raise SlotError(f"bad --slot {slot!r}: use an ISO date-time") from None
        try:
            if slot.tzinfo is None:
                return slot_at_wall(recipe, slot.replace(second=0, microsecond=0))
            return slot_at_instant(recipe, slot)
        except ValueError as exc:
            raise SlotError(f"{recipe.name}: {exc}") from None

    def sweep(self) -> list[str]:
        """Expired claims returned to the pool: their draft keys."""
        from core.drafting.sweeper import sweep_expired_claims

        return sweep_expired_claims(self.store, self.clock)

    # --- settling runs and changing recipes --------------------------------------------

    @cached_property
    def resolver(self) -> Resolver:
        from core.operations.resolution import Resolver

        return Resolver(self.store, self.config, self.clock)

    @cached_property
    def recipes(self) -> RecipeChanges:
        from core.scheduling.recipe_changes import RecipeChanges

        return RecipeChanges(self.store, self.config, self.clock)

    def failed_drafting(self, run_id: str) -> tuple[Recipe, Slot] | None:
        """The recipe and slot of a run that failed before it had a draft (a retry drafts
        it again, without a bump); None for any other run."""
        with self.store.transaction() as session:
            run = run_row(session, run_id)
        if run is None:
            raise UnknownRun(f"no run {run_id!r}")
        if run.state != RunState.FAILED or run.reason not in DRAFTING_FAILURES:
            return None
        recipe = self.config.recipes.get(run.recipe)
        slot = None if recipe is None else slot_of_run(recipe, run.id, run.slot_at)
        return None if recipe is None or slot is None else (recipe, slot)

    def retry(
        self, run_id: str, *, actor: str, draft_again: DraftAgain | None = None
    ) -> str | DraftResult:
        """The one retry routing of every surface. A run that failed before it had a
        draft: its slot drafted again, a person's explicit request (no bump; pause and
        backpressure still apply), by `draft_again` (the bot's pool, never a Slack
        listener's thread) or else here, now. Any other run: its publication looked up
        and tried once more (`Resolver.retry`)."""
        failed = self.failed_drafting(run_id)
        if failed is None:
            return self.resolver.retry(run_id, actor=actor)
        recipe, slot = failed
        if draft_again is not None:
            return draft_again(recipe, slot)
        return self.drafting.draft_slot(recipe, slot, manual=True, actor=actor)

    # --- who acts -------------------------------------------------------------------------

    def people(self, user: str | None = None, *, as_person: bool = False) -> People:
        """Who acts: a person (`as_person`: a notebook, or a Slack user the bot names),
        or nobody (the CLI: the shell authenticates its user and names the actor)."""
        from core.api.desk import People

        return People(self.config.slack, self.directory, user, as_person=as_person)

    def may_administer(self, user: str) -> bool:
        """The one admin check of every surface (CLI, `/galley`, Home and alert buttons,
        the notebook): `People.acting` with `Role.ADMIN`, as a yes or no."""
        try:
            self.people(user, as_person=True).acting(None, Role.ADMIN)
        except NotPermitted:
            return False
        return True

    def desk(self, people: People | None = None) -> Desk:
        """Decisions on drafts, by `people` (default: Slack's users, each named per click)."""
        from core.api.desk import Desk

        return Desk(self.store, self.config, self.clock, people or self.people(), self.fits)


def _slowest_call(config: Config) -> timedelta:
    """The batches API's request timeout: the longest `call_timeout` of any recipe."""
    return max((r.call_timeout for r in config.recipes.values()), default=BATCH_CALL_TIMEOUT)


def batch_client(settings: Settings, timeout: timedelta) -> BatchDrafter | None:
    """The Message Batches adapter beside the drafter, on the same key and base URL."""
    if not settings.anthropic_api_key:
        return None
    from core.drafting.batch_drafter import BatchDrafter

    api_key = settings.anthropic_api_key.get_secret_value()
    return BatchDrafter(api_key, settings.anthropic_base_url, timeout=timeout) if api_key else None


def anthropic_drafter(settings: Settings) -> Drafter | None:
    """The Anthropic adapter when ANTHROPIC_API_KEY is set. Cheap: the SDK itself loads
    when the bot prepares it at start-up (`Drafter.prepare`) or on the first call."""
    if not settings.anthropic_api_key:
        return None
    from core.drafting.anthropic_drafter import AnthropicDrafter

    api_key = settings.anthropic_api_key.get_secret_value()
    return AnthropicDrafter(api_key, settings.anthropic_base_url) if api_key else None


def _require_sqlite_file(url: str) -> None:
    from core.setup.settings import sqlite_file

    path = sqlite_file(normalise_url(url))
    if path is not None and not path.exists():
        raise DatabaseUnavailable(
            f"{URL_VARIABLE}: no database at {path.resolve()} ({url}); a reader never creates "
            "one: name the file `galley run` or `galley draft` uses, as an absolute path"
        )
