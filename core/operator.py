"""The operator API: what the CLI, the `/galley` command and a notebook call.

    >>> from core.operator import Galley
    >>> galley = Galley.from_settings()        # reads GALLEY_CONFIG, GALLEY_DATABASE_URL
    >>> galley.status().to_json()
    >>> galley.draft("weekly-update")          # the most recent due slot, now

Knows nothing of Slack. Every change names its actor, which lands in the event rows.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from functools import cached_property
from typing import Any

import sqlalchemy as sa
from sqlmodel import col, select

from core.anthropic_drafter import AnthropicDrafter
from core.claims import DraftResult, ensure_recipe_row, sweep_expired_claims
from core.config import Config, Recipe, load_config
from core.drafting import Backoff, DraftingService
from core.errors import ConfigError, SlotError
from core.history import move_draft, move_run, record_event
from core.history_pages import ready_counts, runs_page
from core.models import AttemptRow, DraftRow, RecipeRow, RunRow
from core.ports import Clock, Drafter, SystemClock
from core.resolution import Finding, Resolver
from core.schedule import Slot, latest_slot_at_or_before, next_slots, slot_at_instant, slot_at_wall
from core.settings import Settings
from core.states import DraftState, RunState
from core.store import Store

ALL = "all"


@dataclass(frozen=True)
class RecipeStatus:
    name: str
    version: int
    paused: bool
    pending: int
    pending_limit: int
    next_slot: str | None
    paused_reason: str | None = None


@dataclass(frozen=True)
class Status:
    recipes: list[RecipeStatus]
    uncertain: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"recipes": [asdict(r) for r in self.recipes], "uncertain": self.uncertain}


@dataclass(frozen=True)
class RunSummary:
    id: str
    recipe: str
    slot: str
    state: str
    reason: str | None
    draft_key: str | None
    attempts: int


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
    ) -> None:
        self.config = config
        self.store = store
        self.clock = clock or SystemClock()
        self._drafter = drafter
        self._backoff = backoff
        self._service: DraftingService | None = None

    @classmethod
    def from_settings(
        cls, settings: Settings | None = None, *, clock: Clock | None = None
    ) -> Galley:
        """`clock` is for tests and replays; the bot and the CLI use the system clock."""
        settings = settings or Settings()
        config = load_config(settings.galley_config)
        store = Store(settings.galley_database_url)
        store.ensure_schema()
        api_key = (
            settings.anthropic_api_key.get_secret_value() if settings.anthropic_api_key else ""
        )
        drafter = AnthropicDrafter(api_key, settings.anthropic_base_url) if api_key else None
        return cls(config, store, drafter=drafter, clock=clock)

    @property
    def drafting(self) -> DraftingService:
        if self._drafter is None:
            raise ConfigError(["ANTHROPIC_API_KEY is not set: it is needed to draft"])
        if self._service is None:
            self._service = DraftingService(
                self.store, self._drafter, clock=self.clock, backoff=self._backoff
            )
        return self._service

    def recipe(self, name: str) -> Recipe:
        return self.config.recipe(name)

    def resolve_slot(self, recipe: Recipe, slot: str | datetime | None) -> Slot:
        """A person's slot: None (the most recent due one), naive wall time, or an instant."""
        if slot is None:
            latest = latest_slot_at_or_before(recipe, self.clock.now())
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
        self, recipe_name: str, slot: str | datetime | None = None, *, actor: str = "cli"
    ) -> DraftResult:
        """Draft one slot now: a person's explicit request, so misfire_grace does not apply."""
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

    def runs(
        self, state: RunState | None = None, limit: int = 50, before: str | None = None
    ) -> list[RunSummary]:
        """Newest slot first, a page at a time: `before` is the last run id of the
        previous page (keyset paging through ix_runs_slot / ix_runs_state_slot)."""
        with self.store.read() as session:
            rows = runs_page(session, state, limit, before)
            counts = dict(
                session.exec(
                    select(AttemptRow.run_id, sa.func.count())
                    .where(col(AttemptRow.run_id).in_([r.id for r in rows]))
                    .group_by(col(AttemptRow.run_id))
                ).all()
            )
        return [
            RunSummary(
                r.id, r.recipe, r.slot_wall, r.state, r.reason, r.draft_key, counts.get(r.id, 0)
            )
            for r in rows
        ]

    def bump(self, recipe_name: str, *, actor: str, reason: str | None = None) -> int:
        """New version: the only way to a second draft for a slot that has one.

        Drafts of older versions still waiting for review are superseded (they leave the
        review queue) and their runs return to `pending`, to be drafted at the new version.
        """
        self.recipe(recipe_name)
        with self.store.transaction() as session:
            now = self.clock.now()
            row = ensure_recipe_row(session, recipe_name, now)
            row.version += 1
            row.changed_by, row.updated_at = actor, now
            session.add(row)
            record_event(
                session,
                subject="recipe",
                subject_id=recipe_name,
                to_state=f"v{row.version}",
                actor=actor,
                at=now,
                reason=reason,
            )
            stale = session.exec(
                select(DraftRow).where(
                    col(DraftRow.recipe) == recipe_name,
                    col(DraftRow.state) == DraftState.READY,
                    col(DraftRow.version) < row.version,
                )
            ).all()
            for draft in stale:
                why = f"recipe bumped to v{row.version}"
                move_draft(session, draft, DraftState.SUPERSEDED, actor=actor, at=now, reason=why)
                run = session.exec(select(RunRow).where(col(RunRow.id) == draft.run_id)).one()
                if run.state == RunState.AWAITING_REVIEW and run.draft_key == draft.key:
                    move_run(session, run, RunState.PENDING, actor=actor, at=now, reason=why)
            return row.version

    def pause(self, target: str, *, actor: str, reason: str | None = None) -> list[str]:
        return self._set_paused(target, True, actor=actor, reason=reason)

    def resume(self, target: str, *, actor: str) -> list[str]:
        return self._set_paused(target, False, actor=actor, reason=None)

    def _set_paused(
        self, target: str, paused: bool, *, actor: str, reason: str | None
    ) -> list[str]:
        names = sorted(self.config.recipes) if target == ALL else [self.recipe(target).name]
        with self.store.transaction() as session:
            now = self.clock.now()
            for name in names:
                row = ensure_recipe_row(session, name, now)
                row.paused, row.paused_reason = paused, reason if paused else None
                row.changed_by, row.updated_at = actor, now
                session.add(row)
                record_event(
                    session,
                    subject="recipe",
                    subject_id=name,
                    to_state="paused" if paused else "resumed",
                    actor=actor,
                    at=now,
                    reason=reason,
                )
        return names

    def sweep(self) -> list[str]:
        return sweep_expired_claims(self.store, self.clock)

    @cached_property
    def resolver(self) -> Resolver:
        return Resolver(self.store, self.config, self.clock)

    def resolve(self, run_id: str, finding: Finding, *, actor: str) -> str:
        return self.resolver.resolve(run_id, finding, actor=actor)

    def retry(self, run_id: str, *, actor: str) -> str:
        return self.resolver.retry(run_id, actor=actor)

    def cancel(self, run_id: str, *, actor: str) -> str:
        return self.resolver.cancel(run_id, actor=actor)
