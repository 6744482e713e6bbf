"""People settle what Galley cannot: mark an uncertain run published, declare it
absent (Galley then publishes once), retry it, or cancel a run. Each is one short
transaction with an event naming the person.
"""

from __future__ import annotations

from enum import StrEnum

from sqlmodel import Session, col, select

from core.config import Config
from core.effects import EffectLedger
from core.errors import UnknownRun
from core.history import move_draft, move_run
from core.identity import publish_effect_key
from core.models import DraftRow, EffectRow, RunRow
from core.ports import Clock
from core.states import RUN_TRANSITIONS, DraftState, EffectState, RunState
from core.store import Store


class Finding(StrEnum):
    PUBLISHED = "published"
    ABSENT = "absent"


class Resolver:
    def __init__(self, store: Store, config: Config, clock: Clock, ledger: EffectLedger) -> None:
        self.store, self.config, self.clock, self.ledger = store, config, clock, ledger

    def resolve(self, run_id: str, finding: Finding, *, actor: str) -> str:
        """A person says what became of an uncertain publication."""
        run = self._run(run_id)
        key = self._publish_key(run)
        if run.state != RunState.UNCERTAIN or key is None:
            return f"`{run_id}` is {run.state}, not uncertain: nothing to resolve."
        if finding == Finding.PUBLISHED:
            self.ledger.succeed(key, f"manual:{actor}", {"resolved_by": actor}, run_id=run_id)
            with self.store.transaction() as session:
                locked, draft = self._locked(session, run_id)
                now = self.clock.now()
                if draft is not None and draft.state == DraftState.APPROVED:
                    move_draft(session, draft, DraftState.PUBLISHED, actor=actor, at=now)
                move_run(
                    session,
                    locked,
                    RunState.SUCCEEDED,
                    actor=actor,
                    at=now,
                    detail="marked published by a person",
                )
            return f"`{run_id}` marked published. Nothing will be sent again."
        return self._publish_again(run_id, key, actor, why=f"{actor} says it was not published")

    def retry(self, run_id: str, *, actor: str) -> str:
        """Try an uncertain publication once more: the person takes the risk of a repeat."""
        run = self._run(run_id)
        key = self._publish_key(run)
        if run.state != RunState.UNCERTAIN or key is None:
            return f"`{run_id}` is {run.state}: only uncertain runs can be retried."
        return self._publish_again(run_id, key, actor, why=f"{actor} asked for a retry")

    def cancel(self, run_id: str, *, actor: str) -> str:
        """Stop further steps; say which effects had already completed."""
        with self.store.transaction() as session:
            run, _ = self._locked(session, run_id)
            if RunState.CANCELLED not in RUN_TRANSITIONS[RunState(run.state)]:
                return f"`{run_id}` is {run.state}: there is nothing left to cancel."
            drafts = select(DraftRow.key).where(col(DraftRow.run_id) == run.id)
            done = session.exec(
                select(EffectRow).where(
                    col(EffectRow.draft_key).in_(drafts.scalar_subquery()),
                    col(EffectRow.state) == EffectState.SUCCEEDED,
                )
            ).all()
            completed = ", ".join(f"{e.key} → {e.external_id}" for e in done) or "none"
            move_run(
                session,
                run,
                RunState.CANCELLED,
                actor=actor,
                at=self.clock.now(),
                reason=f"completed effects: {completed}",
            )
        return f"`{run_id}` cancelled. Effects already completed: {completed}."

    def _publish_again(self, run_id: str, key: str, actor: str, *, why: str) -> str:
        self.ledger.fail(key, why, run_id=run_id)
        with self.store.transaction() as session:
            run, _ = self._locked(session, run_id)
            move_run(
                session, run, RunState.PUBLISHING, actor=actor, at=self.clock.now(), detail=why
            )
        return f"`{run_id}` will be published once more, under the same key."

    def _run(self, run_id: str) -> RunRow:
        with self.store.transaction() as session:
            run = session.exec(select(RunRow).where(col(RunRow.id) == run_id)).one_or_none()
        if run is None:
            raise UnknownRun(f"no run {run_id!r}")
        return run

    def _locked(self, session: Session, run_id: str) -> tuple[RunRow, DraftRow | None]:
        run = session.exec(select(RunRow).where(col(RunRow.id) == run_id).with_for_update()).one()
        draft = session.exec(
            select(DraftRow).where(col(DraftRow.key) == run.draft_key).with_for_update()
        ).one_or_none()
        return run, draft

    def _publish_key(self, run: RunRow) -> str | None:
        recipe = self.config.recipes.get(run.recipe)
        if recipe is None or recipe.publish is None or run.draft_key is None:
            return None
        return publish_effect_key(run.draft_key, recipe.publish.target)
