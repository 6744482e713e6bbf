"""The operator API: what the CLI, the `/galley` command and a notebook call.

    >>> import galley                          # the notebook's import (see galley/)
    >>> g = galley.connect(user="U0EDITOR")    # GALLEY_CONFIG, GALLEY_DATABASE_URL
    >>> g.status()                             # renders as a table in Jupyter
    >>> d = g.show(g.drafts()[0].key)          # one draft: text, revisions, ledger
    >>> g.approve(d)                           # exactly the revision shown, if still fresh

Knows nothing of Slack. Every change names its actor, which lands in the event rows.
Reads need no running bot. Writes go through the same core functions and permission
rules as Slack's buttons and `/galley`: a Galley opened as a person (`user=`) may
decide drafts only as an approver and run Galley only as an admin. The CLI and the
bot open it without a person: the shell and Slack authenticate their own users.
Read models and rendering live in `core/views.py`, queries in `core/queries.py`,
plots in `core/plots.py`.
"""

from __future__ import annotations

import dataclasses
import time
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING

from sqlmodel import col, select

from core.config import Config, Recipe, load_config
from core.errors import ConfigError, DatabaseUnavailable, SlotError, UnknownRun
from core.history import record_event
from core.history_pages import ready_counts
from core.models import DraftRow, RecipeRow, RunRow
from core.permissions import ListedOnly
from core.policies import FailReason, Finding, Role, Verdict
from core.ports import Clock, Directory, Drafter, RecipeRecord, SimilarPost, SystemClock
from core.publish_time import slots_due_by
from core.queries import (
    draft_detail,
    list_attempts,
    list_drafts,
    list_effects,
    list_events,
    list_runs,
)
from core.rows import run_row
from core.schedule import (
    Slot,
    latest_slot_at_or_before,
    next_slots,
    slot_at_instant,
    slot_at_wall,
    slot_of_run,
)
from core.settings import Settings
from core.states import DraftState, EventSubject, RecipeChange, RunState
from core.store import URL_VARIABLE, Store, normalise_url
from core.views import (
    Answer,
    AttemptList,
    DraftDetail,
    DraftList,
    EffectList,
    EventList,
    FeedbackList,
    RecipeFeedback,
    RecipeStatus,
    RunList,
    RunSummary,
    Status,
)

if TYPE_CHECKING:  # loaded by the operations that use them: reads stay light
    from core.acting import Desk, People
    from core.bumps import Bumped
    from core.claims import DraftResult
    from core.drafting import Backoff, DraftingService
    from core.fit import FitRule
    from core.plots import Plots
    from core.publication_calendar import Calendar
    from core.redrafting import RedraftService
    from core.resolution import Resolver

ALL = "all"
DRAFTING_FAILURES = [reason.value for reason in FailReason if reason.while_drafting]
__all__ = ["ALL", "Galley", "RecipeStatus", "RunSummary", "Status"]


