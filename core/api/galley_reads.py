"""The operator API's reads, which `Galley` inherits: the status, the history (runs,
drafts, events, attempts, effects, decisions), one draft in full, reviewers' feedback,
the calendar, the week, the stats, the report and the plots. Each reads in a transaction
of its own and writes nothing; every change is `Galley`'s (`core/api/galley.py`).
"""

from __future__ import annotations

import dataclasses
from datetime import date, datetime
from functools import cached_property
from typing import TYPE_CHECKING

from core.api.queries import (
    draft_detail,
    list_attempts,
    list_drafts,
    list_effects,
    list_events,
    list_runs,
    read_status,
)
from core.api.services import Services
from core.api.views import (
    AttemptList,
    DraftDetail,
    DraftList,
    EffectList,
    EventList,
    RunList,
    Status,
)
from core.models import DraftRow
from core.ports import RecipeRecord, SimilarPost
from core.review.feedback import (
    FeedbackList,
    RecipeFeedback,
    feedback_entries,
    last_days,
    recent,
    recipe_feedback,
)
from core.states import DraftState, RunState

if TYPE_CHECKING:  # loaded by the operations that use them: reads stay light
    from core.api.calendar import Calendar
    from core.api.decisions import DecisionList
    from core.api.plots import Plots
    from core.api.report import Report
    from core.api.week import Week
    from core.publishing.engagement import StatsList


class GalleyReads:
    """What people read of one config and one database; `Galley` adds what they do."""

    _services: Services

    def status(self) -> Status:
        services = self._services
        with services.store.read() as session:  # indexed counts, no write lock
            return read_status(session, services.config, services.clock.now())

    def closest_seen(self, draft_key: str) -> SimilarPost | None:
        """The post people saw that this draft reads most like, as stored when it became
        ready, whatever its score (the review message shows it from `similar_warn` on)."""
        from core.drafting.similarity import similar_post

        with self._services.store.transaction() as session:
            draft = session.get(DraftRow, draft_key)
            return similar_post(session, draft, warn=None) if draft else None

    def recipe_record(self, recipe_name: str) -> RecipeRecord:
        """Approved of decided drafts over the last 30 days, and the last rejection."""
        from core.review.facts import recipe_record

        self._services.recipe(recipe_name)
        with self._services.store.transaction() as session:
            return recipe_record(session, recipe_name, self._services.clock.now())

    def feedback(self, recipe_name: str, days: int = 30) -> FeedbackList:
        """What reviewers said about the recipe's drafts over `days`: rejections with
        their reasons and redrafts with their notes, newest first, as a table."""
        self._services.recipe(recipe_name)
        with self._services.store.read() as session:
            return feedback_entries(session, recipe_name, recent(self._services.clock.now(), days))

    def _feedback_summary(self, recipe_name: str, days: int = 30) -> RecipeFeedback:
        """Redrafts and rejections over `days`, and the change asked for most."""
        with self._services.store.read() as session:
            since = recent(self._services.clock.now(), days)
            return recipe_feedback(session, recipe_name, since, last_days(days))

    def runs(
        self,
        state: RunState | str | None = None,
        limit: int | None = 50,
        before: str | None = None,
    ) -> RunList:
        """Newest slot first; `limit=None` for the whole history; `before` the last run
        id of the previous page (keyset paging through an index)."""
        with self._services.store.read() as session:
            return list_runs(session, RunState(state) if state else None, limit, before)

    def drafts(
        self,
        state: DraftState | str | None = DraftState.READY,
        *,
        recipe: str | None = None,
        limit: int | None = 100,
    ) -> DraftList:
        """Drafts waiting for people by default (oldest first); `state=None` for all."""
        with self._services.store.transaction() as session:
            return list_drafts(
                session,
                state=DraftState(state) if state else None,
                recipe=recipe,
                limit=limit,
                now=self._services.clock.now(),
            )

    def show(self, ref: str) -> DraftDetail:
        """A run id or a draft key: the text, its revisions, decisions, attempts (with
        causes) and effects (with external ids). What `galley show` prints."""
        with self._services.store.transaction() as session:
            detail = draft_detail(session, ref)
        said = self._feedback_summary(detail.run.recipe)  # reviewers' words (docs/design.md §22)
        return dataclasses.replace(detail, feedback=said.line())

    def events(self, run: str | None = None, *, limit: int | None = 200) -> EventList:
        """A run's history in order, or the newest events of all."""
        with self._services.store.transaction() as session:
            return list_events(session, run_id=run, subject_id=None, limit=limit)

    def attempts(
        self, run: str | None = None, *, recipe: str | None = None, limit: int | None = 200
    ) -> AttemptList:
        """Model calls from the cost ledger, with outcome, cause, tokens and cost."""
        with self._services.store.transaction() as session:
            return list_attempts(session, run_id=run, recipe=recipe, limit=limit)

    def effects(
        self, run: str | None = None, *, state: str | None = None, limit: int | None = 200
    ) -> EffectList:
        """Receipts of Slack posts and publications, with their external ids."""
        with self._services.store.transaction() as session:
            return list_effects(session, run_id=run, state=state, limit=limit)

    def decisions(
        self,
        since: datetime | date | str | None = None,
        *,
        recipe: str | None = None,
        limit: int | None = 1000,
        before: int | None = None,
    ) -> DecisionList:
        """The decision log, newest first (docs/design.md §35): who approved, rejected,
        edited, redrafted, unapproved or settled what, when, on which revision; `before`
        pages by `id`."""
        from core.api.decisions import read_decisions

        with self._services.store.read() as session:
            config = self._services.config
            return read_decisions(
                session, config, since=since, recipe=recipe, limit=limit, before=before
            )

    def calendar(self, days: int = 7) -> Calendar:
        """The publication calendar (docs/design.md §23): each recipe's slots of the last
        day and the next `days`, per target, with their state; `.plot()` draws it."""
        from core.api.calendar import read_calendar

        with self._services.store.read() as session:
            return read_calendar(session, self._services.config, self._services.clock.now(), days)

    def week(self) -> Week:
        """The week at a glance (docs/design.md §36), as the Home tab shows it: each day's
        slots and planned posts with their state, and the items waiting."""
        from core.api.week import read_week

        with self._services.store.read() as session:
            return read_week(session, self._services.config, self._services.clock.now())

    def stats(self, recipe_name: str | None = None, days: int = 30) -> StatsList:
        """How published posts did (docs/design.md §28): each post of the last `days`
        with its latest engagement reading and score; `.to_frame()`, `.best()`."""
        from core.publishing.engagement import read_stats

        if recipe_name is not None:
            self._services.recipe(recipe_name)  # UnknownRecipe for a name not in the config
        with self._services.store.read() as session:
            return read_stats(session, self._services.clock.now(), days, recipe_name)

    def report(self, since: str = "7d", by: str = "recipe") -> Report:
        """Draft quality and results over the last `since` (docs/design.md §38): one row per
        recipe (`by="target"`: per recipe and target), every figure naming what it counts;
        `.to_frame()` a DataFrame, `.best` the window's best post."""
        from core.api.report import ReportBy, read_report
        from core.setup.durations import parse_duration

        window, grouping = parse_duration(since), ReportBy(by)
        recipes = list(self._services.config.recipes)
        with self._services.store.read() as session:
            return read_report(session, recipes, self._services.clock.now(), window, grouping)

    @cached_property
    def plots(self) -> Plots:
        """Figures of the history (needs the `notebook` extra)."""
        from core.api.plots import Plots

        return Plots(self._services.store, self._services.config, self._services.clock)
