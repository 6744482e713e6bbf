"""A recipe's bump (docs/design.md §2): the version people raise on purpose, and what it
does to the drafts of older versions still waiting for review."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlmodel import Session, col, select

from core.drafting.claims import lock_recipe_row
from core.failpoints import Failpoint, failpoint
from core.identity import post_id_of_run
from core.models import DraftRow
from core.publishing.targets import sends_begun
from core.states import DraftState, EventSubject, RunState, version_state
from core.store.rows import lock_draft, lock_run, run_holds
from core.store.transitions import move_draft, move_run, record_event


@dataclass(frozen=True)
class Bumped:
    """What a bump did: the new version, and the drafts it took out of review."""

    recipe: str
    version: int
    superseded: int  # drafts of older versions that were waiting for review
    redrafted: int  # of their runs, those that will be drafted again at `version`

    def describe(self) -> str:
        """One line for a person, in plain words (the CLI and `/galley bump` say it)."""
        line = f"{self.recipe} is now v{self.version}"
        if not self.superseded:
            return f"{line}; no draft was waiting for review."
        drafts = "1 draft" if self.superseded == 1 else f"{self.superseded} drafts"
        slots = "its slot" if self.redrafted == 1 else "their slots"
        then = f"; {slots} will be drafted again at v{self.version}" if self.redrafted else ""
        return f"{line}; {drafts} superseded{then}."


def bump_in(
    session: Session, recipe_name: str, *, actor: str, reason: str | None, now: datetime
) -> Bumped:
    """Raise the version in `session`; supersede the older versions' waiting drafts and
    send their runs back to `pending`, each re-read under its lock (run, then draft)."""
    row = lock_recipe_row(session, recipe_name, now)  # ten bumps at once: +10
    row.version += 1
    row.changed_by, row.updated_at = actor, now
    session.add(row)
    record_event(
        session,
        subject=EventSubject.RECIPE,
        subject_id=recipe_name,
        to_state=version_state(row.version),
        actor=actor,
        at=now,
        reason=reason,
    )
    stale = session.exec(
        select(DraftRow.run_id, DraftRow.key)
        .where(
            col(DraftRow.recipe) == recipe_name,
            col(DraftRow.state) == DraftState.READY,
            col(DraftRow.version) < row.version,
        )
        .order_by(col(DraftRow.key))
    ).all()
    failpoint(Failpoint.BUMP_AFTER_READ)
    why = f"recipe bumped to v{row.version}"
    superseded, redrafted = 0, 0
    for run_id, key in stale:  # run, then draft (core/store/rows.py), each re-read locked
        run, draft = lock_run(session, run_id), lock_draft(session, key)
        if run is None or draft is None or draft.state != DraftState.READY:
            continue  # expired or decided since the read
        if sends_begun(session, draft.key):
            continue  # partly published, back for review: a new draft would post twice
        if post_id_of_run(run_id) is not None:
            continue  # a person's post: a bump leaves it (docs/design.md §37)
        move_draft(session, draft, DraftState.SUPERSEDED, actor=actor, at=now, reason=why)
        superseded += 1
        if run_holds(run, draft.key, RunState.AWAITING_REVIEW):
            run.manual = True  # a person's request: drafted again whatever its age
            move_run(session, run, RunState.PENDING, actor=actor, at=now, reason=why)
            redrafted += 1
    return Bumped(recipe_name, row.version, superseded, redrafted)
