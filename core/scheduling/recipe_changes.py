"""Recipe operations a person asks for: bump, pause and resume, each in one short
transaction with its event row. Who may ask is the caller's check (`Services.acting`);
this module never checks a permission and knows nothing of Slack.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from sqlmodel import Session

from core.ports import Clock
from core.setup.config import Config
from core.states import EventSubject, RecipeChange
from core.store.engine import Store
from core.store.transitions import record_event

if TYPE_CHECKING:
    from core.scheduling.bumps import Bumped

ALL = "all"  # pause or resume every recipe in the file


class RecipeChanges:
    """A recipe's version and pause flag, changed by a person (the CLI, `/galley`, a
    Home button, the notebook)."""

    def __init__(self, store: Store, config: Config, clock: Clock) -> None:
        self.store, self.config, self.clock = store, config, clock

    def bump(self, recipe_name: str, *, actor: str, reason: str | None = None) -> Bumped:
        """New version. Drafts of older versions still waiting for review are superseded
        (they leave the review queue) and their runs return to `pending`, to be drafted
        at the new version whatever their age (a person's request)."""
        self.config.recipe(recipe_name)
        from core.scheduling.bumps import (
            bump_in,  # core.drafting.claims stays out of the light read commands
        )

        with self.store.transaction() as session:
            return bump_in(session, recipe_name, actor=actor, reason=reason, now=self.clock.now())

    def pause(self, target: str, *, actor: str, reason: str | None = None) -> list[str]:
        """`target` is a recipe or `ALL`; the names paused, sorted."""
        return self._set_paused(target, True, actor=actor, reason=reason)

    def resume(self, target: str, *, actor: str) -> list[str]:
        return self._set_paused(target, False, actor=actor, reason=None)

    def _set_paused(
        self, target: str, paused: bool, *, actor: str, reason: str | None
    ) -> list[str]:
        from core.drafting.claims import lock_recipe_row

        names = sorted(self.config.recipes) if target == ALL else [self.config.recipe(target).name]
        with self.store.transaction() as session:
            now = self.clock.now()
            for name in names:
                row = lock_recipe_row(session, name, now)
                row.paused, row.paused_reason = paused, reason if paused else None
                row.changed_by, row.updated_at = actor, now
                session.add(row)
                _note(session, name, paused, actor=actor, at=now, reason=reason)
        return names


def _note(
    session: Session, name: str, paused: bool, *, actor: str, at: datetime, reason: str | None
) -> None:
    record_event(
        session,
        subject=EventSubject.RECIPE,
        subject_id=name,
        to_state=RecipeChange.PAUSED if paused else RecipeChange.RESUMED,
        actor=actor,
        at=at,
        reason=reason,
    )