class Galley:
    """One config and one database, with the operations people ask for."""

    def __init__(
        self,
        config: Config,
        store: Store,
        *,
        drafter: Drafter | None = None,
        clock: Clock | None = None,
        backoff: Backoff | None = None,
        user: str | None = None,
        directory: Directory | None = None,
        as_person: bool = False,
    ) -> None:
        self.config = config
        self.store = store
        self.clock = clock or SystemClock()
        self.user = user  # the person acting, when opened as one (a notebook)
        self.as_person = as_person or user is not None  # writes need `user`, checked
        self.directory = directory or ListedOnly()  # resolves user groups (S…) in config
        self._drafter = drafter
        self._backoff = backoff
        self._service: DraftingService | None = None
        self._fits: FitRule | None = None

    @classmethod
    def from_settings(
        cls,
        settings: Settings | None = None,
        *,
        clock: Clock | None = None,
        user: str | None = None,
        directory: Directory | None = None,
        as_person: bool = False,
        existing_database: bool = False,
    ) -> Galley:
        """`clock` is for tests and replays; the bot and the CLI use the system clock.
        `user` opens it as a person (a notebook): their permissions are checked.
        `existing_database`: refuse a SQLite file that is not there rather than create
        an empty one (a reader pointed at the wrong place must be told, not answered
        "nothing yet")."""
        settings = settings or Settings()
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
            user=user,
            directory=directory,
            as_person=as_person,
        )

    @property
    def drafting(self) -> DraftingService:
        from core.drafting import DraftingService

        if self._drafter is None:
            raise ConfigError(["ANTHROPIC_API_KEY is not set: it is needed to draft"])
        if self._service is None:
            self._service = DraftingService(
                self.store, self._drafter, clock=self.clock, backoff=self._backoff, fits=self.fits
            )
        return self._service

    @cached_property
    def redrafting(self) -> RedraftService:
        """Reviewers' redrafts (docs/design.md §22), on the drafting service's worker."""
        from core.redrafting import RedraftService

        drafter = self.drafting.drafter if self._drafter is not None else None
        worker = self.drafting.worker if drafter is not None else None
        return RedraftService(
            self.store, self.config, self.clock, drafter, worker=worker, backoff=self._backoff
        )

    @property
    def fits(self) -> FitRule:
        """What approvals and the model's request measure drafts against (core/fit.py):
        built here from core's destinations on first use; the bot sets its own, Slack
        channels included."""
        if self._fits is None:
            from core.destinations import Destinations
            from core.fit import FitRule

            self._fits = FitRule(Destinations().publishers_for)
        return self._fits

    @fits.setter
    def fits(self, rule: FitRule) -> None:
        self._fits = rule
        if self._service is not None:
            self._service.fits = rule

    def __repr__(self) -> str:
        return f"<Galley {self.opened}>"

    @property
    def opened(self) -> str:
        """Which config and database this is, and who acts: one line."""
        where = "config" if self.config.path is None else str(self.config.path)
        recipes = f"{len(self.config.recipes)} recipe" + (
            "" if len(self.config.recipes) == 1 else "s"
        )
        database = self.store.engine.url.render_as_string(hide_password=True)
        if self.user is not None:
            who = f"as {self.user}"
        elif self.as_person:
            who = "read only (GALLEY_USER is not set)"
        else:
            who = "as the operator"
        return f"{where} ({recipes}), database {database}, {who}"

    def prepare_drafting(self) -> float | None:
        """Build the drafting service and load the model client now, before any slot is
        due (the bot, at start-up): a fresh process then drafts at once instead of paying
        seconds of imports inside its first call's claim. Seconds it took; None without
        a drafter (no ANTHROPIC_API_KEY) or with one that needs no preparing."""
        if self._drafter is None:
            return None
        began = time.monotonic()
        service = self.drafting
        prepare = getattr(service.drafter, "prepare", None)  # an adapter with set-up cost
        if prepare is None:
            return None
        prepare()
        return time.monotonic() - began

    def recipe(self, name: str) -> Recipe:
        return self.config.recipe(name)

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

    def draft(
        self, recipe_name: str, slot: str | datetime | None = None, *, actor: str | None = None
    ) -> DraftResult:
        """Draft one slot now: a person's explicit request, so misfire_grace does not apply."""
        actor = self.acting(actor, Role.ADMIN) if actor or self.as_person else "cli"
        recipe = self.recipe(recipe_name)
        resolved = self.resolve_slot(recipe, slot)
        return self.drafting.draft_slot(recipe, resolved, manual=True, actor=actor)

    def status(self) -> Status:
        now = self.clock.now()
        recipes = []
        with self.store.read() as session:  # indexed counts, no write lock
            rows = {r.name: r for r in session.exec(select(RecipeRow)).all()}
            pending = ready_counts(session)
            for recipe in self.config.recipes.values():
                row = rows.get(recipe.name)
                upcoming = next_slots(recipe, now, 1)
                recipes.append(
                    RecipeStatus(
                        name=recipe.name,
                        version=row.version if row else 1,
                        paused=row.paused if row else False,
                        pending=pending.get(recipe.name, 0),
                        pending_limit=recipe.pending_limit,
                        next_slot=upcoming[0].fire_at.astimezone(recipe.zone).isoformat()
                        if upcoming
                        else None,
                        paused_reason=row.paused_reason if row else None,
                    )
                )
            uncertain = session.exec(
                select(RunRow.id)
                .where(col(RunRow.state) == RunState.UNCERTAIN)
                .order_by(col(RunRow.slot_at))
            ).all()
        return Status(recipes=recipes, uncertain=list(uncertain))

    def bump(self, recipe_name: str, *, actor: str | None = None, reason: str | None = None) -> int:
        """New version: the only way to a second draft for a slot that has one; returns
        the version (`bump_recipe` also says what became of the waiting drafts)."""
        return self.bump_recipe(recipe_name, actor=actor, reason=reason).version

    def bump_recipe(
        self, recipe_name: str, *, actor: str | None = None, reason: str | None = None
    ) -> Bumped:
        """New version. Drafts of older versions still waiting for review are superseded
        (they leave the review queue) and their runs return to `pending`, to be drafted
        at the new version whatever their age (a person's request)."""
        actor = self.acting(actor, Role.ADMIN)
        self.recipe(recipe_name)
        from core.bumps import bump_in  # core.claims stays out of the light read commands

        with self.store.transaction() as session:
            return bump_in(session, recipe_name, actor=actor, reason=reason, now=self.clock.now())

    def pause(
        self, target: str, *, actor: str | None = None, reason: str | None = None
    ) -> list[str]:
        return self._set_paused(target, True, actor=self.acting(actor, Role.ADMIN), reason=reason)

    def resume(self, target: str, *, actor: str | None = None) -> list[str]:
        return self._set_paused(target, False, actor=self.acting(actor, Role.ADMIN), reason=None)

    def _set_paused(
        self, target: str, paused: bool, *, actor: str, reason: str | None
    ) -> list[str]:
        from core.claims import lock_recipe_row

        names = sorted(self.config.recipes) if target == ALL else [self.recipe(target).name]
        with self.store.transaction() as session:
            now = self.clock.now()
            for name in names:
                row = lock_recipe_row(session, name, now)
                row.paused, row.paused_reason = paused, reason if paused else None
                row.changed_by, row.updated_at = actor, now
                session.add(row)
                record_event(
                    session,
                    subject=EventSubject.RECIPE,
                    subject_id=name,
                    to_state=RecipeChange.PAUSED if paused else RecipeChange.RESUMED,
                    actor=actor,
                    at=now,
                    reason=reason,
                )
        return names

    def sweep(self) -> list[str]:
        from core.claims import sweep_expired_claims

        return sweep_expired_claims(self.store, self.clock)

    @cached_property
    def resolver(self) -> Resolver:
        from core.resolution import Resolver

        return Resolver(self.store, self.config, self.clock)

    def resolve(self, run_id: str, finding: Finding | str, *, actor: str | None = None) -> str:
        actor = self.acting(actor, Role.ADMIN)
        return self.resolver.resolve(run_id, Finding(finding), actor=actor)

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

    def retry(self, run_id: str, *, actor: str | None = None) -> str:
        """A failed draft: draft the slot again now, a person's explicit request like
        `galley draft` of that slot (no bump; pause and backpressure still apply). An
        uncertain publication: try it once more, under the same key. The bot hands a
        failed draft's re-draft to its pool instead (bot/commands.py `retry_run`).
        What happened, in plain text."""
        actor = self.acting(actor, Role.ADMIN)
        redrafted = self.retry_failed_draft(run_id, actor=actor)
        if redrafted is None:
            return self.resolver.retry(run_id, actor=actor)
        return plain_description(redrafted)

    def retry_failed_draft(self, run_id: str, *, actor: str | None = None) -> DraftResult | None:
        """`retry` of a run that failed before it had a draft: its slot drafted again
        now; None (nothing done) for any other run."""
        actor = self.acting(actor, Role.ADMIN)
        failed = self.failed_drafting(run_id)
        if failed is None:
            return None
        recipe, slot = failed
        return self.drafting.draft_slot(recipe, slot, manual=True, actor=actor)

    def skip(self, run_id: str, *, actor: str | None = None) -> str:
        """Give up on a failed run's slot (the alert's Skip button)."""
        return self.resolver.skip(run_id, actor=self.acting(actor, Role.ADMIN))

    def cancel(self, run_id: str, *, actor: str | None = None) -> str:
        return self.resolver.cancel(run_id, actor=self.acting(actor, Role.ADMIN))

    def closest_seen(self, draft_key: str) -> SimilarPost | None:
        """The post people saw that this draft reads most like, as stored when it became
        ready, whatever its score (the review message shows it from `similar_warn` on)."""
        from core.similarity import similar_post

        with self.store.transaction() as session:
            draft = session.get(DraftRow, draft_key)
            return similar_post(session, draft, warn=None) if draft else None

    def recipe_record(self, recipe_name: str) -> RecipeRecord:
        """Approved of decided drafts over the last 30 days, and the last rejection."""
        from core.review_facts import recipe_record

        self.recipe(recipe_name)
        with self.store.transaction() as session:
            return recipe_record(session, recipe_name, self.clock.now())

    def feedback(self, recipe_name: str, days: int = 30) -> FeedbackList:
        """What reviewers said about the recipe's drafts over `days`: rejections with
        their reasons and redrafts with their notes, newest first, as a table."""
        from core.feedback import feedback_entries, recent

        self.recipe(recipe_name)
        with self.store.read() as session:
            return feedback_entries(session, recipe_name, recent(self.clock.now(), days))

    def feedback_summary(self, recipe_name: str, days: int = 30) -> RecipeFeedback:
        """Redrafts and rejections over `days`, and the change asked for most."""
        from core.feedback import last_days, recent, recipe_feedback

        with self.store.read() as session:
            since = recent(self.clock.now(), days)
            return recipe_feedback(session, recipe_name, since, last_days(days))

    # --- acting as a person -------------------------------------------------------------

    @property
    def people(self) -> People:
        from core.acting import People

        return People(self.config.slack, self.directory, self.user, as_person=self.as_person)

    def acting(self, actor: str | None, role: Role) -> str:
        """Who acts: the person this Galley was opened as (their `role` checked with the
        same rule as Slack), or else the `actor` the CLI or the bot names."""
        return self.people.acting(actor, role)

    @property
    def desk(self) -> Desk:
        from core.acting import Desk

        return Desk(self.store, self.config, self.clock, self.people, self.fits)

    def approve(
        self, draft: DraftDetail | str, revision: int | None = None, *, user: str | None = None
    ) -> Answer:
        """Approve exactly the revision read (a `show()` result carries it). Refused,
        changing nothing, if the draft was edited, bumped, expired or decided since."""
        from core.acting import as_answer

        return as_answer(self.desk.decide(draft, revision, Verdict.APPROVED, user=user))

    def reject(
        self,
        draft: DraftDetail | str,
        revision: int | None = None,
        *,
        reason: str | None = None,
        user: str | None = None,
    ) -> Answer:
        from core.acting import as_answer

        decision = self.desk.decide(draft, revision, Verdict.REJECTED, user=user, reason=reason)
        return as_answer(decision)

    def edit(
        self,
        draft: DraftDetail | str,
        text: str,
        revision: int | None = None,
        *,
        user: str | None = None,
    ) -> Answer:
        """Save `text` as the next revision of the revision read; approvals bind to
        revisions, so an approval of the old text no longer counts."""
        from core.acting import as_answer

        return as_answer(self.desk.edit(draft, text, revision, user=user))

    def redraft(
        self,
        draft: DraftDetail | str,
        note: str,
        revision: int | None = None,
        *,
        user: str | None = None,
    ) -> Answer:
        """Ask the model for the next revision of the revision read, with `note` saying
        what to change; one model call however often it is asked (docs/design.md §22)."""
        from core.acting import as_answer
        from core.redraft_claims import RedraftClaim

        claimed = self.desk.ask_redraft(self.redrafting, draft, revision, note, user=user)
        if isinstance(claimed, RedraftClaim):
            return as_answer(self.redrafting.run(claimed))
        return as_answer(claimed)

    # --- reading ------------------------------------------------------------------------

    def runs(
        self,
        state: RunState | str | None = None,
        limit: int | None = 50,
        before: str | None = None,
    ) -> RunList:
        """Newest slot first; `limit=None` for the whole history; `before` the last run
        id of the previous page (keyset paging through an index)."""
        with self.store.read() as session:
            return list_runs(session, RunState(state) if state else None, limit, before)

    def drafts(
        self,
        state: DraftState | str | None = DraftState.READY,
        *,
        recipe: str | None = None,
        limit: int | None = 100,
    ) -> DraftList:
        """Drafts waiting for people by default (oldest first); `state=None` for all."""
        with self.store.transaction() as session:
            return list_drafts(
                session,
                state=DraftState(state) if state else None,
                recipe=recipe,
                limit=limit,
                now=self.clock.now(),
            )

    def show(self, ref: str) -> DraftDetail:
        """A run id or a draft key: the text, its revisions, decisions, attempts (with
        causes) and effects (with external ids). What `galley show` prints."""
        with self.store.transaction() as session:
            detail = draft_detail(session, ref)
        said = self.feedback_summary(detail.run.recipe)  # reviewers' words (§22)
        return dataclasses.replace(detail, feedback=said.line())

    def events(self, run: str | None = None, *, limit: int | None = 200) -> EventList:
        """A run's history in order, or the newest events of all."""
        with self.store.transaction() as session:
            return list_events(session, run_id=run, subject_id=None, limit=limit)

    def attempts(
        self, run: str | None = None, *, recipe: str | None = None, limit: int | None = 200
    ) -> AttemptList:
        """Model calls from the cost ledger, with outcome, cause, tokens and cost."""
        with self.store.transaction() as session:
            return list_attempts(session, run_id=run, recipe=recipe, limit=limit)

    def effects(
        self, run: str | None = None, *, state: str | None = None, limit: int | None = 200
    ) -> EffectList:
        """Receipts of Slack posts and publications, with their external ids."""
        with self.store.transaction() as session:
            return list_effects(session, run_id=run, state=state, limit=limit)

    def run_now(self, recipe_name: str) -> DraftResult:
        """`/galley run`: draft the recipe's most recent slot now."""
        return self.draft(recipe_name)

    def calendar(self, days: int = 7) -> Calendar:
        """The publication calendar (§23): each recipe's slots of the last day and the
        next `days`, per target, with their state; `.plot()` draws it."""
        from core.publication_calendar import read_calendar

        with self.store.read() as session:
            return read_calendar(session, self.config, self.clock.now(), days)

    @cached_property
    def plots(self) -> Plots:
        """Figures of the history (needs the `notebook` extra)."""
        from core.plots import Plots

        return Plots(self.store, self.config)


def plain_description(result: DraftResult) -> str:
    """`DraftResult.describe()` without its Slack markup, for a terminal or a notebook."""
    why = result.detail or result.reason
    return f"{result.run}: {result.outcome}" + (f" ({why})" if why else "")


def anthropic_drafter(settings: Settings) -> Drafter | None:
    """The Anthropic adapter when ANTHROPIC_API_KEY is set. Cheap: the SDK itself loads
    when the bot prepares it at start-up (`Drafter.prepare`) or on the first call."""
    if not settings.anthropic_api_key:
        return None
    from core.anthropic_drafter import AnthropicDrafter

    api_key = settings.anthropic_api_key.get_secret_value()
    return AnthropicDrafter(api_key, settings.anthropic_base_url) if api_key else None


def _require_sqlite_file(url: str) -> None:
    from core.settings import sqlite_file

    path = sqlite_file(normalise_url(url))
    if path is not None and not path.exists():
        raise DatabaseUnavailable(
            f"{URL_VARIABLE}: no database at {path.resolve()} ({url}); a reader never creates "
            "one: name the file `galley run` or `galley draft` uses, as an absolute path"
        )
